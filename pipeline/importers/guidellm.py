"""Importer for GuideLLM's benchmarks report: ``benchmarks.json`` or ``benchmarks.yaml`` (same content).

GuideLLM writes the report as JSON by default and as YAML on request (``--output
kind=yaml``); both hold the same document and are imported alike.  Its ``benchmarks.csv``
flattens the distributions into one row per benchmark and is refused with a pointer to the
JSON.

Keys used: ``benchmarks[]``, each with a scheduling strategy (``config.strategy`` in
GuideLLM ≥ 0.4, ``scheduler.strategy`` or ``args.strategy`` before: ``{"type_": "concurrent",
"streams": N}`` or ``{"type_": "synchronous"}``), ``duration`` (s) and ``metrics``, whose
entries hold ``successful`` distributions ``{mean, median, count, total_sum, percentiles:
{p50, p90, p99, …}}``, and ``request_totals`` (``successful``, ``errored``, ``incomplete``).
The model is ``--model``, else ``worker.backend_model`` (≤ 0.3), ``config.backend.model`` of the
benchmark or ``config.spec.backend.model`` of the report (0.8), ``config.model``, ``args.model``.

Mapping, by each field's definition in GuideLLM's own source
(``guidellm/schemas/request_stats.py``, ``GenerativeRequestStats``), never by its name:
- TTFT ← ``time_to_first_token_ms`` = first iteration − request start (ms): batchmark's TTFT.
- TPOT ← ``inter_token_latency_ms`` = (last token − first token) / (output tokens − 1) per
  request (ms): batchmark's TPOT.  GuideLLM's own ``time_per_output_token_ms`` is (last token −
  request start) / output tokens, TTFT included (before 0.4: (last − first) / output tokens),
  and is not batchmark's TPOT: it is not used.  GuideLLM weights the distribution by token
  (count = Σ (output − 1)), so its percentiles equal per-request ones when output lengths are
  equal (batchmark's fixed-length workloads).
- ITL: only its mean, the token-weighted mean of the same field (= Σ gaps / Σ (output − 1),
  the mean of batchmark's per-token ITL); GuideLLM keeps no per-token gaps.
- E2EL ← ``request_latency`` = request end − request start (s).
- output throughput = (``output_token_count.successful.total_sum`` + ``output_token_count.incomplete.total_sum``)
  / ``duration``: the tokens generated within the benchmark's window, the successful requests' and those streamed
  by the requests a ``--max-seconds`` stop cut off (``incomplete``; left out, a run at 16 streams lost up to 16
  requests' tokens from its throughput), else the mean of
  ``output_tokens_per_second``; per-user throughput = 1 / median TPOT; step time = median TPOT;
  input/output length = median prompt/output token count of the successful requests.
- completed = ``request_totals.successful``; failed = ``request_totals.errored`` (``incomplete``
  requests were cut off at the benchmark's end and are neither).  ``request_totals`` is under
  ``metrics`` from GuideLLM 0.4 and on the benchmark itself in 0.2–0.3 (``GenerativeBenchmark``
  of ``guidellm/benchmark/benchmark.py``); read from either.  A report stating no errored count
  has the caveat ``failed_count_unknown`` (never 0 passed off as measured).

Rate benchmarks (``constant`` and ``poisson`` strategies, ``{"type_": "poisson", "rate": R,
"max_concurrency": cap}``, as GuideLLM's ``constant``, ``poisson`` and ``sweep`` profiles run
them) are open loop: each becomes an open-loop point with its load, ``rate_rps`` = R,
``max_concurrency`` = its cap or None (``concurrency`` None), and ``achieved_rate_rps`` = successful
requests / duration; never
a closed-loop point.  A ``concurrent`` strategy's ``rampup_duration`` (≥ 0.4: its streams started
one by one over that many seconds) has the caveat ``concurrency_ramp``.  ``throughput`` benchmarks (every request at once, no fixed concurrency and
no rate) are neither and stay skipped, listed in the run's details.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.core.lengthstats import normal_stated, point_lengths, stated_stats
from pipeline.importers.base import ImportResult, summary
from pipeline.importers.cardmatch import ModelInfo, model_name_as_given
from pipeline.importers.checks import REFUSAL_FAILURE_RATE, check_completion, check_unique
from pipeline.importers.parsing import check_finite, fail, is_number, load_json, read_text, wrong_format
from pipeline.core.pointsummary import distribution

FORMAT = "guidellm"
ENGINE = "openai"


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _strategy(b: dict[str, Any]) -> dict[str, Any] | None:
    for path in (("config", "strategy"), ("scheduler", "strategy"), ("args", "strategy")):
        s = _get(b, *path)
        if isinstance(s, dict):
            return s
    return None


def _succ(path: Path, where: str, metrics: dict[str, Any], key: str, required: bool = False) -> dict[str, Any] | None:
    m = _get(metrics, key, "successful")
    if m is None:
        if required:
            raise fail(path, f"field {where}.metrics.{key}.successful", "missing")
        return None
    if not isinstance(m, dict):
        raise fail(path, f"field {where}.metrics.{key}.successful", "not an object")
    return m


def _num(path: Path, field: str, v: Any) -> float | None:
    if v is None:
        return None
    if not is_number(v):
        raise fail(path, f"field {field}", f"not a number: {v!r}")
    return float(v)


def _dist(path: Path, field: str, m: dict[str, Any] | None, scale: float,
          mean_only: bool = False) -> dict[str, float | None] | None:
    if not m:
        return None
    pct = m.get("percentiles") or {}
    if not isinstance(pct, dict):
        raise fail(path, f"field {field}.percentiles", "not an object")
    mean = _num(path, f"{field}.mean", m.get("mean"))
    if mean_only:
        return distribution(mean=mean, scale=scale)
    return distribution(p50=_num(path, f"{field}.percentiles.p50", pct.get("p50", m.get("median"))),
                        p90=_num(path, f"{field}.percentiles.p90", pct.get("p90")),
                        p99=_num(path, f"{field}.percentiles.p99", pct.get("p99")), mean=mean, scale=scale)


_CSV_REFUSAL = ("GuideLLM's CSV output is not supported (it flattens the distributions); import the "
                "benchmarks.json (or benchmarks.yaml) of the same run")


def _load(path: Path) -> Any:
    """The report document of a JSON or YAML file; a CSV is refused as unsupported (never read as a cut-short JSON)."""
    text = read_text(path)
    head = text.lstrip()[:1]
    first = text.lstrip().split("\n", 1)[0]
    if path.suffix.lower() == ".csv" or (head not in ("{", "[") and first.count(",") >= 2 and ":" not in first):
        raise fail(path, None, _CSV_REFUSAL)
    if head in ("{", "["):
        return load_json(path, text, "a GuideLLM benchmarks report")
    import yaml

    from pipeline.core.textfiles import UniqueKeyLoader

    try:  # the project's strict loader: duplicate keys and alias bombs refused
        doc = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise fail(path, line, f"not a GuideLLM benchmarks JSON or YAML report "
                               f"({getattr(exc, 'problem', None) or 'invalid YAML'})") from None
    except RecursionError:
        raise fail(path, None, "not a GuideLLM benchmarks report (nested too deeply)") from None
    check_finite(path, doc)
    return doc


def parse(paths: list[Path], model: str | None = None, engine: str | None = None,
          max_failure_rate: float = REFUSAL_FAILURE_RATE) -> ImportResult:
    """Parse one GuideLLM benchmarks report (JSON or YAML)."""
    if len(paths) != 1:
        raise fail(", ".join(map(str, paths)), None, "guidellm imports one file at a time")
    path = paths[0]
    engine = engine or ENGINE
    d = _load(path)
    if not isinstance(d, dict) or not isinstance(d.get("benchmarks"), list):
        raise (wrong_format(path, d, FORMAT, "a GuideLLM benchmarks report")
               or fail(path, "field benchmarks", "missing; not a GuideLLM benchmarks report"))
    other = wrong_format(path, d, FORMAT, "a GuideLLM benchmarks report")
    if other is not None:
        raise other
    points, names, skipped = [], {}, []
    for i, b in enumerate(d["benchmarks"]):
        where = f"benchmarks[{i}]"
        if not isinstance(b, dict):
            raise fail(path, f"field {where}", "not an object")
        load = _load_kind(path, where, b)
        if isinstance(load, str):
            skipped.append(f"{where}: {load}")
            continue
        point, name, raw = _point(path, d, where, b, load, model, engine, max_failure_rate)
        names[name] = raw
        points.append(point)
    if not points:
        raise fail(path, "field benchmarks", f"no synchronous, concurrent, constant or poisson benchmark "
                                             f"(skipped: {'; '.join(skipped) or 'none'})")
    check_unique(path, points)
    version = _get(d, "metadata", "guidellm_version") or d.get("version")
    return ImportResult(FORMAT, "guidellm", str(version) if version else None, [str(path)], points,
                        {k: ModelInfo(raw_name=v) for k, v in names.items()}, {"skipped": skipped} if skipped else {})


def _load_kind(path: Path, where: str, b: dict[str, Any]) -> tuple[str, int | None, float | None, dict[str, Any]] | str:
    """(strategy type, concurrency, rate in requests/s, strategy) of one benchmark: ``synchronous`` (c = 1),
    ``concurrent`` (c = streams), ``constant``/``poisson`` (open loop at ``rate``, capped at ``max_concurrency``);
    another strategy's type (a str: the benchmark is skipped)."""
    strat = _strategy(b)
    if strat is None:
        raise fail(path, f"field {where}.config.strategy", "missing (no scheduling strategy)")
    kind = strat.get("type_") or strat.get("type")
    streams = strat.get("streams")
    rate: float | None = None
    if kind == "synchronous":
        conc = 1
    elif kind == "concurrent" and isinstance(streams, int) and not isinstance(streams, bool) and streams >= 1:
        conc = streams
    elif kind in ("constant", "poisson"):
        rate = _num(path, f"{where}.config.strategy.rate", strat.get("rate"))
        if rate is None or rate <= 0:
            raise fail(path, f"field {where}.config.strategy.rate", f"is {strat.get('rate')!r}; a {kind} benchmark "
                                                                    "needs a positive rate in requests/s")
        cap = strat.get("max_concurrency")
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise fail(path, f"field {where}.config.strategy.max_concurrency", f"is {cap!r}; expected a positive integer or null")
        conc = cap
    else:
        return f"{kind}"
    return kind, conc, rate, strat


