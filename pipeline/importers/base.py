"""What every importer shares: the parsed result, errors that name file and line, model cards, the atomic run write.

An importer turns another tool's output into :class:`~pipeline.metrics.PointSummary` rows
(fields the source cannot supply stay None) plus model cards, as an :class:`ImportResult`;
:func:`write_imported_run` stores it as a complete run (``source: imported:<format>``) built in
a temporary folder and renamed into place, so a failure never leaves a partial run.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


from pipeline import __version__, paths, scrub
from pipeline.config import EXCLUSION_FAILURE_RATE
from pipeline.errors import BatchmarkError
from pipeline.records import PointKey, PointSummary
from pipeline.modelcards import (ModelCard, cached_config, card_from_config_file, card_with_file_size, find_card_file,
                                 load_card, normalize_quant)
from pipeline.schemas import AnalysisFile, ModelCardFile, SummariesFile, stamped
from pipeline.stages import analysis_of


#: Largest fraction of a point's requests that may have failed for it to be imported as a
#: measurement (failed / (completed + failed)).  Above it the point is refused, naming the
#: counts; ``batchmark import --max-failure-rate`` changes it for one import.  The analysis's
#: exclusion default (:data:`pipeline.config.EXCLUSION_FAILURE_RATE`): an import never holds a point
#: the analysis would leave out.
REFUSAL_FAILURE_RATE = EXCLUSION_FAILURE_RATE


def fail(path: str | Path, where: str | int | None, message: str) -> BatchmarkError:
    """A one-line import error naming the file and the line (int) or field (str)."""
    loc = f"line {where}" if isinstance(where, int) else where
    text = f"{path}: {loc}: {message}" if loc else f"{path}: {message}"
    return BatchmarkError(" ".join(text.split()))


#: Largest result file an importer reads, bytes: 64 MiB.  ``vllm bench serve --save-detailed`` of 1,000
#: requests × 1,000 tokens is about 20 MB; a bigger file is refused before it is read (issue 18, item 7:
#: a 100 MB file took 72 s and 3.6 GB).
MAX_IMPORT_BYTES = 64 * 2**20


def read_text(path: str | Path) -> str:
    """A result file's text (at most :data:`MAX_IMPORT_BYTES`).

    Raises:
        BatchmarkError: missing, a folder, too large, unreadable or not UTF-8 text (names the file).
    """
    from pipeline.textfiles import read_limited

    try:
        text = read_limited(path, MAX_IMPORT_BYTES, "result file to import").decode("utf-8")
    except FileNotFoundError:
        raise fail(path, None, "file not found") from None
    except UnicodeDecodeError as exc:
        raise fail(path, None, f"not a UTF-8 text file (byte {exc.start})") from None
    except OSError as exc:
        raise fail(path, None, f"cannot read ({exc.strerror})") from None
    if not text.strip():  # said as it is (an empty vllm-bench file once said "pass --model")
        raise fail(path, None, "empty file; nothing to import")
    return text


def is_number(v: Any) -> bool:
    """True for an int or float that is not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: Largest integer (absolute) an imported document may hold: 2^63 − 1, a 64-bit integer's range.
MAX_IMPORTED_INT = 2**63 - 1


