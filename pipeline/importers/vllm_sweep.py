"""``vllm bench sweep serve``'s server combinations (``--serve-params``) → the variants of one imported run.

Source followed: vLLM ``vllm/benchmarks/sweep/serve.py`` and ``param_sweep.py`` (vllm-project/vllm, read
2026-12-02).  The sweep starts one server per ``--serve-params`` combination (in the file's order) and, on it, runs
every ``--bench-params`` combination ``--num-runs`` times.  Each (server, bench) combination has a folder
``sanitize_filename("-".join(["SERVE-", serve.name, "BENCH-", bench.name]))`` — ``SERVE--max_num_seqs=2-BENCH--
max_concurrency=4``; the ``SERVE-`` part is absent without ``--serve-params``, the ``BENCH-`` part without
``--bench-params`` — where ``ParameterSweepItem.name`` is the combination's ``_benchmark_name`` (the params file as a
dict keyed by name) or ``as_text(sep="-")``, its ``key=value`` pairs joined by ``-``, and ``sanitize_filename``
replaces ``/`` by ``_`` and ``..`` by ``__``.  Each run's ``run=N.json`` is the ``vllm bench serve`` result with
``run_number`` and both combinations' parameters written into it (``_update_run_data``: ``run_data.update(
serve_overrides)`` then ``update(bench_overrides)``).  A ``--show-stdout`` log prints ``Server overrides: {…}`` (the
combination's dict) when a server starts.

So here:

- a result's **server combination** is the ``SERVE-`` part of its folder's name (or its log section's ``Server
  overrides:``); results without one are of variant ``default``, as before;
- the **variant's name** is the combination's ``_benchmark_name`` as it is, else its parameters as ``key_value``
  joined by ``-`` (``max_num_seqs=2`` → ``max_num_seqs_2``; a credential's value spelled ``redacted``:
  ``api_key_redacted``): a name of letters, digits, ``. _ -`` (at most 64);
  anything else is refused naming the folder (name the combination in a dict-form ``--serve-params``);
- its **settings** are the combination's parameters: from a ``key=value`` folder name, each value as the run's JSON
  states it (and every run of the folder must state it so, or the folder is refused naming the file and field: a
  run of another server, or a repeat with other settings); from a named combination, the keys of the run that are
  neither a ``vllm bench serve`` result field (:data:`RESULT_KEYS`) nor a bench parameter the ``BENCH-`` part names,
  and that all the server's runs state alike (a named bench combination's parameters differ from one to the next; a
  bench parameter every bench combination sets alike cannot be told from the server's and stays in its settings);
- a server combination that failed to start (``--continue-on-error``: ``SERVE-<name>-failure.json`` in the
  experiment folder, ``error_type``, ``error``, ``serve_overrides``; ``run_combs``) measured nothing: it is no variant,
  and the run says so (``source_details.server_combinations_failed``, :func:`server_failure`);
- the **baseline** is the combination that ran first (the earliest ``date`` of its results; a log's first section),
  as vLLM runs the ``--serve-params`` list in order.
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path
from typing import Any

from pipeline.config.variants import NAME_PATTERN
from pipeline.core import scrub
from pipeline.core.credentials import is_secret_name
from pipeline.importers.parsing import fail

_SERVE, _BENCH = "SERVE--", "BENCH--"
_PAIR = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)=(.*)$", re.S)

#: Fields of a ``vllm bench serve --save-result`` result (``vllm/benchmarks/serve.py``'s result dict, its
#: ``--save-detailed`` lists, and what the sweep adds), never a server parameter; with the percentile fields
#: (``mean_*_ms``, ``median_*_ms``, ``std_*_ms``, ``p<q>_*_ms``) and speculative decoding's ``spec_decode_*`` matched by
#: :data:`_STAT`.  A ``--metadata`` key of ``vllm bench serve`` is none of them and would count as a setting.
RESULT_KEYS = frozenset((
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate",
    "burstiness", "max_concurrency", "duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
    "request_throughput", "request_goodput", "output_throughput", "total_token_throughput", "latencies",
    "queue_times", "max_output_tokens_per_s", "max_concurrent_requests", "rtfx", "input_lens", "output_lens",
    "ttfts", "itls", "generated_texts", "errors", "start_times", "run_number", "_benchmark_name", "vllm_version",
    "version", "ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps", "goodput",
    "total_input", "total_output", "total_output_retokenized", "benchmark_duration"))  # SGLang's newer names
_STAT = re.compile(r"^((mean|median|std|p\d+(\.\d+)?)_\w+_ms|spec_decode_\w+)$")


def sanitize(text: str) -> str:
    """vLLM's ``sanitize_filename`` (``vllm/benchmarks/sweep/utils.py``): ``/`` → ``_``, ``..`` → ``__``."""
    return text.replace("/", "_").replace("..", "__")


