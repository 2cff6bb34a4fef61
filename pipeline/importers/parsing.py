"""Reading other tools' files: one-line errors naming file and line or field, bounded reads, strict JSON, numbers.

Every importer reads its files through these: :func:`read_text` (a regular file only, :func:`refuse_special`; at
most :data:`MAX_IMPORT_BYTES`, UTF-8, a leading byte-order mark dropped), :func:`load_json` and :func:`check_finite` (no NaN, no integer beyond 64 bits, Unicode
text only), :func:`number` for a text cell; :func:`foreign_file` and :func:`wrong_format` refuse
another tool's file, naming what to import it with.  Errors go through :func:`fail`.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from pipeline.core.errors import BatchmarkError
from pipeline.core.textfiles import read_limited


def fail(path: str | Path, where: str | int | None, message: str) -> BatchmarkError:
    """A one-line import error naming the file and the line (int) or field (str)."""
    loc = f"line {where}" if isinstance(where, int) else where
    text = f"{path}: {loc}: {message}" if loc else f"{path}: {message}"
    return BatchmarkError(" ".join(text.split()))


#: Largest result file an importer reads, bytes: 64 MiB.  ``vllm bench serve --save-detailed`` of 1,000
#: requests × 1,000 tokens is about 20 MB; a bigger file is refused before it is read (fault kind:
#: unbounded memory and time; a 100 MB file took 72 s and 3.6 GB).
MAX_IMPORT_BYTES = 64 * 2**20


def read_text(path: str | Path) -> str:
    """A result file's text (at most :data:`MAX_IMPORT_BYTES`).

    Raises:
        BatchmarkError: missing, a folder, too large, unreadable or not UTF-8 text (names the file).
    """
    refuse_special(path)
    try:
        text = read_limited(path, MAX_IMPORT_BYTES, "result file to import").decode("utf-8")
    except FileNotFoundError:
        raise fail(path, None, "file not found") from None
    except UnicodeDecodeError as exc:
        raise fail(path, None, f"not a UTF-8 text file (byte {exc.start})") from None
    except OSError as exc:
        raise fail(path, None, f"cannot read ({exc.strerror})") from None
    text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark (Windows editors, PowerShell's Out-File) is no content
    if not text.strip():  # said as it is (an empty vllm-bench file once said "pass --model")
        raise fail(path, None, "empty file; nothing to import")
    return text


def refuse_special(path: str | Path) -> None:
    """Refuse a path that is not a regular file (a FIFO, a socket, a device) before anything opens it: opening a FIFO
    for reading blocks until a writer comes, so ``import`` of one waited forever.  A missing path passes (the reader
    names it).

    Raises:
        BatchmarkError: naming the file and what it is.
    """
    import stat

    try:
        mode = Path(path).stat().st_mode
    except OSError:
        return
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
    raise fail(path, None, f"{kind}, not a result file; import a regular file")


def is_number(v: Any) -> bool:
    """True for an int or float that is not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: Largest integer (absolute) an imported document may hold: 2^63 − 1, a 64-bit integer's range.
MAX_IMPORTED_INT = 2**63 - 1