def is_unicode_text(text: str) -> bool:
    """False for a string holding a lone surrogate (JSON's ``"\\ud800"``, or an undecodable ``--model`` byte):
    it cannot be written as UTF-8, so ``show`` and ``pages`` failed on it with UnicodeEncodeError (issue 18)."""
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

    Strings (values and keys) must be Unicode text (:func:`is_unicode_text`).

    Raises:
        BatchmarkError: ``<file>: field <dotted.path>: not a finite number (nan)``, ``…: out of range`` or
            ``…: not Unicode text``.
    """
    stack: list[tuple[str, Any]] = [(where, obj)]
    while stack:
        at, o = stack.pop()
        if isinstance(o, float) and not math.isfinite(o):
            raise fail(path, f"field {at or '(top level)'}", f"not a finite number ({o})")
        if isinstance(o, int) and not isinstance(o, bool) and abs(o) > MAX_IMPORTED_INT:
            raise fail(path, f"field {at or '(top level)'}", f"integer of {o.bit_length()} bits is out of range "
                                                          "(a number of 64 bits at most)")
        if isinstance(o, str) and not is_unicode_text(o):
            raise fail(path, f"field {at or '(top level)'}", "not Unicode text (a lone surrogate such as \\ud800)")
        if isinstance(o, dict):
            for k in o:
                if isinstance(k, str) and not is_unicode_text(k):
                    raise fail(path, f"field {at or '(top level)'}", "a key that is not Unicode text (a lone surrogate)")
            stack.extend((f"{at}.{k}" if at else str(k), v) for k, v in o.items())
        elif isinstance(o, list):
            stack.extend((f"{at}[{i}]", v) for i, v in enumerate(o))


def load_json(path: str | Path, text: str, what: str) -> Any:
    """``text`` parsed as one JSON document and checked finite; ``what`` names the format in errors.

    Raises:
        BatchmarkError: not JSON (names the line), or a non-finite number (names the field).
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            raise fail(path, exc.lineno, f"holds more than one JSON document (one per line?); {what} is one "
                                         "document") from None
        raise fail(path, exc.lineno, f"corrupt JSON ({exc.msg} at column {exc.colno}): cut short, or not {what}") from None
    except RecursionError:
        raise fail(path, None, f"not {what} (JSON nested too deeply)") from None
    except ValueError as exc:  # an integer of more than 4,300 digits (Python's int_max_str_digits)
        raise fail(path, None, f"not {what} ({' '.join(str(exc).split())[:120]})") from None
    check_finite(path, doc)
    return doc


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


#: Foreign files that no importer reads, each with what to import instead (issue 23: refused naming the wrong thing).
_LLAMA_BENCH = re.compile(r'"n_prompt"\s*:.*?"n_gen"\s*:|"n_gen"\s*:.*?"n_prompt"\s*:', re.S)
_CSV_EXPORT = re.compile(r'^\ufeff?"?(Metric|Statistic)"?\s*,\s*"?avg"?\s*,', re.I)


def foreign_file(path: str | Path, head: str, fmt: str) -> BatchmarkError | None:
    """A one-line refusal when the start of a file (``head``, its first few KiB) is of a kind no importer reads, else None.

    - llama-bench's ``-o json`` / ``-o jsonl`` (tests with ``n_prompt``, ``n_gen``, ``avg_ts``): one sequence at a
      time, no batching; llama-batched-bench measures batches;
    - an AIPerf or GenAI-Perf CSV export (first cell ``Metric`` / ``Statistic``, then ``avg``): the aiperf
      importer reads the JSON export written beside it.
    """
    text = head.lstrip()
    if text[:1] in ("[", "{") and _LLAMA_BENCH.search(text) and '"avg_ts"' in text:
        return fail(path, None, "llama-bench output (-o json/jsonl: n_prompt, n_gen, avg_ts per test), which measures "
                                "one sequence at a time; batchmark imports llama-batched-bench's batches "
                                "('batchmark import llama-batched-bench' reads llama-batched-bench's table or JSONL)")
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


#: Largest figure an imported point may hold (tokens, tokens/s, requests, seconds): 10^15.  No
#: benchmark measures more; a larger one is a corrupt or hostile file (issue 18, item 11).
MAX_IMPORTED_VALUE = 1e15
#: Count and length fields of a point: whole numbers ≥ 0 (``concurrency`` ≥ 1 where given).
_COUNT_FIELDS = ("input_len", "output_len", "concurrency", "repeats", "completed", "failed")
#: Figures of a point that are ≥ 0: throughputs (tokens/s), rates (requests/s), times (s).
_FIGURE_FIELDS = ("output_throughput_tok_s", "per_user_tok_s", "prefill_throughput_tok_s", "step_time_s",
                  "rate_rps", "achieved_rate_rps", "send_rate_rps", "burstiness", "failure_rate")
_DISTRIBUTION_FIELDS = ("ttft_s", "ttft_with_queue_s", "tpot_s", "itl_s", "e2el_s", "time_to_first_content_s")


