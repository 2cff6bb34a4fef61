"""Altair chart builders: analysis and summaries (dicts) in, Vega-Lite specs (dicts) out.  No I/O.

Every chart uses a log2 concurrency axis, as the sweep grid doubles.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import altair as alt

from pipeline.core.records import workload_of

WIDTH = 560
HEIGHT = 300


#: The concurrency axis' default ticks: the powers of two of a sweep grid.
POWERS_OF_TWO = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def concurrency_domain(concurrencies: list[Any]) -> tuple[list[float], list[int]] | None:
    """(log2 axis domain, its tick values) spanning ``concurrencies``: from the power of two at or below the least
    to the one at or above the greatest, one doubling wide at least, ticked at each power of two between.  A
    one-point chart has no extent of its own: Vega's log scale then spreads a domain [1, 1] over nothing, and a
    c = 1 point stood under the fixed ticks' "512"; with [1, 2] it stands at "1".  None without a positive value."""
    cs = [float(c) for c in concurrencies if isinstance(c, (int, float)) and not isinstance(c, bool)
          and math.isfinite(c) and c > 0]
    if not cs:
        return None
    lo, hi = 2 ** math.floor(math.log2(min(cs)) + 1e-9), 2 ** math.ceil(math.log2(max(cs)) - 1e-9)
    hi = max(hi, lo * 2)
    ticks = [int(2 ** k) if 2 ** k >= 1 else 2 ** k for k in range(int(math.log2(lo)), int(math.log2(hi)) + 1)]
    return [lo, hi], ticks


def x_concurrency(title: str = "concurrency (requests in flight / batch size B)",
                  values: list[int] | None = None, concurrencies: list[Any] | None = None) -> alt.X:
    """The concurrency axis every chart shares: log2 scale (the sweep grid doubles), ticks at the powers of two;
    with ``concurrencies`` (the chart's data) its domain spans them (:func:`concurrency_domain`)."""
    span = concurrency_domain(concurrencies) if concurrencies is not None else None
    if span is not None:
        return alt.X("concurrency:Q", scale=alt.Scale(type="log", base=2, domain=span[0]),
                     axis=alt.Axis(title=title, values=values or span[1]))
    return alt.X("concurrency:Q", scale=alt.Scale(type="log", base=2),
                 axis=alt.Axis(title=title, values=values or POWERS_OF_TWO))


_x = x_concurrency


def value_scale(values: list[Any], base: float | None = None) -> alt.Scale:
    """A value axis for ``values``: log (``base``, default 10) where every value is above 0, symlog where one is 0 or
    below, so a zero (a goodput of 0 requests/s, an ITL of 0 ms) is drawn where it is: a log axis cannot reach 0
    (log 0 = −∞; Vega put such marks on the frame's edge and the axis lost its ticks)."""
    vals = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if vals and min(vals) <= 0:
        return alt.Scale(type="symlog")
    return alt.Scale(type="log", base=base) if base else alt.Scale(type="log")


