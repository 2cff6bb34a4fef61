"""Importer for ``vllm bench serve``: its ``--save-result`` JSON (one file per concurrency, or
one object per line with ``--append-result``) or the printed block.

JSON keys used (vLLM ``vllm/benchmarks/serve.py``): ``model_id``, ``max_concurrency``,
``request_rate`` (``"inf"`` for a closed loop), ``completed``, ``failed`` or ``num_prompts``,
``output_throughput`` (tok/s), ``total_input_tokens``, ``total_output_tokens``, the
per-request lists of ``--save-detailed`` (``input_lens``, ``output_lens``, ``ttfts`` in s,
``errors``; a failed request has an error text, length 0 and TTFT 0.0, and stays out of every
median), and ``{mean,median,p<N>}_{ttft,tpot,itl,e2el}_ms`` (p90 only where
``--metric-percentiles`` asked for it; missing ones stay null).  vLLM's TPOT is per request
(E2EL − TTFT) / (output tokens − 1), batchmark's ``tpot_s``.  vLLM's ITL is one gap per
streamed chunk, so it is stored as ``itl_chunk_s``, never as the per-token ``itl_s`` (issue 23:
the two differ whenever a chunk carries more than one token).

A finite ``request_rate`` is an open-loop run (issue 10): its throughput is set by the client's
arrival rate, and ``max_concurrency`` is then only a cap.  It becomes an open-loop point, never
a closed-loop one: load ``poisson`` (``burstiness`` 1 or absent, vLLM's default) or ``gamma``
(another burstiness, kept), ``rate_rps`` = ``request_rate``, concurrency = the cap or None,
``achieved_rate_rps`` = ``request_throughput``.  Refused: a closed-loop point with fewer
completed requests than its concurrency, a failure rate above
:data:`~pipeline.importers.base.REFUSAL_FAILURE_RATE`.

The printed block starts at ``============ Serving Benchmark Result ============`` and holds
``Successful requests:``, ``Output token throughput (tok/s):``, ``Mean/Median/P99 TTFT
(ms):`` … lines; the concurrency comes from ``Maximum request concurrency:`` (printed before
or inside the block; ``None`` = uncapped), the rate from ``Traffic request rate:`` (before) or
``Request rate configured (RPS):`` (inside), the burstiness from ``Burstiness factor:``
(before).  The block names no model: pass ``--model``.

Files people really have (issue 23):

- SGLang's ``bench_serving`` JSONL (``backend`` ``sglang``, ``request_rate`` written as the bare
  literal ``Infinity``, ``*_e2e_latency_ms`` where vLLM says ``*_e2el_ms``, no model and no failed
  count) is recognised and imported as engine ``sglang`` (unless ``--engine`` says otherwise), E2EL
  read from ``*_e2e_latency_ms``, the failed count unknown (flag ``failed_count_unknown``, never 0
  passed off as measured);
- ``vllm bench sweep serve`` output folders (``vllm/benchmarks/sweep/serve.py``): per parameter
  combination ``run=N.json`` (one ``--save-result`` JSON per repeat, with ``run_number`` N),
  ``summary.json`` (the list of those runs), ``warmup.json`` (``run_number`` −1, "excluded from
  summary statistics") and ``summary.csv`` per experiment.  Results of one point that carry
  distinct ``run_number`` ≥ 0 are that point's repeats (:func:`merge_repeats`); warm-up results are
  left out (a file of warm-up only is refused, naming it); ``summary.json`` is read only where its
  runs are not beside it as ``run=N.json``; ``summary.csv`` is skipped beside them.  A folder is
  read with its subfolders;
- a ramp-up run (``ramp_up_strategy`` with ``ramp_up_start_rps`` → ``ramp_up_end_rps``) is open
  loop at a changing rate, whatever ``request_rate`` says: refused, naming it;
- a printed block without a concurrency or rate line: ``batchmark import --concurrency N`` or
  ``--rate R`` says what it omits.

Each result is a served point: output throughput = ``output_throughput``; per-user
throughput = 1 / median TPOT; decode step time = median TPOT (docs/definitions.md, MBU); input and
output lengths = median of ``input_lens``/``output_lens``, else total tokens / completed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from statistics import median
from typing import Any

from pipeline.importers.base import (REFUSAL_FAILURE_RATE, ImportResult, ModelInfo, model_name_as_given, check_completion,
                                     check_finite, check_unique, fail, is_number, number, read_text, summary,
                                     wrong_format)
from pipeline.engines.tokencount import length_mismatch
from pipeline.records import distribution

FORMAT = "vllm-bench"
ENGINE = "vllm"
METRICS = ("ttft", "tpot", "itl", "e2el")
_BLOCK_KEYS = {
    "Successful requests": "completed", "Failed requests": "failed", "Benchmark duration (s)": "duration",
    "Total input tokens": "total_input_tokens", "Total generated tokens": "total_output_tokens",
    "Output token throughput (tok/s)": "output_throughput", "Request throughput (req/s)": "request_throughput",
}


def _ms_stats(d: dict[str, Any], metric: str, path: Path | None = None, pre: str = "") -> dict[str, float | None] | None:
    """``{p50, p90, p99, mean}`` (s) of a metric from vLLM's ``{median,p<N>,mean}_<metric>_ms`` keys.

    Raises:
        BatchmarkError: one of those keys holds something other than a number (named).
    """
    for key in (f"median_{metric}_ms", f"p50_{metric}_ms", f"p90_{metric}_ms", f"p99_{metric}_ms", f"mean_{metric}_ms"):
        if d.get(key) is not None and not is_number(d[key]):
            raise fail(path or "?", f"field {pre}{key}", f"not a number: {d[key]!r}")
    return distribution(p50=d.get(f"median_{metric}_ms", d.get(f"p50_{metric}_ms")), p90=d.get(f"p90_{metric}_ms"),
                        p99=d.get(f"p99_{metric}_ms"), mean=d.get(f"mean_{metric}_ms"), scale=1e-3)



def _ok_mask(d: dict[str, Any]) -> list[bool] | None:
    """Which requests of a ``--save-detailed`` result succeeded, or None without per-request lists.

    vLLM (``vllm/benchmarks/serve.py``) keeps one entry per request in ``input_lens``,
    ``output_lens``, ``ttfts``, ``itls`` and ``errors``; a failed request has an error text,
    output length 0 and TTFT 0.0.  Success is an empty error where ``errors`` is saved, else a
    positive output length.
    """
    lens = d.get("output_lens")
    if not isinstance(lens, list) or not lens:
        return None
    errors = d.get("errors")
    if isinstance(errors, list) and len(errors) == len(lens):
        return [not e for e in errors]
    return [isinstance(n, (int, float)) and n > 0 for n in lens]


def _per_request_len(d: dict[str, Any], lens_key: str, total_key: str, completed: int, path: Path, pre: str,
                     what: str, ok: list[bool] | None) -> int:
    """Tokens per request: the median over the successful requests of ``lens_key`` when given, else ``total_key`` / completed.

    Failed requests carry length 0 in vLLM's lists and never enter the median.

    Raises:
        BatchmarkError: neither field is present (the message names ``total_key``), a list that is not numbers.
    """
    lens = d.get(lens_key)
    if isinstance(lens, list) and lens:
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in lens):
            raise fail(path, f"field {pre}{lens_key}", "not a list of numbers")
        mask = ok if ok is not None and len(ok) == len(lens) else [True] * len(lens)
        good = [v for v, keep in zip(lens, mask) if keep]
        if good:
            return round(median(good))
    if isinstance(d.get(total_key), (int, float)) and not isinstance(d.get(total_key), bool):
        return round(d[total_key] / completed)
    raise fail(path, f"field {pre}{total_key}", f"missing; the {what} length is unknown")


#: vLLM's per-request lists (``--save-detailed``): one entry per request sent (``vllm/benchmarks/serve.py``).
PER_REQUEST_LISTS = ("input_lens", "output_lens", "ttfts", "itls", "errors", "generated_texts", "start_times")


def _check_list_lengths(path: Path, d: dict[str, Any], pre: str, requests: int) -> None:
    """Refuse a per-request list longer than the requests the result counts (completed + failed).

    vLLM writes one entry per request sent; a list longer than that is not this result's (issue 18,
    item 7: 20 M ``ttfts`` for ``completed: 32`` took 72 s and 3.6 GB).

    Raises:
        BatchmarkError: naming the list, its length and the count.
    """
    for key in PER_REQUEST_LISTS:
        v = d.get(key)
        if isinstance(v, list) and len(v) > max(requests, 0):
            raise fail(path, f"field {pre}{key}", f"holds {len(v):,} entries for {requests} request(s) (completed + "
                                                  "failed); one entry per request expected")


def _is_closed_loop_rate(rate: Any) -> bool:
    """vLLM writes ``request_rate`` as ``"inf"`` (all requests at once, limited only by ``max_concurrency``)."""
    return rate is None or (isinstance(rate, str) and rate.strip().lower() in ("inf", "infinity")) or rate == float("inf")


def point_from_result(path: Path, d: dict[str, Any], model: str, engine: str, where: str = "",
                      max_failure_rate: float = REFUSAL_FAILURE_RATE, total: int | None = None):
    """One :class:`PointSummary` from a save-result dict (or a parsed printed block).

    ``total``: requests sent, where the source states it apart from the counts (the progress
    bar above a printed block).

    Raises:
        BatchmarkError: a missing or non-numeric required field (named), an open-loop
            (rate-limited) run, no fixed concurrency, too few completed or too many failed
            requests (:func:`~pipeline.importers.base.check_completion`).
    """
    pre = f"{where}." if where else ""
    rate = d.get("request_rate")
    conc = d.get("max_concurrency")
    if d.get("ramp_up_strategy") is not None:
        raise fail(path, f"field {pre}ramp_up_strategy",
                   f"is {d.get('ramp_up_strategy')!r} (from {d.get('ramp_up_start_rps')!r} to {d.get('ramp_up_end_rps')!r} "
                   "req/s): a ramp-up run is open loop at a changing rate, not a point at a fixed concurrency or rate; "
                   "batchmark imports fixed-rate or fixed-concurrency runs")
    open_loop = not _is_closed_loop_rate(rate)
    if open_loop and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate < float("inf")):
        raise fail(path, f"field {pre}request_rate", f"is {rate!r}; expected a positive number of requests/s or \"inf\"")
    check_finite(path, {k: v for k, v in d.items() if k != "request_rate"}, where)
    for key in ("completed", "output_throughput"):
        if not isinstance(d.get(key), (int, float)) or isinstance(d.get(key), bool):
            raise fail(path, f"field {pre}{key}", "missing or not a number")
    if open_loop and conc is None:
        pass  # uncapped: requests in flight are whatever the arrivals and the server make them
    elif not isinstance(conc, int) or isinstance(conc, bool) or conc < 1:
        raise fail(path, f"field {pre}max_concurrency", f"is {conc!r}; a closed-loop run needs a fixed concurrency, an "
                                                         "open-loop one a positive cap or none: pass batchmark import "
                                                         "--concurrency N (requests in flight) or --rate R (requests/s)")
    burst = d.get("burstiness")
    if burst is not None and (isinstance(burst, bool) or not isinstance(burst, (int, float)) or burst <= 0):
        raise fail(path, f"field {pre}burstiness", f"is {burst!r}; expected a positive number")
    completed = int(d["completed"])
    ok = _ok_mask(d)
    failed = d.get("failed")
    if not isinstance(failed, int) or isinstance(failed, bool):
        failed = None
    if failed is None and ok is not None:
        failed = ok.count(False)
    if failed is None and isinstance(d.get("num_prompts"), int):
        failed = max(0, d["num_prompts"] - completed)
    failed_unknown = failed is None and total is None and is_sglang(d)
    failed = int(failed or 0)
    if total is not None and total > completed + failed:
        failed = total - completed
    _check_list_lengths(path, d, pre, completed + failed)
    check_completion(path, f"field {pre}completed", completed, failed, 1 if open_loop else conc, max_failure_rate)
    input_len = _per_request_len(d, "input_lens", "total_input_tokens", completed, path, pre, "input", ok)
    output_len = _per_request_len(d, "output_lens", "total_output_tokens", completed, path, pre, "output", ok)
    tpot = _ms_stats(d, "tpot", path, pre)
    med_tpot = tpot["p50"] if tpot else None
    ttft = _ms_stats(d, "ttft", path, pre)
    ttfts = d.get("ttfts")
    if isinstance(ttfts, list) and ttfts and all(isinstance(v, (int, float)) for v in ttfts):
        mask = ok if ok is not None and len(ok) == len(ttfts) else [v > 0 for v in ttfts]
        good = [v for v, keep in zip(ttfts, mask) if keep and v > 0]
        if good:
            ttft = distribution(values=good)
    errors = d.get("errors")
    error_texts = sorted({str(e) for e in errors if e})[:10] if isinstance(errors, list) else []
    flags = {}
    e2el = _ms_stats(d, "e2el", path, pre) or _ms_stats(d, "e2e_latency", path, pre)  # SGLang: *_e2e_latency_ms
    asked = d.get("random_output_len") if d.get("dataset_name") == "random" else None  # SGLang states it
    if is_number(asked) and asked > 0 and length_mismatch(output_len, asked):
        flags["output_len_mismatch"] = completed
        error_texts.append(f"output length {output_len} per request, {int(asked)} requested (random_output_len)")
    if failed_unknown:
        flags["failed_count_unknown"] = completed
        error_texts.append("the file states no failed count (SGLang bench_serving): failures unknown")
    return summary(model, engine, input_len, output_len, conc, completed=completed, failed=failed, flags=flags,
                   failure_rate=None if failed_unknown else failed / (completed + failed) if completed + failed else None,
                   output_throughput_tok_s=float(d["output_throughput"]),
                   per_user_tok_s=1.0 / med_tpot if med_tpot else None,
                   ttft_s=ttft, tpot_s=tpot, itl_chunk_s=_ms_stats(d, "itl", path, pre),  # vLLM's itl is per chunk
                   e2el_s=e2el,
                   step_time_s=med_tpot, errors=error_texts,
                   samples={"output_throughput_tok_s": [float(d["output_throughput"])]},
                   **(_open_fields(d, float(rate), burst) if open_loop else {}))


def is_sglang(d: dict[str, Any]) -> bool:
    """Whether a result object is SGLang ``bench_serving``'s (``backend`` sglang…, or its ``*_e2e_latency_ms`` keys)."""
    backend = d.get("backend")
    return (isinstance(backend, str) and backend.lower().startswith("sglang")) or any(
        isinstance(k, str) and k.endswith("_e2e_latency_ms") for k in d)


