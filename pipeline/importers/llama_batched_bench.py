"""Importer for ``llama-batched-bench`` (llama.cpp): the Markdown table it prints, or its JSONL (``-oj``).

Columns (llama.cpp ``tools/batched-bench/README.md``): PP prompt tokens per sequence, TG
tokens generated per sequence, B sequences decoded together, N_KV KV cells, T_PP/S_PP prefill
time (s) and tokens/s, T_TG/S_TG generation time (s) and tokens/s over all B sequences
(S_TG = B·TG/T_TG), T/S total.  JSONL keys: ``pp, tg, pl, n_kv, t_pp, speed_pp, t_tg,
speed_tg, t, speed``.

Each (PP, TG) pair is a workload; each row a point at concurrency B (static batch):
- output throughput = S_TG; per-user throughput = S_TG / B = TG / T_TG;
- decode step time = T_TG / TG (all B sequences advance one token per step);
- TTFT = T_PP for every sequence (they are prefilled together; llama.cpp's README: "T_PP –
  prompt processing time (i.e. time to first token)"), so p50 = p90 = p99 = mean;
- TPOT = T_TG / TG for every sequence; E2EL = T_PP + T_TG; ITL: only its mean (T_TG / TG),
  per-step times are not printed; prefill throughput = S_PP.

The model of a Markdown table is the most recent heading above it (``## ggml-org/…-GGUF``),
or ``--model``; the weight format, file size and parameter count come from a description
line under the heading (``qwen2 7B Q8_0 (dense), 7.54 GiB, 7.62 B params``) or llama.cpp's
log (``file type = Q8_0``, ``file size = 7.54 GiB``, ``model params = 7.62 B``,
``arch = qwen2``); the parameter count checks the card found for the name.  The build comes from ``build: 6918 (2f68ce7cf)`` or
``build 2f68ce7cf (6918)``.

The settings line above a table (``main: n_kv_max = …`` before 2025, ``llama_batched_bench: n_kv_max = …``
since) is read whatever its prefix: a run with ``is_pp_shared = 1`` (``-pps``, one prompt shared by
all sequences) or ``is_tg_separate = 1`` (``-tgs``: its decode loop generates each sequence alone,
``tools/batched-bench/batched-bench.cpp``) is refused, not imported as batches of B.  The JSONL states
no ``is_tg_separate``; a ``-tgs`` JSONL cannot be told apart.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, NamedTuple

from pipeline.importers.base import ImportResult, summary
from pipeline.importers.cardmatch import ModelInfo, gib_from_text, model_name_as_given, quant_from_text
from pipeline.importers.checks import MAX_IMPORTED_VALUE, check_unique
from pipeline.importers.parsing import MAX_IMPORTED_INT, check_finite, fail, number, read_text, wrong_format
from pipeline.core.pointsummary import distribution

FORMAT = "llama-batched-bench"
ENGINE = "llama.cpp"
COLUMNS = ("PP", "TG", "B", "N_KV", "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s")
JSONL_KEYS = ("pp", "tg", "pl", "n_kv", "t_pp", "speed_pp", "t_tg", "speed_tg", "t", "speed")
#: S_TG must equal B·TG/T_TG within this fraction (T_TG is printed to 1 ms).
CONSISTENCY = 0.03

_BUILD = [re.compile(r"build[:\s]+(\d+)\s*\(([0-9a-f]{6,})\)", re.I),
          re.compile(r"build[:\s]+([0-9a-f]{6,})\s*\((\d+)\)", re.I)]


def _build(line: str) -> str | None:
    m = _BUILD[0].search(line)
    if m:
        return f"{m.group(1)} ({m.group(2)})"
    m = _BUILD[1].search(line)
    return f"{m.group(2)} ({m.group(1)})" if m else None


class Row(NamedTuple):
    """One batched-bench row: prompt tokens ``pp``, generated tokens ``tg``, batch ``b``, the prefill's and the
    decode's time (``t_pp``, ``t_tg``, s) and speed (``s_pp``, ``s_tg``, tok/s)."""

    pp: int
    tg: int
    b: int
    t_pp: float
    s_pp: float
    t_tg: float
    s_tg: float