def spec_of(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """The Vega-Lite spec (a dict) of an Altair chart, validated against the schema."""
    return chart.to_dict()


_spec = spec_of

#: Chart shapes built once: ``{key: Vega-Lite spec with ``{"name": …}`` data placeholders}`` (:func:`from_skeleton`).
_SKELETONS: dict[tuple, dict[str, Any]] = {}


def _fill(node: Any, data: dict[str, list[dict[str, Any]]]) -> Any:
    """A copy of ``node`` with every ``"data": {"name": N}`` placeholder replaced by ``{"values": data[N]}``."""
    if isinstance(node, dict):
        return {k: ({"values": data[v["name"]]} if k == "data" and isinstance(v, dict) and set(v) == {"name"}
                    else _fill(v, data)) for k, v in node.items()}
    if isinstance(node, list):
        return [_fill(v, data) for v in node]
    return node


def from_skeleton(key: tuple, build: Callable[[], alt.TopLevelMixin], data: dict[str, list[dict[str, Any]]],
                  title: Any = None) -> dict[str, Any]:
    """The spec of the chart ``build()`` makes, with its named data filled from ``data`` and its title set.

    ``build`` returns an Altair chart whose data are placeholders (``alt.Data(name=N)``); it runs
    once per ``key`` (the chart's shape: builder and which optional layers it has), and every call
    copies that spec and puts ``data[N]`` in place of each placeholder, inline as
    ``{"values": rows}`` (the spec Altair would have made with the data given directly).
    Building and validating an Altair chart costs 10–50 ms, and a lab's site draws thousands of
    charts of a handful of shapes ("A site for a lab": 500 workloads × 5 charts).

    Raises:
        KeyError: a placeholder with no entry in ``data`` (a bug in the builder).
    """
    skeleton = _SKELETONS.get(key)
    if skeleton is None:
        skeleton = _SKELETONS[key] = spec_of(build())
    spec = _fill(skeleton, data)
    if title is not None:
        spec["title"] = title
    return spec


def headline_chart(title: str, workloads: list[dict[str, Any]]) -> dict[str, Any]:
    """Home's headline: output throughput vs concurrency of every model of one run, with ceilings and knees.

    ``workloads``: ``[{"label": model name, "model": analysed model, "points": point summaries}]``.
    Layers: one line per model (measured median), its single-stream bandwidth ceiling (dashed
    horizontal rule, same colour) and its knee (vertical rule, same colour).
    """
    rows = [{"concurrency": p["concurrency"], "tok_s": p["output_throughput_tok_s"], "model": w["label"]}
            for w in workloads for p in w["points"] if p.get("output_throughput_tok_s")]
    ceilings = [{"model": w["label"], "y": w["model"]["ceiling_tok_s"],
                 "label": f"{w['label']}: single-stream ceiling {w['model']['ceiling_tok_s']:.1f} tok/s"}
                for w in workloads if w["model"].get("ceiling_tok_s")]
    knees = [{"model": w["label"], "concurrency": w["model"]["knee_concurrency"],
              "label": f"{w['label']}: knee c={w['model']['knee_concurrency']}"}
             for w in workloads if w["model"].get("knee_concurrency")]
    color = alt.Color("model:N", legend=alt.Legend(title=None, orient="top-left"))
    y = alt.Y("tok_s:Q", title="output throughput (tokens/s)",
              scale=value_scale([r["tok_s"] for r in rows] + [c["y"] for c in ceilings]))
    x = _x(concurrencies=[r["concurrency"] for r in rows] + [k["concurrency"] for k in knees])
    layers = [alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=x, y=y, color=color, tooltip=["model:N", "concurrency:Q", alt.Tooltip("tok_s:Q", format=".1f")])]
    if ceilings:
        layers.append(alt.Chart(alt.Data(values=ceilings)).mark_rule(strokeDash=[2, 2]).encode(
            y=alt.Y("y:Q"), color=color, tooltip=["label:N"]))
    if knees:
        layers.append(alt.Chart(alt.Data(values=knees)).mark_rule(strokeWidth=2, opacity=0.6).encode(
            x=x, color=color, tooltip=["label:N"]))
    return _spec(alt.layer(*layers).properties(width=WIDTH, height=HEIGHT, title=title))


