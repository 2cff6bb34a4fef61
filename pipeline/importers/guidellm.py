"""Importer for GuideLLM's benchmarks JSON (``guidellm benchmark … --output-path benchmarks.json``).

Keys used: ``benchmarks[]``, each with a scheduling strategy (``config.strategy``,
``scheduler.strategy`` or ``args.strategy``: ``{"type_": "concurrent", "streams": N}`` or
``{"type_": "synchronous"}``) and ``metrics`` whose entries hold ``successful`` statistics
``{mean, median, count, total_sum, percentiles: {p50, p90, p99, …}}``:
``output_tokens_per_second``, ``output_token_count``, ``prompt_token_count``,
``time_to_first_token_ms``, ``time_per_output_token_ms``, ``inter_token_latency_ms`` (ms) and
``request_latency`` (s); ``request_totals`` counts ``successful`` and ``errored``.  The
model is looked up at ``worker.backend_model``, ``config.model``, ``args.model``.

Benchmarks without a fixed concurrency (rate-based: constant, poisson, throughput) are
skipped and listed in the run's details.  Mapping: output throughput = successful output
tokens / benchmark duration where both are given, else the mean of
``output_tokens_per_second``; per-user throughput = 1 / median TPOT; step time = median
TPOT; input/output length = median prompt/output token count.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.importers.base import ImportResult, ModelInfo, canonical_model_name, check_unique, fail, stats, summary

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
            raise fail(path, f"field {where}.metrics.{key}.successful", "missing (truncated?)")
        return None
    if not isinstance(m, dict):
        raise fail(path, f"field {where}.metrics.{key}.successful", "not an object")
    return m


def _dist(m: dict[str, Any] | None, scale: float) -> dict[str, float | None] | None:
    if not m:
        return None
    pct = m.get("percentiles") or {}
    return stats(p50=pct.get("p50", m.get("median")), p90=pct.get("p90"), p99=pct.get("p99"), mean=m.get("mean"),
                 scale=scale)


def parse(paths: list[Path], model: str | None = None, engine: str | None = None) -> ImportResult:
    """Parse one GuideLLM benchmarks JSON file."""
    if len(paths) != 1:
        raise fail(", ".join(map(str, paths)), None, "guidellm imports one file at a time")
    path = paths[0]
    engine = engine or ENGINE
    try:
        d = json.loads(path.read_text())
    except FileNotFoundError:
        raise fail(path, None, "file not found") from None
    except json.JSONDecodeError as exc:
        raise fail(path, exc.lineno, f"corrupt JSON ({exc.msg}; truncated?)") from None
    if not isinstance(d, dict) or not isinstance(d.get("benchmarks"), list):
        raise fail(path, "field benchmarks", "missing; not a GuideLLM benchmarks file")
    points, names, skipped = [], {}, []
    for i, b in enumerate(d["benchmarks"]):
        where = f"benchmarks[{i}]"
        if not isinstance(b, dict):
            raise fail(path, f"field {where}", "not an object")
        strat = _strategy(b)
        if strat is None:
            raise fail(path, f"field {where}.config.strategy", "missing (no scheduling strategy)")
        kind = strat.get("type_") or strat.get("type")
        if kind == "synchronous":
            conc = 1
        elif kind == "concurrent" and isinstance(strat.get("streams"), int) and strat["streams"] >= 1:
            conc = strat["streams"]
        else:
            skipped.append(f"{where}: {kind}")
            continue
        metrics = b.get("metrics")
        if not isinstance(metrics, dict):
            raise fail(path, f"field {where}.metrics", "missing (truncated?)")
        out_cnt = _succ(path, where, metrics, "output_token_count", required=True)
        in_cnt = _succ(path, where, metrics, "prompt_token_count", required=True)
        otps = _succ(path, where, metrics, "output_tokens_per_second")
        duration = b.get("duration") or _get(b, "run_stats", "duration")
        if isinstance(out_cnt.get("total_sum"), (int, float)) and isinstance(duration, (int, float)) and duration > 0:
            tput = out_cnt["total_sum"] / duration
        elif otps and isinstance(otps.get("mean"), (int, float)):
            tput = float(otps["mean"])
        else:
            raise fail(path, f"field {where}.metrics.output_tokens_per_second", "missing; throughput unknown")
        for key, m in (("output_token_count", out_cnt), ("prompt_token_count", in_cnt)):
            if not isinstance(m.get("median"), (int, float)):
                raise fail(path, f"field {where}.metrics.{key}.successful.median", "missing or not a number")
        tpot = _dist(_succ(path, where, metrics, "time_per_output_token_ms"), 1e-3)
        totals = metrics.get("request_totals") or {}
        completed = totals.get("successful", out_cnt.get("count"))
        raw = (model or _get(b, "worker", "backend_model") or _get(b, "config", "model") or _get(d, "args", "model")
               or _get(b, "args", "model"))
        if not raw:
            raise fail(path, f"field {where}.worker.backend_model", "missing; pass --model")
        name = canonical_model_name(str(raw))
        names[name] = str(raw)
        med_tpot = tpot["p50"] if tpot else None
        points.append(summary(
            name, engine, round(in_cnt["median"]), round(out_cnt["median"]), conc,
            completed=int(completed) if isinstance(completed, (int, float)) else conc,
            failed=int(totals.get("errored", totals.get("failed", 0)) or 0),
            output_throughput_tok_s=tput, per_user_tok_s=1.0 / med_tpot if med_tpot else None,
            ttft_s=_dist(_succ(path, where, metrics, "time_to_first_token_ms"), 1e-3), tpot_s=tpot,
            itl_s=_dist(_succ(path, where, metrics, "inter_token_latency_ms"), 1e-3),
            e2el_s=_dist(_succ(path, where, metrics, "request_latency"), 1.0),
            step_time_s=med_tpot, samples={"output_throughput_tok_s": [tput]}))
    if not points:
        raise fail(path, "field benchmarks", f"no concurrent or synchronous benchmark (skipped: {'; '.join(skipped) or 'none'})")
    check_unique(path, points)
    version = _get(d, "metadata", "guidellm_version") or d.get("version")
    return ImportResult(FORMAT, "guidellm", str(version) if version else None, [str(path)], points,
                        {k: ModelInfo(raw_name=v) for k, v in names.items()}, {"skipped": skipped} if skipped else {})