def point_from_row(path: Path, where: str | int, model: str, row: Row, engine: str = ENGINE):
    """One :class:`PointSummary` from a batched-bench ``row`` (formulas in the module docstring).

    Raises:
        BatchmarkError: non-positive sizes or times, or S_TG ≠ B·TG/T_TG (a shifted column).
    """
    pp, tg, b, t_pp, s_pp, t_tg, s_tg = row
    if max(pp, tg, b) > MAX_IMPORTED_INT:
        raise fail(path, where, "PP, TG or B is out of range (more than 64 bits)")
    if min(pp, tg, b) < 1 or t_tg <= 0 or s_tg <= 0:
        raise fail(path, where, f"PP, TG, B, T_TG and S_TG must be positive (PP={pp} TG={tg} B={b} T_TG={t_tg} S_TG={s_tg})")
    if abs(b * tg / t_tg - s_tg) > CONSISTENCY * s_tg:
        raise fail(path, where, f"S_TG {s_tg} does not equal B·TG/T_TG = {b * tg / t_tg:.2f}; columns out of place?")
    step = t_tg / tg
    same = lambda v: distribution(p50=v, p90=v, p99=v, mean=v)  # noqa: E731 - every sequence of a static batch alike
    return summary(model, engine, pp, tg, b, completed=b,
                   output_throughput_tok_s=s_tg, per_user_tok_s=s_tg / b,
                   output_throughput_window="decode_phase",
                   ttft_s=same(t_pp) if t_pp > 0 else None, tpot_s=same(step),
                   itl_s=distribution(mean=step), e2el_s=same(t_pp + t_tg) if t_pp > 0 else None,
                   prefill_throughput_tok_s=s_pp if s_pp > 0 else None, step_time_s=step,
                   samples={"output_throughput_tok_s": [s_tg], "per_user_tok_s": [s_tg / b], "step_time_s": [step]})


def _stated(path: Path, no: int, what: str, value: float) -> float:
    """A figure the log states about the model (bytes, parameters), refused beyond :data:`MAX_IMPORTED_VALUE`."""
    if not math.isfinite(value) or value > MAX_IMPORTED_VALUE:
        raise fail(path, no, f"{what} out of range ({value:.3g})")
    return value


def _check_grid(path: Path, header_line: int, points: list, settings: dict[str, str]) -> None:
    """A table must hold every (PP, TG, B) of its grid that fits n_kv_max; a missing row means truncation.

    batched-bench runs the product of ``-npp × -ntg × -npl`` and skips only the rows whose
    B·(PP + TG) exceeds ``n_kv_max`` (``tools/batched-bench/batched-bench.cpp``).

    Linear in the rows: the first missing cell raises, and the loops over sorted TG and B stop
    at the first cell past ``n_kv_max`` (every later one is past it too), so the cells visited
    are the rows present, one per (PP, TG) and PP that ends a loop, and the missing one.
    """
    if not points:
        raise fail(path, header_line, "table has a header but no rows (truncated?)")
    n_kv_max = int(settings["n_kv_max"]) if settings.get("n_kv_max", "").isdigit() else None
    have = {(p.input_len, p.output_len, p.concurrency) for p in points}
    pps, tgs, bs = (sorted({k[i] for k in have}) for i in range(3))
    for pp in pps:
        for tg in tgs:
            if n_kv_max is not None and bs[0] * (pp + tg) > n_kv_max:
                break
            for b in bs:
                if n_kv_max is not None and b * (pp + tg) > n_kv_max:
                    break
                if (pp, tg, b) not in have:
                    raise fail(path, header_line, f"table lacks the row PP={pp} TG={tg} B={b} of its grid (truncated?)")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _note_line(path: Path, no: int, s: str, info: dict[str, Any]) -> dict[str, str] | None:
    """Read what a line outside a table says of the model into ``info`` (weight format, file size in bytes, name,
    parameter count, architecture); the run's settings (``n_kv_max = …`` line) when it is that line, else None."""
    q = quant_from_text(s) if ("GiB" in s or "file type" in s or "B params" in s) else None
    if q:
        info["quant"] = q
    if "GiB" in s and ("file size" in s or "params" in s or q):
        g = re.search(r"(\d+(?:\.\d+)?)\s*GiB", s)
        if g:  # a stated figure is range-checked before it is converted (a 400-digit size: OverflowError)
            _stated(path, no, "weight file size", number(path, no, g.group(1)) * 2**30)
        info["file_bytes"] = gib_from_text(s)
    m = re.search(r"general\.name\s+str\s*=\s*(.+)$", s)
    if m:
        info["general_name"] = m.group(1).strip()
    m = re.search(r"(?:model params\s*=\s*)?(\d+(?:\.\d+)?)\s*B(?: params)?\s*$", s) if "params" in s else None
    m = m or re.search(r"(\d+(?:\.\d+)?)\s*B params", s)
    if m:
        info["params"] = int(round(_stated(path, no, "parameter count", number(path, no, m.group(1)) * 1e9)))
    m = re.search(r"(?:general\.architecture\s+str|print_info: arch)\s*=\s*(\S+)", s)
    if m:
        info["arch"] = m.group(1).strip()
    if re.match(r"^\w+:\s*n_kv_max\s*=", s):  # "main: n_kv_max = …"; "llama_batched_bench: n_kv_max = …" since 2025
        return dict(re.findall(r"(\w+)\s*=\s*([-\w.]+)", s))
    return None


