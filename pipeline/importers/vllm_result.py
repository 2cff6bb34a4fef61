"""One ``vllm bench serve`` result → one point: a ``--save-result`` JSON object, or a printed block read into the same keys.

Keys used (vLLM ``vllm/benchmarks/serve.py``): ``max_concurrency``, ``request_rate`` (``"inf"`` for a
closed loop), ``completed``, ``failed`` or ``num_prompts``, ``output_throughput`` (tok/s),
``total_input_tokens``, ``total_output_tokens``, the per-request lists of ``--save-detailed``
(``input_lens``, ``output_lens``, ``ttfts`` in s, ``errors``; a failed request has an error text,
length 0 and TTFT 0.0, and stays out of every median), and ``{mean,median,p<N>}_{ttft,tpot,itl,e2el}_ms``
(p90 only where ``--metric-percentiles`` asked for it; missing ones stay null).  vLLM's TPOT is per
request (E2EL − TTFT) / (output tokens − 1), batchmark's ``tpot_s``.  vLLM's ITL is one gap per
streamed chunk, so it is stored as ``itl_chunk_s``, never as the per-token ``itl_s`` (the
two differ whenever a chunk carries more than one token).  SGLang's ``bench_serving`` results
(:func:`is_sglang`) say ``*_e2e_latency_ms`` for E2EL and state no failed count.

A finite ``request_rate`` is an open-loop point, never a closed-loop one: load
``poisson`` (``burstiness`` 1 or absent, vLLM's default) or ``gamma`` (another burstiness, kept),
``rate_rps`` = ``request_rate``, ``max_concurrency`` = vLLM's (the cap) or None (``concurrency`` None),
``achieved_rate_rps`` = ``request_throughput``.  A ramp-up run is refused.

Each result is a served point: output throughput = ``output_throughput``; per-user throughput = 1 /
median TPOT; decode step time = median TPOT (docs/definitions.md, MBU); input and output lengths =
median of ``input_lens``/``output_lens``, else total tokens / completed; their distribution (mean, p50, min, max)
and a stated ``random_range_ratio`` are the summary's ``lengths``.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import Any

from pipeline.loadgen.tokencount import length_mismatch
from pipeline.importers.base import summary
from pipeline.importers.checks import REFUSAL_FAILURE_RATE, check_completion, flag_rate, rate_disagreement
from pipeline.importers.parsing import check_finite, fail, is_number
from pipeline.core.lengthstats import length_stats, point_lengths, uniform_stated
from pipeline.core.pointsummary import distribution


def _ms_stats(d: dict[str, Any], metric: str, path: Path | None = None, pre: str = "") -> dict[str, float | None] | None:
    """``{p50, p90, p99, mean}`` (s) of a metric from vLLM's ``{median,p<N>,mean}_<metric>_ms`` keys.

    Raises:
        BatchmarkError: one of those keys holds something other than a number (named).
    """
    for key in (f"median_{metric}_ms", f"p50_{metric}_ms", f"p90_{metric}_ms", f"p99_{metric}_ms", f"mean_{metric}_ms"):
        if d.get(key) is not None and not is_number(d[key]):
            raise fail(path or "?", f"field {pre}{key}", f"not a number: {d[key]!r}")
    stated = [d[k] for k in (f"median_{metric}_ms", f"p50_{metric}_ms", f"p90_{metric}_ms", f"p99_{metric}_ms",
                             f"mean_{metric}_ms") if d.get(k) is not None]
    if stated and all(v == 0 for v in stated):
        # Not a measurement: the fallback both clients write when nothing was measured (vLLM serve.py and SGLang
        # bench_serving.py: np.mean(tpots or 0) when no request had two output tokens, ttfts empty when the backend
        # did not stream).  A latency measured as exactly 0.0 in every statistic does not happen (clock differences).
        return None
    return distribution(p50=d.get(f"median_{metric}_ms", d.get(f"p50_{metric}_ms")), p90=d.get(f"p90_{metric}_ms"),
                        p99=d.get(f"p99_{metric}_ms"), mean=d.get(f"mean_{metric}_ms"), scale=1e-3)



def _ms_tails(d: dict[str, Any]) -> dict[str, dict[str, float | None] | None] | None:
    """``{"ttft", "tpot", "itl_chunk", "e2el"}`` → ``{"p95", "p99_9"}`` (s) from vLLM's ``p95_<metric>_ms`` and
    ``p99.9_<metric>_ms`` keys (written when ``--metric-percentiles`` asked for them; vLLM's ``itl`` is per chunk);
    a metric the file does not state is None, and None when it states none.  Non-numbers are left out."""
    out: dict[str, dict[str, float | None] | None] = {}
    for name, metric in (("ttft", "ttft"), ("tpot", "tpot"), ("itl_chunk", "itl"), ("e2el", "e2el")):
        t = {k: float(d[key]) * 1e-3 if is_number(d.get(key)) else None
             for k, key in (("p95", f"p95_{metric}_ms"), ("p99_9", f"p99.9_{metric}_ms"))}
        out[name] = t if any(v is not None for v in t.values()) else None
    return out if any(v is not None for v in out.values()) else None


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

    vLLM writes one entry per request sent; a list longer than that is not this result's (fault kind:
    unbounded memory and time: 20 M ``ttfts`` for ``completed: 32`` took 72 s and 3.6 GB).

    Raises:
        BatchmarkError: naming the list, its length and the count.
    """
    for key in PER_REQUEST_LISTS:
        v = d.get(key)
        if isinstance(v, list) and len(v) > max(requests, 0):
            raise fail(path, f"field {pre}{key}", f"holds {len(v):,} entries for {requests} request(s) (completed + "
                                                  "failed); one entry per request expected")


def is_closed_loop_rate(rate: Any) -> bool:
    """vLLM writes ``request_rate`` as ``"inf"`` (all requests at once, limited only by ``max_concurrency``)."""
    return rate is None or (isinstance(rate, str) and rate.strip().lower() in ("inf", "infinity")) or rate == float("inf")


#: SGLang ``bench_serving.py``'s newer names (its ``BenchmarkMetrics`` fields as the result dict writes them:
#: ``total_input``, ``total_output``, ``total_output_retokenized``; ``benchmark_duration`` in some of its writers) →
#: the ``vllm bench serve`` key of the same definition, read where that key is absent.
SGLANG_ALIASES = {"total_input": "total_input_tokens", "total_output": "total_output_tokens",
                  "total_output_retokenized": "total_output_tokens_retokenized", "benchmark_duration": "duration"}


def with_aliases(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with SGLang's newer key names (:data:`SGLANG_ALIASES`) read as vLLM's, where vLLM's are absent."""
    extra = {ours: d[theirs] for theirs, ours in SGLANG_ALIASES.items() if theirs in d and ours not in d}
    return {**d, **extra} if extra else d


def point_from_result(path: Path, d: dict[str, Any], model: str, engine: str, where: str = "",
                      max_failure_rate: float = REFUSAL_FAILURE_RATE, total: int | None = None):
    """One :class:`PointSummary` from a save-result dict (or a parsed printed block).

    ``total``: requests sent, where the source states it apart from the counts (the progress
    bar above a printed block).

    Raises:
        BatchmarkError: a missing or non-numeric required field (named), an open-loop
            (rate-limited) run, no fixed concurrency, too few completed or too many failed
            requests (:func:`~pipeline.importers.checks.check_completion`).
    """
    pre = f"{where}." if where else ""
    d = with_aliases(d)
    rate = d.get("request_rate")
    conc = d.get("max_concurrency")
    open_loop, burst = _check_load(path, d, where, rate, conc)
    completed = int(d["completed"])
    ok = _ok_mask(d)
    failed, failed_unknown = _failed(d, completed, ok, total)
    _check_list_lengths(path, d, pre, completed + failed)
    check_completion(path, f"field {pre}completed", completed, failed, 1 if open_loop else conc, max_failure_rate)
    input_len = _per_request_len(d, "input_lens", "total_input_tokens", completed, path, pre, "input", ok)
    output_len = _per_request_len(d, "output_lens", "total_output_tokens", completed, path, pre, "output", ok)
    tpot = _ms_stats(d, "tpot", path, pre)
    med_tpot = tpot["p50"] if tpot else None
    ttft = _ttft(d, ok, path, pre)
    errors = d.get("errors")
    error_texts = sorted({str(e) for e in errors if e})[:10] if isinstance(errors, list) else []
    caveats = {}
    e2el = _ms_stats(d, "e2el", path, pre) or _ms_stats(d, "e2e_latency", path, pre)  # SGLang: *_e2e_latency_ms
    flag_rate(path, f"{pre}output_throughput", rate_disagreement(
        d["output_throughput"], d.get("total_output_tokens"), "total_output_tokens", d.get("duration"), "duration",
        "tok/s"), d["output_throughput"], caveats, error_texts, completed)  # vLLM/SGLang: total output / duration
    _flag_length_mismatch(d, output_len, completed, caveats, error_texts)
    _flag_unmeasured_count(d, completed, caveats, error_texts)
    return summary(model, engine, input_len, output_len, None if open_loop else conc, completed=completed, failed=failed,
                   caveats=caveats, max_concurrency=conc if open_loop else None,
                   failures_unknown="the file states no failed count"
                   f"{' (SGLang bench_serving)' if is_sglang(d) else ''}: failures unknown" if failed_unknown else None,
                   failure_rate=failed / (completed + failed) if completed + failed else None,
                   output_throughput_tok_s=float(d["output_throughput"]),
                   per_user_tok_s=1.0 / med_tpot if med_tpot else None,
                   ttft_s=ttft, tpot_s=tpot, itl_chunk_s=_ms_stats(d, "itl", path, pre),  # vLLM's itl is per chunk
                   e2el_s=e2el, tails_s=_ms_tails(d),
                   step_time_s=med_tpot, errors=error_texts,
                   samples={"output_throughput_tok_s": [float(d["output_throughput"])]}, lengths=_lengths(d, ok),
                   **(_open_fields(d, float(rate), burst) if open_loop else {}))


def _lengths(d: dict[str, Any], ok: list[bool] | None) -> dict[str, Any] | None:
    """The point's length distribution (:mod:`pipeline.core.lengthstats`): the successful requests' ``input_lens``
    / ``output_lens`` where saved (``--save-detailed``), and the random dataset's ``random_range_ratio`` where the
    file states it (SGLang's results; vLLM's with ``--metadata random_range_ratio=R``), read with its tool's
    definition."""
    stats = []
    for key in ("input_lens", "output_lens"):
        lens = d.get(key)
        keep = ok if isinstance(lens, list) and ok is not None and len(ok) == len(lens) else None
        stats.append(length_stats([v for i, v in enumerate(lens) if keep is None or keep[i]])
                     if isinstance(lens, list) else None)
    ratio = d.get("random_range_ratio")
    if isinstance(ratio, str):  # --metadata values are strings
        try:
            ratio = float(ratio)
        except ValueError:
            ratio = None
    return point_lengths(stats[0], stats[1], uniform_stated(ratio, is_sglang(d)))


def _check_load(path: Path, d: dict[str, Any], where: str, rate: Any, conc: Any) -> tuple[bool, Any]:
    """(open loop, burstiness) of a result (``where``: its place in the file, "" for a whole file), refusing a
    ramp-up, a rate or concurrency that is none, a non-finite number and a missing count or throughput (each naming
    its field)."""
    pre = f"{where}." if where else ""
    if d.get("ramp_up_strategy") is not None:
        raise fail(path, f"field {pre}ramp_up_strategy",
                   f"is {d.get('ramp_up_strategy')!r} (from {d.get('ramp_up_start_rps')!r} to {d.get('ramp_up_end_rps')!r} "
                   "req/s): a ramp-up run is open loop at a changing rate, not a point at a fixed concurrency or rate; "
                   "batchmark imports fixed-rate or fixed-concurrency runs")
    open_loop = not is_closed_loop_rate(rate)
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
    return open_loop, burst


def _failed(d: dict[str, Any], completed: int, ok: list[bool] | None, total: int | None) -> tuple[int, bool]:
    """(failed requests, whether the file states no failed count): ``failed``, else the per-request success mask's
    failures, else ``num_prompts`` − completed; ``total`` (requests sent) raises it where it says more were sent.

    Only ``failed``, a ``--save-detailed`` ``errors`` list or a total the source prints count failures; a result
    without them (SGLang's, a ``vllm bench serve`` file without ``failed``, a printed block without ``Failed
    requests:`` or a progress bar) has its failures unknown, with ``num_prompts`` − completed (what was asked but
    not completed) as the failures it at least had: 0 is never passed off as measured (docs/imports.md)."""
    failed = d.get("failed")
    if not isinstance(failed, int) or isinstance(failed, bool):
        failed = None
    errors = d.get("errors")
    stated = failed is not None or total is not None or (ok is not None and isinstance(errors, list))
    if failed is None and ok is not None:
        failed = ok.count(False)
    if failed is None and isinstance(d.get("num_prompts"), int) and not isinstance(d.get("num_prompts"), bool):
        failed = max(0, d["num_prompts"] - completed)
    failed = int(failed or 0)
    if total is not None and total > completed + failed:
        failed = total - completed
    return failed, not stated


def _ttft(d: dict[str, Any], ok: list[bool] | None, path: Path, pre: str) -> dict[str, float | None] | None:
    """TTFT (s): from the per-request ``ttfts`` of the successful requests where the file has them, else its
    statistics."""
    ttft = _ms_stats(d, "ttft", path, pre)
    ttfts = d.get("ttfts")
    if isinstance(ttfts, list) and ttfts and all(isinstance(v, (int, float)) for v in ttfts):
        mask = ok if ok is not None and len(ok) == len(ttfts) else [v > 0 for v in ttfts]
        good = [v for v, keep in zip(ttfts, mask) if keep and v > 0]
        if good:
            ttft = distribution(values=good)
    return ttft


def _flag_length_mismatch(d: dict[str, Any], output_len: int, completed: int, caveats: dict[str, int],
                          error_texts: list[str]) -> None:
    """Caveat ``output_len_mismatch`` where the output length per request (tokens) is off the one SGLang's random
    dataset asked for (``random_output_len``, the mean of its draws under ``random_range_ratio``)."""
    asked = d.get("random_output_len") if d.get("dataset_name") == "random" else None  # SGLang states it
    ratio = d.get("random_range_ratio")
    if is_number(asked) and is_number(ratio) and 0 <= ratio < 1:
        # SGLang's random dataset draws each output length from randint(int(len × ratio), len + 1)
        # (bench_serving.py sample_random_requests): the requested mean is (int(len × ratio) + len) / 2
        asked = (int(asked * ratio) + asked) / 2
    if is_number(asked) and asked > 0 and length_mismatch(output_len, asked):
        caveats["output_len_mismatch"] = completed
        error_texts.append(f"output length {output_len} per request, {asked:g} requested (random_output_len"
                           + (f", the mean of random_range_ratio {ratio:g}'s draws)" if is_number(ratio) and 0 <= ratio < 1
                              else ")"))


def _flag_unmeasured_count(d: dict[str, Any], completed: int, caveats: dict[str, int], errors: list[str]) -> None:
    """Flag an output count that is not what was streamed: SGLang writes ``total_output_tokens`` and, beside it, the
    streamed text re-tokenized by the client (``total_output_tokens_retokenized``, "Total generated tokens
    (retokenized)" in its printed block).  When no usage chunk arrives its client falls back to the requested
    ``max_tokens`` for the output count (SGLang PR #24266; PR #36272: "Total generated tokens: 6400 / Total generated
    tokens (retokenized): 32", tool-call runs), so the two disagree beyond
    :func:`pipeline.loadgen.tokencount.length_mismatch` and the output throughput and TPOT divide by a count nobody
    measured: caveat ``output_count_not_measured`` over the completed requests, the two counts in the errors."""
    gen, retok = d.get("total_output_tokens"), d.get("total_output_tokens_retokenized")
    if not (is_number(gen) and is_number(retok)) or retok < 0 or gen <= 0:
        return
    if not (length_mismatch(gen, retok) or retok == 0):
        return
    caveats["output_count_not_measured"] = completed
    apart = f", {gen / retok:.0f}× apart" if retok else ""
    errors.append(f"total generated tokens {gen:g} but {retok:g} re-tokenized from the streamed text{apart}: the "
                  "output count is not what was streamed (the client's max_tokens fallback when no usage arrives), "
                  "so output throughput, TPOT and per-user throughput are not measured")


def is_sglang(d: dict[str, Any]) -> bool:
    """Whether a result object is SGLang ``bench_serving``'s (``backend`` sglang…, or its ``*_e2e_latency_ms`` keys)."""
    backend = d.get("backend")
    return (isinstance(backend, str) and backend.lower().startswith("sglang")) or any(
        isinstance(k, str) and k.endswith("_e2e_latency_ms") for k in d)


def _open_fields(d: dict[str, Any], rate: float, burst: float | None) -> dict[str, Any]:
    """The open-loop fields of a rate-limited result: load (``poisson`` at burstiness 1, else ``gamma``), rate,
    burstiness, achieved rate (``request_throughput``, requests/s; None where not stated)."""
    achieved = d.get("request_throughput")
    return {"load": "poisson" if burst is None or burst == 1 else "gamma", "rate_rps": rate,
            "burstiness": float(burst) if burst is not None else None,
            "achieved_rate_rps": float(achieved) if is_number(achieved) else None}
