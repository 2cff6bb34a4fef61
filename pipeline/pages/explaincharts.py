"""The explainer pages' charts (Vega-Lite spec dicts, as in :mod:`pipeline.pages.charts`): batching, the roofline from
the model cards and over measured curves, ceilings, step time, expert coverage, bytes per step, MoE vs dense
efficiency, KV cache per sequence, capacity.

Each takes the numbers it draws (cards, workloads, rows of :mod:`pipeline.pages.explain`) and returns a spec;
:func:`pipeline.pages.explain.explain_context` hands the specs to the templates.
"""

from __future__ import annotations

from typing import Any

import altair as alt

from pipeline.analysis.capacity import DEFAULT_CONTEXTS
from pipeline.cards.modelcards import ModelCard
from pipeline.pages.charts import HEIGHT, WIDTH, efficiency_domain, x_concurrency
from pipeline.pages.explainbasis import step_rows
from pipeline.pages.charts import spec_of as _spec
from pipeline.cards.stepcost import expert_coverage, kv_bytes_per_sequence, weight_bytes_per_step

BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
KIND_COLORS = alt.Scale(domain=["dense", "moe"], range=["#1f77b4", "#d62728"])


def _x(title: str = "concurrency B (sequences decoded together)", values: list[int] | None = None) -> alt.X:
    return x_concurrency(title, values or BATCHES)


def workload_label(w: Any) -> str:
    """A workload in a chart's title or tooltip: ``model (kind), N in``."""
    m = w.model
    return f"{m['model']} ({m.get('kind') or '?'}), {m['input_len']} in"


# -- charts -----------------------------------------------------------------------------------

def batching_chart(workload: Any) -> dict[str, Any]:
    """Total output tokens/s and per-user tokens/s against B for one workload (what batching buys, what it costs)."""
    rows = []
    for p in workload.points:
        if p.get("output_throughput_tok_s"):
            rows.append({"concurrency": p["concurrency"], "series": "all users together (output throughput)",
                         "tok_s": p["output_throughput_tok_s"]})
        if p.get("per_user_tok_s"):
            rows.append({"concurrency": p["concurrency"], "series": "each user (per-user throughput)",
                         "tok_s": p["per_user_tok_s"]})
    chart = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=_x(values=[1, 2, 4, 8, 16, 32, 64]), y=alt.Y("tok_s:Q", title="tokens/s", scale=alt.Scale(type="log")),
        color=alt.Color("series:N", legend=alt.Legend(title=None, orient="top-left")),
        tooltip=["series:N", "concurrency:Q", alt.Tooltip("tok_s:Q", format=".1f")])
    return _spec(chart.properties(width=WIDTH, height=HEIGHT, title=f"Batching {workload_label(workload)}"))


def card_roofline_chart(cards: list[ModelCard], basis: dict[str, Any], hardware_name: str,
                        batches: list[int] | None = None, usable_gb: float | None = None) -> dict[str, Any] | None:
    """The step predicted from the model cards alone: output tokens/s (all users) and step time (ms) against B.

    ``basis``: :func:`pipeline.pages.explainbasis.step_basis` of the profile; the lines are
    :func:`pipeline.pages.explainbasis.step_rows` (solid: the step as ``plan`` costs it, the engine's fitted terms at
    the measured peak where the profile has them; dashed: the roofline at the spec sheet's peak, labelled so), context
    0 (weights only), ``cards`` as served.  Needs no run, so the batching and knee explainers always have a chart of
    the project's own data.  None without a bandwidth figure.  A card whose weights exceed ``usable_gb`` (GB: the
    Sizing page's usable memory) is left out and named in the title: no hardware of this profile decodes it
    (Llama-3.1-70B in bf16, 141 GB, on a DGX Spark's 108.8 GB).
    """
    if not basis.get("bandwidth_gb_s"):
        return None
    batches = batches or BATCHES
    left_out = [c for c in cards if usable_gb and c.weight_bytes / 1e9 > usable_gb]
    rows = step_rows([c for c in cards if c not in left_out], batches, basis)
    names = list(dict.fromkeys(r["series"] for r in rows))
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=_x("B", values=batches), y=alt.Y("tok_s:Q", title=None, scale=alt.Scale(type="log")),
        color=alt.Color("model:N", legend=alt.Legend(title=None, orient="bottom", columns=2, labelLimit=320)),
        detail="series:N", tooltip=["model:N", "series:N", "concurrency:Q", "bound:N", alt.Tooltip("tok_s:Q", format=".2f")])
    lines = _dashed_lines(base, alt.StrokeDash("series:N", scale=alt.Scale(domain=names, range=[[1, 0], [5, 4]][:len(names)]),
                                                legend=alt.Legend(title=None, orient="bottom", symbolType="stroke",
                                                                  labelLimit=420)))
    chart = lines.properties(width=PANEL_WIDTH, height=PANEL_HEIGHT).facet(
        column=alt.Column("panel:N", title=None, sort="descending"))
    return _spec(chart.resolve_scale(y="independent").properties(
        title=f"The step predicted from the model cards as served on {hardware_name} (context 0)" + "".join(
            f"; {c.name} ({c.quantization}) left out: weights {c.weight_bytes / 1e9:.0f} GB exceed {usable_gb:.1f} GB usable"
            for c in left_out)))


