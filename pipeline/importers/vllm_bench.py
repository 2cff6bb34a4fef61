"""Importer for ``vllm bench serve``: its ``--save-result`` JSON (one file per concurrency) or the printed block.

JSON keys used (vLLM ``vllm/benchmarks/serve.py``): ``model_id``, ``max_concurrency``,
``completed``, ``failed`` or ``num_prompts``, ``output_throughput`` (tok/s), ``duration``,
``total_input_tokens``, ``total_output_tokens``, ``input_lens``/``output_lens`` (when saved
with details), ``ttfts`` (s, per request), and ``{mean,median,p<N>}_{ttft,tpot,itl,e2el}_ms``
(p90 only where ``--metric-percentiles`` asked for it; missing ones stay null).

The printed block starts at ``============ Serving Benchmark Result ============`` and holds
``Successful requests:``, ``Output token throughput (tok/s):``, ``Mean/Median/P99 TTFT
(ms):`` … lines; the concurrency comes from ``Maximum request concurrency:`` (printed before
or inside the block).  The block names no model: pass ``--model``.

Each result is a served point: output throughput = ``output_throughput``; per-user
throughput = 1 / median TPOT; decode step time = median TPOT (DESIGN.md, MBU); input and
output lengths = median of ``input_lens``/``output_lens``, else total tokens / completed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from statistics import median
from typing import Any

from pipeline.importers.base import ImportResult, ModelInfo, canonical_model_name, check_unique, fail, stats, summary

FORMAT = "vllm-bench"
ENGINE = "vllm"
METRICS = ("ttft", "tpot", "itl", "e2el")
_BLOCK_KEYS = {
    "Successful requests": "completed", "Failed requests": "failed", "Benchmark duration (s)": "duration",
    "Total input tokens": "total_input_tokens", "Total generated tokens": "total_output_tokens",
    "Output token throughput (tok/s)": "output_throughput", "Maximum request concurrency": "max_concurrency",
}


def _ms_stats(d: dict[str, Any], metric: str) -> dict[str, float | None] | None:
    return stats(p50=d.get(f"median_{metric}_ms", d.get(f"p50_{metric}_ms")), p90=d.get(f"p90_{metric}_ms"),
                 p99=d.get(f"p99_{metric}_ms"), mean=d.get(f"mean_{metric}_ms"), scale=1e-3)



def _per_request_len(d: dict[str, Any], lens_key: str, total_key: str, completed: int, path: Path, pre: str,
                     what: str) -> int:
    """Tokens per request: the median of ``lens_key`` when given, else ``total_key`` / completed requests.

    Raises:
        BatchmarkError: neither field is present (the message names ``total_key``).
    """
    if d.get(lens_key):
        return round(median(d[lens_key]))
    if isinstance(d.get(total_key), (int, float)):
        return round(d[total_key] / completed)
    raise fail(path, f"field {pre}{total_key}", f"missing; the {what} length is unknown")

def point_from_result(path: Path, d: dict[str, Any], model: str, engine: str, where: str = ""):
    """One :class:`PointSummary` from a save-result dict (or a parsed printed block).

    Raises:
        BatchmarkError: a missing or non-numeric required field (named), no fixed concurrency.
    """
    pre = f"{where}." if where else ""
    for key in ("completed", "output_throughput"):
        if not isinstance(d.get(key), (int, float)):
            raise fail(path, f"field {pre}{key}", "missing or not a number (truncated?)")
    conc = d.get("max_concurrency")
    if not isinstance(conc, int) or conc < 1:
        raise fail(path, f"field {pre}max_concurrency", f"is {conc!r}; batchmark imports closed-loop runs at a fixed concurrency (--max-concurrency)")
    completed = int(d["completed"])
    if completed < 1:
        raise fail(path, f"field {pre}completed", "no request completed")
    input_len = _per_request_len(d, "input_lens", "total_input_tokens", completed, path, pre, "input")
    output_len = _per_request_len(d, "output_lens", "total_output_tokens", completed, path, pre, "output")
    failed = d.get("failed")
    if failed is None and isinstance(d.get("num_prompts"), int):
        failed = max(0, d["num_prompts"] - completed)
    tpot = _ms_stats(d, "tpot")
    med_tpot = tpot["p50"] if tpot else None
    ttft = _ms_stats(d, "ttft")
    if d.get("ttfts") and all(isinstance(v, (int, float)) for v in d["ttfts"]):
        ttft = stats(values=[v for v in d["ttfts"] if v > 0])
    return summary(model, engine, input_len, output_len, conc, completed=completed, failed=int(failed or 0),
                   output_throughput_tok_s=float(d["output_throughput"]),
                   per_user_tok_s=1.0 / med_tpot if med_tpot else None,
                   ttft_s=ttft, tpot_s=tpot, itl_s=_ms_stats(d, "itl"), e2el_s=_ms_stats(d, "e2el"),
                   step_time_s=med_tpot,
                   samples={"output_throughput_tok_s": [float(d["output_throughput"])]})


def parse_json(path: Path, text: str, model: str | None, engine: str) -> tuple[Any, str, str | None]:
    """One save-result file → (point, model as named, vLLM version or None)."""
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(path, exc.lineno, f"corrupt JSON ({exc.msg}; truncated?)") from None
    if not isinstance(d, dict):
        raise fail(path, None, "not a vllm bench serve result object")
    raw = model or d.get("model_id") or d.get("model")
    if not raw:
        raise fail(path, "field model_id", "missing; pass --model")
    version = d.get("vllm_version") or d.get("version")
    return point_from_result(path, d, canonical_model_name(str(raw)), engine), str(raw), version


def _num(path: Path, no: int, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise fail(path, no, f"not a number: {value!r}") from None


def parse_block(path: Path, text: str, model: str | None, engine: str) -> list[Any]:
    """Every "Serving Benchmark Result" block of a printed log → points (``--model`` required)."""
    if not model:
        raise fail(path, None, "the printed Serving Benchmark Result block names no model; pass --model")
    name = canonical_model_name(model)
    points = []
    pending_conc: int | None = None
    block: dict[str, Any] | None = None
    start = 0
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip().lstrip("#").strip()
        if re.match(r"^=+\s*Serving Benchmark Result\s*=+$", s):
            if block is not None:
                raise fail(path, start, "Serving Benchmark Result block never closed (truncated?)")
            block, start = {"max_concurrency": pending_conc}, no
            continue
        if block is not None and s and set(s) == {"="}:
            points.append(point_from_result(path, block, name, engine, where=f"block at line {start}"))
            block, pending_conc = None, None
            continue
        m = re.match(r"^([A-Za-z][^:]*?):\s+(\S+)\s*$", s)
        if not m:
            continue
        key, value = m.group(1).strip(), m.group(2)
        if key == "Maximum request concurrency":
            conc = int(_num(path, no, value))
            if block is not None:
                block["max_concurrency"] = conc
            else:
                pending_conc = conc
            continue
        if block is None:
            continue
        stat = re.match(r"^(Mean|Median|P(\d+(?:\.\d+)?)) (TTFT|TPOT|ITL|E2EL) \(ms\)$", key)
        if stat:
            which = "median" if stat.group(1) == "Median" else ("mean" if stat.group(1) == "Mean" else f"p{stat.group(2)}")
            block[f"{which}_{stat.group(3).lower()}_ms"] = _num(path, no, value)
        elif key in _BLOCK_KEYS:
            v = _num(path, no, value)
            block[_BLOCK_KEYS[key]] = int(v) if key in ("Successful requests", "Failed requests") else v
    if block is not None:
        raise fail(path, start, "Serving Benchmark Result block never closed (truncated?)")
    if not points:
        raise fail(path, None, "no 'Serving Benchmark Result' block found")
    return points


def parse(paths: list[Path], model: str | None = None, engine: str | None = None) -> ImportResult:
    """Parse save-result JSON files (one per concurrency) and/or printed logs."""
    engine = engine or ENGINE
    points, names, versions = [], {}, set()
    for path in paths:
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise fail(path, None, "file not found") from None
        if text.lstrip().startswith("{"):
            pt, raw, version = parse_json(path, text, model, engine)
            points.append(pt)
            names[pt.model] = raw
            if version:
                versions.add(str(version))
        else:
            for pt in parse_block(path, text, model, engine):
                points.append(pt)
                names[pt.model] = model or pt.model
    check_unique(", ".join(map(str, paths)), points)
    return ImportResult(FORMAT, "vllm bench serve", ", ".join(sorted(versions)) or None, [str(p) for p in paths],
                        points, {k: ModelInfo(raw_name=v) for k, v in names.items()})