def _point(path: Path, d: dict[str, Any], where: str, b: dict[str, Any],
           load: tuple[str, int | None, float | None, dict[str, Any]], model: str | None, engine: str,
           max_failure_rate: float) -> tuple[Any, str, str]:
    """One benchmark's (point, model name, model as the report names it)."""
    kind, conc, rate, strat = load
    metrics = b.get("metrics")
    if not isinstance(metrics, dict):
        raise fail(path, f"field {where}.metrics", "missing")
    totals_at, failed_unknown, completed, failed, out_cnt, in_cnt = _counts(path, where, b, metrics)
    check_completion(path, f"field {where}.{totals_at}", int(completed), int(failed),
                     conc if rate is None else 1, max_failure_rate)
    otps = _succ(path, where, metrics, "output_tokens_per_second")
    duration = _num(path, f"{where}.duration", b.get("duration") if b.get("duration") is not None
                    else _get(b, "run_stats", "duration"))
    total_out = _num(path, f"{where}.metrics.output_token_count.successful.total_sum", out_cnt.get("total_sum"))
    cut = _cut_off(path, where, metrics)  # requests cut off at the benchmark's end (--max-seconds): their tokens
    if total_out is not None and duration and duration > 0:
        tput = (total_out + cut[1]) / duration
    elif otps and is_number(otps.get("mean")):
        tput = float(otps["mean"])
    else:
        raise fail(path, f"field {where}.duration", "missing; throughput unknown")
    lens = {}
    for key, m in (("output_token_count", out_cnt), ("prompt_token_count", in_cnt)):
        med = _num(path, f"{where}.metrics.{key}.successful.median", m.get("median"))
        if med is None:
            raise fail(path, f"field {where}.metrics.{key}.successful.median", "missing")
        lens[key] = round(med)
    itl_field = f"{where}.metrics.inter_token_latency_ms.successful"
    itl_m = _succ(path, where, metrics, "inter_token_latency_ms")
    tpot = _dist(path, itl_field, itl_m, 1e-3)
    raw = (model or _get(b, "worker", "backend_model") or _get(b, "config", "backend", "model")
           or _get(d, "config", "spec", "backend", "model") or _get(b, "config", "model")
           or _get(d, "args", "model") or _get(b, "args", "model"))
    if not raw or not isinstance(raw, str):
        raise fail(path, f"field {where}.config.backend.model", "missing; pass --model")
    name = model_name_as_given(raw)
    med_tpot = tpot["p50"] if tpot else None
    ramp = strat.get("rampup_duration") if kind == "concurrent" else None
    point = summary(
        name, engine, lens["prompt_token_count"], lens["output_token_count"], conc if rate is None else None,
        completed=int(completed), failed=int(failed),
        output_throughput_tok_s=tput, per_user_tok_s=1.0 / med_tpot if med_tpot else None,
        ttft_s=_dist(path, f"{where}.metrics.time_to_first_token_ms.successful",
                     _succ(path, where, metrics, "time_to_first_token_ms"), 1e-3),
        tpot_s=tpot, itl_s=_dist(path, itl_field, itl_m, 1e-3, mean_only=True),
        e2el_s=_dist(path, f"{where}.metrics.request_latency.successful",
                     _succ(path, where, metrics, "request_latency"), 1.0),
        step_time_s=med_tpot, samples={"output_throughput_tok_s": [tput]}, lengths=_lengths(d, in_cnt, out_cnt),
        failures_unknown="the report states no errored count (request_totals): failures unknown" if failed_unknown
        else None,
        **({} if rate is None else {"load": kind, "rate_rps": rate, "max_concurrency": conc,
                                    "achieved_rate_rps": completed / duration if duration and duration > 0 else None}))
    if cut[1] > 0:
        point.errors.append(f"output throughput counts the {cut[1]:g} output tokens of {cut[0]:g} request(s) cut off "
                            "at the benchmark's end (incomplete: --max-seconds), generated within its duration")
    if is_number(ramp) and ramp > 0:  # ConcurrentStrategy.rampup_duration (GuideLLM ≥ 0.4): streams started over it
        point.caveats["concurrency_ramp"] = int(completed)
        point.errors.append(f"streams started one by one over the first {ramp:g} s (rampup_duration): part "
                            f"of the benchmark ran below {conc} in flight")
    return point, name, raw


