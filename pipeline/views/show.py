"""``batchmark show``: a run's point summaries and per-model analysis as the JSON contract of docs/definitions.md.

Pure assembly from what the metrics and analysis stages wrote (read back by :func:`pipeline.analysis.stages.load_run`,
which refuses a complete run without them, naming the command that writes them; a sweep in progress is the one
run summarised in memory, ``"partial": true``; reading never writes into a run); no measurement, no guessing:
fields a source cannot supply are null.
Beyond the contract's fields, every point carries ``failure_rate``, ``caveats`` (failed requests,
token counts that set evidence aside; ``caveat_counts``: requests with each), ``token_count_sources``, ``excluded`` and
``excluded_reason`` (a point above the config's ``max_failure_rate`` is left out of knee, peak
and scaling), ``errors`` (its failed requests' first ten distinct errors), ``regime`` and ``server`` (what the point measured, from the server's /metrics and
limits), and every model ``excluded_concurrency``, ``caveat_concurrency``, ``post_knee_cause``, and the knee's
uncertainty from the repeats: ``knee_per_repeat`` and ``knee_settled`` (:func:`pipeline.analysis.knee.knee_uncertainty`;
computed from the summaries when an older analysis.json lacks them).
Numbers that cannot be right (an MBU above 1, a single stream above its bandwidth ceiling: a wrong
model card or weight format) are named in ``implausible`` on the point and the model (the reason,
else null; computed from the figures when an older analysis.json lacks it), and the table says so.
Open loop: every point carries ``load`` (``closed``, ``poisson``, ``constant``,
``gamma``) and, for a rate point, ``rate_rps`` (offered), ``send_rate_rps``, ``schedule_rate_rps``, ``achieved_rate_rps``,
``schedule_lag_s``, ``schedule_kept``, ``burstiness``, ``slo`` and ``max_concurrency`` (its cap on
requests in flight, null when uncapped; its ``concurrency`` is null); every model ``rate_sweeps`` (saturation, SLO limit; :func:`pipeline.analysis.ratesweep.rate_sweep`)
and ``slo_concurrency``, null where the run has none.
Every model entry also carries the run's ``run_quality`` verdict (:func:`pipeline.analysis.quality.run_quality`), and
every point its own ``quality`` (``{"verdict", "reasons"}``, :func:`pipeline.analysis.quality.point_verdict`: its repeats'
spread, the outside load while it ran) and ``interference`` (that load as measured, null when not); the
top level is exactly the contract.
What ``vllm bench serve`` prints is there too: every point's ``request_throughput_rps`` and
``total_token_throughput_tok_s`` (:func:`pipeline.views.servefigures.serve_figures`: by the definition of the point's
throughput, null where its figures allow none, never output tok/s ÷ output_len of a generation-only throughput) with
``request_throughput_basis`` (``stated``, ``tokens_over_window``, ``c_over_e2el`` or null), ``tails_s`` (``{"ttft", "tpot", "itl", "itl_chunk",
"e2el"}`` → ``{"p95", "p99_9"}`` in seconds, the summary's own ``tails_s``; for a summary written before it was kept,
TTFT and TPOT from its per-request samples and the others null; null where a summary has none; the contract's
``ttft_s`` … stay exactly ``{"p50", "p90", "p99", "mean"}``), and
``repeat_spread`` of the output throughput (``{"n", "min", "max", "ratio"}``).
Every model entry carries ``workload``: its shape's lengths and arrivals in words (:mod:`pipeline.views.showworkload`),
which the table prints once per shape.
The human table (:func:`format_table`) lays the points out by :mod:`pipeline.views.showtable`: the server's figures,
then the client's and the stream's, each with ``±`` half its 95 % interval over repeats where the point has one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.analysis import stages
from pipeline.analysis.knee import knee_uncertainty_of
from pipeline.core.contracts import checked
from pipeline.core.words import REGIME_TEXT, post_knee_words
from pipeline.analysis.quality import (implausible_cause, implausible_diagnosis, implausible_mfu, implausible_model, implausible_point, point_verdict, run_quality,
                              short_reasons)
from pipeline.core.pointsummary import throughput_window
from pipeline.core.records import DEFAULT_VARIANT, PointKey, workload_of
from pipeline.metrics import registry
from pipeline.views.servefigures import RATE_BASIS, serve_figures
from pipeline.views.showtable import error_lines, point_label, point_tables
from pipeline.views.showcontract import ShowDocument
from pipeline.views.showworkload import add_workloads, workload_lines
from pipeline.diff.variants import format_tuning, tuning_of

#: A point's identity in the contract (:class:`~pipeline.core.records.PointKey`'s closed-loop fields).
KEY_FIELDS = ("model", "engine", "variant", "concurrency", "input_len", "output_len")
#: Fields of a point that are no metric, each shown right after the metric it qualifies (its place in the contract):
#: which window the output throughput was measured over, whether the client was the limit and why.
BESIDE = {"prefill_throughput_tok_s": ("output_throughput_window",), "first_byte_s": ("client_bound", "client_bound_reason")}
#: The point fields: its key, then every metric the registry shows in a point (:mod:`pipeline.metrics.registry`: the
#: contract's counts and figures, the peer definitions apart, the client's own figures and what peers report beside),
#: then the 95 % intervals over repeats and the length distribution (per-request mean, p50, min, max and the stated
#: draw, core.lengthstats).
POINT_FIELDS = (KEY_FIELDS + tuple(f for name in registry.shown("point") for f in (name, *BESIDE.get(name, ())))
                + ("ci95", "lengths"))
MODEL_FIELDS = ("model", "engine", "variant", "input_len", "output_len", "kind", "total_params", "active_params",
                "weight_bytes", "kv_bytes_per_token", "ceiling_tok_s", "knee_concurrency", "post_knee",
                "peak_output_throughput_tok_s", "scaling_efficiency", "excluded_concurrency", "caveat_concurrency",
                "post_knee_cause", "server_limits", "implausible", "rate_sweeps", "slo_concurrency",
                "compute_roof_tflops", "compute_roof_dtype", "compute_roof_under_read", "coverage_not_measured")
#: Open-loop fields of every point (``load`` ``closed`` and the rest null for a closed-loop point): its load and
#: offered rate, the registry's open-loop metrics, whether the schedule was kept, the arrivals' burstiness, the SLO
#: check and the cap on requests in flight.
OPEN_LOOP_FIELDS = (("load", "rate_rps") + registry.shown("open_loop")
                    + ("schedule_kept", "burstiness", "slo", "max_concurrency"))


#: The contract's hardware block (docs/definitions.md).  The contract predates the "probed" naming and tools
#: rely on it, so its key ``bandwidth_gb_s_measured`` carries the analysis' ``bandwidth_gb_s_probed``.
HARDWARE_FIELDS = ("name", "bandwidth_gb_s_spec", "bandwidth_gb_s_measured", "peak_tflops_spec", "memory_gb")
CONTRACT_NAMES = {"bandwidth_gb_s_measured": "bandwidth_gb_s_probed"}


def build_show(meta: dict[str, Any], summaries: list[dict[str, Any]], analysis: dict[str, Any]) -> dict[str, Any]:
    """Assemble the ``show --json`` document from ``run.json``, summaries and analysis (dicts)."""
    extra = {PointKey.of(p): p for p in analysis.get("points", [])}
    points = []
    for s in summaries:
        row = {k: s.get(k) for k in POINT_FIELDS}
        row["variant"] = row["variant"] or DEFAULT_VARIANT
        row["output_throughput_window"] = s.get("output_throughput_window") or throughput_window(s)
        row.update({k: s.get(k, "closed" if k == "load" else None) for k in OPEN_LOOP_FIELDS})
        a = extra.get(PointKey.of(s), {})
        row["mbu"] = a.get("mbu")
        row["mfu"], row["mfu_withheld"] = a.get("mfu"), a.get("mfu_withheld")  # withheld: an under-read roof
        row["routing"], row["mbu_implausible"] = a.get("routing"), a.get("mbu_implausible")  # MoE bytes' routing
        row["regime"] = a.get("regime")
        row["batch"] = a.get("batch")
        row["server"] = a.get("server")
        row["failure_rate"] = a.get("failure_rate")
        row["caveats"] = a.get("caveats") or sorted(set(s.get("caveats") or {}) | ({"failed_requests"} if s.get("failed") else set()))
        row["caveat_counts"] = dict(s.get("caveats") or {})
        row["token_count_sources"] = dict(s.get("token_count_sources") or {})
        row["errors"] = [str(e) for e in s.get("errors") or []]
        row["excluded"] = bool(a.get("excluded", False))
        row["excluded_reason"] = a.get("excluded_reason")
        row["implausible"] = implausible_cause(meta, a.get("implausible") or implausible_point({**a, "concurrency": s["concurrency"]}))
        row["mfu_implausible"] = a.get("mfu_implausible") or implausible_mfu(
            {**a, "concurrency": s["concurrency"]}, (meta.get("probe") or {}).get("dtype"))
        row["interference"] = s.get("interference")
        serve = serve_figures(s)
        row["request_throughput_rps"] = serve["request_throughput_rps"]
        row["request_throughput_basis"] = serve["request_throughput_basis"]
        row["total_token_throughput_tok_s"] = serve["total_token_throughput_tok_s"]
        row["tails_s"] = {k.removesuffix("_s"): (v if any(x is not None for x in v.values()) else None)
                          for k, v in serve["tails"].items()}
        row["repeat_spread"] = serve["repeat_spread"]
        v = point_verdict(s)
        row["quality"] = {"verdict": v["verdict"], "reasons": v["reasons"]}
        points.append(row)

    doc = {
        "run_id": meta.get("run_id"),
        "source": meta.get("source", "measured"),
        "hardware": {k: analysis.get("hardware", {}).get(CONTRACT_NAMES.get(k, k)) for k in HARDWARE_FIELDS},
        "points": points,
        "models": [{**{k: m.get(k, [] if k in ("excluded_concurrency", "caveat_concurrency") else None)
                       for k in MODEL_FIELDS},
                    "implausible": m.get("implausible") or implausible_model(m, [
                        a for a in analysis.get("points", [])
                        if workload_of(a) == workload_of(m)]),
                    **knee_uncertainty_of(m, summaries, analysis.get("points", []))}
                   for m in analysis.get("models", [])],
    }
    adaptive = list(((meta.get("adaptive") or {}).get("models") or {}).values())
    for m in doc["models"]:  # an adaptive sweep's choices (run.json ``adaptive``): measured or predicted, and why
        cell = (m["model"], m.get("variant") or DEFAULT_VARIANT, m["input_len"], m["output_len"])
        a = next((a for a in adaptive if (a.get("model"), a.get("variant") or DEFAULT_VARIANT, a.get("input_len"),
                                          a.get("output_len")) == cell), None)
        m["adaptive"] = {**a, "tolerance": meta["adaptive"].get("tolerance")} if a else None
    fronts = list(((meta.get("adaptive") or {}).get("frontiers") or {}).values())
    if fronts:  # an adaptive sweep over a tuning space: each model × shape's frontier, measured or predicted
        doc["adaptive_frontiers"] = fronts
    quality = run_quality(meta, summaries, doc["models"])
    for m in doc["models"]:  # an impossible figure with its causes in order of evidence and advice that fits the run
        m["implausible_diagnosis"] = implausible_diagnosis(meta, m["implausible"])
        m["implausible"] = m["implausible_diagnosis"]["text"] if m["implausible_diagnosis"] else None
    for m in doc["models"]:  # the top level stays the contract of docs/definitions.md; the run's verdict rides on each model
        m["run_quality"] = quality
        if quality["verdict"] == "flagged" and m.get("post_knee_cause") == "batching":
            m["post_knee_cause"] = "interference"  # a flagged run's plateau is never called batching
    return doc


def show_run(ref: str | Path) -> dict[str, Any]:
    """The ``show --json`` document of a run (id or path), from the files the stages stored.

    Reading never writes into the run.  An incomplete run shows its finished points, summarised in memory, with
    ``"partial": true`` added (the sweep is unfinished; its knee and peak are of those points only).

    Raises:
        BatchmarkError: unknown run, corrupt files, a complete run without ``summaries.json`` or ``analysis.json``
            (the file and the command that writes it named).
    """
    res = stages.load_run(ref, allow_incomplete=True)
    doc = build_show(res.meta, [x.as_dict() for x in res.summaries], res.analysis)
    tuning = tuning_of(res.meta, res.summaries)  # more than one variant: the frontier and what each setting bought
    if tuning is not None:
        doc["tuning"] = tuning
    add_workloads(doc, res.meta)  # each shape's lengths and arrivals in words
    if res.partial:  # only then: a complete run's document is exactly the contract of docs/definitions.md
        doc["partial"] = True
    return checked(ShowDocument, doc)  # validated where the tests ask (pipeline.core.contracts)


def _rate_sweep_line(m: dict[str, Any], rs: dict[str, Any]) -> str:
    """One line of a model's open-loop rate sweep: where it saturated, the rates not steady, the most achieved, the
    SLO's limit (req/s)."""
    sat = rs.get("saturation_rate_rps")
    slo = rs.get("slo") or {}
    return (f"{m['model']} open loop ({rs['load']}{', cap ' + str(rs['max_concurrency']) if rs.get('max_concurrency') else ''}): "
            + (f"saturated from {sat:g} req/s offered" if sat else "no steady rate saturated it" if
               rs.get("unsteady_rates") else "achieved followed offered at every rate")
            + (f"; not steady at {', '.join(f'{r:g}' for r in rs['unsteady_rates'])} req/s (under three "
               "E2ELs of arrivals: neither saturation nor SLO judged)" if rs.get("unsteady_rates") else "")
            + (f", at most {rs['max_achieved_rps']:.2f} req/s achieved" if rs.get("max_achieved_rps") else "")
            + (f"; SLO held up to {slo['max_ok']:g} req/s" if slo.get("max_ok") is not None else
               ("; SLO missed at every rate" if rs.get("slo") else "")))


