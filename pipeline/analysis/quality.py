"""A run's quality verdict: ``clean`` or ``flagged``, with its reasons (pure).

A run is *flagged* when any of these holds, each a reason of its own:

- its probe warned (``run.json`` ``probe.warning``: the median absolute deviation of its repeats above 15 % of
  their median, or another load seen while it ran, :func:`pipeline.machine.hardware.probe_warning`);
- a point's repeats disagree: the output throughput of its slowest and fastest repeat differ by more
  than :data:`REPEAT_SPREAD_LIMIT` (max / min over repeats, ``PointSummary.samples``), which
  batching alone does not do — the machine was busy during that point (closed-loop points only: an
  open-loop point's throughput below saturation is set by its schedule, rate × output length, and a
  repeat of a few dozen Poisson arrivals moves it by itself, so its spread says nothing of the machine);
- outside processes loaded the machine while a point ran: the CPU time of everyone but the
  measuring process tree took more than :data:`pipeline.machine.interference.OUTSIDE_SHARE_LIMIT` of the
  machine's CPUs over the point (``PointSummary.interference``, measured by the sweep);
- the probe repeated after the sweep (``run.json`` ``probe_after``) warned, or its bandwidth differs
  from the probe before the sweep by more than :data:`PROBE_DRIFT_LIMIT` and the probes' own repeat noise
  (:func:`pipeline.analysis.probedrift.probe_moved`): the machine changed while the run was measured;
- a point beat the probed compute roof (``compute_roof_under_read``, :mod:`pipeline.analysis.underread`);
- a point was timed by an intermediary: its tokens arrived in bursts of many events per read (caveat
  ``timed_by_intermediary``), so its latencies are a buffer's;
- a point was client-bound (``PointSummary.client_bound``: the client's CPU or event-loop lag says the client,
  not the server, was the limit; :mod:`pipeline.metrics.clientside`);
- an imported point's own figures disagree (caveat ``figures_disagree``: a stated rate against its count and
  duration, a request rate faster than its latencies allow; :mod:`pipeline.importers.checks`);
- a workload's numbers cannot be right (``implausible``: an MBU above 1, a single stream above its
  bandwidth ceiling; :func:`implausible_model`).

Each point gets a verdict of its own too (:func:`point_verdict`: its repeats' spread and the
outside load while it ran), listed in the run's verdict under ``points``.

A flag withholds only what it touches (``withholds`` in the verdict, read by :mod:`pipeline.diff.withhold`): a
probe that warned and an impossible figure make the figures computed from the probe or the card uncertain
(ceilings, roofline, MBU, MFU: ``"roofline"``), not a throughput or latency measured by repeats that agree; a
flagged point withholds that point; a probe that moved while the run was measured withholds the roofline too, and
a measured change only where the drift (``probe_drift``) is as large as that change
(:func:`pipeline.analysis.probedrift.drift_explains`).

Pages show the verdict wherever a run appears, and choose a clean run over a flagged one as a
headline or an explainer's example whenever a clean one exists (:func:`prefer_clean`).
"""

from __future__ import annotations

from typing import Any, Iterable, TypeVar

from pipeline.analysis.checksmade import clean_claims
from pipeline.analysis.pointquality import point_reasons
from pipeline.analysis.probedrift import PROBE_DRIFT_LIMIT, drift_limit, probe_drift, probe_moved  # noqa: F401
from pipeline.machine.interference import MIN_WALL_S, OUTSIDE_SHARE_LIMIT

#: A point whose repeats' output throughput spreads more than this (max / min) is noisy.  The
#: committed clean runs spread at most 1.25x; an interfered point reached 2x and more.
REPEAT_SPREAD_LIMIT = 1.5

T = TypeVar("T")


def repeat_spread(samples: Iterable[float] | None) -> float | None:
    """max / min of a point's per-repeat values; None with fewer than two positive values."""
    xs = [x for x in (samples or []) if x and x > 0]
    return max(xs) / min(xs) if len(xs) >= 2 else None