def _cut_off(path: Path, where: str, metrics: dict[str, Any]) -> tuple[float, float]:
    """(requests, output tokens) of a benchmark's incomplete requests: those in flight when it stopped (GuideLLM's
    ``--max-seconds`` / ``max_duration`` constraint cancels them), whose tokens streamed before the stop are in
    ``output_token_count.incomplete`` (``count``, ``total_sum``); (0, 0) where not stated."""
    inc = _get(metrics, "output_token_count", "incomplete")
    if not isinstance(inc, dict):
        return 0.0, 0.0
    n = _num(path, f"{where}.metrics.output_token_count.incomplete.count", inc.get("count")) or 0.0
    tokens = _num(path, f"{where}.metrics.output_token_count.incomplete.total_sum", inc.get("total_sum")) or 0.0
    if n < 0 or tokens < 0:
        raise fail(path, f"field {where}.metrics.output_token_count.incomplete", "a negative count")
    return n, tokens


def _counts(path: Path, where: str, b: dict[str, Any],
            metrics: dict[str, Any]) -> tuple[str, bool, float, float, dict[str, Any], dict[str, Any]]:
    """(where the counts are, whether failures are unknown, completed requests, failed requests, the output and the
    prompt token count distributions) of one benchmark, refused where the counts are impossible (a total below
    their sum, a token distribution over another count)."""
    # GuideLLM ≥ 0.4 keeps the counts in metrics.request_totals; 0.2–0.3 (GenerativeBenchmark.request_totals) on the
    # benchmark itself: read from either, so the errored count of a 0.3 report is never taken as 0
    totals_at = "metrics.request_totals" if metrics.get("request_totals") is not None else "request_totals"
    totals = metrics.get("request_totals") if metrics.get("request_totals") is not None else b.get("request_totals")
    if totals is not None and not isinstance(totals, dict):
        raise fail(path, f"field {where}.{totals_at}", "not an object")
    failed_unknown = totals is None or not any(k in totals for k in ("errored", "failed"))
    totals = totals or {}
    out_cnt = _succ(path, where, metrics, "output_token_count", required=True)
    in_cnt = _succ(path, where, metrics, "prompt_token_count", required=True)
    completed = _num(path, f"{where}.{totals_at}.successful", totals.get("successful"))
    if completed is None:
        completed = _num(path, f"{where}.metrics.output_token_count.successful.count", out_cnt.get("count"))
    failed = _num(path, f"{where}.{totals_at}.errored", totals.get("errored", totals.get("failed", 0))) or 0
    if completed is None:
        raise fail(path, f"field {where}.{totals_at}.successful", "missing; the completed count is unknown")
    total = totals.get("total")
    incomplete = totals.get("incomplete")
    counted = completed + failed + (incomplete if is_number(incomplete) else 0)
    if is_number(total) and total < counted:  # GuideLLM's total = successful + incomplete + errored
        raise fail(path, f"field {where}.{totals_at}.total", f"{total:g} is fewer than the requests it sums "
                                                             f"({counted:g}): an impossible count")
    n_dist = out_cnt.get("count")
    if is_number(n_dist) and n_dist != completed:  # the per-request token counts cover every successful request
        raise fail(path, f"field {where}.{totals_at}.successful", f"{completed:g} successful requests, but "
                                                                  f"output_token_count covers {n_dist:g}: counts "
                                                                  "that disagree")
    return totals_at, failed_unknown, completed, failed, out_cnt, in_cnt