def run_number(d: Any) -> int | None:
    """``vllm bench sweep``'s ``run_number`` of a result (−1 = warm-up), None when absent."""
    v = d.get("run_number") if isinstance(d, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def merge_repeats(points: list[Any]) -> Any:
    """One point from the results of its repeats (``vllm bench sweep``'s ``run=N.json``), per the module docstring.

    Output throughput = median over repeats (one sample per repeat, as a measured point keeps them);
    completed and failed = sums; each latency figure (p50, p90, p99, mean) = median over the repeats
    of that figure; per-user throughput = 1 / that median TPOT p50; the repeats' TTFT and TPOT p50 are
    kept as ``ttft_s_per_repeat`` / ``tpot_s_per_repeat`` (the repeat is the unit of replication).
    """
    first = points[0]
    thr = [p.output_throughput_tok_s for p in points if p.output_throughput_tok_s is not None]

    def med(values: list[float | None]) -> float | None:
        vals = [v for v in values if v is not None]
        return float(median(vals)) if vals else None

    def dist(name: str) -> Any:
        ds = [getattr(p, name) for p in points if getattr(p, name)]
        if not ds:
            return None
        return distribution(**{q: med([d.get(q) for d in ds]) for q in ("p50", "p90", "p99", "mean")})

    tpot = dist("tpot_s")
    completed = sum(p.completed for p in points)
    failed = sum(p.failed for p in points)
    flags: dict[str, int] = {}
    for p in points:
        for k, v in (p.flags or {}).items():
            flags[k] = flags.get(k, 0) + v
    out = summary(first.model, first.engine, first.input_len, first.output_len, first.concurrency,
                  repeats=len(points), completed=completed, failed=failed, flags=flags,
                  failure_rate=failed / (completed + failed) if completed + failed else None,
                  output_throughput_tok_s=med(thr), per_user_tok_s=1.0 / tpot["p50"] if tpot and tpot["p50"] else None,
                  ttft_s=dist("ttft_s"), tpot_s=tpot, itl_chunk_s=dist("itl_chunk_s"), e2el_s=dist("e2el_s"),
                  step_time_s=tpot["p50"] if tpot else None,
                  errors=sorted({e for p in points for e in p.errors})[:10],
                  samples={"output_throughput_tok_s": thr,
                           "ttft_s_per_repeat": [p.ttft_s["p50"] for p in points if p.ttft_s and p.ttft_s["p50"] is not None],
                           "tpot_s_per_repeat": [p.tpot_s["p50"] for p in points if p.tpot_s and p.tpot_s["p50"] is not None]},
                  load=first.load, rate_rps=first.rate_rps, burstiness=first.burstiness,
                  achieved_rate_rps=med([p.achieved_rate_rps for p in points]))
    return out


def _open_fields(d: dict[str, Any], rate: float, burst: float | None) -> dict[str, Any]:
    """The open-loop fields of a rate-limited result: load (``poisson`` at burstiness 1, else ``gamma``), rate,
    burstiness, achieved rate (``request_throughput``, requests/s; None where not stated)."""
    achieved = d.get("request_throughput")
    return {"load": "poisson" if burst is None or burst == 1 else "gamma", "rate_rps": rate,
            "burstiness": float(burst) if burst is not None else None,
            "achieved_rate_rps": float(achieved) if is_number(achieved) else None}


def _objects(path: Path, text: str) -> list[tuple[int, Any]]:
    """Every JSON value of a file, with its first line: one save-result object, or one per line (``--append-result``).

    ``--append-result`` writes ``"\n"`` and another ``json.dump(result)`` after the first, so a
    sweep run into one file is JSON Lines.

    Raises:
        BatchmarkError: a value that does not parse (names the line).
    """
    dec = json.JSONDecoder()
    out, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return out
        line = text.count("\n", 0, pos) + 1
        try:
            obj, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise fail(path, exc.lineno, f"corrupt JSON ({exc.msg} at column {exc.colno}): cut short, or not a "
                                         "vllm bench serve result") from None
        except RecursionError:
            raise fail(path, line, "corrupt JSON (nested too deeply)") from None
        except ValueError as exc:  # an integer of more than 4,300 digits (Python's int_max_str_digits)
            raise fail(path, line, f"corrupt JSON ({' '.join(str(exc).split())[:120]})") from None
        out.append((line, obj))


WARMUP_ONLY = ("holds only vllm bench sweep's warm-up (run_number -1, warmup.json), which vLLM excludes from its "
               "results; import the run=N.json files beside it")


def parse_json(path: Path, text: str, model: str | None, engine: str | None,
               max_failure_rate: float = REFUSAL_FAILURE_RATE, concurrency: int | None = None,
               rate: float | None = None, warmup_ok: bool = False) -> list[tuple[Any, str, str | None, int | None]]:
    """A save-result file (one object), an ``--append-result`` file (one object per line) or a ``vllm bench sweep``
    ``summary.json`` (a list of results) → [(point, model as named, vLLM version, run_number)].

    Warm-up results (``run_number`` −1) are left out; a file of nothing else is refused unless ``warmup_ok``
    (then it gives []).  ``engine`` None: ``sglang`` for SGLang's results, else
    ``vllm``.  ``concurrency`` / ``rate``: what a result that states none ran at (``--concurrency``, ``--rate``).

    Raises:
        BatchmarkError: a malformed result (named); a file of warm-up only.
    """
    objs = _objects(path, text)
    if len(objs) == 1 and isinstance(objs[0][1], list):  # vllm bench sweep's summary.json
        items = objs[0][1]
        if not items or not all(isinstance(d, dict) and run_number(d) is not None for d in items):
            raise fail(path, None, "a JSON list, but not vllm bench sweep's summary.json (a list of results with run_number)")
        objs = [(objs[0][0], d) for d in items]
    out = []
    warmups = 0
    for line, d in objs:
        where = f"line {line}" if len(objs) > 1 else ""
        if not isinstance(d, dict):
            raise fail(path, line if len(objs) > 1 else None, "not a vllm bench serve result object")
        if run_number(d) is not None and run_number(d) < 0:
            warmups += 1  # vllm bench sweep's warm-up (warmup.json): "excluded from summary statistics"
            continue
        if d.get("run_number") is not None and len(objs) > 1:
            where = f"run_number {d['run_number']}"
        other = wrong_format(path, d, FORMAT, "a vllm bench serve result")
        if other is not None:
            raise other
        raw = model or d.get("model_id") or d.get("model")
        if not raw or not isinstance(raw, str):
            what = "SGLang bench_serving results name no model" if is_sglang(d) else "missing"
            raise fail(path, f"{where + ' ' if where else ''}field model_id", f"{what}; pass --model")
        if d.get("max_concurrency") is None and concurrency is not None:
            d = {**d, "max_concurrency": concurrency}
        if rate is not None and _is_closed_loop_rate(d.get("request_rate")) and d.get("ramp_up_strategy") is None:
            d = {**d, "request_rate": rate}
        version = d.get("vllm_version") or d.get("version")
        pt = point_from_result(path, d, model_name_as_given(raw), engine or ("sglang" if is_sglang(d) else ENGINE),
                               where=where, max_failure_rate=max_failure_rate)
        out.append((pt, raw, str(version) if version else None, run_number(d)))
    if not out and warmups:
        if warmup_ok:
            return out
        raise fail(path, None, WARMUP_ONLY)
    if not out:
        raise fail(path, None, "empty file")
    return out


def parse_block(path: Path, text: str, model: str | None, engine: str,
                max_failure_rate: float = REFUSAL_FAILURE_RATE, concurrency: int | None = None,
                rate: float | None = None) -> list[Any]:
    """Every "Serving Benchmark Result" block of a printed log → points (``--model`` required).

    The lines above a block say how it ran: ``Traffic request rate: inf`` (closed loop) or a
    rate (open loop), ``Burstiness factor:``, ``Maximum request concurrency:`` (``None`` =
    uncapped), and the progress bar
    ``100/100 [...]`` whose total counts every request sent (blocks of before mid-2025 print
    no ``Failed requests:`` line, so total − successful is the failed count there).
    """
    if not model:
        raise fail(path, None, "the printed Serving Benchmark Result block names no model; pass --model")
    name = model_name_as_given(model)
    points = []
    pending: dict[str, Any] = {}
    given: dict[str, Any] = {"max_concurrency": concurrency, "request_rate": rate if rate is not None else "inf"}
    block: dict[str, Any] | None = None
    total: int | None = None
    start = 0
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip().lstrip("#").strip()
        if re.match(r"^=+\s*Serving Benchmark Result\s*=+$", s):
            if block is not None:
                raise fail(path, start, "Serving Benchmark Result block never closed (cut short?)")
            block, start = {**given, **pending}, no
            continue
        if block is not None and s and set(s) == {"="}:
            points.append(point_from_result(path, block, name, engine, where=f"block at line {start}",
                                            max_failure_rate=max_failure_rate, total=total))
            block, pending, total = None, {}, None
            continue
        bar = re.search(r"\|\s*(\d+)/(\d+)\s*\[", s)
        if bar and block is None:
            total = int(bar.group(2))
            continue
        m = re.match(r"^([A-Za-z][^:]*?):\s+(\S+)(?:\s.*)?$", s)
        if not m:
            continue
        key, value = m.group(1).strip(), m.group(2)
        if key in ("Traffic request rate", "Request rate configured (RPS)"):
            rate: Any = "inf" if value.lower() in ("inf", "infinity") else number(path, no, value)
            (block if block is not None else pending)["request_rate"] = rate
            continue
        if key == "Maximum request concurrency":
            conc = None if value == "None" else int(number(path, no, value))
            (block if block is not None else pending)["max_concurrency"] = conc
            continue
        if key == "Burstiness factor":
            (block if block is not None else pending)["burstiness"] = number(path, no, value)
            continue
        if block is None:
            continue
        stat = re.match(r"^(Mean|Median|P(\d+(?:\.\d+)?)) (TTFT|TPOT|ITL|E2EL) \(ms\)$", key)
        if stat:
            which = "median" if stat.group(1) == "Median" else ("mean" if stat.group(1) == "Mean" else f"p{stat.group(2)}")
            block[f"{which}_{stat.group(3).lower()}_ms"] = number(path, no, value)
        elif key in _BLOCK_KEYS:
            v = number(path, no, value)
            block[_BLOCK_KEYS[key]] = int(v) if key in ("Successful requests", "Failed requests") else v
    if block is not None:
        raise fail(path, start, "Serving Benchmark Result block never closed (cut short?)")
    if not points:
        raise fail(path, None, "no 'Serving Benchmark Result' block found; not vllm bench serve output")
    return points


def parse(paths: list[Path], model: str | None = None, engine: str | None = None,
          max_failure_rate: float = REFUSAL_FAILURE_RATE, concurrency: int | None = None,
          rate: float | None = None) -> ImportResult:
    """Parse save-result JSON files (one per concurrency, or one per line with ``--append-result``), ``vllm bench
    sweep`` folders and/or printed logs (module docstring).

    ``concurrency`` / ``rate`` (``--concurrency``, ``--rate``): what a result or printed block that states neither ran
    at.  Results of one point with distinct ``run_number`` ≥ 0 become one point of that many repeats
    (:func:`merge_repeats`); any other two results of one point are refused.
    """
    names, versions = {}, set()
    given = {Path(p).resolve() for p in paths}
    entries: list[tuple[Any, int | None]] = []
    runs_given = [q for q in given if re.fullmatch(r"run=\d+\.json", q.name)]
    for path in paths:
        runs_beside = any(q.parent == Path(path).resolve().parent for q in runs_given)
        if path.name == "summary.csv" and runs_given:
            continue  # vllm bench sweep's table of the run=N.json results given with it
        if path.name == "summary.csv":
            raise fail(path, None, "vllm bench sweep's summary.csv: import the run=N.json files or their folder")
        text = read_text(path)
        head = text.lstrip()[:1]
        if head == "[" and path.name == "summary.json" and runs_beside:
            continue  # the list of the run=N.json results beside it
        if head in ("{", "["):
            for pt, raw, version, run in parse_json(path, text, model, engine, max_failure_rate, concurrency, rate,
                                                    warmup_ok=True):
                entries.append((pt, run))
                names[pt.model] = raw
                if version:
                    versions.add(version)
        else:
            for pt in parse_block(path, text, model, engine or ENGINE, max_failure_rate, concurrency, rate):
                entries.append((pt, None))
                names[pt.model] = model or pt.model
    if not entries:
        raise fail(", ".join(map(str, paths)), None, WARMUP_ONLY)
    groups: dict[Any, list[tuple[Any, int | None]]] = {}
    for pt, run in entries:
        groups.setdefault(pt.key, []).append((pt, run))
    points = []
    for group in groups.values():
        runs = [run for _, run in group]
        if len(group) > 1 and all(r is not None for r in runs) and len(set(runs)) == len(runs):
            points.append(merge_repeats([pt for pt, _ in sorted(group, key=lambda e: e[1])]))
        else:
            points.extend(pt for pt, _ in group)
    check_unique(", ".join(map(str, paths)), points)
    return ImportResult(FORMAT, "vllm bench serve", ", ".join(sorted(versions)) or None, [str(p) for p in paths],
                        points, {k: ModelInfo(raw_name=v) for k, v in names.items()})
