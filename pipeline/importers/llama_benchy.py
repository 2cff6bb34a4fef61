"""Importer for ``llama-benchy`` (eugr/llama-benchy): its JSON report or its Markdown table.

JSON (``schemas/benchmark_report_schema.json`` of llama-benchy): top-level ``version``,
``model``, ``benchmarks[]`` with ``concurrency``, ``context_size`` (prefix/depth tokens),
``prompt_size``, ``response_size``, ``is_context_prefill_phase`` and metrics, each
``{mean, std, values}``: ``tg_throughput`` (generation tok/s, all requests),
``tg_req_throughput`` (per request), ``pp_throughput``, ``ttfr``, ``est_ppt``, ``e2e_ttft``
(ms).  Markdown: ``| model | test | t/s (total) | t/s (req) | peak t/s | … | ttfr (ms) |
est_ppt (ms) | e2e_ttft (ms) |`` with tests ``pp2048 (c4)`` / ``tg128 (c4)`` (optionally
``@ d4096``), values ``mean ± std``; a single-concurrency table has ``t/s`` and no ``(cN)``.

Mapping: input length = context_size + prompt_size; output length = response_size;
output throughput = tg_throughput (t/s (total)); per-user throughput = tg_req_throughput
(t/s (req)); decode step time = 1 / per-user throughput (the mean TPOT); TTFT = e2e_ttft
(first content token, docs/definitions.md's definition; ttfr counts the first empty chunk);
prefill throughput = pp_throughput.  Context-prefill phases (``ctx_pp``/``ctx_tg``) are
skipped.  A Markdown tg row takes its prompt size from the pp row before it.  llama-benchy leaves
failed requests out of its figures and counts them nowhere, so every point has the caveat
``failed_count_unknown`` (failures unknown, not 0).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

from pipeline.importers.base import ImportResult, summary
from pipeline.importers.cardmatch import ModelInfo, model_name_as_given
from pipeline.importers.checks import check_unique, flag_impossible_rate
from pipeline.importers.parsing import fail, is_number, load_json, read_text, wrong_format
from pipeline.core.pointsummary import distribution

FORMAT = "llama-benchy"
ENGINE = "openai"
#: Columns only llama-benchy prints (latency columns and the per-request split); its table is recognised by them.
BENCHY_COLUMNS = frozenset({"ttfr (ms)", "est_ppt (ms)", "e2e_ttft (ms)", "t/s (req)", "t/s (total)"})
#: Columns of llama.cpp's ``llama-bench`` table (``tools/llama-bench/README.md``), which shares ``test``/``t/s``.
LLAMA_BENCH_COLUMNS = frozenset({"model", "size", "params", "backend", "test", "t/s"})
_TEST = re.compile(r"^(ctx_pp|ctx_tg|pp|tg)(\d*)(?:\s*@\s*d(\d+))?(?:\s*\(c(\d+)\))?$")


def _metric(path: Path, field: str, m: Any) -> tuple[float | None, list[float]]:
    if m is None:
        return None, []
    if not isinstance(m, dict) or not is_number(m.get("mean")):
        raise fail(path, f"field {field}", "expected {mean, std, values}")
    values = m.get("values") or []
    if not isinstance(values, list):
        raise fail(path, f"field {field}.values", "not a list")
    vals = [float(v) for v in values if is_number(v)]
    return float(m["mean"]), vals


class Figures(NamedTuple):
    """What one tg row states: ``t/s (total)`` (``tg``, tok/s) and its runs' values, ``t/s (req)`` (tok/s), the TTFT's
    mean and values (ms), the pp row's ``t/s (total)`` (tok/s); None where the row states none."""

    tg: float | None
    tg_vals: list[float]
    req: float | None
    ttft_mean_ms: float | None
    ttft_vals_ms: list[float]
    pp: float | None


def _point(model: str, engine: str, input_len: int, output_len: int, conc: int, figures: Figures):
    """One tg row's point, its ``t/s (total)`` (a generation-window rate) checked against c × its ``t/s (req)``
    (:func:`~pipeline.importers.checks.flag_impossible_rate`), never against whole requests' time."""
    point = _summary(model, engine, input_len, output_len, conc, figures)
    flag_impossible_rate(point, "t/s (total)", "t/s (req)")
    return point