def is_unicode_text(text: str) -> bool:
    """False for a string holding a lone surrogate (JSON's ``"\\ud800"``, or an undecodable ``--model`` byte):
    it cannot be written as UTF-8, so ``show`` and ``pages`` failed on it with UnicodeEncodeError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_finite(path: str | Path, obj: Any, where: str = "") -> None:
    """Refuse a NaN or ±Infinity anywhere in a parsed document (JSON, YAML), naming the field.

    Python's ``json`` reads ``NaN``/``Infinity`` and YAML reads ``.nan``/``.inf`` as floats;
    a non-finite figure is never a measurement, so it stops the import at the boundary.  So does
    an integer beyond 64 bits (:data:`MAX_IMPORTED_INT`): every tool writes its numbers from 64-bit
    integers or doubles, and a 400-digit one would overflow the first float conversion
    (``OverflowError``).

    Strings (values and keys) must be Unicode text (:func:`is_unicode_text`).  A negative number in a latency or
    duration field (:func:`is_latency_field`) is refused too, whether an importer reads that field or not.

    Raises:
        BatchmarkError: ``<file>: field <dotted.path>: not a finite number (nan)``, ``…: out of range``,
            ``…: is a negative latency`` or ``…: not Unicode text``.
    """
    stack: list[tuple[str, Any]] = [(where, obj)]
    while stack:
        at, o = stack.pop()
        if isinstance(o, float) and not math.isfinite(o):
            raise fail(path, f"field {at or '(top level)'}", f"not a finite number ({o})")
        if isinstance(o, int) and not isinstance(o, bool) and abs(o) > MAX_IMPORTED_INT:
            raise fail(path, f"field {at or '(top level)'}", f"integer of {o.bit_length()} bits is out of range "
                                                          "(a number of 64 bits at most)")
        if is_number(o) and o < 0 and is_latency_field(at):
            shown = f"{o:g}" if isinstance(o, float) else str(o)
            raise fail(path, f"field {at}", f"{shown} is a negative latency, which cannot be measured; the file is "
                                            "corrupt or not a measurement")
        if isinstance(o, str) and not is_unicode_text(o):
            raise fail(path, f"field {at or '(top level)'}", "not Unicode text (a lone surrogate such as \\ud800)")
        if isinstance(o, dict):
            for k in o:
                if isinstance(k, str) and not is_unicode_text(k):
                    raise fail(path, f"field {at or '(top level)'}", "a key that is not Unicode text (a lone surrogate)")
            stack.extend((f"{at}.{k}" if at else str(k), v) for k, v in o.items())
        elif isinstance(o, list):
            stack.extend((f"{at}[{i}]", v) for i, v in enumerate(o))


#: A field whose dotted path has a component naming a latency or a duration (vLLM ``mean_ttft_ms``, ``ttfts``,
#: ``duration``; AIPerf/GenAI-Perf ``time_to_first_token.avg``, ``request_latency.p99``, ``benchmark_duration``;
#: GuideLLM ``request_latency``; llama-batched-bench ``t_pp``, ``t_tg``, ``t``; SGLang ``*_e2e_latency_ms``;
#: llama-benchy ``ttfr``, ``est_ppt``, ``e2e_ttft``, ``latency_ms``).
_LATENCY_PART = re.compile(r"ttft|ttfr|tpot|itl|e2el|e2e|latency|time_to_|inter_token|time_per_output|duration|"
                           r"^est_ppt$|^t(_pp|_tg)?$", re.I)
#: Statistics of a latency that may be negative without being a measurement: a confidence interval's lower bound
#: (mean − t·se, AIPerf's multi-run aggregate ``ci_low``), a difference or a skew.
_SIGNED_STAT = re.compile(r"^(ci_low|ci_lower|lower_bound|skew|skewness|kurtosis)$|diff|delta|change|slope", re.I)


def is_latency_field(at: str) -> bool:
    """Whether a dotted field path (``a.b[3].c``) names a measured latency or duration (:data:`_LATENCY_PART`), so a
    negative value in it cannot be: a latency is a later clock reading minus an earlier one."""
    parts = [p for p in re.split(r"[.\[\]]", at) if p and not p.isdigit() and not p.startswith("line ")]
    if not parts or any(_SIGNED_STAT.search(p) for p in parts):
        return False
    return any(_LATENCY_PART.search(p) for p in parts)


def load_json(path: str | Path, text: str, what: str) -> Any:
    """``text`` parsed as one JSON document and checked finite; ``what`` names the format in errors.

    Raises:
        BatchmarkError: not JSON (names the line), or a non-finite number (names the field).
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            other = _first_document_format(text)
            if other is not None:  # one result per line of another tool (batched-bench -oj, vllm --append-result, …)
                raise fail(path, None, f"one JSON object per line of {other} output, not {what}; import it with "
                                       f"'batchmark import {other}'") from None
            raise fail(path, exc.lineno, f"holds more than one JSON document (one per line?); {what} is one "
                                         "document") from None
        raise fail(path, exc.lineno, f"corrupt JSON ({exc.msg} at column {exc.colno}): cut short, or not {what}") from None
    except RecursionError:
        raise fail(path, None, f"not {what} (JSON nested too deeply)") from None
    except ValueError as exc:  # an integer of more than 4,300 digits (Python's int_max_str_digits)
        raise fail(path, None, f"not {what} ({' '.join(str(exc).split())[:120]})") from None
    check_finite(path, doc)
    return doc


def _first_document_format(text: str) -> str | None:
    """The import format the first JSON document of ``text`` looks like (:func:`sniff_json`), or None."""
    try:
        first, _ = json.JSONDecoder().raw_decode(text.lstrip())
    except (ValueError, RecursionError):
        return None
    return sniff_json(first)


def number(path: str | Path, where: str | int, value: str) -> float:
    """A finite number from a text cell (``nan``, ``inf`` and non-numbers refused, naming the line or field)."""
    shown = repr(value) if len(value) <= 40 else f"{value[:40]!r}… ({len(value)} characters)"
    try:
        v = float(value)
    except ValueError:
        raise fail(path, where, f"not a number: {shown}") from None
    if not math.isfinite(v):
        raise fail(path, where, f"not a finite number: {shown}")
    return v