def per_user_chart(model: dict[str, Any], points: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-user throughput (1 / median streamed TPOT, tokens/s) vs concurrency."""
    rows = [{"concurrency": p["concurrency"], "tok_s": p["per_user_tok_s"]} for p in points if p.get("per_user_tok_s")]

    def build() -> alt.TopLevelMixin:
        return alt.Chart(alt.Data(name="points")).mark_line(point=True, color="#9467bd").encode(
            x=_x(), y=alt.Y("tok_s:Q", title="per-user throughput (tokens/s)"),
            tooltip=["concurrency:Q", alt.Tooltip("tok_s:Q", format=".1f")]).properties(width=WIDTH, height=220)

    return from_skeleton(("per_user",), build, {"points": rows}, title=f"{model['model']}: per-user tokens/s")


def latency_chart(model: dict[str, Any], points: list[dict[str, Any]]) -> dict[str, Any]:
    """TTFT and TPOT p50/p99 (ms) vs concurrency, one panel per metric."""
    rows = []
    for p in points:
        for metric in ("ttft_s", "tpot_s"):
            stats = p.get(metric) or {}
            for q in ("p50", "p99"):
                if stats.get(q) is not None:
                    rows.append({"concurrency": p["concurrency"], "metric": metric.removesuffix("_s").upper(),
                                 "quantile": q, "ms": stats[q] * 1e3})

    scale = value_scale([r["ms"] for r in rows])

    def build() -> alt.TopLevelMixin:
        chart = alt.Chart(alt.Data(name="points")).mark_line(point=True).encode(
            x=_x("concurrency"), y=alt.Y("ms:Q", title="milliseconds", scale=scale),
            color=alt.Color("quantile:N", legend=alt.Legend(title=None)),
            tooltip=["metric:N", "quantile:N", "concurrency:Q", alt.Tooltip("ms:Q", format=".2f")],
        ).properties(width=260, height=220)
        return chart.facet(column=alt.Column("metric:N", title=None)).properties(title="placeholder")

    return from_skeleton(("latency", scale.type), build, {"points": rows},
                         title=f"{model['model']}: TTFT and TPOT percentiles")


def pareto_chart(model: dict[str, Any], points: list[dict[str, Any]]) -> dict[str, Any]:
    """Throughput vs interactivity: output throughput (all users) against per-user tokens/s, labelled by concurrency."""
    rows = [{"concurrency": p["concurrency"], "per_user": p["per_user_tok_s"], "total": p["output_throughput_tok_s"]}
            for p in points if p.get("per_user_tok_s") and p.get("output_throughput_tok_s")]

    def build() -> alt.TopLevelMixin:
        base = alt.Chart(alt.Data(name="points")).encode(
            x=alt.X("per_user:Q", title="per-user throughput (tokens/s)"),
            y=alt.Y("total:Q", title="output throughput (tokens/s)"), order="concurrency:Q")
        chart = base.mark_line(point=True, color="#8c564b") + base.mark_text(dx=8, dy=-6, align="left").encode(
            text="concurrency:Q")
        return chart.properties(width=WIDTH, height=260, title="placeholder")

    return from_skeleton(("pareto",), build, {"points": rows}, title=f"{model['model']}: throughput vs interactivity")


def efficiency_domain(values: list[float], floor: float = 1.1) -> list[float]:
    """A scaling-efficiency axis that holds every value: [0, max(floor, 5 % above the largest value)].

    A fixed [0, 1.1] drew a measured 1.25 outside the frame;
    super-linear points (a batch faster per sequence than one stream) are real and must show.
    """
    top = max([v for v in values if v is not None and math.isfinite(v)] or [0.0])
    return [0, max(floor, round(top * 1.05, 2))]


def efficiency_chart(models: list[dict[str, Any]]) -> dict[str, Any]:
    """Scaling efficiency T(c) / (c × T(1)) vs concurrency, one line per workload (MoE vs dense); the axis holds every value."""
    rows = []
    for m in models:
        label = f"{m['model']} ({m.get('kind') or '?'})"
        for c, eff in (m.get("scaling_efficiency") or {}).items():
            rows.append({"concurrency": int(c), "efficiency": eff, "model": label, "kind": m.get("kind") or "?"})
    domain = efficiency_domain([r["efficiency"] for r in rows])
    chart = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=_x(), y=alt.Y("efficiency:Q", title="scaling efficiency T(c) / (c·T(1))", scale=alt.Scale(domain=domain)),
        color=alt.Color("model:N", legend=alt.Legend(title=None, orient="top-right")),
        strokeDash=alt.StrokeDash("kind:N", legend=None),
        tooltip=["model:N", "concurrency:Q", alt.Tooltip("efficiency:Q", format=".3f")])
    return _spec(chart.properties(width=WIDTH, height=HEIGHT, title="Scaling efficiency: MoE vs dense"))


REGIME_LABELS = {"batching": "batching", "queueing": "queueing", "kv_cache_full": "KV cache full",
                 "limits_unknown": "limits unknown"}


def server_state_chart(model: dict[str, Any], analysis_points: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The server's own view per point (served backends): KV-cache usage (%) and requests running/waiting vs concurrency.

    Values are the highest ``/metrics`` samples during the point (about one a second); each
    point is coloured by what it measured (``regime.point_regime``).  None when the server
    exported nothing (the in-process backend, endpoints without ``/metrics``).
    """
    rows = []
    for a in sorted(analysis_points, key=lambda a: a["concurrency"]):
        srv = a.get("server") or {}
        regime = REGIME_LABELS.get(a.get("regime") or "", "unknown")
        for key, label in (("kv_cache_usage_max", "KV cache in use (%)"),
                           ("requests_running_max", "requests running (max)"),
                           ("requests_waiting_max", "requests waiting (max)")):
            v = srv.get(key)
            if v is not None:
                rows.append({"concurrency": a["concurrency"], "metric": label,
                             "value": v * 100 if key == "kv_cache_usage_max" else v, "regime": regime})
    if not rows:
        return None
    def build() -> alt.TopLevelMixin:
        base = alt.Chart()  # the data sits on the layer, so that the facet splits it by metric
        line = base.mark_line(color="#7f7f7f").encode(x=_x("concurrency"), y=alt.Y("value:Q", title=None))
        dots = base.mark_point(filled=True, size=70).encode(
            x=_x("concurrency"), y=alt.Y("value:Q", title=None),
            color=alt.Color("regime:N", title="point measured", scale=alt.Scale(
                domain=list(REGIME_LABELS.values()), range=["#2ca02c", "#d62728", "#9467bd", "#7f7f7f"])),
            tooltip=["metric:N", "concurrency:Q", alt.Tooltip("value:Q", format=".2f"), "regime:N"])
        chart = alt.layer(line, dots, data=alt.Data(name="points")).properties(width=240, height=200)
        return (chart.facet(column=alt.Column("metric:N", title=None)).resolve_scale(y="independent")
                .properties(title="placeholder"))

    return from_skeleton(("server_state",), build, {"points": rows},
                         title=f"{model['model']}: the server's view (from /metrics)")


def engines_chart(title: str, series: list[dict[str, Any]]) -> dict[str, Any]:
    """Output throughput vs concurrency of one model and workload under several engines or runs.

    ``series``: ``[{"label": "vllm (continuous batching) · <run>", "points": [point summaries]}]``.
    """
    rows = [{"concurrency": p["concurrency"], "tok_s": p["output_throughput_tok_s"], "series": s["label"]}
            for s in series for p in s["points"] if p.get("output_throughput_tok_s")]
    chart = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=_x(), y=alt.Y("tok_s:Q", title="output throughput (tokens/s)"),
        color=alt.Color("series:N", legend=alt.Legend(title=None, orient="bottom", labelLimit=520)),
        tooltip=["series:N", "concurrency:Q", alt.Tooltip("tok_s:Q", format=".1f")])
    return _spec(chart.properties(width=WIDTH, height=HEIGHT, title=title))