#: ``vllm bench sweep serve_sla``'s iteration folder (``vllm/benchmarks/sweep/serve_sla.py`` ``_get_sla_iter_path``):
#: ``<variable>=<value>`` inside the combination folder, for the SLA variable it searches.
_SLA_ITERATION = re.compile(r"^(request_rate|max_concurrency)=\d+$")


def is_sla_file(path: str | Path) -> bool:
    """Whether a file is ``serve_sla``'s ``SLA--<criteria>.json``: the list of every run of one search, which are also
    its iterations' ``<variable>=<value>/run=N.json`` (``serve_sla.py`` ``search_sla``)."""
    name = Path(path).name
    return name.startswith("SLA--") and name.endswith(".json")


def combination_folder(path: str | Path) -> str:
    """The name of the (server, bench) combination folder a result lies in: its folder, or the one above a
    ``serve_sla`` iteration folder (``SERVE--…-BENCH--…/request_rate=8/run=0.json``) or an ``SLA--…`` file's."""
    parent = Path(path).resolve().parent
    return parent.parent.name if _SLA_ITERATION.match(parent.name) else parent.name


def folder_parts(name: str) -> tuple[str | None, str | None]:
    """(server combination's name, bench combination's name) of a combination folder's name; None where absent."""
    if name.startswith(_SERVE):
        serve, sep, bench = name[len(_SERVE):].partition("-" + _BENCH)
        return serve, (bench if sep else None)
    if name.startswith(_BENCH):
        return None, name[len(_BENCH):]
    return None, None


def pairs(name: str) -> list[tuple[str, str]] | None:
    """The ``key=value`` pairs of a combination's ``as_text(sep="-")`` name, in order, or None for a named one
    (``_benchmark_name``).  A ``-`` not followed by ``key=`` belongs to the value before it (``fp8-e4m3``)."""
    pieces = name.split("-")
    if not pieces or not _PAIR.match(pieces[0]):
        return None
    out: list[list[str]] = []
    for piece in pieces:
        m = _PAIR.match(piece)
        if m:
            out.append([m.group(1), m.group(2)])
        else:
            out[-1][1] += "-" + piece
    return [(k, v) for k, v in out]


def guided_pairs(name: str, d: dict[str, Any]) -> list[tuple[str, str]] | None:
    """The ``key=value`` pairs of a combination's name read with the keys and values its run ``d`` states, so that a
    key with ``-`` (``max-num-seqs=2``, which vLLM's CLI takes too) or a value with ``-`` splits right; None when the
    name is not made of them."""
    if not name:
        return []
    for key in sorted((k for k in d if isinstance(k, str)), key=len, reverse=True):
        head = f"{key}={_text(d[key])}"
        if name == head or name.startswith(head + "-"):
            rest = guided_pairs(name[len(head) + 1:], d)
            if rest is not None:
                return [(key, _text(d[key])), *rest]
    return None


