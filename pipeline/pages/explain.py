"""The explainer pages: chart builders (Vega-Lite spec dicts, as in :mod:`pipeline.pages.charts`) and the numbers the templates fill in.

Pages (``templates/explain/*.md.j2`` → ``<docs_dir>/explain/*.md``, and
``templates/capacity.md.j2`` → ``capacity.md``; rendered by :func:`pipeline.pages.render.render_site`
with :func:`page_context` through its ``PAGE_CONTEXT`` hook): what batching is; the bandwidth
arithmetic; the knee; MoE vs dense; KV cache and concurrency; sizing into 128 GB; KV capacity.
Every number comes from model cards (``data/models/``), a hardware profile
(``data/hardware/``) and the analysed runs; formulas are those of
:mod:`pipeline.modelarch`, :mod:`pipeline.analysis`, :mod:`pipeline.knee` and :mod:`pipeline.capacity`.
No I/O: the reference measurement, when the site has one, arrives as run views like
any run's (the reference stage, :mod:`pipeline.reference`, stores it; ``batchmark pages
--reference DIR`` reads it).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import altair as alt

from pipeline.analysis import ceiling_tok_s, ratio, roofline_step_s
from pipeline.capacity import DEFAULT_CONTEXTS, capacity_table, does_not_fit, fit_table, usable_memory_gb
from pipeline.cardregistry import list_card_files, load_card
from pipeline.knee import KNEE_THRESHOLD
from pipeline.modelcards import ModelCard
from pipeline.stepcost import expert_coverage, kv_bytes_per_sequence, weight_bytes_per_step
from pipeline.pages.charts import HEIGHT, WIDTH, efficiency_domain, x_concurrency
from pipeline.pages.charts import spec_of as _spec

EXPLAINERS = ("batching", "bandwidth", "knee", "moe", "kv-cache", "sizing")
#: Pages (docs_dir-relative) whose templates need :func:`page_context`.
PAGES = ("capacity.md", *(f"explain/{name}.md" for name in EXPLAINERS))
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
KIND_COLORS = alt.Scale(domain=["dense", "moe"], range=["#1f77b4", "#d62728"])


def _x(title: str = "concurrency B (sequences decoded together)", values: list[int] | None = None) -> alt.X:
    return x_concurrency(title, values or BATCHES)


def _label(w: Any) -> str:
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
    return _spec(chart.properties(width=WIDTH, height=HEIGHT, title=f"Batching {_label(workload)}"))


def card_roofline_chart(cards: list[ModelCard], bandwidth_gb_s: float | None, peak_tflops: float | None,
                        hardware_name: str, batches: list[int] | None = None) -> dict[str, Any] | None:
    """Roofline prediction from the model cards alone: output tokens/s (all users) and step time (ms) against B.

    Derived (docs/definitions.md, roofline): step time(B) = max(bytes(B) / bandwidth, FLOPs(B) / peak);
    predicted output throughput = B / step time; context 0 (weights only).  Needs no run, so the
    batching and knee explainers always have a chart of the project's own data.  None without a
    bandwidth figure.
    """
    if not bandwidth_gb_s:
        return None
    batches = batches or BATCHES
    rows = []
    for c in cards:
        for b in batches:
            step_s, bound = roofline_step_s(c, b, 0.0, bandwidth_gb_s, peak_tflops)
            label = f"{c.name} ({c.kind}, {c.quantization})"
            rows.append({"concurrency": b, "model": label, "tok_s": b / step_s, "panel": "output throughput (tokens/s, all users)",
                         "bound": bound})
            rows.append({"concurrency": b, "model": label, "tok_s": step_s * 1e3, "panel": "step time = per-token latency (ms)",
                         "bound": bound})
    base = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=_x("B", values=batches), y=alt.Y("tok_s:Q", title=None, scale=alt.Scale(type="log")),
        color=alt.Color("model:N", legend=alt.Legend(title=None, orient="bottom", columns=2, labelLimit=320)),
        tooltip=["model:N", "concurrency:Q", "bound:N", alt.Tooltip("tok_s:Q", format=".2f")])
    chart = base.properties(width=PANEL_WIDTH, height=PANEL_HEIGHT).facet(
        column=alt.Column("panel:N", title=None, sort="descending"))
    return _spec(chart.resolve_scale(y="independent").properties(
        title=f"Roofline prediction from the model cards on {hardware_name} (context 0)"))


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
    # the title promises the diamonds only when there are some (issue 13: it promised ◆ that were not drawn)
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


def coverage_chart(cards: list[ModelCard], batches: list[int] | None = None) -> dict[str, Any]:
    """Expected fraction of routed experts touched, 1 − (1 − k/E)^B, against B for each MoE card."""
    batches = batches or [b for b in range(1, 257) if b <= 16 or b % 4 == 0]
    rows = [{"concurrency": b, "model": f"{c.name} (k={c.experts_per_token} of E={c.num_experts})",
             "coverage": expert_coverage(b, c.experts_per_token, c.num_experts)}
            for c in cards if c.num_experts for b in batches]
    chart = alt.Chart(alt.Data(values=rows)).mark_line().encode(
        x=_x(), y=alt.Y("coverage:Q", title="experts read per step (fraction of all)", scale=alt.Scale(domain=[0, 1]),
                        axis=alt.Axis(format="%")),
        color=alt.Color("model:N", legend=alt.Legend(title=None, orient="bottom-right")),
        tooltip=["model:N", "concurrency:Q", alt.Tooltip("coverage:Q", format=".1%")])
    return _spec(chart.properties(width=WIDTH, height=HEIGHT, title="Expert coverage 1 − (1 − k/E)^B under uniform routing"))


def bytes_growth_chart(cards: list[ModelCard], context: int = 0) -> dict[str, Any]:
    """Weight bytes read per step at B relative to B = 1, MoE vs dense (a dense model stays at 1×)."""
    rows = []
    for c in cards:
        one = weight_bytes_per_step(c, 1)
        for b in BATCHES:
            rows.append({"concurrency": b, "model": c.name, "kind": c.kind,
                         "growth": (weight_bytes_per_step(c, b) + kv_bytes_per_sequence(c, context) * b)
                         / (one + kv_bytes_per_sequence(c, context))})
    chart = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=_x(), y=alt.Y("growth:Q", title="bytes read per step ÷ bytes at B = 1"),
        color=alt.Color("model:N", legend=alt.Legend(title=None, orient="top-left")),
        strokeDash=alt.StrokeDash("kind:N", legend=None),
        tooltip=["model:N", "kind:N", "concurrency:Q", alt.Tooltip("growth:Q", format=".2f")])
    return _spec(chart.properties(width=WIDTH, height=HEIGHT, title="How much more a decode step reads as the batch grows (weights only)"))


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
    """Concurrent sequences that fit against context, per model (from :func:`pipeline.capacity.capacity_table`).

    Each model has its own point shape and dash, so two models with the same capacity (lines on
    top of each other) both show; a model whose weights do not fit, or fit with no room for one
    sequence at any context, has no line and the subtitle names it (issue 13: the chart dropped
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


# -- numbers for the templates ---------------------------------------------------------------

def ceiling_rows(cards: list[ModelCard], bandwidth_gb_s: float, workloads: list[Any] = (),
                 quants: tuple[str, ...] = ("fp8", "nvfp4")) -> list[dict[str, Any]]:
    """Per model: bytes read per token at B = 1 (weights only) and the ceiling bandwidth / bytes, native and in ``quants``.

    Derived (docs/definitions.md): ceiling = bandwidth / bytes per decode step at B = 1; an MoE reads
    its dense part + k/E of its experts.  Measured single streams (c = 1) of matching models
    are attached for comparison.
    """
    out = []
    files: dict[str, Any] = {}  # card file of each name, found once (a search per card × workload was quadratic)
    for c in cards:
        native = weight_bytes_per_step(c, 1)
        row = {"model": c.name, "kind": c.kind, "quantization": c.quantization, "card": c,
               "dense_bytes": c.dense_bytes, "expert_bytes_read": native - c.dense_bytes,
               "bytes_per_token": native, "ceiling_tok_s": ceiling_tok_s(c, 0, bandwidth_gb_s),
               "ceilings": {f"native ({c.quantization})": ceiling_tok_s(c, 0, bandwidth_gb_s)}, "measured": []}
        for q in quants:
            alt_card = load_card(c.name, quant=q)
            row["ceilings"][q] = bandwidth_gb_s * 1e9 / weight_bytes_per_step(alt_card, 1)
        for w in workloads:
            if w.model.get("model") and _same_model(w.model["model"], c.name, files):
                p1 = next((p for p in w.points if p["concurrency"] == 1 and p.get("output_throughput_tok_s")), None)
                if p1:
                    row["measured"].append({"tok_s": p1["output_throughput_tok_s"], "label": _label(w)})
        out.append(row)
    return out


def _same_model(a: str, b: str, files: dict[str, Any] | None = None) -> bool:
    """True when model names ``a`` and ``b`` resolve to the same model card file (``files``: a cache of name → card file)."""
    from pipeline.cardregistry import find_card_file

    files = {} if files is None else files
    for name in (a, b):
        if name not in files:
            files[name] = find_card_file(name)
    fa, fb = files[a], files[b]
    return fa is not None and fb is not None and fa[0] == fb[0]


def crossover_batch(card: ModelCard, bandwidth_gb_s: float, peak_tflops: float, context: float = 0.0) -> float | None:
    """Smallest B at which the compute roof meets the memory roof: FLOPs(B)/peak = bytes(B)/bandwidth.

    Derived from the roofline of :mod:`pipeline.analysis`: bytes(B)/bw = FLOPs(B)/peak, solved
    numerically on B (bytes grow with B through KV and expert coverage).  None when the
    compute roof never binds below B = 65536.
    """
    if not peak_tflops:
        return None

    def _binds(b: int) -> bool:
        return roofline_step_s(card, b, context, bandwidth_gb_s, peak_tflops)[1] == "compute"

    hi = 1
    while not _binds(hi):
        hi *= 2
        if hi > 65536:
            return None
    lo = hi // 2  # _binds(lo) is False (or lo = 0); bisect to the first B where it holds
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _binds(mid) else (mid, hi)
    return hi


def pick(workloads: list[Any], kind: str, flagged: set[int] = frozenset()) -> Any | None:
    """The workload of ``kind`` with the most points, shortest prompt first (the page's worked example).

    A workload of a clean run always comes before one of a flagged run (``flagged``: the ``id()``
    of every workload whose run's quality verdict is flagged, :mod:`pipeline.quality`), so a run
    measured under interference is an example only when no clean one exists.  Then: among equals a
    served vLLM workload (continuous batching, as a Spark serves) comes before static batches, and a
    newer run before an older one (workloads are listed oldest run first).
    """
    mine = [w for w in workloads if w.model.get("kind") == kind and len(w.points) >= 2]
    if not mine:
        return None
    order = {id(w): i for i, w in enumerate(workloads)}
    return sorted(mine, key=lambda w: (id(w) in flagged, -len(w.points), w.model["input_len"],
                                       w.model.get("engine") != "vllm", -order[id(w)], w.model["model"]))[0]


def _flagged_workloads(views: list[Any]) -> set[int]:
    """``id()`` of every workload of a run whose quality verdict is flagged (views without one count as clean)."""
    return {id(w) for v in views if getattr(v, "flagged", False) for w in v.workloads}


def point_at(w: Any, c: int) -> dict[str, Any] | None:
    """Point summary of a workload at concurrency ``c``."""
    return next((p for p in w.points if p["concurrency"] == c), None) if w else None


def step_ratios(p1: dict[str, Any] | None, pl: dict[str, Any] | None) -> dict[str, float | None]:
    """From point ``p1`` to point ``pl`` of one workload: what batching bought and what it cost.

    ``output_x`` = T(pl) ÷ T(p1) (output throughput), ``per_user_x`` (per-user throughput),
    ``step_x`` = step(pl) ÷ step(p1), ``step_growth_pct`` = (step_x − 1) × 100, and
    ``step_ms_1`` / ``step_ms_l`` the decode steps in ms (None where a figure is missing).
    """
    p1, pl = p1 or {}, pl or {}
    step_x = ratio(pl.get("step_time_s"), p1.get("step_time_s"))
    return {"output_x": ratio(pl.get("output_throughput_tok_s"), p1.get("output_throughput_tok_s")),
            "per_user_x": ratio(pl.get("per_user_tok_s"), p1.get("per_user_tok_s")),
            "step_x": step_x, "step_growth_pct": None if step_x is None else (step_x - 1) * 100,
            "step_ms_1": None if p1.get("step_time_s") is None else p1["step_time_s"] * 1e3,
            "step_ms_l": None if pl.get("step_time_s") is None else pl["step_time_s"] * 1e3}


def ceiling_of_bytes(bandwidth_gb_s: float | None, bytes_per_token: float | None) -> float | None:
    """Tokens/s one stream can reach reading ``bytes_per_token`` per token at ``bandwidth_gb_s`` (10⁹ bytes/s).

    Derived (docs/definitions.md, bandwidth ceiling): ceiling = bandwidth ÷ bytes per decode step.
    """
    return bandwidth_gb_s * 1e9 / bytes_per_token if bandwidth_gb_s and bytes_per_token else None


def roofline_ratios(w: Any, concurrencies: list[int]) -> list[float | None]:
    """Roofline prediction ÷ measured output throughput of workload ``w`` at each concurrency (None where unknown)."""
    roof = {a["concurrency"]: a.get("roofline_tok_s") for a in w.analysis_points}
    measured = {p["concurrency"]: p.get("output_throughput_tok_s") for p in w.points}
    return [ratio(roof.get(c), measured.get(c)) for c in concurrencies]


def kv_read_per_step(w: Any, concurrency: int) -> dict[str, float]:
    """KV-cache bytes one decode step reads at ``concurrency``: B × mean context × KV bytes per token.

    Derived (docs/definitions.md, bytes per decode step): the mean context over the generation is
    input + output ÷ 2 tokens.  Returns ``{"mean_context", "kv_bytes"}``.
    """
    m = w.model
    mean_context = m["input_len"] + m["output_len"] / 2
    return {"mean_context": mean_context, "kv_bytes": concurrency * mean_context * (m.get("kv_bytes_per_token") or 0)}


def hardware_figures(hardware: dict[str, Any]) -> dict[str, Any]:
    """A run's hardware block (``analysis.json``'s ``hardware``) as the pages quote it: name, figures and their source.

    ``bandwidth_source`` / ``peak_source`` say whether the figure the analysis used is the
    profile's spec sheet or a ``batchmark probe`` measurement.
    """
    def _source(kind: str) -> str | None:
        used = hardware.get(kind)
        if used is None:
            return None
        return "spec sheet" if hardware.get(f"{kind}_spec") == used else "measured by batchmark probe"

    return {"name": hardware.get("name") or "unknown hardware",
            "bandwidth_gb_s": hardware.get("bandwidth_gb_s"), "bandwidth_source": _source("bandwidth_gb_s"),
            "peak_tflops": hardware.get("peak_tflops"), "peak_source": _source("peak_tflops")}


def bandwidth_check(w: Any) -> dict[str, Any]:
    """Does a measured curve follow the bandwidth-bound picture (the step hardly grows with B)?

    From the workload's own data: the roofline bound of each point (``analysis_points``'
    ``roofline_bound``) and its measured points.  ``compute_from``: the first B at which the
    roofline has compute, not memory, setting the step (None if memory binds throughout).
    ``stalls``: doublings of B after which the output throughput did not rise (the step grew
    at least as much as B), each with the roofline's predicted step ratio.  ``step_growth`` and
    ``roofline_step_growth``: step time at the last B ÷ at the first, measured and by the
    roofline (derived: roofline step = B ÷ roofline tokens/s; ``roofline_step_growth_pct`` = (growth − 1) × 100).  ``follows``: memory binds
    throughout and nothing stalled.
    """
    pts = [p for p in w.points if p.get("output_throughput_tok_s") and p.get("step_time_s")]
    roof = {a["concurrency"]: a for a in w.analysis_points}

    def _roof_step(p: dict[str, Any]) -> float | None:
        r = (roof.get(p["concurrency"]) or {}).get("roofline_tok_s")
        return p["concurrency"] / r if r else None

    compute_from = next((a["concurrency"] for a in sorted(w.analysis_points, key=lambda a: a["concurrency"])
                         if a.get("roofline_bound") == "compute"), None)
    stalls = []
    for a, b in zip(pts, pts[1:]):
        if b["output_throughput_tok_s"] <= a["output_throughput_tok_s"]:
            ra, rb = _roof_step(a), _roof_step(b)
            stalls.append({"a": a, "b": b, "step_ratio": b["step_time_s"] / a["step_time_s"],
                           "roofline_step_ratio": rb / ra if ra and rb else None})
    first, last = (pts[0], pts[-1]) if pts else (None, None)
    rf, rl = (_roof_step(first), _roof_step(last)) if pts else (None, None)
    return {"compute_from": compute_from, "stalls": stalls,
            "step_growth": last["step_time_s"] / first["step_time_s"] if pts else None,
            "roofline_step_growth": rl / rf if rf and rl else None,
            "roofline_step_growth_pct": (rl / rf - 1) * 100 if rf and rl else None,
            "follows": bool(pts) and compute_from is None and not stalls}


def batching_examples(views: list[Any], hardware_name: str | None) -> list[dict[str, Any]]:
    """The batching page's measured examples: per hardware, its dense workload of :func:`pick`, ``hardware_name`` first.

    Each: ``{"run_id", "hardware" (:func:`hardware_figures`), "w", "p1", "pl", "check" (:func:`bandwidth_check`)}``.
    """
    by_hw: dict[str, list[tuple[Any, Any]]] = {}
    for v in views:
        for w in v.workloads:
            by_hw.setdefault(v.hardware.get("name") or "unknown hardware", []).append((v, w))
    out = []
    flagged = _flagged_workloads(views)
    for name in sorted(by_hw, key=lambda n: (n != hardware_name, n)):
        w = pick([w for _, w in by_hw[name]], "dense", flagged)
        if w is None or not any(p.get("step_time_s") for p in w.points):
            continue
        v = next(v for v, x in by_hw[name] if x is w)
        pts = [p for p in w.points if p.get("step_time_s")]
        out.append({"run_id": v.run_id, "hardware": hardware_figures(v.hardware), "w": w,
                    "quality": getattr(v, "quality", None), "clean_exists": any(id(x) not in flagged for _, x in by_hw[name]),
                    "p1": point_at(w, 1) or pts[0], "pl": pts[-1], "check": bandwidth_check(w),
                    "r": step_ratios(point_at(w, 1) or pts[0], pts[-1])})
    return out


def latest_workloads(views: list[Any]) -> list[tuple[Any, Any]]:
    """``(run view, workload)`` pairs the explainers list and draw: per (hardware, model, engine, input, output),
    the newest clean run's workload and every flagged run's newer than it (the newest run's alone when none is
    clean), newest run first.

    A lab re-measures the same models run after run; the explainers illustrate the physics with
    each workload once (issue 13, "A site for a lab": 50 models × 10 runs made the Knee page
    3.8 MB), while the model pages keep every run.  A flagged run newer than the clean one stays,
    so that it is shown as flagged where it would otherwise have been the example.
    """
    groups: dict[tuple, list[tuple[Any, Any]]] = {}
    for v in sorted(views, key=lambda v: v.run_id, reverse=True):
        for w in v.workloads:
            m = w.model
            key = (str(v.hardware.get("name")), m["model"], m.get("engine"), m["input_len"], m["output_len"])
            groups.setdefault(key, []).append((v, w))
    keep: set[int] = set()
    for pairs in groups.values():
        clean = [i for i, (v, _) in enumerate(pairs) if not getattr(v, "flagged", False)]
        # newest first: every run down to the newest clean one; the newest alone when none is clean
        keep.update(id(w) for _, w in pairs[:clean[0] + 1 if clean else 1])
    return [(v, w) for v in views for w in v.workloads if id(w) in keep]


def _example_cards(cards: list[ModelCard]) -> list[ModelCard]:
    """The cards of the model-card roofline chart: the smallest and the largest dense model and every MoE, at most four."""
    dense = sorted((c for c in cards if c.kind == "dense"), key=lambda c: weight_bytes_per_step(c, 1))
    picked = ([dense[0], dense[-1]] if len(dense) > 1 else dense) + [c for c in cards if c.kind == "moe"]
    return picked[:4]


def explain_context(views: list[Any], hardware: dict[str, Any]) -> dict[str, Any]:
    """Everything the explainer templates fill in: cards, ceilings, examples from the runs, capacity.

    Args:
        views: analysed runs (:class:`pipeline.pages.views.RunView`-shaped: ``run_id``, ``meta``,
            ``workloads`` with ``model``, ``points``, ``analysis_points``); those flagged for a busy machine
            (``interfered``, else ``flagged``) are left out, named in ``flagged_left_out``: an explainer's numbers are
            findings, theirs are not.
        hardware: the profile the sizing pages are written for (a ``HardwareProfile`` dict).
    """
    # explainers never draw a run measured on a busy machine (issue 24): it lives on its model and run pages, marked
    # there.  A run flagged only for an impossible figure (a card that does not match the weights) stays, that
    # figure marked where it stands, and a clean run still comes first (:func:`pick`).
    def busy(v: Any) -> bool:
        return bool(getattr(v, "interfered", getattr(v, "flagged", False)))

    left_out = sorted(v.run_id for v in views if busy(v))
    views = [v for v in views if not busy(v)]
    cards = [load_card(n) for n in sorted(list_card_files(), key=str.lower)]
    workloads = [w for v in views for w in v.workloads]
    bw, peak = hardware.get("bandwidth_gb_s_spec"), hardware.get("peak_tflops_spec")
    flagged = _flagged_workloads(views)
    dense, moe = pick(workloads, "dense", flagged), pick(workloads, "moe", flagged)
    last = lambda w: max(p["concurrency"] for p in w.points) if w else None  # noqa: E731
    moe_cards = [c for c in cards if c.kind == "moe"]
    capacity = [capacity_table(c, hardware) for c in cards]
    worked = next(t for t in capacity if t["model"] == "Llama-3.1-8B") if any(t["model"] == "Llama-3.1-8B" for t in capacity) else None
    latest = latest_workloads(views)
    run_of = {id(w): v.run_id for v in views for w in v.workloads}
    hw_of = {id(w): v.hardware.get("name") or "unknown hardware" for v in views for w in v.workloads}
    return {
        "dense_run": run_of.get(id(dense)), "moe_run": run_of.get(id(moe)),
        "dense_hw": hw_of.get(id(dense)), "moe_hw": hw_of.get(id(moe)),
        "batching_examples": batching_examples(views, hardware.get("name")),
        "hw": hardware, "cards": cards, "moe_cards": moe_cards, "dense_cards": [c for c in cards if c.kind == "dense"],
        "views": views, "workloads": workloads, "latest": latest, "flagged_left_out": left_out,
        "measured_workloads": [w for _, w in latest if w.model.get("kind")],
        # a chart's series of a flagged run says so in its label (issue 13: flagged wherever it appears)
        "measured": [(f"{v.run_id} ({v.hardware.get('name') or '?'})" + (" ⚠ flagged" if id(w) in flagged else ""), w)
                     for v, w in latest if w.model.get("kind")],
        "dense": dense, "moe": moe, "dense_last": last(dense), "moe_last": last(moe),
        "ceilings": ceiling_rows(cards, bw, workloads) if bw else [],
        "crossovers": {c.name: crossover_batch(c, bw, peak) for c in cards} if bw else {},
        "card_roofline": card_roofline_chart(_example_cards(cards), bw, peak, hardware.get("name") or "?"),
        "capacity": capacity, "worked": worked, "does_not_fit": does_not_fit,
        "fits": fit_table(hardware, contexts=(8192, 32768, 131072)),
        "coverage_examples": [(c, [(b, expert_coverage(b, c.experts_per_token, c.num_experts)) for b in (1, 2, 8, 32, 64)])
                              for c in moe_cards],
        "knee_threshold": next((w.model.get("knee_threshold") for w in workloads if w.model.get("knee_threshold")), KNEE_THRESHOLD),
        "coverage": lambda b, c: expert_coverage(b, c.experts_per_token, c.num_experts),
        "dense_ratios": step_ratios(point_at(dense, 1) or dense.points[0], point_at(dense, last(dense))) if dense else None,
        "step_ratios": step_ratios, "roofline_ratios": roofline_ratios, "kv_read_per_step": kv_read_per_step,
        "ratio": ratio, "ceiling_of_bytes": ceiling_of_bytes,
        "usable": None if hardware.get("memory_gb") is None else usable_memory_gb(hardware),
        "usable_gb": None if hardware.get("memory_gb") is None else usable_memory_gb(hardware)["usable_gb"],
        "point_at": point_at, "math": math, "kv_bytes_per_sequence": kv_bytes_per_sequence,
        "weight_bytes_per_step": weight_bytes_per_step, "explain_charts": sys.modules[__name__],
    }


_CACHE: dict[str, Any] = {}


def page_context(views: list[Any], run_dirs: list[Path], reference: list[Any] | tuple[Any, ...] = (),
                 hardware: str = "dgx-spark") -> dict[str, Any]:
    """``PAGE_CONTEXT`` hook of :mod:`pipeline.pages.render` for :data:`PAGES`: :func:`explain_context` of the runs.

    ``reference``: run views of the reference measurement (``batchmark pages --reference``, the
    stored output of :mod:`pipeline.reference`); each is added to the runs unless one of the
    runs was imported from the same source file (then it is there already).  Computed once per
    set of runs.
    """
    from pipeline.hardware import load_profile

    views = [v for v in views if getattr(v, "meta", {}).get("source") != "simulated"]  # a prediction is no measured example
    key = repr((hardware, [v.run_id for v in views], [str(d) for d in run_dirs], [v.run_id for v in reference]))
    if _CACHE.get("key") != key:
        imported = {f for v in views for f in (v.meta.get("source_files") or [])}
        extra = [r for r in reference if not set(r.meta.get("source_files") or []) & imported]
        _CACHE.clear()
        _CACHE.update(key=key, ctx=explain_context(list(views) + extra, load_profile(hardware).model_dump(mode="json")))
    return _CACHE["ctx"]
