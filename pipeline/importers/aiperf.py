"""Importer for NVIDIA AIPerf's ``profile_export_aiperf.json`` (and GenAI-Perf's ``profile_export_*.json``).

The file is one object of metrics, each ``{"unit", "avg", "p1" … "p99", "min", "max",
"std"}`` (throughputs and counts carry only ``avg``), plus ``input_config`` with the run's
settings (``loadgen.concurrency``, ``loadgen.request_rate``, ``endpoint.model_names``;
GenAI-Perf puts ``concurrency``, ``request_rate`` and ``model`` at the top of
``input_config``).  One file is one run of one point; the files of one point with the same settings are its repeats,
and a sweep's files of other lengths or concurrencies its other shapes and points
(:mod:`pipeline.importers.aiperf_runs`).

Mapping, by each metric's definition in AIPerf's metrics reference (``docs/metrics_reference.md``
of ai-dynamo/aiperf), never by its name:
- TTFT ← ``time_to_first_token`` = first response − request start: batchmark's TTFT.
- TPOT ← ``inter_token_latency`` = (request latency − TTFT) / (output sequence length − 1) per
  request: batchmark's TPOT (AIPerf's "ITL" is a per-request average, not per-token gaps, so
  batchmark's ITL stays null).
- E2EL ← ``request_latency`` = last response − request start.
- output throughput ← ``output_token_throughput`` = total output sequence length / benchmark
  duration (first request sent to last response received), all requests together.
- per-user throughput ← median of ``output_token_throughput_per_user`` (= 1 / ITL per request;
  its median is 1 / median TPOT), else 1 / median TPOT; step time = median TPOT.
- input/output length ← median ``input_sequence_length`` / ``output_sequence_length`` (output
  sequence length counts reasoning tokens too, as the server generated them).
- completed ← ``request_count`` (successful requests); failed ← ``error_request_count``, else
  the counts of ``error_summary`` (AIPerf may list failures there and leave
  ``error_request_count`` null); a run stopped by hand (``was_cancelled``) has the caveat
  ``run_cancelled``, and its requests cancelled in flight (code 499) are counted apart, not as failed.
  GenAI-Perf states neither: its point counts the requests it was told to send, and says so.
  GenAI-Perf's ``output_token_throughput_per_request`` (output tokens / request latency, TTFT
  included) is not batchmark's per-user throughput and is not read.
Older and other exports: early GenAI-Perf named the lengths ``num_input_token`` /
``num_output_token`` and wrote statistics as strings (both read); until perf_analyzer #694 (June 2024,
the same era) its ``inter_token_latency`` was a distribution over response gaps (each gap / the
tokens of the later response), not per request, so of such a file only the mean is kept as TPOT; GenAI-Perf's default mode
measures for ``measurement_interval`` ms with ``request_count`` 0, so its completed count is
``request_throughput`` × interval (said so in the point's errors); an output length off the
requested one (``output_tokens.mean``, ``output_tokens_mean``, ``extra_inputs.max_tokens``) beyond
:func:`pipeline.loadgen.tokencount.length_mismatch` has the caveat ``output_len_mismatch``.
Times are converted from each metric's ``unit`` (``ns``, ``us``, ``ms``, ``s``).  A run with
a request rate (open loop) is refused, so are AIPerf's ``user_centric_rate`` (per-user turn gaps) and a
run with ``request_cancellation_rate`` > 0 (client
aborts by design, its 499s are no server failures), and so is a fixed schedule (trace replay: AIPerf's
``input.fixed_schedule`` or a ``mooncake_trace`` dataset, GenAI-Perf's ``prompt_source`` ``payload``); a
``concurrency_ramp_duration`` has the caveat ``concurrency_ramp``.  A file that states no error
count (GenAI-Perf: neither ``error_request_count`` nor ``error_summary``) has the caveat
``failed_count_unknown`` and no failure rate (never 0 passed off as measured).
Other layouts (files people really have, from AIPerf's and GenAI-Perf's own releases): AIPerf ≤ 0.1 wrote the metrics under ``records`` (each
with its ``tag`` and ``header``; TTFT tagged ``ttft``), read alike; GenAI-Perf with a config
(≥ 0.0.13) writes its settings as ``perf_analyzer.stimulus`` (``concurrency`` / ``request_rate``),
``perf_analyzer.measurement`` (``mode``, ``num``), ``input.synthetic_tokens.mean``,
``input.output_tokens.mean`` and ``input.extra.max_tokens``, read beside the flat names.
Refused as no closed-loop point, naming the setting: multi-turn sessions and ``--prefill-concurrency``
(:func:`pipeline.importers.aiperf_settings.refuse_sessions_and_gates`).  An output length above the requested one (beyond the tolerance) was not
generated: caveat ``output_count_not_measured`` too, named as GenAI-Perf 24.11–24.12's streaming output-length bug
for a GenAI-Perf export.  AIPerf's multi-run layout (``--num-profile-runs``) and its sweeps: :mod:`pipeline.importers.aiperf_runs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.importers.aiperf_runs import aggregate_refusal, beside_its_runs, is_aggregate, repeats, swept_concurrency
from pipeline.importers.aiperf_settings import (OVERCOUNT, is_aiperf, length_distribution, refuse_schedules,
                                               setting as _setting)
from pipeline.importers.base import ImportResult, summary
from pipeline.importers.cardmatch import ModelInfo, model_name_as_given
from pipeline.importers.checks import (REFUSAL_FAILURE_RATE, check_completion, check_unique, flag_rate,
                                      rate_disagreement, refuse_open_loop)
from pipeline.importers.repeats import merge_repeats
from pipeline.importers.parsing import fail, is_number, load_json, number, read_text, wrong_format
from pipeline.loadgen.tokencount import length_mismatch
from pipeline.core.pointsummary import distribution

FORMAT = "aiperf"
ENGINE = "openai"
_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}


def _metric(path: Path, d: dict[str, Any], key: str, required: bool = False) -> dict[str, Any] | None:
    m = d.get(key)
    if m is None:
        if required:
            raise fail(path, f"field {key}", "missing; not an AIPerf/GenAI-Perf profile export, or cut short")
        return None
    if not isinstance(m, dict):
        raise fail(path, f"field {key}", "not an object {unit, avg, p50, …}")
    out = {}
    for k, v in m.items():
        if k in ("tag", "header") and isinstance(v, str):  # AIPerf ≤ 0.1 (records layout): the metric's name and title
            continue
        if k == "unit" or v is None or is_number(v):
            out[k] = v
        elif isinstance(v, str):  # early GenAI-Perf wrote every statistic as a string ("217.1")
            out[k] = number(path, f"field {key}.{k}", v)
        else:
            raise fail(path, f"field {key}.{k}", f"not a number: {v!r}")
    return out


def _value(path: Path, d: dict[str, Any], key: str, stat: str = "avg", required: bool = False) -> float | None:
    m = _metric(path, d, key, required)
    v = m.get(stat) if m else None
    if v is None and required:
        raise fail(path, f"field {key}.{stat}", "missing")
    return float(v) if v is not None else None


def _time_stats(path: Path, d: dict[str, Any], key: str) -> dict[str, float | None] | None:
    m = _metric(path, d, key)
    if not m:
        return None
    unit = str(m.get("unit", "ms")).strip().lower()
    if unit not in _TIME_UNITS:
        raise fail(path, f"field {key}.unit", f"unknown time unit {m.get('unit')!r} (known: ns, us, ms, s)")
    return distribution(p50=m.get("p50"), p90=m.get("p90"), p99=m.get("p99"), mean=m.get("avg"), scale=_TIME_UNITS[unit])


#: AIPerf ≤ 0.1 metric tags that were renamed when its export took GenAI-Perf's names (ai-dynamo/aiperf #343).
_OLD_TAGS = {"ttft": "time_to_first_token", "ttst": "time_to_second_token"}


def requested_len(cfg: dict[str, Any], which: str) -> int | None:
    """The input or output length (tokens) a profile export's settings asked for; None when not stated.

    AIPerf: ``input.prompt.input_tokens.mean`` / ``input.prompt.output_tokens.mean``; GenAI-Perf:
    ``synthetic_input_tokens_mean`` / ``output_tokens_mean`` (−1 = not set), else ``extra_inputs.max_tokens``; GenAI-Perf
    with a config (≥ 0.0.13, its ``ConfigInput``): ``input.synthetic_tokens.mean`` / ``input.output_tokens.mean``, else
    ``input.extra.max_tokens``.
    """
    if which == "input":
        v = _setting(cfg, ("input", "prompt", "input_tokens", "mean"), ("synthetic_input_tokens_mean",),
                     ("input", "synthetic_tokens", "mean"))
    else:
        v = _setting(cfg, ("input", "prompt", "output_tokens", "mean"), ("output_tokens_mean",),
                     ("input", "output_tokens", "mean"))
        if not (is_number(v) and v > 0):
            v = _setting(cfg, ("extra_inputs", "max_tokens"), ("input", "extra", "max_tokens"))
    return int(v) if is_number(v) and v > 0 else None


def error_counts(d: dict[str, Any]) -> tuple[int | None, int]:
    """(failed requests, requests cancelled by a stopped run) of a profile export.

    ``error_request_count`` where stated; else the sum of ``error_summary``'s ``count`` (AIPerf
    lists each error kind with its count and may leave ``error_request_count`` null).  In a run
    stopped by hand (``was_cancelled``) the requests cancelled in flight (``RequestCancellationError``,
    code 499) are counted apart, not as the server's failures.  (None, 0) when neither field is there.
    """
    stated = d.get("error_request_count")
    stated_n = stated.get("avg") if isinstance(stated, dict) else stated
    summary_ = d.get("error_summary")
    cancelled, listed = 0, 0
    if isinstance(summary_, list):
        for e in summary_:
            if not isinstance(e, dict) or not is_number(e.get("count")):
                continue
            det = e.get("error_details") if isinstance(e.get("error_details"), dict) else {}
            n = int(e["count"])
            if d.get("was_cancelled") is True and (det.get("code") == 499 or "cancel" in str(det.get("type", "")).lower()):
                cancelled += n
            else:
                listed += n
    if is_number(stated_n):
        return max(int(stated_n) - cancelled, 0), cancelled
    return (listed if isinstance(summary_, list) else None), cancelled


def parse_file(path: Path, model: str | None, engine: str, max_failure_rate: float,
               concurrency: int | None = None, rate_given: float | None = None):
    """One profile export → (point, model as named, tool version, its ``input_config``)."""
    d = _load(path)
    cfg = d.get("input_config")
    if not isinstance(cfg, dict):
        raise fail(path, "field input_config", "missing; the concurrency of the run is unknown")
    stimulus = refuse_schedules(path, cfg)
    conc = _concurrency(path, cfg, stimulus, concurrency, rate_given)
    raw = model or _setting(cfg, ("endpoint", "model_names"), ("model_names",), ("model",))
    if isinstance(raw, list):
        raw = raw[0] if len(raw) == 1 else None
    if not raw or not isinstance(raw, str):
        raise fail(path, "field input_config.endpoint.model_names", "missing or more than one model; pass --model")
    completed, counts_stated, estimated = _completed(path, d, cfg)
    failed_n, cancelled = error_counts(d)
    stated = d.get("error_request_count")
    stated = stated.get("avg") if isinstance(stated, dict) else stated
    if is_number(stated) and stated < 0:  # was clamped to 0 failed
        raise fail(path, "field error_request_count", f"{stated:g} is negative")
    failed = float(failed_n or 0)
    failed_unknown = failed_n is None  # GenAI-Perf states no error count: failures unknown, never 0 as measured
    check_completion(path, "field request_count", int(completed), int(failed), conc, max_failure_rate)
    tput = _value(path, d, "output_token_throughput", required=True)
    lens = _lengths(path, d, cfg)
    tpot = _time_stats(path, d, "inter_token_latency")
    early = "num_output_token" in d and "output_sequence_length" not in d
    if early and tpot:
        # GenAI-Perf before June 2024 (num_output_token): until perf_analyzer #694 its inter_token_latency was every
        # response gap / the tokens of the later response, over all chunks (not per request): its percentiles are not
        # TPOT's; the mean is (Σ gaps / Σ (output − 1) when chunks carry one token), so only it is kept
        tpot = distribution(mean=tpot["mean"])
    med_tpot = tpot["p50"] if tpot else None
    per_user = _value(path, d, "output_token_throughput_per_user", "p50")
    if per_user is None and med_tpot:
        per_user = 1.0 / med_tpot
    note = ("completed not stated by the file (GenAI-Perf measured for measurement_interval): "
            "request_throughput × interval; failed not stated" if estimated else
            "completed/failed not stated by the file: counts are the requests it was told to send" if not counts_stated
            else None)
    point = summary(model_name_as_given(raw), engine, lens[0], lens[1], conc, completed=int(completed),
                    failed=int(failed), output_throughput_tok_s=tput, per_user_tok_s=per_user,
                    ttft_s=_time_stats(path, d, "time_to_first_token"), tpot_s=tpot,
                    e2el_s=_time_stats(path, d, "request_latency"), step_time_s=med_tpot,
                    samples={"output_throughput_tok_s": [tput]}, lengths=length_distribution(
                        _metric(path, d, "input_sequence_length"), _metric(path, d, "output_sequence_length"), cfg),
                    failures_unknown=(note or "the file states no error count (no error_request_count, no "
                                              "error_summary): failures unknown") if failed_unknown else None)
    if note and not failed_unknown:
        point.errors.append(note)
    if early and tpot:
        point.errors.append("early GenAI-Perf (num_output_token): its inter_token_latency may be per chunk, not per "
                            "request; only its mean is kept as TPOT")
    _add_caveats(point, d, cfg, lens[1], conc, int(completed), cancelled)
    _flag_rate(path, d, tput, point)
    version = d.get("aiperf_version") or _setting(cfg, ("aiperf_version",), ("version",)) or d.get("version")
    return point, raw, str(version) if version else None, cfg


def _flag_rate(path: Path, d: dict[str, Any], tput: float, point: Any) -> None:
    """``output_token_throughput`` against ``total_osl`` / ``benchmark_duration`` (AIPerf's definition of it,
    ``docs/metrics_reference.md``), where the export states both (:func:`pipeline.importers.checks.flag_rate`)."""
    total = _value(path, d, "total_osl")
    dur = d.get("benchmark_duration")
    unit = str(dur.get("unit", "sec")).strip().lower() if isinstance(dur, dict) else None
    if total is None or unit not in _TIME_UNITS or not is_number(dur.get("avg")):
        return
    flag_rate(path, "output_token_throughput.avg", rate_disagreement(
        tput, total, "total_osl", float(dur["avg"]) * _TIME_UNITS[unit], "benchmark_duration", "tok/s"), tput,
        point.caveats, point.errors, point.completed)


def _load(path: Path) -> dict[str, Any]:
    """The export's object, refused when it is another layout (an aggregate, another tool's, perf_analyzer's own),
    with AIPerf ≤ 0.1's ``records`` lifted to the top under today's names."""
    d = load_json(path, read_text(path), "an AIPerf profile export")
    if not isinstance(d, dict):
        raise fail(path, None, "not an AIPerf/GenAI-Perf profile export object")
    if is_aggregate(d):
        raise fail(path, "field metadata.aggregation_type", aggregate_refusal(d))
    other = wrong_format(path, d, FORMAT, "an AIPerf/GenAI-Perf profile export")
    if other is not None:
        raise other
    if isinstance(d.get("experiments"), list) and "input_config" not in d:
        raise fail(path, None, "perf_analyzer's per-request export (profile_export.json: experiments, requests), not "
                               "GenAI-Perf's summary; import profile_export_genai_perf.json written beside it")
    records = d.get("records")
    if isinstance(records, dict) and "output_token_throughput" not in d:
        # AIPerf ≤ 0.1 (before ai-dynamo/aiperf #343) wrote the metrics under "records", TTFT/TTST tagged ttft/ttst
        d = {**{_OLD_TAGS.get(k, k): v for k, v in records.items()}, **{k: v for k, v in d.items() if k != "records"}}
    return d


def _concurrency(path: Path, cfg: dict[str, Any], stimulus: dict[str, Any], concurrency: int | None,
                 rate_given: float | None) -> int:
    """The run's fixed concurrency (the export's, else ``--concurrency``); a request rate (the export's, else
    ``--rate``) is refused as open loop."""
    rate = _setting(cfg, ("loadgen", "request_rate"), ("request_rate",), ("perf_analyzer", "stimulus", "request_rate"))
    conc = _setting(cfg, ("loadgen", "concurrency"), ("concurrency",), ("perf_analyzer", "stimulus", "concurrency"))
    conc = concurrency if conc is None and concurrency is not None else conc
    conc = swept_concurrency(path, conc) if isinstance(conc, list) else conc  # a sweep's list: its folder's value
    rate = rate_given if rate is None and conc is None and rate_given is not None else rate
    if rate is not None:
        rate_at = next((f"field input_config.{'.'.join(p)}" for p in (("loadgen", "request_rate"), ("request_rate",),
                        ("perf_analyzer", "stimulus", "request_rate")) if _setting(cfg, p) is not None), "--rate")
        if not is_number(rate):
            raise fail(path, rate_at, f"not a number: {rate!r}")
        raise refuse_open_loop(path, rate_at, float(rate), conc if is_number(conc) else None)
    if not isinstance(conc, int) or isinstance(conc, bool) or conc < 1:
        raise fail(path, "field input_config." + ("perf_analyzer.stimulus.concurrency" if stimulus else
                                                  "loadgen.concurrency"),
                   f"is {conc!r}; batchmark imports closed-loop runs at a fixed concurrency: pass batchmark import "
                   "--concurrency N when the export does not state it")
    return conc


def _completed(path: Path, d: dict[str, Any], cfg: dict[str, Any]) -> tuple[float, bool, bool]:
    """(completed requests, whether the file states them, whether they were estimated from GenAI-Perf's
    request_throughput × measurement_interval)."""
    completed = _value(path, d, "request_count")
    if completed is None and ("error_summary" in d or "was_cancelled" in d):
        # AIPerf (which writes error_summary and was_cancelled, GenAI-Perf neither) leaves request_count out when no
        # request succeeded (its "failed run" export: only error_request_count): none completed, not the count it sent
        completed = 0.0
    counts_stated = completed is not None
    estimated = False
    if completed is None:  # GenAI-Perf writes no request_count: the requests it was told to send
        sent = _setting(cfg, ("loadgen", "request_count"), ("request_count",))
        interval_ms = _setting(cfg, ("measurement_interval",), ("loadgen", "measurement_interval"))
        mode = str(_setting(cfg, ("perf_analyzer", "measurement", "mode")) or "").lower()
        if mode in ("request_count", "interval"):  # GenAI-Perf with a config: perf_analyzer.measurement {mode, num}
            num = _setting(cfg, ("perf_analyzer", "measurement", "num"))
            sent, interval_ms = (num, None) if mode == "request_count" else (0, num)
        thr = _value(path, d, "request_throughput")
        if (not isinstance(sent, int) or isinstance(sent, bool) or sent <= 0) and is_number(interval_ms) \
                and interval_ms > 0 and thr:
            # GenAI-Perf's default mode measures for a time (measurement_interval, ms), not a request count
            # (request_count 0): the requests measured = request_throughput × interval (derived, said so)
            completed, estimated = float(round(thr * interval_ms / 1000.0)), True
        else:
            if sent is None:
                sent = _setting(cfg, ("num_prompts",))
            if not isinstance(sent, int) or isinstance(sent, bool):
                raise fail(path, "field request_count", "missing, and input_config states no request count")
            completed = float(sent)
    return completed, counts_stated, estimated


def _lengths(path: Path, d: dict[str, Any], cfg: dict[str, Any]) -> list[int]:
    """[input, output] length per request (tokens): the median, else the mean, else the length asked for."""
    lens = []
    for key, old_key, asked in (("input_sequence_length", "num_input_token", requested_len(cfg, "input")),
                                ("output_sequence_length", "num_output_token", requested_len(cfg, "output"))):
        name = key if key in d or old_key not in d else old_key  # early GenAI-Perf: num_input_token, num_output_token
        v = _value(path, d, name, "p50")
        v = v if v is not None else _value(path, d, name, "avg", required=asked is None)
        lens.append(round(v) if v is not None else int(asked))
    return lens


def _add_caveats(point: Any, d: dict[str, Any], cfg: dict[str, Any], out_len: int, conc: int, completed: int,
                 cancelled: int) -> None:
    """The point's caveats and errors from what the export says of its run: an output length off the one asked
    (``out_len`` tokens per request), a concurrency ramp, a run cancelled by hand, the errors it lists."""
    asked_out = requested_len(cfg, "output")
    if asked_out and length_mismatch(out_len, asked_out):
        point.caveats["output_len_mismatch"] = completed
        point.errors.append(f"output length {out_len} per request, {asked_out} requested: the server did not generate "
                            "the requested length (ignore_eos not honoured, another max_tokens)")
        if out_len > asked_out:  # more than the max_tokens asked: no server generates that, the count is wrong
            point.caveats["output_count_not_measured"] = completed
            point.errors.append(OVERCOUNT if "output_sequence_length" in d and not is_aiperf(cfg) else
                                "an output length above the requested max_tokens was not generated: the count is not "
                                "measured, and neither is the output throughput")
    ramp = _setting(cfg, ("loadgen", "concurrency_ramp_duration"))
    if is_number(ramp) and ramp > 0:  # AIPerf --concurrency-ramp-duration: from 1 to c over that many seconds
        point.caveats["concurrency_ramp"] = completed
        point.errors.append(f"concurrency ramped from 1 to {conc} over the first {ramp:g} s "
                            "(concurrency_ramp_duration): part of the run was below its concurrency")
    if d.get("was_cancelled") is True:
        point.caveats["run_cancelled"] = cancelled or 1
        point.errors.append(f"the run was cancelled by hand (was_cancelled): {cancelled} request(s) cancelled in flight "
                            "are not counted as failed; the run measured less than it was set up to")
    for e in d.get("error_summary") or []:
        det = e.get("error_details") if isinstance(e, dict) and isinstance(e.get("error_details"), dict) else None
        if det:
            point.errors.append(f"{e.get('count')} × {det.get('code')} {det.get('type')}: {str(det.get('message'))[:120]}")


def parse(paths: list[Path], model: str | None = None, engine: str | None = None,
          max_failure_rate: float = REFUSAL_FAILURE_RATE, concurrency: int | None = None,
          rate: float | None = None) -> ImportResult:
    """Parse profile exports (one file per concurrency); ``concurrency`` / ``rate``: what an export that states neither ran at."""
    engine = engine or ENGINE
    names, versions = {}, set()
    exports: list[tuple[Path, Any, dict[str, Any]]] = []  # (file, point, its input_config): aiperf_runs.repeats
    for path in paths:
        if beside_its_runs(path, paths):
            continue  # the aggregate of runs imported beside it
        pt, raw, version, cfg = parse_file(path, model, engine, max_failure_rate, concurrency, rate)
        exports.append((path, pt, cfg))
        names[pt.model] = raw
        if version:
            versions.add(version)
    points = [group[0][1] if len(group) == 1 else merge_repeats([pt for _, pt in group]) for group in repeats(exports)]
    check_unique(", ".join(map(str, paths)), points)
    return ImportResult(FORMAT, "aiperf", ", ".join(sorted(versions)) or None, [str(p) for p in paths], points,
                        {k: ModelInfo(raw_name=v) for k, v in names.items()})