def ceilings_chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Single-stream ceiling (bandwidth / bytes per token) per model and format, with measured single streams as dots."""
    bars, dots = [], []
    for r in rows:
        for q, v in r["ceilings"].items():
            if v:
                bars.append({"model": r["model"], "format": q, "tok_s": v})
        for m in r.get("measured", []):
            dots.append({"model": r["model"], "tok_s": m["tok_s"], "label": m["label"]})
    y = alt.Y("model:N", title=None, sort=[r["model"] for r in rows])
    chart = alt.Chart(alt.Data(values=bars)).mark_bar().encode(
        x=alt.X("tok_s:Q", title="single-stream ceiling (tokens/s)"),  # linear: bars on a log scale have no base
        y=y, yOffset="format:N", color=alt.Color("format:N", legend=alt.Legend(title="weights")),
        tooltip=["model:N", "format:N", alt.Tooltip("tok_s:Q", format=".1f")])
    layers = [chart]
    if dots:
        layers.append(alt.Chart(alt.Data(values=dots)).mark_point(shape="diamond", size=90, filled=True, color="black")
                      .encode(x="tok_s:Q", y=y, tooltip=["model:N", "label:N", alt.Tooltip("tok_s:Q", format=".1f")]))
    # the title promises the diamonds only when there are some (it promised ◆ that were not drawn)
    title = ("Bandwidth ceiling of one stream (bars) and measured single streams (◆)" if dots else
             "Bandwidth ceiling of one stream (bars); no run measured a single stream of these models")
    return _spec(alt.layer(*layers).properties(width=WIDTH, height=max(220, 34 * len(rows)), title=title))


def _pairs(workloads: list[Any]) -> list[tuple[str, Any]]:
    """``(run id, workload)`` for each item of ``workloads``: a workload, or already such a pair ("" when unknown)."""
    return [w if isinstance(w, tuple) else ("", w) for w in workloads]


def workload_key(run_id: str, w: Any) -> str:
    """One line of a chart: the workload run × model × engine × prompt length × output length."""
    m = w.model
    return f"{run_id + ' · ' if run_id else ''}{m['model']} ({m.get('engine') or '?'}), {m['input_len']} in / {m['output_len']} out"


def _panel(w: Any) -> str:
    return f"{w.model['model']} ({w.model.get('kind') or '?'})"


def _prompt(w: Any) -> str:
    return f"{w.model['input_len']} in / {w.model['output_len']} out"


def _colour_by(pairs: list[tuple[str, Any]]) -> tuple[Any, str]:
    """What the knee charts colour by: what differs between their lines, never what all of them share.

    Returns ``(fn(run id, workload) -> colour label, legend title)``: the run (its id and hardware)
    when every workload has the same prompt / output lengths, else run and lengths.
    """
    prompts = {_prompt(w) for _, w in pairs}
    if len(prompts) <= 1:
        return (lambda run_id, w: run_id or "?"), "run (hardware)"
    return (lambda run_id, w: f"{run_id or '?'} · {_prompt(w)}"), "run (hardware) · prompt / output tokens"


#: Panels of the faceted charts: two a row, each wide enough for 12 px axis labels.
PANEL_WIDTH, PANEL_HEIGHT, PANEL_COLUMNS = 380, 260, 2


def _dashed_lines(base: Any, dash: Any) -> Any:
    """Lines of ``base`` dashed by ``dash``, with a point layer that leaves the dash legend alone.

    A line mark with ``point=True`` draws its legend symbols filled with a transparent stroke,
    so a strokeDash legend would show no dashes; the points are a second layer instead.
    """
    return alt.layer(base.mark_line().encode(strokeDash=dash), base.mark_point(filled=True, size=25))


def _faceted(chart: Any, title: str) -> dict[str, Any]:
    """``chart`` as a panel per model, :data:`PANEL_COLUMNS` to a row, with text large enough to read."""
    return _spec(chart.properties(width=PANEL_WIDTH, height=PANEL_HEIGHT)
                 .facet(facet=alt.Facet("model:N", title=None, header=alt.Header(labelFontSize=14, labelFontWeight="bold")),
                        columns=PANEL_COLUMNS)
                 .properties(title=alt.TitleParams(title, fontSize=15))
                 .configure_axis(labelFontSize=12, titleFontSize=13)
                 .configure_legend(labelFontSize=12, titleFontSize=13, labelLimit=320))


def roofline_overlay_chart(workloads: list[Any]) -> dict[str, Any]:
    """Measured output throughput (solid) and the roofline prediction (dashed) against B: a panel per model.

    ``workloads`` are workloads or ``(run id, workload)`` pairs; each line is one workload (run ×
    model × engine × prompt × output length: the ``workload`` field, encoded as ``detail``) and one
    series, coloured by what differs between the lines (:func:`_colour_by`: the run, and the
    prompt / output lengths only when they differ).
    """
    rows = []
    pairs = _pairs(workloads)
    colour, legend = _colour_by(pairs)
    for run_id, w in pairs:
        roof = {a["concurrency"]: a.get("roofline_tok_s") for a in w.analysis_points}
        base = {"model": _panel(w), "prompt": _prompt(w), "workload": workload_key(run_id, w), "run": run_id,
                "colour": colour(run_id, w)}
        for p in w.points:
            if p.get("output_throughput_tok_s"):
                rows.append({**base, "concurrency": p["concurrency"], "series": "measured", "tok_s": p["output_throughput_tok_s"]})
            if roof.get(p["concurrency"]):
                rows.append({**base, "concurrency": p["concurrency"], "series": "roofline", "tok_s": roof[p["concurrency"]]})
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=_x("B", values=[1, 2, 4, 8, 16, 32, 64]),
        y=alt.Y("tok_s:Q", title="output throughput (tokens/s)", scale=alt.Scale(type="log")),
        color=alt.Color("colour:N", sort=None, legend=alt.Legend(title=legend, orient="bottom", columns=1)),
        detail="workload:N",
        tooltip=["workload:N", "series:N", "concurrency:Q", alt.Tooltip("tok_s:Q", format=".1f")])
    chart = _dashed_lines(base, alt.StrokeDash(
        "series:N", scale=alt.Scale(domain=["measured", "roofline"], range=[[1, 0], [5, 4]]),
        legend=alt.Legend(title=None, symbolType="stroke", symbolStrokeWidth=2, symbolSize=300, symbolStrokeColor="#333")))
    return _faceted(chart, "Roofline prediction (dashed) over the measured curve (solid)")


def step_time_chart(workloads: list[Any]) -> dict[str, Any]:
    """Decode step time (ms) against B, a panel per model, a line per workload: what each user waits per token."""
    rows = []
    pairs = _pairs(workloads)
    colour, legend = _colour_by(pairs)
    for run_id, w in pairs:
        for p in w.points:
            if p.get("step_time_s"):
                rows.append({"concurrency": p["concurrency"], "model": _panel(w), "prompt": _prompt(w),
                             "workload": workload_key(run_id, w), "run": run_id, "colour": colour(run_id, w),
                             "ms": p["step_time_s"] * 1e3})
    chart = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=_x("B", values=[1, 2, 4, 8, 16, 32, 64]), y=alt.Y("ms:Q", title="step time = per-token latency (ms)"),
        color=alt.Color("colour:N", sort=None, legend=alt.Legend(title=legend, orient="bottom", columns=1)),
        detail="workload:N",
        tooltip=["workload:N", "concurrency:Q", alt.Tooltip("ms:Q", format=".2f")])
    return _faceted(chart, "The latency cost: step time per token vs batch")


def implied_coverage(points: list[dict[str, Any]], card: ModelCard) -> list[tuple[int, float]]:
    """Expert coverage a measured curve implies, per B: the experts' share of the bytes its steps would read at its
    c = 1 rate, ``(T(B) / T(1) × bytes(1) − dense − KV(B)) / expert bytes`` = ``(bytes(B) × MBU(1) / MBU(B) − dense − KV(B))
    / expert bytes`` (derived from MBU = bytes / step / bandwidth; compute and fixed costs count as bytes, so it is an
    upper estimate), clipped to [k/E, 1].  Empty without an MBU at c = 1 or an MoE card."""
    if not card.expert_bytes or not card.num_experts:
        return []
    one = next((p for p in points if p.get("concurrency") == 1 and p.get("mbu")), None)
    if one is None:
        return []
    floor = card.experts_per_token / card.num_experts
    out = []
    for p in sorted(points, key=lambda q: q["concurrency"]):
        if not p.get("mbu") or not p.get("bytes_per_step"):
            continue
        b = int(p.get("batch") or p["concurrency"])
        non_expert = p["bytes_per_step"] - card.expert_bytes * expert_coverage(b, card.experts_per_token, card.num_experts)
        implied = p["bytes_per_step"] * one["mbu"] / p["mbu"]
        out.append((p["concurrency"], min(max((implied - non_expert) / card.expert_bytes, floor), 1.0)))
    return out


#: Engines whose runs are static batches of identical prompts (every sequence decodes the same tokens).
STATIC_ENGINES = ("llama.cpp", "llama-batched-bench", "transformers")


def routing_prior(hardware: dict[str, Any]) -> float | None:
    """The hardware profile's vLLM routing locality prior (``engines.vllm.routing_scale``), None when it states none."""
    return ((hardware.get("engines") or {}).get("vllm") or {}).get("routing_scale")