def point_verdict(p: dict[str, Any], spread_limit: float = REPEAT_SPREAD_LIMIT,
                  share_limit: float = OUTSIDE_SHARE_LIMIT) -> dict[str, Any]:
    """One point's verdict: ``{"verdict": "clean" | "flagged", "reasons": [str], "spread", "outside_share"}``.

    Args:
        p: a point summary as a dict: ``samples.output_throughput_tok_s`` (per repeat) gives the
            spread (max / min, :func:`repeat_spread`), ``interference.outside_share`` the outside load
            (:func:`pipeline.machine.interference.outside_load`); either may be absent (older runs, imports).
        spread_limit: max / min of the repeats above which the point is noisy.
        share_limit: share of the machine's CPUs busy outside the measuring processes above which
            the point was measured on a busy machine (judged only for a point of at least
            :data:`pipeline.machine.interference.MIN_WALL_S`, and not where the server measured is no process
            of the sweep's, ``server_outside_tree``: an ``openai`` endpoint on this machine would count
            as outside load; ``outside_share`` is None otherwise).
    """
    reasons = []
    closed = p.get("load", "closed") == "closed"  # module docstring: open-loop spread comes from the schedule
    spread = repeat_spread((p.get("samples") or {}).get("output_throughput_tok_s")) if closed else None
    if spread is not None and spread > spread_limit:
        reasons.append(f"repeats disagree: slowest vs fastest output throughput {spread:.2f}× "
                       f"(more than {spread_limit:.2f}×)")
    inter = p.get("interference") or {}
    judged = (inter.get("wall_s") or 0) >= MIN_WALL_S and not inter.get("server_outside_tree")
    share = inter.get("outside_share") if judged else None
    if isinstance(share, (int, float)) and share > share_limit:
        reasons.append(f"machine busy: other processes kept {inter.get('outside_load_cpus', 0):.1f} of "
                       f"{inter.get('cpu_count', '?')} CPUs busy ({share:.0%}, more than {share_limit:.0%}) "
                       "while it ran")
    burst = (p.get("caveats") or {}).get("timed_by_intermediary", 0)
    if burst:  # pipeline.loadgen.streamrecord.arrived_in_bursts
        reasons.append(f"timed by an intermediary: {burst} of {(p.get('completed') or 0) + (p.get('failed') or 0)} "
                       "requests arrived in bursts of many events per read, so its TTFT, TPOT and ITL are a buffer's, "
                       "not the server's")
    if p.get("client_bound"):  # the client was the limit (pipeline.metrics.clientside): no server measurement
        reasons.append(str(p.get("client_bound_reason") or "client-bound"))
    return {"verdict": "flagged" if reasons else "clean", "reasons": reasons, "spread": spread,
            "outside_share": share if isinstance(share, (int, float)) else None}


def probe_saw_load(probe: dict[str, Any] | None) -> bool:
    """Whether a probe (``run.json`` ``probe`` or ``probe_after``) saw another load while it ran
    (:func:`pipeline.machine.hardware.probe_busy` of its ``load``); a probe recorded without its load (an older run)
    counts its warning, as it did then.  A spread alone is the probe's own noise, not a busy machine."""
    from pipeline.machine.hardware import probe_busy

    if not (probe or {}).get("warning"):
        return False
    return "load" not in probe or probe_busy(probe.get("load")) is not None


def measurements_uncertain(quality: dict[str, Any]) -> bool:
    """Whether a run's verdict touches its measured throughputs and latencies (not only its roofline): points whose
    repeats disagree or that ran beside another load (a moved probe touches only the changes it is as large as,
    :func:`pipeline.analysis.probedrift.drift_explains`)."""
    return bool(quality.get("noisy_points") or quality.get("busy_points"))


def nothing_measured(stops: list[str]) -> str:
    """The reason of a run none of whose points has a completed request (``stops``: why each model stopped)."""
    return "nothing was measured: no point has a completed request" + (f" ({stops[0]})" if stops else "")


