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
  :func:`pipeline.importers.vllm_bench.merge_repeats` joins them: output throughput the median of the runs);
- the aggregate alone is refused (:func:`is_aggregate`): its statistics are over runs' averages, not over a point's
  requests, and it names no concurrency; the aggregate given beside its runs is left out (:func:`beside_its_runs`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

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
    return isinstance(meta, dict) and "aggregation_type" in meta and isinstance(doc.get("metrics"), dict)


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
    if p.parent.name != "aggregate":
        return False
    return any(run_root(q) == p.parent.parent for q in paths)