def measured_coverage(measured: list, moe_cards: list[ModelCard]) -> list[tuple[str, list[tuple[int, float]]]]:
    """Each measured MoE workload's implied coverage (:func:`pipeline.pages.explaincharts.implied_coverage`), labelled
    with its run; a static batch (llama-batched-bench decodes the same tokens in every sequence) is left out: its
    coverage was not measured."""
    by_name = {c.name: c for c in moe_cards}
    out = []
    for label, w in measured:
        card = by_name.get(w.model.get("model"))
        if card is None or str(w.model.get("engine")) in STATIC_ENGINES:
            continue
        curve = implied_coverage(w.points, card)
        if len(curve) >= 2:
            out.append((f"{label} {w.model.get('model')}", curve))
    return out


def coverage_chart(cards: list[ModelCard], batches: list[int] | None = None, routing_scale: float | None = None,
                   measured: list[tuple[str, list[tuple[int, float]]]] | None = None) -> dict[str, Any]:
    """Fraction of routed experts touched against B for each MoE card: uniform routing 1 − (1 − k/E)^B (the upper
    bound), identical routing k/E (the lower: every sequence the same tokens), the locality prior ``routing_scale``
    (:func:`pipeline.cards.stepcost.effective_batch`) between, and each measured curve's implied coverage
    (:func:`implied_coverage`) as points."""
    from pipeline.cards.stepcost import coverage_at

    batches = batches or [b for b in range(1, 257) if b <= 16 or b % 4 == 0]
    routings = [("uniform (upper bound)", None), ("identical prompts (k/E, lower bound)", 0.0)]
    if routing_scale:
        routings.insert(1, (f"locality prior (effective batch, s = {routing_scale:g})", routing_scale))
    rows = [{"concurrency": b, "model": f"{c.name} (k={c.experts_per_token} of E={c.num_experts})", "routing": name,
             "coverage": coverage_at(b, c.experts_per_token, c.num_experts, scale)}
            for c in cards if c.num_experts for name, scale in routings for b in batches]
    lines = alt.Chart(alt.Data(values=rows)).mark_line().encode(
        x=_x(), y=alt.Y("coverage:Q", title="experts read per step (fraction of all)", scale=alt.Scale(domain=[0, 1]),
                        axis=alt.Axis(format="%")),
        color=alt.Color("model:N", legend=alt.Legend(title=None, orient="bottom-right")),
        strokeDash=alt.StrokeDash("routing:N", legend=alt.Legend(title=None, orient="top-left")),
        tooltip=["model:N", "routing:N", "concurrency:Q", alt.Tooltip("coverage:Q", format=".1%")])
    pts = [{"concurrency": b, "coverage": v, "measured": label} for label, curve in (measured or []) for b, v in curve]
    chart = lines
    if pts:
        chart = lines + alt.Chart(alt.Data(values=pts)).mark_point(filled=True, size=50, color="black").encode(
            x=_x(), y="coverage:Q", shape=alt.Shape("measured:N", legend=alt.Legend(title="implied by", orient="bottom")),
            tooltip=["measured:N", "concurrency:Q", alt.Tooltip("coverage:Q", format=".1%")])
    return _spec(chart.properties(width=WIDTH, height=HEIGHT,
                                  title="Expert coverage: uniform, the locality prior, identical prompts, and measured"))