def run_quality(meta: dict[str, Any], points: list[dict[str, Any]], models: list[dict[str, Any]] = (),
                spread_limit: float = REPEAT_SPREAD_LIMIT) -> dict[str, Any]:
    """``{"verdict": "clean" | "flagged", "reasons": [str, ...], "noisy_points": [{"model", "concurrency",
    "spread"}], "busy_points": [{"model", "concurrency", "outside_share"}], "points": [{"model", "engine",
    "input_len", "output_len", "concurrency", "verdict", "reasons"}], "interference"}`` of one run (``points``: only the
    flagged ones; every other point is clean; ``withholds``: what the run's own flag takes back of a diff —
    ``"roofline"`` (ceilings, roofline, MBU, MFU) or None (nothing beyond its flagged points); ``probe_drift``: the
    probes' drift where it moved beyond their noise, else None; ``interference``: True when a reason says the machine was busy or
    changed while the run was measured — its probe, its points' spread or outside load, the probe's drift —
    rather than only that a workload's figures are impossible, which pages mark where they stand; ``clean_text``: the
    run page's line for a clean run, the checks made and those not possible, :func:`pipeline.analysis.checksmade.clean_claims`).

    Args:
        meta: ``run.json`` (its ``probe.warning`` and ``probe_after`` are read).
        points: point summaries as dicts (``samples.output_throughput_tok_s`` and ``interference`` are read).
        models: the analysis' models (their ``implausible`` is read).
        spread_limit: max / min of a point's repeats above which the point is noisy.
    """
    reasons = []
    warning = (meta.get("probe") or {}).get("warning")
    if warning:
        reasons.append(f"bandwidth probe: {warning}")
    after = meta.get("probe_after") or {}
    if after.get("warning"):
        reasons.append(f"bandwidth probe after the sweep: {after['warning']}")
    drift = probe_moved(meta)  # beyond the probes' own repeat noise (pipeline.analysis.probedrift)
    if drift is not None:
        reasons.append(f"the bandwidth probed after the sweep ({after['bandwidth_gb_s']:.1f} GB/s) differs from the "
                       f"one before it ({meta['probe']['bandwidth_gb_s']:.1f} GB/s) by {drift:+.0%} (more than "
                       f"{drift_limit(meta):.0%}, the probes' own noise or 10 %): the machine changed while the run "
                       "was measured")
    noisy, busy, flagged = [], [], []
    for p in sorted(points, key=lambda p: (p.get("model") or "", p.get("input_len") or 0, p.get("concurrency") or 0)):
        v = point_verdict(p, spread_limit)
        if v["spread"] is not None and v["spread"] > spread_limit:
            noisy.append({"model": p.get("model"), "concurrency": p.get("concurrency"), "spread": v["spread"]})
        if v["outside_share"] is not None and v["outside_share"] > OUTSIDE_SHARE_LIMIT:
            busy.append({"model": p.get("model"), "concurrency": p.get("concurrency"), "outside_share": v["outside_share"]})
        if v["verdict"] == "flagged":
            key = {k: p.get(k) for k in ("model", "engine", "input_len", "output_len", "concurrency")}
            if p.get("load", "closed") != "closed":  # an open-loop point is known by its rate too (PointKey)
                key |= {"load": p["load"], "rate_rps": p.get("rate_rps")}
            flagged.append(key | {"verdict": "flagged", "reasons": v["reasons"]})
    if noisy:
        where = ", ".join(f"{n['model']} c = {n['concurrency']} ({n['spread']:.2f}×)" for n in noisy)
        reasons.append(f"repeats of a point disagree by more than {spread_limit:.2f}× (slowest vs fastest output "
                       f"throughput), so they were not steady: {where}")
    if busy:
        where = ", ".join(f"{b['model']} c = {b['concurrency']} ({b['outside_share']:.0%})" for b in busy)
        reasons.append(f"other processes kept more than {OUTSIDE_SHARE_LIMIT:.0%} of the machine's CPUs busy "
                       f"while points ran: {where}")
    # the machine busy or changed on evidence: points that disagree or ran beside another load, a moved probe, a probe
    # that saw another load (a probe's spread alone is its own noise: it makes the roofline uncertain, nothing else)
    interference = bool(noisy or busy or drift is not None
                        or probe_saw_load(meta.get("probe")) or probe_saw_load(after))
    reasons += point_reasons(points)
    for m in models:
        if m.get("implausible"):
            reasons.append(f"{m.get('model')}: {implausible_diagnosis(meta, m['implausible'])['text']}")
        if m.get("compute_roof_under_read"):  # pipeline.analysis.underread: a point beat the probed compute roof
            reasons.append(f"{m.get('model')}: {m['compute_roof_under_read']}")
    if all(p.get("completed") == 0 for p in points):  # no point, or none completed a request: never clean
        stops = sorted(f"{m}: {why}" for m, why in (meta.get("stopped") or {}).items() if why)
        reasons.append(nothing_measured(stops))
    withholds = "roofline" if (warning or after.get("warning") or drift is not None or
                               any(m.get("implausible") or m.get("compute_roof_under_read") for m in models)) else None
    return {"verdict": "flagged" if reasons else "clean", "reasons": reasons, "noisy_points": noisy,
            "busy_points": busy, "points": flagged, "interference": interference, "withholds": withholds,
            "probe_drift": drift,
            "clean_text": clean_claims(meta, points, spread_limit, models)}