def variant_name(combination: str, where: str | Path, found: list[tuple[str, str]] | None = None) -> str:
    """The variant a server combination is named as (module docstring); ``found``: its ``key=value`` pairs, else
    read from the name (:func:`pairs`).

    Raises:
        BatchmarkError: no valid variant name can be built (naming ``where``, the folder or log section).
    """
    found = found if found is not None else pairs(combination)
    # a credential's value (``api_key=K``) is spelled ``redacted``: a key is no name, and base64's + = refuse one
    name = "-".join(f"{k}_{'redacted' if is_secret_name(k) else v}" for k, v in found) if found else combination
    if not re.match(NAME_PATTERN, name) or len(name) > 64:
        keys = [v for k, v in found or () if is_secret_name(k)]  # the refusal names no key either
        raise fail(scrub.redact(str(where), keys), "server combination",
                   f"{scrub.redact(combination, keys)!r} gives no variant name ({name!r}: letters, digits, "
                                                ". _ - only, at most 64 characters); name the combination in "
                                                "--serve-params (a dict keyed by name, its _benchmark_name)")
    return name


def _text(value: Any) -> str:
    """A parameter as its combination's name writes it (``f"{k}={v}"``, then ``sanitize_filename``)."""
    return sanitize(str(value))


def check_pairs(path: Path, d: dict[str, Any], found: list[tuple[str, str]], folder: str) -> dict[str, Any]:
    """The parameters a folder's name sets, as the run's JSON ``d`` states them (vLLM writes both combinations'
    parameters into each run).

    Raises:
        BatchmarkError: a run that lacks one or states another value (naming the file and the field).
    """
    out: dict[str, Any] = {}
    for key, text in found:
        if key not in d:
            raise fail(path, f"field {key}", f"missing, but its folder {folder} sets {key}={text} (vllm bench sweep "
                                             "writes each combination's parameters into its runs): a mixed-up folder?")
        if _text(d[key]) != text:
            raise fail(path, f"field {key}", f"{d[key]!r}, but its folder {folder} says {text}: a run of another "
                                             "combination (a repeat with other settings) in this folder")
        out[key] = d[key]
    return out


def json_settings(path: Path, d: dict[str, Any], folder: str) -> tuple[str, dict[str, Any], Any] | None:
    """(server combination's name, its settings, its ``key=value`` pairs or None when named) of a ``run=N.json``
    result ``d`` in ``folder``; None when the folder names no server combination (module docstring).

    Raises:
        BatchmarkError: a run whose parameters disagree with its folder's name (:func:`check_pairs`).
    """
    serve, bench = folder_parts(folder)
    bench_pairs = (guided_pairs(bench, d) or pairs(bench)) if bench else None
    bench_keys = set(check_pairs(path, d, bench_pairs, folder)) if bench_pairs else set()
    if serve is None:
        return None
    found = guided_pairs(serve, d) or pairs(serve)
    if found is not None:
        return serve, check_pairs(path, d, found, folder), found
    return serve, {k: v for k, v in d.items() if k not in RESULT_KEYS and not _STAT.match(k) and k not in bench_keys}, None


def _plain(value: Any, depth: int = 0) -> str | None:
    """Why a parameter value is not plain JSON data (None when it is): a string, a whole number, a finite float, a
    bool, None, or a list or dict (string keys) of those; Python's sets, bytes and complex numbers, an infinite or
    NaN float (``1e999``) are none."""
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value!r} is not a finite number"
    if depth < 8 and isinstance(value, (list, tuple)):
        return next((why for why in (_plain(v, depth + 1) for v in value) if why), None)
    if depth < 8 and isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            return "a key that is not a string"
        return next((why for why in (_plain(v, depth + 1) for v in value.values()) if why), None)
    return f"a Python {type(value).__name__} ({str(value)[:40]!r}) is not a parameter value"


def overrides(path: str | Path, line: int | None, text: str) -> dict[str, Any]:
    """A log's ``Server overrides: {…}`` text (the combination as Python prints a dict) as a dict of plain values,
    read with :func:`ast.literal_eval` (no code runs).

    Raises:
        BatchmarkError: a text that is no dict of string keys, or a value that is not plain data (:func:`_plain`),
            naming the input file and its line.
    """
    try:
        comb = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        comb = None
    if not isinstance(comb, dict) or not all(isinstance(k, str) for k in comb):
        raise fail(path, line, f"Server overrides: {text[:80]!r} is not a parameter combination (a dict)")
    why = _plain(comb)
    if why is not None:
        raise fail(path, line, f"Server overrides: {why}")
    return comb