def bytes_growth_chart(cards: list[ModelCard], context: int = 0, routing_scale: float | None = None) -> dict[str, Any]:
    """Weight bytes read per step at B relative to B = 1 of each card (as served), MoE vs dense (a dense model stays at
    1×): an MoE's under uniform routing (solid) and, given ``routing_scale``, the locality prior's effective batch
    (dashed, :func:`pipeline.cards.stepcost.effective_batch`)."""
    routings = [("uniform routing", None)] + ([(f"locality prior s = {routing_scale:g}", routing_scale)]
                                               if routing_scale else [])
    rows = []
    for c in cards:
        one = weight_bytes_per_step(c, 1) + kv_bytes_per_sequence(c, context)
        for name, scale in routings if c.kind == "moe" else routings[:1]:
            for b in BATCHES:
                rows.append({"concurrency": b, "model": c.name, "format": c.quantization, "kind": c.kind, "routing": name,
                             "growth": (weight_bytes_per_step(c, b, scale) + kv_bytes_per_sequence(c, context) * b) / one})
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=_x(), y=alt.Y("growth:Q", title="bytes read per step ÷ bytes at B = 1"),
        color=alt.Color("model:N", legend=alt.Legend(title=None, orient="top-left", labelLimit=320)), detail="routing:N",
        tooltip=["model:N", "format:N", "routing:N", "concurrency:Q", alt.Tooltip("growth:Q", format=".2f")])
    chart = _dashed_lines(base, alt.StrokeDash("routing:N", scale=alt.Scale(domain=[n for n, _ in routings],
                                                                             range=[[1, 0], [5, 4]][:len(routings)]),
                                               legend=alt.Legend(title=None, orient="bottom", symbolType="stroke")))
    return _spec(chart.properties(width=WIDTH, height=HEIGHT, title="How much more a decode step reads as the batch "
                                  "grows (weights only, as served)"))