ENGINE_TEXT = {"vllm": "vLLM, continuous batching", "transformers": "transformers, static batches",
               "openai": "served endpoint, continuous batching",
               "simulated": "SIMULATED continuous batching (a prediction)"}


def engine_comparisons(views: list[Any]) -> list[dict[str, Any]]:
    """Models measured under more than one engine on the same hardware and workload, newest run per engine
    (the newest clean run where one exists: a flagged run is chosen only when no clean one is).

    Returns ``[{"title", "hardware", "model", "input_len", "output_len", "series": [{"label", "engine", "run_id",
    "flagged", "points", "model" (analysis row)}]}]`` for :func:`engines_chart` and the Benchmarks page.
    """
    groups: dict[tuple, dict[str, tuple[tuple[bool, str], Any]]] = {}
    for v in views:
        hw = v.hardware.get("name") or "?"
        rank = (not getattr(v, "flagged", False), v.run_id)  # a clean run before a flagged one, then the newest
        for w in v.workloads:
            m = w.model
            key = (hw, *workload_of(m)[:1], *workload_of(m)[2:])  # model, variant, shape: the engines compared
            engine = m.get("engine") or "?"
            prev = groups.setdefault(key, {}).get(engine)
            if prev is None or rank > prev[0]:
                groups[key][engine] = (rank, w)
    out = []
    for (hw, model, variant, inp, outl), by_engine in sorted(groups.items()):
        if len(by_engine) < 2:
            continue
        series = [{"label": f"{ENGINE_TEXT.get(e, e)} · {rid}" + ("" if clean else " ⚠ flagged"), "engine": e,
                   "run_id": rid, "flagged": not clean, "points": w.points, "model": w.model}
                  for e, ((clean, rid), w) in sorted(by_engine.items(), key=lambda kv: kv[0] != "vllm")]
        out.append({"title": f"{model} on {hw}: continuous vs static batching ({inp} in / {outl} out)",
                    "hardware": hw, "model": model, "input_len": inp, "output_len": outl, "series": series})
    return out


