"""AIPerf's multi-run layout (``--num-profile-runs N``): N profile exports that are the repeats of one point, and an
aggregate of another shape beside them.

Source: ai-dynamo/aiperf ``docs/tutorials/multi-run-confidence.md`` ("Output Structure"): with
``--num-profile-runs`` > 1 AIPerf writes ``<artifact>/profile_runs/run_0001/profile_export_aiperf.json`` …
``run_000N/…`` and ``<artifact>/aggregate/profile_export_aiperf_aggregate.json`` ("Example Aggregate Output":
``metadata`` {``aggregation_type`` "confidence", ``num_profile_runs``, ``num_successful_runs``, ``run_labels`` …}
and ``metrics`` {``request_throughput_avg``: {``mean``, ``std``, ``ci_low``, …}}); every run sends the same
prompts in the same order ("Workload Consistency").  So:

- a folder is searched for profile exports in its subfolders (:func:`export_files`), the aggregate left out;
- the exports of one artifact's ``profile_runs/run_*/`` are one point's repeats (:func:`run_root` groups them;
  :func:`pipeline.importers.repeats.merge_repeats` joins them: output throughput the median of the runs);
- the aggregate alone is refused (:func:`is_aggregate`): its statistics are over runs' averages, not over a point's
  requests, and it names no concurrency; the aggregate given beside its runs is left out (:func:`beside_its_runs`).

Sweeps (ai-dynamo/aiperf ``docs/tutorials/parameter-sweeping.md``, "Output Structure": ``--concurrency 10,20,30,40``
writes ``<artifact>/concurrency_10/profile_export_aiperf.json`` …, with ``--num-profile-runs`` (repeated mode)
``<artifact>/profile_runs/trial_0001/concurrency_10/…``, and ``sweep_aggregate/profile_export_aiperf_sweep.json``;
``docs/tutorials/sweeps.md``, "Sweep + Multi-Run": a YAML ``sweep:`` grid or scenarios (ISL/OSL pairs among them)
writes ``variation_0000_<label>/profile_runs/run_0001/…``): every export is one run at one setting, so

- exports of different input/output lengths or concurrencies are the shapes and points of one run;
- exports of one point are its repeats (:func:`repeats`), whatever folders they lie in (the ``run_NNNN`` of a
  multi-run artifact, the ``trial_NNNN`` of a sweep's, or exports made by hand), when their settings
  (``input_config`` less where the files went, :func:`repeat_settings`) are the same; otherwise they are not one
  point measured again, and are refused naming the file and the first setting that differs;
- a sweep's export whose ``loadgen.concurrency`` is the sweep's list takes its value from its ``concurrency_<N>``
  folder (:func:`swept_concurrency`); the aggregates (``aggregate/``, ``sweep_aggregate/``) are no exports and are not
  searched for.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pipeline.importers.parsing import fail
from pipeline.importers.repeats import configured_key

#: The profile exports a folder import looks for (AIPerf's, GenAI-Perf's), at any depth.
EXPORT_NAMES = ("profile_export_aiperf.json", "profile_export_genai_perf.json")
_RUN = re.compile(r"run_\d+")


def export_files(folder: Path) -> list[Path]:
    """The profile exports under ``folder`` (its subfolders too; hidden ones skipped), sorted; [] when none."""
    found = []
    for name in EXPORT_NAMES:
        for q in folder.rglob(name):
            if q.is_file() and not any(part.startswith(".") for part in q.relative_to(folder).parts):
                found.append(q)
    return sorted(found)


def run_root(path: Path) -> Path | None:
    """The artifact folder of an export in AIPerf's multi-run layout (``<artifact>/profile_runs/run_NNNN/<file>``), or
    None for an export of a single run."""
    parent = Path(path).resolve().parent
    if _RUN.fullmatch(parent.name) and parent.parent.name == "profile_runs":
        return parent.parent.parent
    return None


def is_aggregate(doc: Any) -> bool:
    """Whether a parsed export is AIPerf's multi-run aggregate (``metadata.aggregation_type`` and ``metrics``)."""
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    return isinstance(meta, dict) and "aggregation_type" in meta and (
        isinstance(doc.get("metrics"), dict) or isinstance(doc.get("per_combination_metrics"), list))