def moe_dense_efficiency_chart(workloads: list[Any]) -> dict[str, Any]:
    """Scaling efficiency T(c) / (c·T(1)) of every workload of every run: colour by kind (MoE red, dense blue), dash by run.

    ``workloads`` are workloads or ``(run id, workload)`` pairs; each line is one workload (the
    ``workload`` field, encoded as ``detail``), so prompt lengths and runs are never joined.
    """
    rows = []
    for run_id, w in _pairs(workloads):
        for c, eff in (w.model.get("scaling_efficiency") or {}).items():
            rows.append({"concurrency": int(c), "efficiency": eff, "workload": workload_key(run_id, w),
                         "run": run_id or "?", "kind": w.model.get("kind") or "?"})
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=_x(values=[1, 2, 4, 8, 16, 32, 64]),
        y=alt.Y("efficiency:Q", title="scaling efficiency T(c) / (c·T(1))",
                scale=alt.Scale(domain=efficiency_domain([r["efficiency"] for r in rows]))),
        color=alt.Color("kind:N", scale=KIND_COLORS, legend=alt.Legend(title="kind", orient="top-right")),
        detail="workload:N",
        tooltip=["workload:N", "kind:N", "concurrency:Q", alt.Tooltip("efficiency:Q", format=".3f")])
    chart = _dashed_lines(base, alt.StrokeDash("run:N", legend=alt.Legend(
        title="run (hardware)", orient="bottom", labelLimit=400, symbolType="stroke", symbolStrokeWidth=2,
        symbolSize=300, symbolStrokeColor="#333")))
    return _spec(chart.properties(width=WIDTH, height=HEIGHT, title="Scaling efficiency: MoE (red) vs dense (blue)"))


