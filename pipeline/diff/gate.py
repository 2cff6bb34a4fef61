"""Run vs run, the gate: ``--fail-above``'s thresholds per metric and the called regressions beyond them."""

from __future__ import annotations

from pipeline.diff.rundiff import RunDiff
from pipeline.diff.metrics import METRIC_BY_KEY, METRICS, MetricChange
from pipeline.core.errors import BatchmarkError


#: Short metric names accepted by ``--fail-above NAME:PCT%`` (the full keys of ``METRICS`` are accepted too).
GATE_NAMES = {"output_throughput": "output_throughput_tok_s", "per_user": "per_user_tok_s",
              "per_user_throughput": "per_user_tok_s", "ttft_p50": "ttft_p50_s", "ttft_p99": "ttft_p99_s",
              "tpot_p50": "tpot_p50_s", "tpot_p99": "tpot_p99_s", "mbu": "mbu", "mfu": "mfu"}


def parse_fail_above(text: str) -> dict[str, float]:
    """``--fail-above``'s value → ``{metric key: percent}``.

    ``"10"`` (one threshold, the gate's first form) gates both throughput metrics (output and per-user) at 10 %;
    ``"output_throughput:5%,ttft_p99:10%"`` gates each named metric at its own percentage (the ``%`` is optional;
    names: :data:`GATE_NAMES` or a metric key).  A percentage is of the relative change, the worse way.

    Raises:
        BatchmarkError: an unknown metric name, a metric named twice, or a percentage that is not a finite number ≥ 0.
    """
    def pct(v: str, where: str) -> float:
        try:
            x = float(v.strip().removesuffix("%"))
        except ValueError:
            x = float("nan")
        if not (x == x and x >= 0 and x != float("inf")):
            # nan compares false with everything and inf exceeds every change: either would switch the gate off
            raise BatchmarkError(f"--fail-above {where}: must be a finite percentage >= 0")
        return x

    text = text.strip()
    if ":" not in text:
        p = pct(text, text)
        return {m.key: p for m in METRICS if m.throughput}
    out: dict[str, float] = {}
    for item in text.split(","):
        name, _, value = item.partition(":")
        key = GATE_NAMES.get(name.strip(), name.strip() if name.strip() in METRIC_BY_KEY else None)
        if key is None:
            raise BatchmarkError(f"--fail-above {item.strip()}: unknown metric {name.strip()!r}; one of "
                                 + ", ".join(sorted(GATE_NAMES)))
        if key in out:
            raise BatchmarkError(f"--fail-above {text}: metric {name.strip()!r} given twice")
        out[key] = pct(value, item.strip())
    return out


def regressions(d: RunDiff, fail_above: float | dict[str, float]) -> list[MetricChange]:
    """Called regressions larger than their threshold (for ``--fail-above``).

    Args:
        fail_above: one percentage for both throughput metrics (output and per-user tokens/s), or
            ``{metric key: percent}`` (:func:`parse_fail_above`).

    A metric regresses when its change is called worse (:func:`diff_runs`); it counts when its relative change
    the worse way exceeds the threshold: |effect| > pct / 100.
    """
    gates = fail_above if isinstance(fail_above, dict) else {m.key: float(fail_above) for m in METRICS if m.throughput}
    return [c for c in d.changes
            if c.metric in gates and c.verdict == "worse" and c.effect is not None
            and abs(c.effect) > gates[c.metric] / 100]


def untestable_drops(d: RunDiff, gates: dict[str, float]) -> list[MetricChange]:
    """Gated changes beyond their threshold the worse way that could not be tested (fewer than 2 repeats a side)."""
    out = []
    for c in d.changes:
        if c.metric not in gates or c.effect is None or c.p_value is not None:
            continue
        worse = (c.effect < 0) == METRIC_BY_KEY[c.metric].higher_is_better
        if worse and abs(c.effect) > gates[c.metric] / 100:
            out.append(c)
    return out