def format_table(doc: dict[str, Any]) -> str:
    """A plain-text table of a show document (points, then models)."""
    lines = [f"run {doc['run_id']} ({doc['source']}) on {doc['hardware']['name']}", ""]
    if doc["source"] == "simulated":
        lines[1:1] = ["SIMULATED: a prediction of the simulated server (model cards' roofline on the hardware profile, "
                      "vLLM's scheduling rules), not a measurement"]
    quality = doc.get("quality") or next((m.get("run_quality") for m in doc.get("models", [])), None)
    if quality and quality["verdict"] == "flagged":
        # condensed (the reasons in full repeated the probe's sentence per model and part, 1,500 characters
        # on one line); each point's own reason is in its row, every reason in full in --json and on the run's page
        lines[1:1] = ["FLAGGED RUN: " + "; ".join(short_reasons(quality) or quality["reasons"])
                      + " (in full: the run's page, or `run_quality` in --json)"]
    if doc.get("partial"):
        lines[1:1] = [f"PARTIAL: the run is incomplete; {len(doc['points'])} finished point(s) shown "
                      "(resume it with `batchmark sweep --resume`)"]
    # MBU against a probe the run itself calls noisy: the run's verdict names the probe's warning
    noisy_probe = next((r.removeprefix("bandwidth probe: ") for r in (quality or {}).get("reasons") or []
                        if r.startswith("bandwidth probe: ")), None)

    tuned = len({p.get("variant") for p in doc["points"]}) > 1  # more than one variant: a column of its own
    shaped = len({(p["input_len"], p["output_len"]) for p in doc["points"]}) > 1
    lines += point_tables(doc["points"], noisy_probe, tuned, shaped)
    lines += [""] + workload_lines(doc)
    for m in doc["models"]:
        if m["peak_output_throughput_tok_s"] is None and m.get("rate_sweeps"):
            continue  # measured at rates only: no concurrency grid, no knee to report (its rate sweep follows)
        ceil = f"{m['ceiling_tok_s']:.1f}" if m["ceiling_tok_s"] else "-"
        past = ""
        if m["knee_concurrency"]:
            cause = m.get("post_knee_cause")
            past = (f", past it the curve {post_knee_words(m['post_knee'])}"
                    + (f" ({REGIME_TEXT.get(cause, cause)}" + (
                        f", roof {m['compute_roof_tflops'] * 1e3:,.1f} GFLOP/s in {m.get('compute_roof_dtype') or '?'}"
                        if cause == "compute" and m.get("compute_roof_tflops") else "") + ")" if cause else ""))
        variant = f" [{m['variant']}]" if tuned and m.get("variant") else ""
        lines.append(f"{m['model']}{variant} ({m['kind'] or '?'}, in {m['input_len']} / out {m['output_len']}): ceiling {ceil} tok/s, "
                     f"knee {m['knee_concurrency'] or 'not reached'}{past}, "
                     + (f"peak {m['peak_output_throughput_tok_s']:.1f} tok/s" if m["peak_output_throughput_tok_s"]
                        else "peak – (no point measured a throughput)")
                     + (f"; left out: c = {', '.join(map(str, m['excluded_concurrency']))}"
                        if m.get("excluded_concurrency") else "")
                     + (f"\n  IMPLAUSIBLE, not a result: {m['implausible']}" if m.get("implausible") else "")
                     + (f"\n  ROOF UNDER-READ: {m['compute_roof_under_read']}" if m.get("compute_roof_under_read") else "")
                     + (f"\n  coverage not measured, MBU and roofline at identical routing (k/E): {m['coverage_not_measured']}"
                        if m.get("coverage_not_measured") else ""))
    for m in doc["models"]:
        lines.extend(adaptive_lines(m))
    lines.extend(adaptive_frontier_lines(doc))
    lines.extend(format_tuning(doc["tuning"]) if doc.get("tuning") else [])
    for m in doc["models"]:
        for rs in m.get("rate_sweeps") or []:
            lines.append(_rate_sweep_line(m, rs))
    if any(p.get("implausible") for p in doc["points"]):
        cause = next((m["implausible_diagnosis"]["title"] for m in doc["models"] if m.get("implausible_diagnosis")),
                     "a wrong model card or weight format")
        lines.append(f"MBU marked ! is above 1, which no hardware reaches: most likely {cause}")
    if noisy_probe:
        lines.append(f"MBU marked ? is unreliable: measured against a bandwidth probe this run calls noisy ({noisy_probe})")
    bound = [p for p in doc["points"] if p.get("client_bound")]
    if bound:
        lines.append("read wait marked ! is a client-bound point (the client, not the server, was the limit; left out of the "
                     f"knee, peak and diff): {bound[0]['client_bound_reason']}")
    lines.extend(rate_basis_lines(doc["points"]))
    unresolved = [p for p in doc["points"] if (p.get("itl_unresolved_share") or 0) >= ITL_UNRESOLVED_NOTE]
    if unresolved:
        lines.append("ITL not resolved per chunk: " + ", ".join(
            f"{point_label(p)} ({p['itl_unresolved_share']:.0%} of chunks came in one read with the one before)"
            for p in unresolved) + "; their gaps are the read's, spread over its tokens, never 0")
    for key, what in (("mbu_implausible", "MBU"), ("mfu_implausible", "MFU")):
        lines.extend([f"{what} marked ! is not a result: {p[key]}" for p in doc["points"] if p.get(key)][:1])
    return "\n".join(lines + error_lines(doc["points"]))