def log_settings(path: Path, text: str, line: int | None = None) -> tuple[str, dict[str, Any], Any] | None:
    """(server combination's name, its settings, its ``key=value`` pairs or None when named) of a log section's
    ``Server overrides: {…}`` text (:func:`overrides`); None for ``{}``, the sweep's one server without
    ``--serve-params``.

    Raises:
        BatchmarkError: :func:`overrides`' refusals (naming the file and ``line``).
    """
    comb = overrides(path, line, text)
    if not comb:
        return None
    settings = {k: v for k, v in comb.items() if k != "_benchmark_name"}
    if "_benchmark_name" in comb:
        return sanitize(str(comb["_benchmark_name"])), settings, None
    found = [(k, _text(v)) for k, v in settings.items()]
    return sanitize("-".join(f"{k}={v}" for k, v in settings.items())), settings, found


def variants_table(combos: list[tuple[str, dict[str, Any], Any, Any, str]]) -> tuple[dict[str, str],
                                                                                    list[dict[str, Any]]]:
    """Every server combination's variant and the run's ``variants`` list.

    ``combos``: (combination name, settings, its ``key=value`` pairs or None, order key, where: a file) per result, in
    any order; the combination whose
    smallest order key is least is the baseline.  Returns ({combination: variant name}, ``[{name, baseline,
    settings}]`` baseline first).

    A combination's settings are what all its results state alike (a named combination's runs also carry each bench
    combination's parameters, left out so); the runs of one folder must state the same.

    Raises:
        BatchmarkError: one folder's runs with different settings, or two combinations of one variant name (naming
            the file and the field).
    """
    seen: dict[str, tuple[dict[str, Any], Any, str]] = {}
    folders: dict[tuple[str, Path], tuple[dict[str, Any], str]] = {}  # (combination, folder) → its first run's settings
    found: dict[str, Any] = {}  # combination → its key=value pairs (None: named)
    for comb, settings, comb_pairs, order, where in combos:
        found.setdefault(comb, comb_pairs)
        first, at = folders.setdefault((comb, Path(where).parent), (settings, where))
        if settings != first:  # one folder's runs: one server, one bench combination
            field = next((k for k in sorted(set(settings) | set(first)) if settings.get(k) != first.get(k)), "?")
            raise fail(where, f"field {field}", f"{settings.get(field)!r}, but {at} of the same server combination "
                                                f"({comb}) says {first.get(field)!r}: a repeat with other settings")
        if comb not in seen:
            seen[comb] = (settings, order, where)
            continue
        kept, low, at = seen[comb]  # across bench combinations: what every one of them states alike
        seen[comb] = ({k: v for k, v in kept.items() if k in settings and settings[k] == v}, min(low, order), at)
    names: dict[str, str] = {}
    named: dict[str, str] = {}  # variant name → its combination (one look-up per combination: linear)
    for comb, (_, _, where) in seen.items():
        name = variant_name(comb, Path(where).parent if Path(where).suffix == ".json" else where, found[comb])
        other = named.setdefault(name, comb)
        if other != comb:
            raise fail(where, "server combination", f"{comb!r} and {other!r} are both named variant {name!r}; name "
                                                    "the combinations in --serve-params (a dict keyed by name)")
        names[comb] = name
    ordered = sorted(seen, key=lambda c: seen[c][1])
    table = [{"name": names[c], "baseline": i == 0, "settings": seen[c][0]} for i, c in enumerate(ordered)]
    return names, table


def server_failure(path: Path, text: str) -> dict[str, Any] | None:
    """The record of a server combination that failed (``SERVE-<name>-failure.json``: ``error_type``, ``error``,
    ``serve_overrides``, no result) as ``{file, combination, error_type}``; None for any other file."""
    name = Path(path).name
    if not (name.startswith("SERVE-") and name.endswith("-failure.json")):
        return None
    try:
        d = json.loads(text)
    except ValueError:
        return None
    if not (isinstance(d, dict) and "error_type" in d and isinstance(d.get("serve_overrides"), dict)
            and "completed" not in d):
        return None
    return {"file": name, "combination": {str(k): v for k, v in d["serve_overrides"].items()},
            "error_type": str(d["error_type"])[:80]}
