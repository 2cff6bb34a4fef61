"""What ``show`` says of each shape's workload: its lengths' distribution and its arrivals in words
(:func:`pipeline.config.workloadwords.workload_words`), one line per shape, and on each model entry of ``--json``
(``workload``)."""

from __future__ import annotations

from typing import Any

from pipeline.config.workloadwords import arrival_words, workload_words


def shape_words(meta: dict[str, Any], points: list[dict[str, Any]], input_len: int, output_len: int) -> str:
    """The workload of one shape of a run in words: the run's ``config.lengths`` (``meta``: its ``run.json``) around
    the shape, and the loads (and a gamma point's burstiness) of its ``points`` (summaries or show rows).  An imported
    run (no config of batchmark's) is said as its tool sent it, never as fixed lengths."""
    cfg = meta.get("config") if isinstance(meta.get("config"), dict) else None
    mine = [p for p in points if (p.get("input_len"), p.get("output_len")) == (input_len, output_len)]
    loads = [str(p.get("load") or "closed") for p in mine]
    burst = next((p["burstiness"] for p in mine if isinstance(p.get("burstiness"), (int, float))
                  and not isinstance(p.get("burstiness"), bool)), None)
    loads = sorted(set(loads), key=loads.index)
    source = str(meta.get("source") or "")
    if cfg is None and source.startswith("imported:"):  # the tool's file states lengths, never how it drew them
        arrivals = arrival_words(loads, burst)
        return (f"as {source.removeprefix('imported:')} sent them, {input_len:,} prompt and {output_len:,} output "
                "tokens a request as it measured them (it states no length distribution)"
                + (f", {arrivals}" if arrivals else ""))
    return workload_words((cfg or {}).get("lengths"), input_len, output_len, loads, burst)


def add_workloads(doc: dict[str, Any], meta: dict[str, Any]) -> None:
    """Each model entry of a show document gains ``workload``: its shape's workload in words (:func:`shape_words`)."""
    for m in doc["models"]:
        m["workload"] = shape_words(meta, doc["points"], m["input_len"], m["output_len"])


def workload_lines(doc: dict[str, Any]) -> list[str]:
    """One line per shape of a show document: ``workload in 4000 / out 500: prompts uniform …`` (shapes in order)."""
    seen: dict[tuple[int, int], str] = {}
    for m in doc["models"]:
        seen.setdefault((m["input_len"], m["output_len"]), m.get("workload") or "")
    return [f"workload in {i} / out {o}: {w}" for (i, o), w in seen.items() if w]