def aggregate_refusal(doc: dict[str, Any]) -> str:
    """Why an aggregate alone is not imported, naming its runs and what to import instead."""
    meta = doc["metadata"]
    runs = meta.get("num_profile_runs")
    return (f"AIPerf's aggregate of {runs if isinstance(runs, int) else 'several'} profile runs "
            f"(metadata.aggregation_type {meta.get('aggregation_type')!r}): its statistics are over the runs' "
            "averages, not a point's requests; import the runs (the profile_runs/ folder beside it, or the artifact "
            "folder), which are the repeats of one point")


def beside_its_runs(path: Path, paths: list[Path]) -> bool:
    """Whether ``path`` is an ``aggregate/`` file whose artifact's ``profile_runs/`` exports are among ``paths``."""
    p = Path(path).resolve()
    folder = next((f for f in (p.parent, p.parent.parent) if f.name in ("aggregate", "sweep_aggregate")), None)
    if folder is None:  # aggregate/ (multi-run), aggregate/concurrency_N/ or sweep_aggregate/ (a sweep's)
        return False
    return any(_artifact(q) == folder.parent for q in paths)


def _artifact(path: Path) -> Path | None:
    """The artifact folder of an export under ``profile_runs/`` (``run_NNNN/`` or ``trial_NNNN/<value>/``), or of a
    sweep's ``concurrency_N/`` export; None otherwise."""
    root = run_root(path)
    if root is not None:
        return root
    parent = Path(path).resolve().parent
    for up in parent.parents:
        if up.name == "profile_runs":
            return up.parent
    return parent.parent if re.fullmatch(r"concurrency_\d+", parent.name) else None


#: ``input_config`` keys that say where the files went or how the command was typed, not how the run ran: left out
#: of :func:`repeat_settings` (AIPerf ``output.*``, ``cli_command``; GenAI-Perf ``artifact_dir``, ``profile_export_file``).
_WHERE = re.compile(r"^(output(\..*)?|cli_command|.*artifact.*|.*profile_export.*)$")


def repeat_settings(cfg: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """An export's ``input_config`` flattened to dotted keys (``loadgen.concurrency``), less :data:`_WHERE`."""
    out: dict[str, Any] = {}
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        if _WHERE.match(key):
            continue
        if isinstance(v, dict):
            out.update(repeat_settings(v, key + "."))
        else:
            out[key] = v
    return out


def repeats(exports: list[tuple[Path, Any, dict[str, Any]]]) -> list[list[tuple[Path, Any]]]:
    """(export, point, its ``input_config``) → the points' repeats: one list per configuration (the point's load and
    :func:`repeat_settings`), in path order (``run_0001`` before ``run_0002``, ``trial_0001`` before ``trial_0002``).

    Grouped by what was configured, never by the lengths each run measured: two runs of one configuration whose
    median output lengths differ by a token are one point's repeats (:mod:`pipeline.importers.repeats`).  Linear in
    the number of exports.

    Raises:
        BatchmarkError: two exports of one point whose settings differ (naming the file and the setting).
    """
    groups: dict[Any, list[tuple[Path, Any, dict[str, Any]]]] = {}
    for path, pt, cfg in sorted(exports, key=lambda e: str(Path(e[0]).resolve())):
        settings = repeat_settings(cfg)
        text = json.dumps(settings, sort_keys=True, default=repr)
        groups.setdefault((configured_key(pt), text), []).append((path, pt, settings))
    owner: dict[Any, tuple[Path, dict[str, Any], Any]] = {}  # point key → (first export, its settings, its group)
    for gid, group in groups.items():
        for path, pt, settings in group:
            path0, first, g0 = owner.setdefault(pt.key, (path, settings, gid))
            if g0 == gid:
                continue
            key = next((k for k in sorted(set(first) | set(settings)) if first.get(k) != settings.get(k)), "?")
            raise fail(path, f"field input_config.{key}", f"{settings.get(key)!r}, but {path0} of the same point "
                                                          f"says {first.get(key)!r}: a repeat with other settings")
    return [[(p, pt) for p, pt, _ in group] for group in groups.values()]


def swept_concurrency(path: Path, values: list[Any]) -> Any:
    """The concurrency of a sweep's export whose ``loadgen.concurrency`` is the sweep's list: the ``N`` of its
    ``concurrency_N`` folder when the list holds it, else the list (refused by the caller, naming the field)."""
    for part in reversed(Path(path).resolve().parent.parts):
        m = re.fullmatch(r"concurrency_(\d+)", part)
        if m and int(m.group(1)) in values:
            return int(m.group(1))
    return values