def short_reasons(quality: dict[str, Any]) -> list[str]:
    """The verdict's reasons condensed for an index, one short line each (the Runs index repeated the same
    sentence per point and filled a 2,400-pixel screen); ``[]`` for a clean run.

    The probe's warning, the points whose repeats disagree (their count and the largest spread), the points measured
    on a busy machine (count, largest outside share), the probe's drift, and every implausible workload in one line;
    the run page keeps each reason in full.
    """
    if quality.get("verdict") != "flagged":
        return []
    out, implausible = [], []
    noisy, busy = quality.get("noisy_points") or [], quality.get("busy_points") or []
    for r in quality.get("reasons") or []:
        if r.startswith("bandwidth probe after the sweep:"):
            out.append("noisy probe after the sweep")
        elif r.startswith("bandwidth probe:"):
            out.append("noisy bandwidth probe")
        elif r.startswith("the bandwidth probed after the sweep"):
            out.append("bandwidth changed while the run was measured")
        elif r.startswith("repeats of a point disagree") and noisy:
            out.append(f"repeats disagree at {len(noisy)} point(s), up to {max(n['spread'] for n in noisy):.2f}×")
        elif r.startswith("other processes kept") and busy:
            out.append(f"machine busy during {len(busy)} point(s), up to {max(b['outside_share'] for b in busy):.0%} "
                       "of its CPUs")
        elif ": " in r and (r.split(": ", 1)[1].startswith(("single stream", "MBU above 1"))):
            implausible.append(r.split(": ", 1)[0])
        elif ": " in r and r.split(": ", 1)[1].startswith("the probe under-read the "):  # analysis.underread
            out.append(f"compute roof under-read ({r.split(': ', 1)[0]}): a point beat it")
        else:
            out.append(r if len(r) <= 100 else r[:99] + "…")
    if implausible:
        out.append("impossible figures (MBU above 1): " + ", ".join(implausible))
    return out


def verdict_text(quality: dict[str, Any]) -> str:
    """One line for tables: ``clean``, or ``⚠ flagged: <first reason>`` (+ how many more)."""
    if quality["verdict"] == "clean":
        return "clean"
    more = len(quality["reasons"]) - 1
    return f"⚠ flagged: {quality['reasons'][0]}" + (f" (+{more} more)" if more > 0 else "")


def prefer_clean(items: list[T], is_clean: Any) -> list[T]:
    """``items`` that are clean when any is, else all of them: a flagged run is never chosen over a clean one."""
    clean = [x for x in items if is_clean(x)]
    return clean or list(items)