def sniff_json(doc: Any) -> str | None:
    """The import format a parsed JSON document looks like (by keys only that tool writes), or None."""
    if not isinstance(doc, dict):
        return None
    bench = doc.get("benchmarks")
    if isinstance(bench, list):
        first = bench[0] if bench and isinstance(bench[0], dict) else {}
        if "tg_throughput" in first or "pp_throughput" in first or "latency_mode" in doc:
            return "llama-benchy"
        return "guidellm"
    if isinstance(doc.get("output_token_throughput"), dict) or isinstance(doc.get("input_config"), dict):
        return "aiperf"
    if "output_throughput" in doc and ("max_concurrency" in doc or "completed" in doc):
        return "vllm-bench"
    if {"pp", "tg", "pl", "speed_tg"} <= set(doc):
        return "llama-batched-bench"
    return None


#: Foreign files that no importer reads, each with what to import instead (refused naming the wrong thing).
_LLAMA_BENCH = re.compile(r'"n_prompt"\s*:.*?"n_gen"\s*:|"n_gen"\s*:.*?"n_prompt"\s*:', re.S)
#: (newer AIPerf writes ``Metric,Unit,avg,…``: its docs, "CSV Export Format" of the command outputs reference).
_CSV_EXPORT = re.compile(r'^\ufeff?"?(Metric|Statistic)"?\s*,\s*("?Unit"?\s*,\s*)?"?avg"?\s*,', re.I)
#: llama-bench's ``-o csv`` header (``tools/llama-bench/llama-bench.cpp``, ``test::get_fields``): build_commit, …, n_prompt, n_gen, …
_LLAMA_BENCH_CSV = re.compile(r'^\ufeff?"?build_commit"?\s*,[^\n]*\bn_prompt\b[^\n]*\bn_gen\b')
#: SGLang ``bench_serving``'s result line (``*_e2e_latency_ms``, ``request_rate`` possibly the bare literal Infinity).
_SGLANG_RESULT = re.compile(r'"(mean|median|p99)_e2e_latency_ms"\s*:')


def foreign_file(path: str | Path, head: str, fmt: str) -> BatchmarkError | None:
    """A one-line refusal when the start of a file (``head``, its first few KiB) is of a kind no importer reads, else None.

    - llama-bench's ``-o json`` / ``-o jsonl`` (tests with ``n_prompt``, ``n_gen``, ``avg_ts``): one sequence at a
      time, no batching; llama-batched-bench measures batches;
    - an AIPerf or GenAI-Perf CSV export (first cell ``Metric`` / ``Statistic``, then ``avg``): the aiperf
      importer reads the JSON export written beside it;
    - llama-bench's ``-o csv`` (header ``build_commit, …, n_prompt, n_gen, …``), as its JSON;
    - AIPerf's per-request ``profile_export.jsonl`` given to the aiperf importer (it reads the summary);
    - SGLang ``bench_serving`` results given to another importer than vllm-bench (which reads them).
    """
    text = head.lstrip()
    if _LLAMA_BENCH_CSV.match(text):
        return fail(path, None, "llama-bench output (-o csv: n_prompt, n_gen, avg_ts per test), which measures one "
                                "sequence at a time; batchmark imports llama-batched-bench's batches "
                                "('batchmark import llama-batched-bench' reads llama-batched-bench's table or JSONL)")
    if fmt != "vllm-bench" and text[:1] == "{" and _SGLANG_RESULT.search(text) and '"output_throughput"' in text:
        return fail(path, None, "SGLang bench_serving results (*_e2e_latency_ms, one JSON object per run); import them "
                                "with 'batchmark import vllm-bench' (engine sglang)")
    if text[:1] in ("[", "{") and _LLAMA_BENCH.search(text) and '"avg_ts"' in text:
        return fail(path, None, "llama-bench output (-o json/jsonl: n_prompt, n_gen, avg_ts per test), which measures "
                                "one sequence at a time; batchmark imports llama-batched-bench's batches "
                                "('batchmark import llama-batched-bench' reads llama-batched-bench's table or JSONL)")
    if fmt == "aiperf" and text[:1] == "{" and '"session_num"' in text and '"metrics"' in text:
        return fail(path, None, "AIPerf's per-request records (profile_export.jsonl: metadata, metrics, error per "
                                "request), not its summary; import profile_export_aiperf.json written beside it")
    if _CSV_EXPORT.match(text):
        return fail(path, None, f"an AIPerf/GenAI-Perf CSV export; {'the aiperf importer' if fmt == 'aiperf' else 'aiperf'} "
                                "reads the JSON export beside it ('batchmark import aiperf profile_export_aiperf.json', "
                                "GenAI-Perf: profile_export_genai_perf.json)")
    return None


def wrong_format(path: str | Path, doc: Any, fmt: str, expected: str) -> BatchmarkError | None:
    """An error naming the right importer when ``doc`` is another tool's output, else None."""
    other = sniff_json(doc)
    if other and other != fmt:
        return fail(path, None, f"not {expected}: it looks like {other} output; import it with "
                                f"'batchmark import {other}'")
    return None