def _rate_x(title: str = "offered rate (requests/s)") -> alt.X:
    return alt.X("rate:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(title=title))


def rate_chart(model: dict[str, Any], points: list[dict[str, Any]]) -> dict[str, Any]:
    """Open loop: achieved rate and goodput (requests/s) against the offered rate, with offered = achieved dashed.

    Below saturation the achieved rate lies on the dashed line; where it leaves it, the server is
    saturated (``ratesweep.rate_sweep``).  Goodput (requests meeting every SLO, per second) is drawn
    where the run has an SLO.  One line per load pattern and cap.
    """
    rows = []
    for p in points:
        series = p.get("load", "?") + (f", cap {p['max_concurrency']}" if p.get("max_concurrency") else "")
        rate = p.get("rate_rps")
        if not rate:
            continue
        rows.append({"rate": rate, "series": "offered (achieved = offered)", "rps": rate})
        if p.get("achieved_rate_rps") is not None:
            rows.append({"rate": rate, "series": f"achieved ({series})", "rps": p["achieved_rate_rps"]})
        if (p.get("slo") or {}).get("goodput_rps") is not None:
            rows.append({"rate": rate, "series": f"goodput, SLO met ({series})", "rps": p["slo"]["goodput_rps"]})
    chart = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=_rate_x(), y=alt.Y("rps:Q", title="requests/s", scale=value_scale([r["rps"] for r in rows], base=2)),
        color=alt.Color("series:N", legend=alt.Legend(title=None, orient="top-left")),
        strokeDash=alt.condition(alt.datum.series == "offered (achieved = offered)", alt.value([5, 4]), alt.value([1, 0])),
        tooltip=["series:N", alt.Tooltip("rate:Q", format=".3g"), alt.Tooltip("rps:Q", format=".3g")],
    ).properties(width=WIDTH, height=HEIGHT, title=f"{model['model']}: achieved rate and goodput vs offered rate")
    return _spec(chart)


def rate_latency_chart(model: dict[str, Any], points: list[dict[str, Any]]) -> dict[str, Any]:
    """Open loop: TTFT, TPOT and E2EL p99 (ms) against the offered rate, one panel per metric; the SLO's p99 bounds as rules."""
    rows, limits = [], []
    for p in points:
        for metric in ("ttft_s", "tpot_s", "e2el_s"):
            v = (p.get(metric) or {}).get("p99")
            if v is not None and p.get("rate_rps"):
                rows.append({"rate": p["rate_rps"], "metric": metric.removesuffix("_s").upper(), "ms": v * 1e3,
                             "series": p.get("load", "?") + (f", cap {p['max_concurrency']}" if p.get("max_concurrency") else "")})
    slo = next((p["slo"] for p in points if p.get("slo")), None) or {}
    for metric in ("ttft", "tpot", "e2el"):
        if slo.get(f"{metric}_p99_max_ms"):
            limits.append({"metric": metric.upper(), "ms": slo[f"{metric}_p99_max_ms"]})
    base = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=_rate_x("offered rate (requests/s)"),
        y=alt.Y("ms:Q", title="p99, milliseconds", scale=value_scale([r["ms"] for r in rows + limits])),
        color=alt.Color("series:N", legend=alt.Legend(title=None)),
        tooltip=["metric:N", "series:N", alt.Tooltip("rate:Q", format=".3g"), alt.Tooltip("ms:Q", format=".1f")],
    ).properties(width=180, height=200)
    chart = base.facet(column=alt.Column("metric:N", title=None))
    if limits:  # the SLO's p99 bounds, dashed, in their panel (a faceted layer takes its data at the top level)
        data = alt.Data(values=rows + [{**r, "rule": True} for r in limits])
        lines = base.properties(data=alt.Undefined).transform_filter("datum.rule != true")
        rules = alt.Chart().mark_rule(strokeDash=[4, 3], color="#d62728").encode(y="ms:Q").transform_filter(
            "datum.rule == true").properties(width=180, height=200)
        chart = alt.layer(lines, rules, data=data).facet(column=alt.Column("metric:N", title=None))
    return _spec(chart.properties(title=f"{model['model']}: p99 latency vs offered rate"
                                  + (" (dashed: the SLO's p99 bounds)" if limits else "")))
