"""Importer for ``vllm bench serve``: its ``--save-result`` JSON (one file per concurrency, or
one object per line with ``--append-result``), ``vllm bench sweep`` folders, or the printed block.

Which result files make which points is decided here; one result becomes a point in
:mod:`~pipeline.importers.vllm_result` (the keys read, closed and open loop, SGLang's results), a
printed log's blocks in :mod:`~pipeline.importers.vllm_block`.  Refused: a closed-loop point with
fewer completed requests than its concurrency, a failure rate above
:data:`~pipeline.importers.checks.REFUSAL_FAILURE_RATE`.  A JSON result names its model in ``model_id``.

Files people really have:

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
  read with its subfolders.  The sweep's log with ``--show-stdout`` holds each run's printed block
  after ``Run Number: N``: those blocks are repeats alike, the warm-up's left out
  (:mod:`~pipeline.importers.vllm_block`).  With ``--continue-on-error`` a run whose ``vllm bench
  serve`` failed leaves ``run=N.failure.json`` (``run_number``, ``error_type``, ``error``, the
  overrides; no result): it is no result, the point whose results are beside it keeps its other runs
  and is flagged (caveat ``sweep_runs_failed``: the number of such runs; its errors name each), and
  a record with no result beside it is refused, naming it (the real 0.32 record was refused
  as "field model_id: missing; pass --model");
- ``vllm bench sweep serve --serve-params`` folders (``SERVE--<server>-BENCH--<bench>/``): each server combination
  is a variant of the one run, named from the combination, the first run the baseline, its parameters the variant's
  settings (:mod:`~pipeline.importers.vllm_sweep`); the same for a log's ``Server overrides:`` sections;
- a ramp-up run (``ramp_up_strategy`` with ``ramp_up_start_rps`` → ``ramp_up_end_rps``) is open
  loop at a changing rate, whatever ``request_rate`` says: refused, naming it;
- a printed block without a concurrency or rate line: ``batchmark import --concurrency N`` or
  ``--rate R`` says what it omits.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pipeline.importers.base import ImportResult
from pipeline.importers.cardmatch import ModelInfo, model_name_as_given
from pipeline.importers.checks import REFUSAL_FAILURE_RATE, check_unique
from pipeline.importers.importoptions import ImportOptions
from pipeline.importers.parsing import fail, read_text, wrong_format
from pipeline.importers.repeats import configured_key, merge_repeats
from pipeline.importers.vllm_block import parse_block
from pipeline.importers.vllm_result import is_closed_loop_rate, is_sglang, point_from_result
from pipeline.importers.vllm_sweep import (combination_folder, is_sla_file, json_settings, log_settings, server_failure,
                                           variants_table)

FORMAT = "vllm-bench"
ENGINE = "vllm"


def run_number(d: Any) -> int | None:
    """``vllm bench sweep``'s ``run_number`` of a result (−1 = warm-up), None when absent."""
    v = d.get("run_number") if isinstance(d, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def is_sweep_failure(d: Any) -> bool:
    """Whether a JSON object is ``vllm bench sweep serve``'s record of a failed run (``run=N.failure.json``, written
    with ``--continue-on-error``: ``run_number``, ``error_type``, ``error``, ``serve_overrides``, ``bench_overrides``;
    ``vllm/benchmarks/sweep/serve.py``), not a result."""
    return (isinstance(d, dict) and run_number(d) is not None and "error_type" in d and "error" in d
            and "completed" not in d)


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


def parse_json(path: Path, text: str, options: ImportOptions, warmup_ok: bool = False,
               failures: list[tuple[Path, int, str]] | None = None) -> list[tuple[Any, str, str | None, int | None, Any]]:
    """A save-result file (one object), an ``--append-result`` file (one object per line) or a ``vllm bench sweep``
    ``summary.json`` (a list of results) → [(point, model as named, vLLM version, run_number, server combination)];
    the combination (name, settings, order) of a result in a ``SERVE-…`` folder, else None
    (:func:`pipeline.importers.vllm_sweep.json_settings`).

    Warm-up results (``run_number`` −1) are left out; a file of nothing else is refused unless ``warmup_ok``
    (then it gives []).  ``vllm bench sweep``'s records of a failed run (:func:`is_sweep_failure`) are appended to
    ``failures`` as (file, run number, ``error_type``) where it is given, else refused.  ``options``: the command
    line's model, engine (None: ``sglang`` for SGLang's results, else ``vllm``), failure limit (None: the default),
    and what a result that states none ran at (``--concurrency``, ``--rate``).

    Raises:
        BatchmarkError: a malformed result (named); a file of warm-up only.
    """
    model, engine, concurrency, rate = options.model, options.engine, options.concurrency, options.rate
    max_failure_rate = REFUSAL_FAILURE_RATE if options.max_failure_rate is None else options.max_failure_rate
    objs = _objects(path, text)
    if len(objs) == 1 and isinstance(objs[0][1], list):  # vllm bench sweep's summary.json
        items = objs[0][1]
        if not items or not all(isinstance(d, dict) and run_number(d) is not None for d in items):
            raise fail(path, None, "a JSON list, but not vllm bench sweep's summary.json (a list of results with run_number)")
        objs = [(objs[0][0], d) for d in items]
    out = []
    warmups = 0
    failed_runs = 0  # records of a failed run (vllm bench sweep's run=N.failure.json) in this file
    for line, d in objs:
        where = f"line {line}" if len(objs) > 1 else ""
        if not isinstance(d, dict):
            raise fail(path, line if len(objs) > 1 else None, "not a vllm bench serve result object")
        if run_number(d) is not None and run_number(d) < 0:
            warmups += 1  # vllm bench sweep's warm-up (warmup.json): "excluded from summary statistics"
            continue
        if is_sweep_failure(d):
            if failures is None:
                raise fail(path, None, f"vllm bench sweep's record of a failed run (run_number {d['run_number']}, "
                                       f"{str(d['error_type'])[:80]}), not a result")
            failures.append((path, d["run_number"], str(d["error_type"])[:80]))
            failed_runs += 1
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
        if rate is not None and is_closed_loop_rate(d.get("request_rate")) and d.get("ramp_up_strategy") is None:
            d = {**d, "request_rate": rate}
        version = d.get("vllm_version") or d.get("version")
        pt = point_from_result(path, d, model_name_as_given(raw), engine or ("sglang" if is_sglang(d) else ENGINE),
                               where=where, max_failure_rate=max_failure_rate)
        found = json_settings(path, d, combination_folder(path))
        comb = (*found, (str(d.get("date") or ""), str(path), line)) if found else None
        out.append((pt, raw, str(version) if version else None, run_number(d), comb))
    if not out and failed_runs:
        return out  # parse() refuses a record with no result beside it
    if not out and warmups:
        if warmup_ok:
            return out
        raise fail(path, None, WARMUP_ONLY)
    if not out:
        raise fail(path, None, "empty file")
    return out


def parse(paths: list[Path], model: str | None = None, engine: str | None = None,
          max_failure_rate: float = REFUSAL_FAILURE_RATE, concurrency: int | None = None,
          rate: float | None = None) -> ImportResult:
    """Parse save-result JSON files (one per concurrency, or one per line with ``--append-result``), ``vllm bench
    sweep`` folders and/or printed logs (module docstring).

    ``concurrency`` / ``rate`` (``--concurrency``, ``--rate``): what a result or printed block that states neither ran
    at.  Results with distinct ``run_number`` ≥ 0 of one combination (a folder; a bench combination's runs in a
    server's section of a printed log) at one load are one point of that many repeats (:func:`merge_repeats`), whatever
    lengths each measured; any other two results of one point are refused.  Linear in the number of files.
    """
    names: dict[str, str] = {}
    versions: set[str] = set()
    failures: list[tuple[Path, int, str]] = []
    servers_failed: list[dict[str, Any]] = []  # vllm bench sweep's SERVE-<name>-failure.json records (vllm_sweep)
    options = ImportOptions(model=model, engine=engine, max_failure_rate=max_failure_rate, concurrency=concurrency,
                            rate=rate)
    entries = _entries(paths, options, names, versions, failures, servers_failed)
    if not entries and not failures and servers_failed:
        raise fail(servers_failed[0]["file"], None, "vllm bench sweep's record of a server combination that failed "
                                                    "(--continue-on-error): it measured nothing, and no result is beside it")
    if not entries and not failures:
        raise fail(", ".join(map(str, paths)), None, WARMUP_ONLY)
    variants = server_variants(entries)
    points, folders = _join_repeats(entries)
    _flag_failed_runs(failures, folders)
    check_unique(", ".join(map(str, paths)), points)
    return ImportResult(FORMAT, "vllm bench serve", ", ".join(sorted(versions)) or None, [str(p) for p in paths],
                        points, {k: ModelInfo(raw_name=v) for k, v in names.items()}, variants=variants,
                        details={"server_combinations_failed": servers_failed} if servers_failed else {})


def _skipped(path: Path, head: str, run_dirs: set[Path], run_parents: set[Path]) -> bool:
    """Whether a list file only repeats the ``run=N.json`` results given with it: ``vllm bench sweep``'s
    ``summary.json`` beside them, ``serve_sla``'s ``SLA--<criteria>.json`` (every iteration's runs) above the
    iterations' folders that hold them (:func:`pipeline.importers.vllm_sweep.is_sla_file`)."""
    here = Path(path).resolve().parent
    if head != "[":
        return False
    return (path.name == "summary.json" and here in run_dirs) or (is_sla_file(path) and here in run_parents)


def _entries(paths: list[Path], options: ImportOptions, names: dict[str, str], versions: set[str],
             failures: list[tuple[Path, int, str]], servers_failed: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Every result of ``paths`` as (point, run number, file, its combination, server combination), the files that
    only repeat others left out (:func:`_skipped`); fills ``names``, ``versions``, ``failures`` and
    ``servers_failed``."""
    run_dirs = {Path(q).resolve().parent for q in paths if re.fullmatch(r"run=\d+\.json", Path(q).name)}
    run_parents = {d.parent for d in run_dirs}
    entries: list[tuple[Any, ...]] = []
    sections: dict[Any, tuple[int, int]] = {}  # a log's (file, server) → (bench combination index, last run number)
    for path in paths:
        if path.name == "summary.csv" and run_dirs:
            continue  # vllm bench sweep's table of the run=N.json results given with it
        if path.name == "summary.csv":
            raise fail(path, None, "vllm bench sweep's summary.csv: import the run=N.json files or their folder")
        text = read_text(path)
        head = text.lstrip()[:1]
        if _skipped(path, head, run_dirs, run_parents):
            continue
        failed_server = server_failure(path, text)
        if failed_server is not None:
            servers_failed.append(failed_server)  # a server that never started measured nothing: named in run.json
            continue
        if head in ("{", "["):
            for pt, raw, version, run, comb in parse_json(path, text, options, warmup_ok=True, failures=failures):
                entries.append((pt, run, path, (Path(path).resolve().parent, None), comb))
                names[pt.model] = raw
                if version:
                    versions.add(version)
            continue
        for pt, run, server in parse_block(path, text, options.model, options.engine, options.max_failure_rate,
                                           options.concurrency, options.rate):
            found = log_settings(path, server) if server else None
            comb = (*found, ("", str(path), len(entries))) if found else None
            # a server's section runs each bench combination's runs 0, 1, … in turn: a run number that does not
            # rise starts the next bench combination
            index, last = sections.get((path, server), (0, None))
            index += int(run is not None and last is not None and run <= last)
            sections[(path, server)] = (index, run if run is not None else last)
            entries.append((pt, run, path, (Path(path).resolve(), server, index), comb))
            names[pt.model] = options.model or pt.model
    return entries


def _join_repeats(entries: list[tuple[Any, ...]]) -> tuple[list[Any], list[tuple[Any, set[Path]]]]:
    """(points, [(point, the folders its results came from)]): the results with distinct run numbers of one
    combination at one load joined (:func:`merge_repeats`), grouped by that configuration, not by the lengths each
    run measured (two repeats a token apart are one point); the rest one point each."""
    groups: dict[Any, list[tuple[Any, int | None, Path]]] = {}
    for pt, run, path, where, _ in entries:
        key = configured_key(pt) if run is not None else pt.key
        groups.setdefault((key, where), []).append((pt, run, path))
    points: list[Any] = []
    folders: list[tuple[Any, set[Path]]] = []
    for group in groups.values():
        runs = [run for _, run, _ in group]
        if len(group) > 1 and all(r is not None for r in runs) and len(set(runs)) == len(runs):
            points.append(merge_repeats([pt for pt, _, _ in sorted(group, key=lambda e: e[1])]))
            folders.append((points[-1], {Path(p).resolve().parent for _, _, p in group}))
            continue
        for pt, _, p in group:
            points.append(pt)
            folders.append((pt, {Path(p).resolve().parent}))
    return points, folders


def _flag_failed_runs(failures: list[tuple[Path, int, str]], folders: list[tuple[Any, set[Path]]]) -> None:
    """Flag the point whose results lie beside each ``vllm bench sweep`` record of a failed run (module docstring):
    caveat ``sweep_runs_failed`` (+1 per record) and an error naming the run and the record.

    Raises:
        BatchmarkError: a record with no result of its combination beside it (naming it).
    """
    by_folder: dict[Path, list[Any]] = {}  # folder → the points with a result in it (linear, not per record)
    for pt, dirs in folders:
        for d in dirs:
            by_folder.setdefault(d, []).append(pt)
    for path, run, error_type in failures:
        beside = by_folder.get(Path(path).resolve().parent, [])
        if not beside:
            raise fail(path, None, f"vllm bench sweep's record of a failed run (run_number {run}, {error_type}): that "
                                   "run measured nothing and no result of its combination is beside it; leave it out "
                                   "of the import")
        for pt in beside:
            pt.caveats = {**(pt.caveats or {}), "sweep_runs_failed": (pt.caveats or {}).get("sweep_runs_failed", 0) + 1}
            pt.errors = [*pt.errors, f"vllm bench sweep run {run} failed ({error_type}; {Path(path).name}): left out"]


def server_variants(entries: list[tuple[Any, int | None, Path, Any, Any]]) -> list[dict[str, Any]]:
    """Name each result's point by its ``--serve-params`` server combination (:mod:`~pipeline.importers.vllm_sweep`)
    and return the run's ``variants`` (``[{name, baseline, settings}]``, baseline first); [] when no result has one
    (every point stays of variant ``default``).

    Raises:
        BatchmarkError: results of server combinations mixed with results of none (naming a file of each), or
            :func:`~pipeline.importers.vllm_sweep.variants_table`'s refusals.
    """
    with_comb = [e for e in entries if e[4] is not None]
    if not with_comb:
        return []
    without = next((e for e in entries if e[4] is None), None)
    if without is not None:
        raise fail(without[2], None, f"a result of no --serve-params server combination imported with results of "
                                     f"server combinations ({with_comb[0][2]}): a mixed-up folder; import them apart")
    names, table = variants_table([(c[0], c[1], c[2], c[3], str(path)) for _, _, path, _, c in with_comb])
    for pt, _, _, _, c in with_comb:
        pt.variant = names[c[0]]
    return table