def rate_basis_lines(points: list[dict[str, Any]]) -> list[str]:
    """One line on the req/s and total tok/s columns where a point's rate is derived from its latencies
    (``c_over_e2el``) or unknown (its throughput counts generation only and no E2EL, TTFT or TPOT gives one);
    ``[]`` when every rate is stated or its tokens over its window."""
    def at(ps: list[dict[str, Any]]) -> str:
        return "c = " + ", ".join(dict.fromkeys(point_label(p) for p in ps))

    derived = [p for p in points if p.get("request_throughput_basis") == "c_over_e2el"]
    unknown = [p for p in points if p.get("request_throughput_basis") is None
               and p.get("output_throughput_window") == "decode_phase"]
    out = [f"req/s and total tok/s at {at(derived)}: {RATE_BASIS['c_over_e2el']}"] if derived else []
    return out + ([f"req/s and total tok/s at {at(unknown)}: not stated (the throughput counts generation only, and "
                   "no E2EL, TTFT or TPOT gives a request's time)"] if unknown else [])


#: Share of a point's chunks read together with the chunk before them from which ``show`` says its ITL is not
#: resolved per chunk (a tenth: below it a few coalesced reads barely move the percentiles).
ITL_UNRESOLVED_NOTE = 0.1


def adaptive_lines(m: dict[str, Any]) -> list[str]:
    """An adaptive sweep's choices for one model entry: its knee and why it stopped, then per grid point whether it
    was measured (in which order) or predicted (the anchored prediction, tok/s), and why; ``[]`` without one."""
    a = m.get("adaptive")
    if not a:
        return []
    knee = f"c = {a['knee_concurrency']}" if a.get("knee_concurrency") is not None else "not reached"
    out = [f"{a.get('curve') or m['model']} adaptive sweep (tolerance {a.get('tolerance') or 0:.0%}): knee {knee} on the measured + "
           f"predicted curve; {a.get('stopped')}"]
    for p in a.get("points") or []:
        tok = p.get("output_throughput_tok_s")
        val = f"{tok:.1f} tok/s" if tok is not None else "-"
        if p["measured"]:
            err = f", {p['error']:+.1%} off its prediction" if p.get("error") is not None else ""
            out.append(f"  c = {p['concurrency']}: measured #{p['order']} ({val}{err}): {p['reason']}")
        else:
            out.append(f"  c = {p['concurrency']}: PREDICTED {val} (not a measurement): {p['reason']}")
    return out


def adaptive_frontier_lines(doc: dict[str, Any]) -> list[str]:
    """An adaptive sweep's frontiers over a tuning space (``run.json`` ``adaptive.frontiers``): per model × shape its
    points, each marked measured or PREDICTED, and why the frontier walk stopped; ``[]`` without one."""
    out = []
    for f in doc.get("adaptive_frontiers") or []:
        pts = ", ".join(f"{p['variant']} c = {p['concurrency']}" + ("" if p["measured"] else " PREDICTED")
                        for p in f.get("frontier") or []) or "-"
        out.append(f"{f['model']} (in {f['input_len']} / out {f['output_len']}) adaptive frontier: {pts}; {f['stopped']}")
    return out