# -- numbers that cannot be right: an MBU or MFU above 1, a single stream above its ceiling --

#: What an impossible MBU says about its inputs (shown wherever the flag is).
IMPLAUSIBLE_CAUSE = "the model card or its weight format (quantisation) does not match what was served"


def implausible_point(point: dict[str, Any]) -> str | None:
    """Why an analysed point's numbers cannot be right (MBU above 1), or None.

    Derived: MBU = bytes per step / step time / bandwidth; a step that reads its bytes faster than
    the memory's bandwidth would need MBU > 1, which no hardware does.
    """
    mbu = point.get("mbu_min", point.get("mbu"))  # unstated format or MoE: the MBU of its fewest plausible bytes
    if mbu is not None and mbu > 1:
        return f"MBU {mbu:.2f} at c = {point['concurrency']} is above 1: {IMPLAUSIBLE_CAUSE}"
    return None


def same_format(name: str) -> str:
    """A dtype or weight format under one spelling (``bfloat16`` and ``bf16`` are one format), else as given."""
    from pipeline.core.errors import BatchmarkError
    from pipeline.cards.weightformats import normalize_quant

    try:
        return normalize_quant(name)
    except BatchmarkError:  # an unknown name is compared as written
        return str(name).strip().lower()


def implausible_mfu(point: dict[str, Any], roof_dtype: str | None = None, model_dtype: str | None = None) -> str | None:
    """Why an analysed point's MFU cannot be right (above 1), or None.

    Derived: MFU = FLOPs per step / step time / peak FLOP/s; no step does more arithmetic per second than the
    peak it is measured against, so an MFU above 1 means the roof is too low for what ran: most often a peak
    probed in one dtype (the CPU probe multiplies float32 matrices) while the model ran in another (bfloat16
    in the committed vLLM run: MFU 1.016 at c = 32).  Unlike an MBU above 1 the memory figures stay valid, so
    the MFU is marked, not the workload.

    Args:
        point: an analysed point (``mfu``, ``concurrency``).
        roof_dtype: the dtype the compute roof was probed in (``run.json`` ``probe.dtype``), None when unknown
            or when the roof is the spec sheet's.
        model_dtype: the dtype the model ran in (its card's ``quantization``).
    """
    mfu = point.get("mfu")
    if mfu is None or mfu <= 1:
        return None
    if roof_dtype and model_dtype and same_format(roof_dtype) != same_format(model_dtype):
        why = f"the compute roof was probed in {roof_dtype} while the model ran in {model_dtype}"
    else:
        why = "the peak FLOP/s it is measured against is below what the model reached (a roof of another dtype, or a wrong FLOP count)"
    return f"MFU {mfu:.2f} at c = {point.get('concurrency')} is above 1: {why}"


def implausible_model(model: dict[str, Any], points: list[dict[str, Any]] = ()) -> str | None:
    """Why a workload's numbers cannot be right, or None: a single stream above its bandwidth ceiling,
    or any of its analysed ``points`` with an MBU above 1 (:func:`implausible_point`)."""
    reasons = []
    single, ceiling = model.get("single_stream_tok_s"), model.get("ceiling_tok_s")
    span = model.get("ceiling_tok_s_range")
    if span and span[1] > span[0] * (1 + 1e-9):  # the served format unstated: above every plausible format only
        ceiling = span[1]
    if single is not None and ceiling and single > ceiling:
        every = " of every plausible served format" if span and span[1] > span[0] * (1 + 1e-9) else ""
        reasons.append(f"single stream {single:.1f} tok/s is above its bandwidth ceiling{every} {ceiling:.1f} tok/s")
    bad = sorted(p["concurrency"] for p in points if implausible_point(p))
    if bad:
        top = max((p["mbu"] for p in points if implausible_point(p)))
        reasons.append(f"MBU above 1 at c = {', '.join(map(str, bad))} (up to {top:.2f})")
    return f"{'; '.join(reasons)}: {IMPLAUSIBLE_CAUSE}" if reasons else None