def kv_sequence_chart(cards: list[ModelCard], contexts: list[int] | None = None) -> dict[str, Any]:
    """KV-cache GB (10⁹ bytes) held by one sequence against its context, per model (sliding windows bend the line)."""
    contexts = contexts or [1024 * 2**i for i in range(8)]
    rows = [{"context": n, "model": c.name, "gb": kv_bytes_per_sequence(c, n) / 1e9}
            for c in cards for n in contexts if not c.max_context or n <= c.max_context]
    chart = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=alt.X("context:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(title="context (tokens)", values=contexts)),
        y=alt.Y("gb:Q", title="KV cache of one sequence (GB)", scale=alt.Scale(type="log")),
        color=alt.Color("model:N", legend=alt.Legend(title=None, orient="bottom", columns=3)),
        tooltip=["model:N", "context:Q", alt.Tooltip("gb:Q", format=".3f")])
    return _spec(chart.properties(width=WIDTH, height=HEIGHT, title="KV cache per sequence vs context"))


def capacity_chart(table_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Concurrent sequences that fit against context, per model (from :func:`pipeline.analysis.capacity.capacity_table`).

    Each model has its own point shape and dash, so two models with the same capacity (lines on
    top of each other) both show; a model whose weights do not fit, or fit with no room for one
    sequence at any context, has no line and the subtitle names it (the chart dropped
    such models without a word).
    """
    rows = [{"context": r["context"], "model": t["model"], "sequences": r["max_sequences"]}
            for t in table_rows for r in t["contexts"] if r["max_sequences"] > 0 and r["within_max_context"] is not False]
    drawn = {r["model"] for r in rows}
    missing = [t["model"] for t in table_rows if t["model"] not in drawn]
    names = sorted({t["model"] for t in table_rows})
    shapes = ["circle", "square", "triangle-up", "diamond", "cross", "triangle-down", "triangle-left", "triangle-right"]
    dashes = [[1, 0], [6, 3], [2, 2], [8, 3, 2, 3]]
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X("context:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(title="context per sequence (tokens)",
                                                                              values=list(DEFAULT_CONTEXTS))),
        y=alt.Y("sequences:Q", title="concurrent sequences that fit", scale=alt.Scale(type="log")),
        color=alt.Color("model:N", scale=alt.Scale(domain=names),
                        legend=alt.Legend(title=None, orient="bottom", columns=3)),
        tooltip=["model:N", "context:Q", "sequences:Q"])
    chart = alt.layer(
        base.mark_line(opacity=0.8).encode(strokeDash=alt.StrokeDash(
            "model:N", scale=alt.Scale(domain=names, range=[dashes[i % len(dashes)] for i in range(len(names))]),
            legend=None)),
        base.mark_point(filled=True, size=60).encode(shape=alt.Shape(
            "model:N", scale=alt.Scale(domain=names, range=[shapes[i % len(shapes)] for i in range(len(names))]),
            legend=None)))
    title: dict[str, Any] = {"text": "How many sequences fit beside the weights"}
    if missing:
        title["subtitle"] = "Not drawn (weights leave no room for one sequence): " + ", ".join(missing)
    return _spec(chart.properties(width=WIDTH, height=HEIGHT, title=title))