def _summary(model: str, engine: str, input_len: int, output_len: int, conc: int, figures: Figures):
    tg, tg_vals, req, ttft_mean_ms, ttft_vals_ms, pp = figures
    return summary(model, engine, input_len, output_len, conc,
                   output_throughput_tok_s=tg, per_user_tok_s=req,
                   output_throughput_window="decode_phase",
                   ttft_s=distribution(values=ttft_vals_ms, mean=ttft_mean_ms, scale=1e-3),
                   tpot_s=distribution(mean=1.0 / req) if req else None,
                   prefill_throughput_tok_s=pp, step_time_s=1.0 / req if req else None,
                   samples={"output_throughput_tok_s": tg_vals} if tg_vals else {},
                   # llama-benchy drops a failed request from its figures (results.py: valid_results = [r for r in
                   # results if r and not r.error]) and counts it nowhere: failures unknown, never 0 as measured
                   failures_unknown="llama-benchy states no failed count (it leaves failed requests out): failures unknown")


def parse_json(path: Path, text: str, model: str | None, engine: str) -> ImportResult:
    """A llama-benchy JSON report → points (fields named on error)."""
    d = load_json(path, text, "a llama-benchy report")
    other = wrong_format(path, d, FORMAT, "a llama-benchy report")
    if other is not None:
        raise other
    if not isinstance(d, dict) or not isinstance(d.get("benchmarks"), list):
        raise fail(path, "field benchmarks", "missing; not a llama-benchy report")
    raw = model or d.get("model")
    if not raw:
        raise fail(path, "field model", "missing; pass --model")
    name = model_name_as_given(str(raw))
    points = []
    for i, b in enumerate(d["benchmarks"]):
        where = f"benchmarks[{i}]"
        if not isinstance(b, dict):
            raise fail(path, f"field {where}", "not an object")
        for key in ("concurrency", "context_size", "prompt_size", "response_size"):
            if not isinstance(b.get(key), int):
                raise fail(path, f"field {where}.{key}", "missing or not an integer")
        if b.get("is_context_prefill_phase"):
            continue
        tg, tg_vals = _metric(path, f"{where}.tg_throughput", b.get("tg_throughput"))
        if tg is None:
            continue
        req, _ = _metric(path, f"{where}.tg_req_throughput", b.get("tg_req_throughput"))
        ttft, ttft_vals = _metric(path, f"{where}.e2e_ttft", b.get("e2e_ttft"))
        pp, _ = _metric(path, f"{where}.pp_throughput", b.get("pp_throughput"))
        figures = Figures(tg, tg_vals, req if req else (tg if b["concurrency"] == 1 else None), ttft, ttft_vals, pp)
        points.append(_point(name, engine, b["context_size"] + b["prompt_size"], b["response_size"], b["concurrency"],
                             figures))
    if not points:
        raise fail(path, "field benchmarks", "holds no generation (tg) results")
    check_unique(path, points)
    return ImportResult(FORMAT, "llama-benchy", d.get("version"), [str(path)], points,
                        {name: ModelInfo(raw_name=str(raw))}, {"latency_mode": d.get("latency_mode"),
                                                               "prefix_caching_enabled": d.get("prefix_caching_enabled")})


def _value(path: Path, no: int, cell: str) -> float | None:
    cell = cell.strip()
    if not cell:
        return None
    m = re.match(r"^(-?\d+(?:\.\d+)?)(?:\s*±\s*(-?\d+(?:\.\d+)?))?$", cell)
    if not m:
        if re.match(r"^[-+]?(nan|inf|infinity)\b", cell, re.IGNORECASE):
            raise fail(path, no, f"not a finite number: {cell!r}")
        raise fail(path, no, f"not a number or 'mean ± std': {cell!r}")
    return float(m.group(1))