def _table_header(path: Path, no: int, raw: str | None, info: dict[str, Any], models: dict[str, ModelInfo],
                  settings: dict[str, str]) -> str:
    """The model of the table whose header is line ``no`` (``raw``: as named by ``--model``, the heading or the
    GGUF's name), recorded in ``models`` with what ``info`` read of it; runs whose settings batch no independent
    requests (``-pps``, ``-tgs``) are refused."""
    if not raw:
        raise fail(path, no, "table has no model name above it; pass --model")
    table_model = model_name_as_given(raw)
    mi = models.setdefault(table_model, ModelInfo(raw_name=raw))
    mi.quant = mi.quant or info.get("quant")
    mi.file_bytes = mi.file_bytes or info.get("file_bytes")
    mi.params = mi.params or info.get("params")
    mi.arch = mi.arch or info.get("arch")
    if settings.get("is_pp_shared") == "1":
        raise fail(path, no, "is_pp_shared = 1 (one prompt shared by all sequences) is not a batch of independent requests; import runs without -pps")
    if settings.get("is_tg_separate") == "1":
        raise fail(path, no, "is_tg_separate = 1 (-tgs: each sequence generates alone, one after another) is not a "
                             "batch decoded together; import runs without -tgs")
    return table_model


def parse_markdown(path: Path, text: str, model: str | None = None, engine: str = ENGINE) -> ImportResult:
    """Parse the Markdown table(s) of a batched-bench output (one table per model).

    Raises:
        BatchmarkError: a malformed or truncated row (names the line), a table with no model
            name, a file without a table.
    """
    heading: str | None = None
    info: dict[str, Any] = {}
    version = None
    models: dict[str, ModelInfo] = {}
    points = []
    by_model: dict[str, list] = {}  # the rows of each model so far (a table's grid is checked when it ends)
    settings: dict[str, str] = {}
    header_at: int | None = None
    table_model: str | None = None
    lines = text.splitlines()
    for no, line in enumerate(lines, 1):
        s = line.strip()
        version = version or _build(s)
        if s.startswith("#"):
            heading = s.lstrip("#").strip()
            info = {}
            header_at = None
            continue
        if not s.startswith("|"):
            if table_model and header_at is not None:
                _check_grid(path, header_at, by_model.get(table_model, []), settings)
            header_at = None
            noted = _note_line(path, no, s, info)
            settings = settings if noted is None else noted
            continue
        cells = _cells(s)
        low = {c.lower() for c in cells}
        if "test" in low and ("t/s" in low or "t/s (total)" in low):
            tool = "llama-benchy" if low & {"ttfr (ms)", "e2e_ttft (ms)", "t/s (req)", "t/s (total)"} else "llama-bench"
            hint = ("import it with 'batchmark import llama-benchy'" if tool == "llama-benchy"
                    else "batchmark does not import llama-bench (one sequence per test)")
            raise fail(path, no, f"this is a {tool} table (test | t/s), not llama-batched-bench; {hint}")
        if "PP" in cells and "S_TG t/s" in cells:
            if tuple(cells) != COLUMNS:
                raise fail(path, no, f"unexpected columns {cells}; expected {list(COLUMNS)}")
            table_model = _table_header(path, no, model or heading or info.get("general_name"), info, models, settings)
            header_at = no
            continue
        if header_at is None:
            continue
        if set(s.replace("|", "").strip()) <= set("-: "):
            continue
        if len(cells) != len(COLUMNS):
            raise fail(path, no, f"row has {len(cells)} cells, expected {len(COLUMNS)} (truncated?)")
        try:
            pp, tg, b, _n_kv = (int(c) for c in cells[:4])
        except ValueError:
            raise fail(path, no, f"non-numeric cell in {cells}") from None
        t_pp, s_pp, t_tg, s_tg, _t, _s = (number(path, no, c) for c in cells[4:])
        points.append(point_from_row(path, no, table_model, Row(pp, tg, b, t_pp, s_pp, t_tg, s_tg), engine))
        by_model.setdefault(table_model, []).append(points[-1])
    if not points:
        raise fail(path, None, "no llama-batched-bench table found (expected a header | PP | TG | B | N_KV | … |)")
    if table_model and header_at is not None:
        _check_grid(path, header_at, by_model.get(table_model, []), settings)
    check_unique(path, points)
    return ImportResult(FORMAT, "llama-batched-bench", version, [str(path)], points, models,
                        {"settings": settings} if settings else {})