# -- an impossible figure diagnosed: its possible causes in order of evidence, advice that fits how the run was made --


def _probe_evidence(meta: dict[str, Any]) -> list[str]:
    """What in ``run.json`` says the probe under-read, strongest first: its own warning (before or after the sweep),
    its drift between the two, a bandwidth under half the profile's spec sheet; ``[]`` when nothing does."""
    probe, after = meta.get("probe") or {}, meta.get("probe_after") or {}
    said = []
    for name, p in (("the probe", probe), ("the probe after the sweep", after)):
        if p.get("warning"):
            said.append(f"{name} under-read a noisy or loaded machine ({str(p['warning']).split(':', 1)[0]})")
    drift = probe_moved(meta)
    if drift is not None:
        said.append(f"the probed bandwidth moved by {drift:+.0%} while the run was measured")
    spec, bw = (meta.get("hardware") or {}).get("bandwidth_gb_s_spec"), probe.get("bandwidth_gb_s")
    if isinstance(spec, (int, float)) and isinstance(bw, (int, float)) and 0 < bw < 0.5 * spec:
        said.append(f"the probe read {bw:.1f} GB/s, under half the spec sheet's {spec:g} GB/s")
    return said


def implausible_diagnosis(meta: dict[str, Any], implausible: str | None) -> dict[str, Any] | None:
    """An impossible figure's diagnosis: ``{"facts", "causes", "title", "advice", "text"}``, None when ``implausible``
    is None.

    A figure above its roof means either the roof is too low or the bytes counted are too many: the probe that sets
    the roof under-read (a busy machine, a moved one), or the model card or its weight format does not match what
    was served.  The causes are listed in order of evidence: a probe ``run.json`` itself calls noisy, moved or far
    below its spec comes first; the card second (first where nothing speaks against the probe).  The advice fits how
    the run was made: ``--quant`` exists only on import; a measured run is probed and measured again, or its
    recorded card (``models/<model>.json`` in the run) checked against what the engine served.

    Args:
        meta: ``run.json`` (its ``probe``, ``probe_after``, ``hardware`` and ``source`` are read).
        implausible: the workload's reason (:func:`implausible_model`), stored or computed.
    """
    if not implausible:
        return None
    facts = implausible.removesuffix(f": {IMPLAUSIBLE_CAUSE}")
    source = str(meta.get("source") or "measured")
    card = IMPLAUSIBLE_CAUSE
    probe = _probe_evidence(meta)
    if source.startswith("imported"):
        card_advice = "correct the model card or the weight format (`--quant` on import) and import again"
    elif source == "simulated":
        card_advice = "check the card and the hardware profile the simulation used (its figures come from them)"
    else:
        card_advice = ("check the card the run recorded (`models/<model>.json` in the run) against the model's "
                       "config.json and the dtype the engine served, then `batchmark analyze` again")
    if probe:
        causes = probe + [f"else {card}"]
        title = "the probe under-read the machine"
        advice = ("measure again on an idle machine (`batchmark probe` shows what it reads now); if the probe was "
                  f"right, {card_advice}")
    else:
        causes = [card, "else the probe under-read without showing it (probe again on an idle machine)"]
        title = "wrong model card or weight format"
        advice = card_advice
    text = f"{facts}. Most likely cause: {causes[0]}; {'; '.join(causes[1:])}. What to do: {advice}"
    return {"facts": facts, "causes": causes, "title": title, "advice": advice, "text": text}


def implausible_cause(meta: dict[str, Any], implausible: str | None) -> str | None:
    """An impossible figure's reason with its most likely cause in place of the generic one (a point's note, a table
    row), None when ``implausible`` is None (:func:`implausible_diagnosis`)."""
    diag = implausible_diagnosis(meta, implausible)
    return f"{diag['facts']}: most likely {diag['causes'][0]}" if diag else None