def _out_of_range(v: Any, whole: bool) -> str | None:
    """Why ``v`` is not an imported figure (None when it is one): not a number, not finite, negative, too large."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{v!r} is not a number"
    if isinstance(v, float) and not math.isfinite(v):
        return f"{v} is not a finite number"
    if v < 0:
        return f"{v:g} is negative"
    if v > MAX_IMPORTED_VALUE:
        return f"{v:.3g} is out of range (above {MAX_IMPORTED_VALUE:g})"
    if whole and isinstance(v, float) and not v.is_integer():
        return f"{v:g} is not a whole number"
    return None


def check_ranges(path: str | Path, summaries: list[PointSummary]) -> None:
    """Every number of every imported point range-checked at the boundary (issue 18, item 11).

    Counts and lengths are whole numbers ≥ 0 (concurrency ≥ 1 where given), throughputs, rates,
    times and every latency percentile finite, ≥ 0 and at most :data:`MAX_IMPORTED_VALUE`; the
    samples kept for diffs too.  A negative TTFT or ``failed: -100`` was once stored and shown
    as "peak −52.8 tok/s" and "-100 of -68 requests failed (147 %)".

    Raises:
        BatchmarkError: one line naming the file, the point and the field.
    """
    for s in summaries:
        for what, name in (("model", s.model), ("engine", s.engine)):
            if not is_unicode_text(name):
                raise fail(path, f"{what} name {name!r}", "not Unicode text (a lone surrogate)")
        where = f"point ({s.model}, {s.key.label()})"
        checks: list[tuple[str, Any, bool]] = [(f, getattr(s, f), True) for f in _COUNT_FIELDS]
        for f in _DISTRIBUTION_FIELDS:  # before the figures derived from them (per-user = 1 / median TPOT)
            checks += [(f"{f}.{k}", v, False) for k, v in (getattr(s, f, None) or {}).items()]
        checks += [(f, getattr(s, f, None), False) for f in _FIGURE_FIELDS]
        for name, values in (s.samples or {}).items():
            checks += [(f"samples.{name}[{i}]", v, False) for i, v in enumerate(values)]
        for name, value, whole in checks:
            if value is None:
                continue
            why = _out_of_range(value, whole)
            if why is None and name == "concurrency" and value < 1:
                why = f"{value} is not a positive concurrency"
            if why is not None:
                raise fail(path, f"{where} field {name}", why)


def check_completion(path: str | Path, where: str, completed: int, failed: int, concurrency: int,
                     max_failure_rate: float = REFUSAL_FAILURE_RATE, total: int | None = None) -> None:
    """Refuse a point that did not measure its concurrency: too few completed requests, or too many failures.

    A closed-loop point at concurrency c measures c requests in flight only when at least c
    requests completed; failure rate = failed / (completed + failed), or (total − completed) /
    total where the source states a total.  The message names the counts.

    Raises:
        BatchmarkError: completed < concurrency, or failure rate > ``max_failure_rate``.
    """
    for name, n in (("completed", completed), ("failed", failed), ("total", total)):
        if n is not None and n < 0:
            raise fail(path, where, f"{name} count {n} is negative")
    if total is not None and total > completed + failed:
        failed = total - completed
    attempted = completed + failed
    rate = failed / attempted if attempted else 1.0
    if completed < 1:
        raise fail(path, where, f"no request completed ({failed} failed); nothing was measured")
    if completed < concurrency:
        raise fail(path, where, f"only {completed} request(s) completed ({failed} failed) at concurrency {concurrency}; "
                                "a closed-loop point needs at least as many completed requests as its concurrency")
    if rate > max_failure_rate:
        raise fail(path, where, f"{failed} of {attempted} requests failed ({rate:.0%}, above the "
                                f"{max_failure_rate:.0%} limit); not a measurement of the server "
                                "(--max-failure-rate raises the limit)")


def refuse_open_loop(path: str | Path, where: str, rate: float, cap: int | None) -> BatchmarkError:
    """The one-line refusal of an open-loop (rate-limited) result."""
    capped = f" capped at {cap} in flight" if cap else ""
    return fail(path, where, f"open loop at {rate:g} req/s{capped}; its throughput is set by the request rate, not "
                             "the server; batchmark imports closed-loop runs (a fixed number of requests in flight)")


@dataclass
class ModelInfo:
    """A model as a source names it, with what the source says about its weights.

    Attributes:
        raw_name: the name in the file (``ggml-org/gpt-oss-20b-GGUF``).
        quant: weight format the source states (``q8_0``, ``mxfp4``), or None.
        file_bytes: size of the weight file the source states (bytes), or None.
        params: parameter count the source states (llama.cpp's ``20.91 B``), or None.
        arch: architecture the source states (llama.cpp's ``general.architecture``), or None.
    """

    raw_name: str
    quant: str | None = None
    file_bytes: int | None = None
    params: int | None = None
    arch: str | None = None


@dataclass
class ImportResult:
    """What an importer read: points, models, and the provenance of the source."""

    format: str
    tool: str
    tool_version: str | None
    files: list[str]
    summaries: list[PointSummary]
    models: dict[str, ModelInfo] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


def model_name_as_given(raw: str) -> str:
    """The name an imported run keeps and shows: the source's own, outer whitespace trimmed.

    Never cut at a ``/`` nor stripped of an org or a quantisation suffix (issue 9: names are
    shown as given; ``<script>…</script>`` once showed as ``script>``, ``org/Model`` lost its
    org).  Only card matching reads a shortened form (:func:`canonical_model_name`,
    :func:`model_key`); file names derived from it go through :func:`pipeline.pointfiles.file_stem`.
    """
    return raw.strip() or raw


_QUANT_SUFFIX = re.compile(r"[-_.](q\d_[0-9a-z_]+|mxfp4|nvfp4|fp8|bf16|f16|f32|gguf)$", re.IGNORECASE)


def canonical_model_name(raw: str) -> str:
    """A model name without org prefix, ``-GGUF`` or a quantisation suffix.

    ``ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF`` → ``Qwen2.5-Coder-7B``;
    ``ggml-org/gpt-oss-20b-GGUF`` → ``gpt-oss-20b``; ``openai/gpt-oss-120b`` → ``gpt-oss-120b``.
    """
    name = raw.strip().rstrip("/").split("/")[-1]
    name = re.sub(r"\.gguf$", "", name, flags=re.IGNORECASE)
    prev = None
    while prev != name:
        prev = name
        name = _QUANT_SUFFIX.sub("", name)
    return name or raw.strip()


def quant_from_text(text: str) -> str | None:
    """The weight format named in a free-text model description (``qwen2 7B Q8_0`` → ``q8_0``; llama.cpp's
    ``file type = Q4_K - Medium`` and ``Q4_K_M`` → ``q4_k_m``)."""
    if re.search(r"\bQ4_K\s*-\s*Medium\b", text, re.IGNORECASE):
        return "q4_k_m"
    for token in re.findall(r"[A-Za-z0-9_]+", text):
        t = token.lower()
        if t in ("q8_0", "q4_0", "q4_k_m", "mxfp4", "nvfp4", "fp8", "bf16", "f16"):
            return normalize_quant(t)
    return None


def gib_from_text(text: str) -> int | None:
    """Bytes of the first ``<x> GiB`` in ``text`` (x × 2^30), or None."""
    m = re.search(r"(\d+(?:\.\d+)?)\s*GiB", text)
    return int(round(float(m.group(1)) * 2**30)) if m else None


#: Words of a model name that name a variant of the same architecture (tuning, packaging, org), not another model.
VARIANT_WORDS = frozenset({
    "instruct", "it", "chat", "base", "pt", "coder", "qat", "gguf", "hf", "meta", "moe", "dense", "thinking",
    "latest", "preview", "awq", "gptq", "bnb", "4bit", "8bit", "dynamic", "unsloth", "ud", "w4a16", "w8a8", "int4",
    "int8", "fp8", "bf16", "f16", "fp16", "f32", "fp32", "mxfp4", "nvfp4", "mlx"})
_QUANT_TOKEN = re.compile(r"^(i?q\d(_[a-z0-9]+)*|w\d+a\d+|int\d|\d+bit|[0-9.]+bpw)$")


def model_key(name: str) -> tuple[str, ...]:
    """The architecture-identifying words of a model name: family, version, size (and MoE active size).

    ``meta-llama/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf``, ``llama3.1:8b-instruct-q4_K_M`` and
    ``Llama-3.1-8B`` all give ``("llama", "3.1", "8b")``; ``Qwen3-30B-A3B-Instruct-2507`` gives
    ``("qwen", "3", "30b", "a3b")``.  Dropped: the org prefix, a ``.gguf`` extension,
    :data:`VARIANT_WORDS`, quantisation tokens (``Q4_K_M``, ``IQ3_XS``, ``W4A16``), release
    dates (``2507``) and version tags (``v0.3``).  Ollama's ``name:tag`` reads as ``name-tag``.
    """
    s = re.sub(r"\.gguf$", "", name.strip().lower().rstrip("/").split("/")[-1])
    out: list[str] = []
    for tok in re.split(r"[-\s:]+", s):
        if not tok or tok in VARIANT_WORDS or _QUANT_TOKEN.match(tok) or re.fullmatch(r"\d{4}|v\d+(\.\d+)*", tok):
            continue
        for part in tok.split("_"):
            if not part or part in VARIANT_WORDS or _QUANT_TOKEN.match(part):
                continue
            m = re.fullmatch(r"([a-z]{3,})(\d+(?:\.\d+)?)", part)
            out.extend([m.group(1), m.group(2)] if m else [part])
    return tuple(out)


def quant_of_name(raw: str) -> str | None:
    """A quantisation token a model name carries (``q4_k_m``, ``awq``, ``fp8``), lower case, or None."""
    s = re.sub(r"\.gguf$", "", raw.strip().lower().split("/")[-1])
    for tok in reversed(re.split(r"[-\s:.]+", s)):
        if _QUANT_TOKEN.match(tok) or tok in ("awq", "gptq", "fp8", "bf16", "f16", "fp16", "mxfp4", "nvfp4"):
            return tok
    return None


@dataclass
class CardMatch:
    """Which card an imported model was given, and how (recorded in ``run.json``), or why none."""

    card: ModelCard | None
    how: str


def _find_variant(raw: str, name: str) -> tuple[Path, dict[str, Any]] | None:
    """The one card file whose name or alias has the same :func:`model_key` as ``raw`` (None when none or several)."""
    from pipeline.modelcards import _models_dir, _read_card_file

    want = model_key(raw)
    if len(want) < 2:
        return None
    hits = []
    for path in sorted(_models_dir().glob("*.yaml")):
        data = _read_card_file(path)
        names = [data.get("name", path.stem), path.stem, *(data.get("aliases") or [])]
        if any(model_key(str(n)) == want for n in names):
            hits.append((path, data))
    return hits[0] if len(hits) == 1 else None


def match_card(name: str, info: ModelInfo | None) -> CardMatch:
    """The card of an imported model in the format the source states (or its name carries), and how it was found.

    Looked up, in order: a card file of ``data/models/`` by ``name`` or the name as the source
    wrote it (name or alias); a card file whose name has the same architecture words
    (:func:`model_key`: ``…-Instruct``, ``…-Coder-…``, ``-it-qat``, ``-GGUF``, ``Q4_K_M``,
    ``org/``, Ollama ``name:tag`` are variants of one card); a ``config.json`` in the local
    Hugging Face cache.  What the file itself says is checked against the card: a stated
    parameter count more than 15 % off the card's means another architecture (no card).  A
    stated file size replaces the counted bytes (:func:`card_with_file_size`); ``mxfp4`` marks
    MXFP4 experts (the gpt-oss GGUFs), any other known format applies to every weight; a format
    batchmark has no bits-per-weight for (``q5_k_m``, ``iq3_xs``), without a file size, leaves the bytes
    unknown (no card).  Without a card the model's analysis fields (kind, ceiling, MBU) stay null.
    """
    from pipeline.modelcards import QUANT_BITS

    raw = info.raw_name if info else name
    quant = (info.quant or quant_from_text(raw)) if info else quant_from_text(raw)
    named = quant_of_name(raw)
    if quant is None and named is not None and named not in ("fp8", "bf16", "f16", "fp16", "mxfp4", "nvfp4") \
            and not (info and info.file_bytes):
        try:
            quant = normalize_quant(named)
        except BatchmarkError:
            return CardMatch(None, f"weight format {named} of {raw!r}: bits per weight unknown and no file size "
                                   "stated, so the bytes read per step are unknown")
    elif quant is None and named in ("fp8", "mxfp4", "nvfp4"):
        quant = named
    if quant is not None and normalize_quant(quant) not in QUANT_BITS:  # pragma: no cover - normalize_quant raises
        return CardMatch(None, f"weight format {quant} unknown")
    weights, experts = ("bf16", "mxfp4") if quant == "mxfp4" else (quant, None)
    how = None
    found = None
    for cand in dict.fromkeys((canonical_model_name(name), name, raw)):  # the shortened name finds a card first
        found = find_card_file(cand)
        if found is not None:
            how = f"card file {found[0].name} (name or alias {cand!r})"
            break
    if found is None:
        found = _find_variant(raw, name)
        if found is not None:
            how = f"card file {found[0].name}: {raw!r} is a variant of {found[1].get('name', found[0].stem)!r} " \
                  f"(same architecture words {'-'.join(model_key(raw))})"
    if found is not None:
        card = load_card(str(found[1].get("name", found[0].stem)), quant=weights, expert_quant=experts, card_name=name)
    else:
        cfg = cached_config(raw)
        if cfg is None:
            return CardMatch(None, f"no card in data/models/ matches {raw!r} (architecture words "
                                   f"{'-'.join(model_key(raw)) or 'none'}) and no config.json in the Hugging Face cache")
        card = card_from_config_file(cfg, name=name, quant=weights or "bf16", expert_quant=experts)
        how = f"config.json of {raw} in the Hugging Face cache"
    if info and info.params and abs(card.total_params - info.params) > 0.15 * info.params:
        return CardMatch(None, f"{how} has {card.total_params / 1e9:.2f} B params but the source states "
                               f"{info.params / 1e9:.2f} B: another architecture, no card used")
    if info and info.file_bytes:
        card = card_with_file_size(card, info.file_bytes, expert_quant=experts)
        how += f"; bytes from the stated file size ({info.file_bytes} bytes)"
    elif weights:
        how += f"; weights in {weights}" + (f", experts in {experts}" if experts else "")
    return CardMatch(card, how)


def card_for(name: str, info: ModelInfo | None) -> ModelCard | None:
    """The card :func:`match_card` finds, or None."""
    return match_card(name, info).card


def summary(model: str, engine: str, input_len: int, output_len: int, concurrency: int | None, **kw: Any) -> PointSummary:
    """A :class:`PointSummary` with every field the source does not give set to None.

    ``concurrency`` is the closed loop's N, or an open-loop point's cap (None when uncapped; pass
    ``load`` and ``rate_rps`` then, and ``completed``).
    """
    base: dict[str, Any] = dict(
        repeats=1, completed=concurrency or 0, failed=0, output_throughput_tok_s=None, per_user_tok_s=None,
        ttft_s=None, ttft_with_queue_s=None, tpot_s=None, itl_s=None, e2el_s=None,
        prefill_throughput_tok_s=None, step_time_s=None)
    base.update(kw)
    out = PointSummary(model=model, engine=engine, input_len=int(input_len), output_len=int(output_len),
                       concurrency=int(concurrency) if concurrency is not None else None, **base)
    out.key  # noqa: B018  (a closed point without a concurrency, an open one without a rate: a bug here)
    if out.output_throughput_window is None:  # the static-batch importers say "decode_phase" themselves
        out.output_throughput_window = "send_to_completion" if out.output_throughput_tok_s is not None else None
    return out


def check_unique(path: str | Path, summaries: list[PointSummary]) -> None:
    """Refuse two rows for the same point (its :class:`~pipeline.records.PointKey`)."""
    seen: set[PointKey] = set()
    for s in summaries:
        if s.key in seen:
            raise fail(path, None, f"two results for the same point ({s.model}, {s.engine}, in {s.input_len}, "
                                   f"out {s.output_len}, {s.key.label()})")
        seen.add(s.key)


def write_imported_run(result: ImportResult, hardware: str, run_id: str | None = None,
                       runs_dir: Path | None = None) -> Path:
    """Store an import as a complete run under ``runs_dir/<run_id>/`` atomically; return its folder.

    Writes ``run.json`` (``source: imported:<format>``, the tool, its version, the source
    files, the hardware profile, the engine(s) and the import command; ``config`` and
    ``probe`` are null: nothing was configured or probed here), ``models/<model>.json``, ``summaries.json`` and
    ``analysis.json`` into a temporary sibling folder, which the store publishes in one rename
    (:func:`pipeline.runs.assembling`; ``run.json`` built by :func:`pipeline.runs.run_json`).

    Raises:
        BatchmarkError: unknown hardware profile, a run of that id exists, nothing to import.
    """
    from pipeline import runs
    from pipeline.hardware import load_profile

    hw = load_profile(hardware, field="--hardware")
    if not result.summaries:
        raise BatchmarkError(f"{', '.join(result.files)}: no points found")
    runs_dir = runs_dir or paths.runs_dir()
    runs.clean_stale_tmp(runs_dir)  # temporary folders of imports killed mid-way (kill -9)
    runs.clean_stale_claims(runs_dir)  # and the empty run folders they had claimed
    # the empty run folder is the claim (mkdir is atomic); the store builds the run beside it and renames it over it,
    # holding the run's lock, so that a claim left by a killed import is known stale (runs.is_stale_claim)
    final = runs.claim_run_dir(runs_dir, runs.check_run_id(run_id) if run_id else None, host=f"{hw.name}-import")
    with runs.lock_run(final):
        return _build_imported_run(result, hw, final, runs_dir)


def _build_imported_run(result: ImportResult, hw: Any, final: Path, runs_dir: Path) -> Path:
    """Build the run claimed as ``final`` in a temporary sibling folder and rename it over the claim (lock held)."""
    from pipeline import runs

    run_id = final.name
    with runs.assembling(final, release_claim=True) as tmp:
        cards: dict[str, ModelCard] = {}
        matches: dict[str, str] = {}
        unknown: dict[str, str] = {}
        for name in sorted({s.model for s in result.summaries}):
            found = match_card(name, result.models.get(name))
            if found.card is not None:
                cards[name] = found.card
                matches[name] = found.how
            else:
                unknown[name] = found.how
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        engines = sorted({s.engine for s in result.summaries})
        tool = f"{result.tool} {result.tool_version}" if result.tool_version else result.tool
        # files relative to the repository, other machine folders replaced (pipeline.scrub): runs are published
        files = [scrub.relative_path(str(Path(f).resolve())) for f in result.files]
        command = f"batchmark import {result.format} {' '.join(files)} --hardware {hw.name} --run-id {run_id}"
        runs.atomic_write_json(tmp / "run.json", runs.run_json(run_id, "complete", {
            "source": f"imported:{result.format}", "source_tool": result.tool,
            "source_version": result.tool_version,
            "source_files": files,
            "source_details": result.details,
            "models_as_named": {k: v.raw_name for k, v in result.models.items()},
            "models_without_card": sorted({s.model for s in result.summaries} - set(cards)),
            "model_cards_used": matches,
            "models_unknown": {k: f"{v}; kind, ceiling, roofline and MBU are null" for k, v in unknown.items()},
            "hardware": hw.model_dump(mode="json"), "probe": None, "config": None,
            "engine": {"engine": f"{', '.join(engines)} (measured by {tool})"},
            "versions": {result.tool: result.tool_version, "batchmark": __version__},
            "stopped": {}, "command": command,
            "imported_at": now, "finished_at": now}))
        for name, card in cards.items():
            runs.atomic_write_json(runs.model_card_path(tmp, name), stamped(ModelCardFile, card.as_dict()))
        ordered = sorted(result.summaries, key=lambda s: s.key.sort_key())
        runs.atomic_write_json(tmp / "summaries.json", stamped(SummariesFile, {
            "run_id": run_id, "points": [s.as_dict() for s in ordered]}))
        # the analysis stage's file, from the summaries in memory (written once, not read back: issue 9 "Scale")
        analysis = analysis_of(tmp, runs.read_run_json(tmp), ordered)
        runs.atomic_write_json(tmp / "analysis.json", stamped(AnalysisFile, {"run_id": run_id, **analysis}))
    return final