def pp_shared(path: Path, no: int, value: object) -> bool:
    """Whether a JSONL row's ``is_pp_shared`` says one prompt is shared: ``true``/``1``/``"1"``/``"true"`` yes,
    ``false``/``0``/``"0"``/``"false"``/absent no (a string ``"0"`` is not shared, though it is truthy in Python)."""
    if value is None or value is False or value == 0 or (isinstance(value, str) and value.strip().lower() in
                                                          ("0", "false")):
        return False
    if value is True or value == 1 or (isinstance(value, str) and value.strip().lower() in ("1", "true")):
        return True
    raise fail(path, f"line {no} field 'is_pp_shared'", f"{value!r} is neither 0 nor 1")


def parse_jsonl(path: Path, text: str, model: str | None = None, engine: str = ENGINE) -> ImportResult:
    """Parse batched-bench JSONL (one JSON object per row); the model comes from ``--model``.

    Raises:
        BatchmarkError: no ``--model``, a line that is not JSON (names the line), a missing key.
    """
    if not model:
        raise fail(path, None, "llama-batched-bench JSONL carries no model name; pass --model")
    name = model_name_as_given(model)
    points = []
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or not s.startswith("{"):
            continue
        try:
            row = json.loads(s)
        except json.JSONDecodeError as exc:
            raise fail(path, no, f"not a JSON object ({exc.msg}; cut short?)") from None
        except RecursionError:
            raise fail(path, no, "not a JSON object (nested too deeply)") from None
        except ValueError as exc:  # an integer of more than 4,300 digits (Python's int_max_str_digits)
            raise fail(path, no, f"not a JSON object ({' '.join(str(exc).split())[:120]})") from None
        if not isinstance(row, dict):
            raise fail(path, no, "not a JSON object")
        check_finite(path, row, f"line {no}")
        missing = [k for k in JSONL_KEYS if k not in row]
        if missing:
            raise fail(path, no, f"missing field {missing[0]!r}")
        if pp_shared(path, no, row.get("is_pp_shared")):
            raise fail(path, f"line {no} field 'is_pp_shared'", "1 (shared prompt) is not a batch of independent requests")
        try:
            points.append(point_from_row(path, no, name, Row(int(row["pp"]), int(row["tg"]), int(row["pl"]),
                                                             float(row["t_pp"]), float(row["speed_pp"]),
                                                             float(row["t_tg"]), float(row["speed_tg"])), engine))
        except (TypeError, ValueError, OverflowError):
            raise fail(path, no, "non-numeric value") from None
    if not points:
        raise fail(path, None, "no JSONL rows found")
    check_unique(path, points)
    return ImportResult(FORMAT, "llama-batched-bench", None, [str(path)], points,
                        # JSONL states no weight format: the --model name, else the file's name says it (…-q4_0.jsonl)
                        {name: ModelInfo(raw_name=model, quant=quant_from_text(model) or quant_from_text(path.name))})


def parse(paths: list[Path], model: str | None = None, engine: str | None = None,
          max_failure_rate: float | None = None) -> ImportResult:
    """Parse one batched-bench output file (Markdown or JSONL, told apart by the first row)."""
    if len(paths) != 1:
        raise fail(", ".join(map(str, paths)), None, "llama-batched-bench imports one file at a time")
    path = paths[0]
    text = _read(path)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if first.startswith("[") or (first.startswith("{") and "\n" in text.strip() and _one_document(text)):
        # a whole JSON document (another tool's report), not JSONL: name what it is
        doc = _one_document(text)
        other = wrong_format(path, doc, FORMAT, "llama-batched-bench output") if doc is not None else None
        raise other or fail(path, None, "one JSON document, not llama-batched-bench's JSONL (one {pp, tg, pl, …} object "
                                        "per line, -oj) or its table")
    if path.suffix == ".jsonl" or first.startswith("{"):
        return parse_jsonl(path, text, model, engine or ENGINE)
    return parse_markdown(path, text, model, engine or ENGINE)


def _one_document(text: str) -> Any:
    """``text`` parsed as one JSON document, or None (JSONL, or not JSON)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _read(path: Path) -> str:
    return read_text(path)
