"""The explainer pages' numbers: what the templates fill in (ceilings, crossovers, worked examples, ratios,
capacity), with the charts of :mod:`pipeline.pages.explaincharts` built from them.

Pages (``templates/explain/*.md.j2`` → ``<docs_dir>/explain/*.md``, and
``templates/capacity.md.j2`` → ``capacity.md``; rendered by :func:`pipeline.pages.render.render_site`
with :func:`page_context` through its ``PAGE_CONTEXT`` hook): what batching is; the bandwidth
arithmetic; the knee; MoE vs dense; KV cache and concurrency; sizing into 128 GB; KV capacity.
Every number comes from model cards (``data/models/``, counted as vLLM serves them on the profile's hardware and
each step costed as ``plan`` costs it: :mod:`pipeline.pages.explainbasis`), a hardware profile
(``data/hardware/``), the explainers' settings (``data/explainers.yaml``: the worked example's model) and the
analysed runs; formulas are those of :mod:`pipeline.cards.modelarch`, :mod:`pipeline.analysis.analyze`,
:mod:`pipeline.analysis.knee` and :mod:`pipeline.analysis.capacity`.  The reference measurement, when the site has one, arrives as run views like
any run's (the reference stage, :mod:`pipeline.importers.reference`, stores it; ``batchmark pages
--reference DIR`` reads it).
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Sequence, Set
from typing import Any

from pipeline.core import paths
from pipeline.analysis.analyze import ceiling_tok_s, ratio
from pipeline.analysis.capacity import capacity_table, does_not_fit, fit_table, usable_memory_gb
from pipeline.cards.registry import list_card_files, load_card
from pipeline.cards.servedformat import default_format, served_card
from pipeline.core.errors import BatchmarkError
from pipeline.analysis.knee import KNEE_THRESHOLD
from pipeline.cards.modelcards import ModelCard
from pipeline.pages import explaincharts as ec
from pipeline.pages.explainbasis import crossover_batch  # noqa: F401 (where callers found it before explainbasis)
from pipeline.pages.explainbasis import (PLAN_ENGINE, crossover_rows, served_cards, served_info, single_stream_tok_s,
                                         step_basis)
from pipeline.pages.explaincharts import workload_label
from pipeline.cards.stepcost import coverage_at, expert_coverage, kv_bytes_per_sequence, weight_bytes_per_step
from pipeline.core.records import workload_of
from pipeline.core.textfiles import load_yaml_text, read_text_file

EXPLAINERS = ("batching", "bandwidth", "knee", "moe", "kv-cache", "sizing")
#: Pages (docs_dir-relative) whose templates need :func:`page_context`.
PAGES = ("capacity.md", *(f"explain/{name}.md" for name in EXPLAINERS))
#: The explainers' settings file: ``worked_example_model``, the model card name of the worked examples (bandwidth
#: ceiling, KV bytes, sizing; its capacity is ``worked``).
SETTINGS_FILE = "explainers.yaml"


def worked_example_model(path: Path | None = None) -> str:
    """The model card name the explainers work their examples on (``data/explainers.yaml``'s ``worked_example_model``).

    Raises:
        BatchmarkError: the file is missing or unreadable, or ``worked_example_model`` is not a non-empty string.
    """
    path = path or paths.data_dir() / SETTINGS_FILE
    doc = load_yaml_text(path, read_text_file(path, "explainers' settings"))
    name = doc.get("worked_example_model") if isinstance(doc, dict) else None
    if not isinstance(name, str) or not name.strip():
        raise BatchmarkError(f"{path}: worked_example_model: give a model card name (e.g. Llama-3.1-8B)")
    return name


# -- numbers for the templates ---------------------------------------------------------------

def ceiling_rows(cards: list[ModelCard], bandwidth_gb_s: float, workloads: Sequence[Any] = (),
                 quants: tuple[str, ...] = ("fp8", "nvfp4"), hardware: str | None = None) -> list[dict[str, Any]]:
    """Per model: bytes read per token at B = 1 (weights only) and the ceiling bandwidth / bytes, native and in ``quants``;
    ``served``: as vLLM serves it on ``hardware`` where that is not the checkpoint (:func:`default_format`).

    Derived (docs/definitions.md): ceiling = bandwidth / bytes per decode step at B = 1; an MoE reads
    its dense part + k/E of its experts.  Measured single streams (c = 1) of matching models are attached.
    """
    out = []
    files: dict[str, Any] = {}  # card file of each name, found once (a search per card × workload was quadratic)
    for c in cards:
        native = weight_bytes_per_step(c, 1)
        row: dict[str, Any] = {"model": c.name, "kind": c.kind, "quantization": c.quantization, "card": c,
               "dense_bytes": c.dense_bytes, "expert_bytes_read": native - c.dense_bytes,
               "bytes_per_token": native, "ceiling_tok_s": ceiling_tok_s(c, 0, bandwidth_gb_s),
               "ceilings": {f"native ({c.quantization})": ceiling_tok_s(c, 0, bandwidth_gb_s)}, "measured": []}
        for q in quants:
            alt_card = load_card(c.name, quant=q)
            row["ceilings"][q] = bandwidth_gb_s * 1e9 / weight_bytes_per_step(alt_card, 1)
        fmt = default_format("vllm", hardware, (c.extra or {}).get("model_type")) if hardware else None
        served = weight_bytes_per_step(served_card(c, engine="vllm", hardware=hardware), 1) if fmt else None
        row["served"] = ({"format": fmt.label(), "source": fmt.source, "ceiling_tok_s": bandwidth_gb_s * 1e9 / served}
                         if fmt and served is not None else None)
        for w in workloads:
            if w.model.get("model") and _same_model(w.model["model"], c.name, files):
                p1 = next((p for p in w.points if p["concurrency"] == 1 and p.get("output_throughput_tok_s")), None)
                if p1:
                    row["measured"].append({"tok_s": p1["output_throughput_tok_s"], "label": workload_label(w)})
        out.append(row)
    return out


def _same_model(a: str, b: str, files: dict[str, Any] | None = None) -> bool:
    """True when model names ``a`` and ``b`` resolve to the same model card file (``files``: a cache of name → card file)."""
    from pipeline.cards.registry import find_card_file

    files = {} if files is None else files
    for name in (a, b):
        if name not in files:
            files[name] = find_card_file(name)
    fa, fb = files[a], files[b]
    return fa is not None and fb is not None and fa[0] == fb[0]


def pick(workloads: list[Any], kind: str, flagged: Set[int] = frozenset()) -> Any | None:
    """The workload of ``kind`` with the most points, shortest prompt first (the page's worked example).

    A workload of a clean run always comes before one of a flagged run (``flagged``: the ``id()``
    of every workload whose run's quality verdict is flagged, :mod:`pipeline.analysis.quality`), so a run
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


def point_at(w: Any, c: int | None) -> dict[str, Any] | None:
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
    first, last = (pts[0], pts[-1]) if pts else ({}, {})
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
    each workload once ("A site for a lab": 50 models × 10 runs made the Knee page
    3.8 MB), while the model pages keep every run.  A flagged run newer than the clean one stays,
    so that it is shown as flagged where it would otherwise have been the example.
    """
    groups: dict[tuple, list[tuple[Any, Any]]] = {}
    for v in sorted(views, key=lambda v: v.run_id, reverse=True):
        for w in v.workloads:
            m = w.model
            key = (str(v.hardware.get("name")), *workload_of({"engine": None, **m}))
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


def coverage_examples(cards: list[ModelCard], routing_scale: float | None,
                      batches: tuple[int, ...] = (1, 2, 8, 32, 64)) -> list[tuple[ModelCard, list[tuple[str, list]]]]:
    """Per MoE card, the expert coverage at each of ``batches`` under each routing, labelled: uniform (the upper bound,
    1 − (1 − k/E)^B), the locality prior ``routing_scale`` where the profile states one (its effective batch,
    :func:`pipeline.cards.stepcost.effective_batch`) and identical prompts (k/E, the lower bound)."""
    routings = [("uniform (upper bound)", None)] + ([(f"fitted prior (vLLM), s = {routing_scale:g}", routing_scale)]
                                                     if routing_scale else []) + [("identical prompts (k/E)", 0.0)]
    return [(c, [(name, [(b, coverage_at(b, c.experts_per_token, c.num_experts, s)) for b in batches])
                 for name, s in routings]) for c in cards]


def explain_context(views: list[Any], hardware: dict[str, Any], worked_model: str) -> dict[str, Any]:
    """Everything the explainer templates fill in: cards, ceilings, examples from the runs, capacity.

    Args:
        views: analysed runs (:class:`pipeline.pages.views.RunView`-shaped: ``run_id``, ``meta``,
            ``workloads`` with ``model``, ``points``, ``analysis_points``); those flagged for a busy machine
            (``interfered``, else ``flagged``) are left out, named in ``flagged_left_out``: an explainer's numbers are
            findings, theirs are not.
        hardware: the profile the sizing pages are written for (a ``HardwareProfile`` dict).
        worked_model: the model card name of the worked examples (:func:`worked_example_model`).

    The charts are built here (:mod:`pipeline.pages.explaincharts`), under ``charts`` and each batching example's
    ``chart``: templates get values, never a module.
    """
    # explainers never draw a run measured on a busy machine: it lives on its model and run pages, marked
    # there.  A run flagged only for an impossible figure (a card that does not match the weights) stays, that
    # figure marked where it stands, and a clean run still comes first (:func:`pick`).
    def busy(v: Any) -> bool:
        return bool(getattr(v, "interfered", getattr(v, "flagged", False)))

    left_out = sorted(v.run_id for v in views if busy(v))
    views = [v for v in views if not busy(v)]
    cards = [load_card(n) for n in sorted(list_card_files(), key=str.lower)]
    basis = step_basis(hardware)  # what plan costs a step with here, each figure with its source
    served = served_cards(cards, hardware.get("name"))  # as vLLM serves each card on this hardware
    workloads = [w for v in views for w in v.workloads]
    bw, prior = hardware.get("bandwidth_gb_s_spec"), ec.routing_prior(hardware)
    flagged = _flagged_workloads(views)
    dense, moe = pick(workloads, "dense", flagged), pick(workloads, "moe", flagged)
    last = lambda w: max(p["concurrency"] for p in w.points) if w else None  # noqa: E731
    moe_cards = [c for c in cards if c.kind == "moe"]
    capacity = [{**capacity_table(sc, hardware), "served": served_info(sc, c)} for sc, c in zip(served, cards)]
    worked = next((t for t in capacity if t["model"] == worked_model), None)
    latest = latest_workloads(views)
    run_of = {id(w): v.run_id for v in views for w in v.workloads}
    hw_of = {id(w): v.hardware.get("name") or "unknown hardware" for v in views for w in v.workloads}
    measured = [(f"{v.run_id} ({v.hardware.get('name') or '?'})" + (" ⚠ flagged" if id(w) in flagged else ""), w)
                for v, w in latest if w.model.get("kind")]
    examples = batching_examples(views, hardware.get("name"))
    for ex in examples:
        ex["chart"] = ec.batching_chart(ex["w"])
    ceilings = ceiling_rows(cards, bw, workloads, hardware=hardware.get("name")) if bw else []
    charts = {"ceilings": ec.ceilings_chart(ceilings), "capacity": ec.capacity_chart(capacity),
              "kv_sequence": ec.kv_sequence_chart(served),
              "coverage": ec.coverage_chart(moe_cards, routing_scale=prior, measured=ec.measured_coverage(measured, moe_cards)),
              "bytes_growth": ec.bytes_growth_chart([c for c in served if c.kind == "moe" or c.name == worked_model],
                                                    routing_scale=prior)}
    if any(w.model.get("kind") for _, w in latest):  # the pages draw these only when a run measured a known model
        charts.update(roofline_overlay=ec.roofline_overlay_chart(measured), step_time=ec.step_time_chart(measured),
                      moe_dense_efficiency=ec.moe_dense_efficiency_chart(measured))
    return {
        "worked_model": worked_model, "charts": charts,
        "dense_run": run_of.get(id(dense)), "moe_run": run_of.get(id(moe)),
        "dense_hw": hw_of.get(id(dense)), "moe_hw": hw_of.get(id(moe)),
        "batching_examples": examples,
        "hw": hardware, "cards": cards, "moe_cards": moe_cards, "dense_cards": [c for c in cards if c.kind == "dense"],
        "views": views, "workloads": workloads, "latest": latest, "flagged_left_out": left_out,
        "measured_workloads": [w for _, w in latest if w.model.get("kind")],
        # a chart's series of a flagged run says so in its label (flagged wherever it appears)
        "measured": measured,
        "dense": dense, "moe": moe, "dense_last": last(dense), "moe_last": last(moe),
        "ceilings": ceilings,
        "basis": basis, "served": {c.name: c for c in served}, "served_moe": [c for c in served if c.kind == "moe"],
        "crossovers": crossover_rows(served, cards, basis) if bw else [],
        "card_roofline": ec.card_roofline_chart(_example_cards(served), basis, hardware.get("name") or "?", usable_gb=(
            usable_memory_gb(hardware)["usable_gb"] if hardware.get("memory_gb") else None)),
        "capacity": capacity, "worked": worked, "does_not_fit": does_not_fit,
        "fits": fit_table(hardware, contexts=(8192, 32768, 131072), engine=PLAN_ENGINE),
        "routing_prior": prior, "coverage_examples": coverage_examples(moe_cards, prior),
        "knee_threshold": next((w.model.get("knee_threshold") for w in workloads if w.model.get("knee_threshold")), KNEE_THRESHOLD),
        "coverage": lambda b, c: expert_coverage(b, c.experts_per_token, c.num_experts),
        "dense_ratios": step_ratios(point_at(dense, 1) or dense.points[0], point_at(dense, last(dense))) if dense else None,
        "step_ratios": step_ratios, "roofline_ratios": roofline_ratios, "kv_read_per_step": kv_read_per_step,
        "ratio": ratio, "ceiling_of_bytes": ceiling_of_bytes, "plan_tok_s": lambda c: single_stream_tok_s(c, basis),
        "usable": None if hardware.get("memory_gb") is None else usable_memory_gb(hardware),
        "usable_gb": None if hardware.get("memory_gb") is None else usable_memory_gb(hardware)["usable_gb"],
        "point_at": point_at, "kv_bytes_per_sequence": kv_bytes_per_sequence,
        "weight_bytes_per_step": weight_bytes_per_step,
    }


def page_context(views: list[Any], run_dirs: list[Path], reference: list[Any] | tuple[Any, ...] = (),
                 hardware: str = "dgx-spark") -> dict[str, Any]:
    """``PAGE_CONTEXT`` hook of :mod:`pipeline.pages.render` for :data:`PAGES`: :func:`explain_context` of the runs.

    ``reference``: run views of the reference measurement (``batchmark pages --reference``, the
    stored output of :mod:`pipeline.importers.reference`); each is added to the runs unless one of the
    runs was imported from the same source file (then it is there already).  Computed on every call, from the
    card files and settings as they are now; :func:`pipeline.pages.render.render_site` calls it once per site
    for all of :data:`PAGES`.
    """
    from pipeline.machine.hardware import load_profile

    views = [v for v in views if getattr(v, "meta", {}).get("source") != "simulated"]  # a prediction is no measured example
    imported = {f for v in views for f in (v.meta.get("source_files") or [])}
    extra = [r for r in reference if not set(r.meta.get("source_files") or []) & imported]
    return explain_context(list(views) + extra, load_profile(hardware).model_dump(mode="json"), worked_example_model())