def _data_settings(d: dict[str, Any]) -> dict[str, Any]:
    """The synthetic data's settings of a report: ``config.spec.data``'s objects (0.8) or ``args.data`` (a
    ``k=v,k=v`` string, a JSON object, or a list of those), merged; {} where it states none."""
    items = _get(d, "config", "spec", "data") or _get(d, "args", "data") or []
    out: dict[str, Any] = {}
    for item in items if isinstance(items, list) else [items]:
        if isinstance(item, str):
            try:
                item = json.loads(item)
            except ValueError:
                item = dict(kv.split("=", 1) for kv in item.split(",") if "=" in kv)
        if isinstance(item, dict):
            out.update(item)
    return out


def _lengths(d: dict[str, Any], in_cnt: dict[str, Any], out_cnt: dict[str, Any]) -> dict[str, Any] | None:
    """A benchmark's length distribution (``PointSummary.lengths``, :mod:`pipeline.core.lengthstats`): the successful
    requests' ``prompt_token_count`` / ``output_token_count`` mean, median, min and max, and the synthetic data's
    ``prompt_tokens_stdev`` / ``output_tokens_stdev`` where stated (0 fixed, else normal with that std)."""
    stats = [stated_stats(m.get("mean"), m.get("median"), m.get("min"), m.get("max")) for m in (in_cnt, out_cnt)]
    data = _data_settings(d)

    def std(name: str) -> float | None:
        try:
            return float(data[name]) if name in data and not isinstance(data[name], bool) else None
        except (TypeError, ValueError):
            return None
    return point_lengths(stats[0], stats[1], normal_stated(std("prompt_tokens_stdev"), std("output_tokens_stdev")))
