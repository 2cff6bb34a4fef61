"""Zeros drawn where they are: no chart puts a value of 0 on a log axis.

Fault kind: log(0) = −∞ (Vega's log scale, https://vega.github.io/vega/docs/scales/#log, "domain must be strictly
positive or negative"): an open-loop goodput of 0 requests/s gave the axis the domain [0, 4], no ticks, and every
mark on the frame's edge.  Right value: such a chart's axis is symlog (defined at 0,
https://vega.github.io/vega/docs/scales/#symlog); one of positive values keeps its log axis.
"""

from __future__ import annotations

from pipeline.pages import charts


def _open_points(goodput: float) -> list[dict]:
    return [{"load": "poisson", "rate_rps": r, "achieved_rate_rps": r * 0.9, "slo": {"goodput_rps": goodput},
             "ttft_s": {"p99": 0.1}, "tpot_s": {"p99": 0.0}, "e2el_s": {"p99": 1.0}} for r in (1.0, 2.0, 4.0)]


def _y_scales(spec: dict) -> list[dict]:
    found = []

    def walk(node):
        if isinstance(node, dict):
            y = (node.get("encoding") or {}).get("y")
            if isinstance(y, dict) and "scale" in y:
                found.append(y["scale"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    return found


def test_a_zero_goodput_gets_a_symlog_axis():
    spec = charts.rate_chart({"model": "m"}, _open_points(0.0))
    assert [s["type"] for s in _y_scales(spec)] == ["symlog"]
    spec = charts.rate_chart({"model": "m"}, _open_points(1.5))
    assert _y_scales(spec) == [{"type": "log", "base": 2}]


def test_a_zero_p99_latency_gets_a_symlog_axis():
    """TPOT p99 of 0 ms (one-token outputs) is drawn at 0."""
    spec = charts.rate_latency_chart({"model": "m"}, _open_points(1.0))
    assert {s["type"] for s in _y_scales(spec)} == {"symlog"}


def test_value_scale_by_hand():
    assert charts.value_scale([1.0, 2.0]).type == "log"
    assert charts.value_scale([0.0, 2.0]).type == "symlog"
    assert charts.value_scale([]).type == "log"