def parse_markdown(path: Path, text: str, model: str | None, engine: str) -> ImportResult:
    """A llama-benchy Markdown table → points (lines named on error)."""
    header: list[str] | None = None
    version = None
    points = []
    names: dict[str, str] = {}
    last_pp: dict[tuple[int, int, str], tuple[int, float | None, float | None]] = {}
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        m = re.search(r"llama-benchy \((?:build:\s*)?([^)]+)\)", s)
        if m:
            version = m.group(1).strip()
        if not s.startswith("|"):
            continue
        cells = [c.strip() for c in s.strip("|").split("|")]
        low = [c.lower() for c in cells]
        if "s_tg t/s" in low:
            raise fail(path, no, "this is a llama-batched-bench table (PP | TG | B | … | S_TG t/s), not llama-benchy; "
                                 "import it with 'batchmark import llama-batched-bench'")
        if "test" in low:
            header = low
            if LLAMA_BENCH_COLUMNS <= set(header):
                raise fail(path, no, "this is a llama-bench table (columns model | size | params | backend | … | test | "
                                     "t/s), not llama-benchy: llama-bench (llama.cpp) times one sequence per test, "
                                     "its tgN generates N tokens from depth d alone (no pp before it); batchmark does "
                                     "not import llama-bench; for batch sweeps of llama.cpp use llama-batched-bench")
            if not BENCHY_COLUMNS & set(header):
                raise fail(path, no, f"not a llama-benchy table: none of its columns {sorted(BENCHY_COLUMNS)} "
                                     f"(header: {' | '.join(cells)})")
            if not any(h in header for h in ("t/s (total)", "t/s")):
                raise fail(path, no, "table has no 't/s (total)' or 't/s' column")
            continue
        if header is None or set("".join(cells)) <= set("-: "):
            continue
        if len(cells) != len(header):
            raise fail(path, no, f"row has {len(cells)} cells, header has {len(header)} (truncated?)")
        row = dict(zip(header, cells))
        t = _TEST.match(row["test"])
        if not t:
            raise fail(path, no, f"unrecognised test name {row['test']!r} (expected e.g. 'tg128 (c4)')")
        kind, size, depth, conc = t.group(1), t.group(2), int(t.group(3) or 0), int(t.group(4) or 1)
        raw = model or row.get("model")
        if not raw:
            raise fail(path, no, "no model column; pass --model")
        name = model_name_as_given(raw)
        names[name] = raw
        if kind.startswith("ctx_"):
            continue
        if not size:
            raise fail(path, no, f"test {row['test']!r} has no token count")
        total = _value(path, no, row.get("t/s (total)", row.get("t/s", "")))
        if kind == "pp":
            ttft = _value(path, no, row.get("e2e_ttft (ms)", ""))
            last_pp[(depth, conc, name)] = (int(size), ttft, total)
            continue
        if (depth, conc, name) not in last_pp:
            raise fail(path, no, f"tg row {row['test']!r} has no pp row before it; its prompt length is unknown")
        pp_size, ttft_ms, pp_tput = last_pp[(depth, conc, name)]
        req = _value(path, no, row["t/s (req)"]) if "t/s (req)" in row else (total if conc == 1 else None)
        if total is None:
            raise fail(path, no, f"tg row {row['test']!r} has no throughput")
        points.append(_point(name, engine, depth + pp_size, int(size), conc,
                             Figures(total, [], req, ttft_ms, [], pp_tput)))
    if header is None:
        raise fail(path, None, "no llama-benchy table found (expected a header with 'test' and 't/s (total)')")
    if not points:
        raise fail(path, None, "table holds no tg rows")
    check_unique(path, points)
    return ImportResult(FORMAT, "llama-benchy", version, [str(path)], points,
                        {k: ModelInfo(raw_name=v) for k, v in names.items()})


def parse(paths: list[Path], model: str | None = None, engine: str | None = None,
          max_failure_rate: float | None = None) -> ImportResult:
    """Parse one llama-benchy output (JSON or Markdown, told apart by the first character)."""
    if len(paths) != 1:
        raise fail(", ".join(map(str, paths)), None, "llama-benchy imports one file at a time")
    path = paths[0]
    text = read_text(path)
    if text.lstrip().startswith("{"):
        return parse_json(path, text, model, engine or ENGINE)
    return parse_markdown(path, text, model, engine or ENGINE)
