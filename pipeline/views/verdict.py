"""The verdict line: the one line that ends a sweep and the workflow (``batchmark verdict``).

Built from ``show``'s document (:func:`pipeline.views.show.build_show`) and the run's quality
(:func:`pipeline.analysis.quality.run_quality`); it says nothing ``show`` does not.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.analysis import stages
from pipeline.analysis.quality import run_quality, short_reasons
from pipeline.views.show import build_show


#: The longest main reason the summary line quotes (characters); the rest is on ``batchmark show``.
SUMMARY_REASON_CHARS = 160


def summary_line(ref: str | Path, site: str | Path | None = None) -> str:
    """The one line that ends a sweep and the workflow: run id, verdict with its main reason, the command
    to see it, where the site is.

    ``run 20261130T045437Z-vm: ⚠ flagged: <first reason> (+2 more) · see: batchmark show 20261130T045437Z-vm ·
    site: site/index.html``.  ``site`` None: the line says how to build one (the callers pass the built site when
    it has the run's page: :func:`pipeline.pages.indexviews.built_site`).

    Raises:
        BatchmarkError: unknown run, corrupt files.
    """
    res = stages.load_run(ref, allow_incomplete=True)
    doc = build_show(res.meta, [x.as_dict() for x in res.summaries], res.analysis)
    quality = doc["models"][0]["run_quality"] if doc["models"] else run_quality(res.meta, [x.as_dict() for x in res.summaries])
    run_id = res.run_dir.name
    if quality["verdict"] == "clean":
        verdict = "clean"
    else:  # the main reason in its short form (the Runs index's), the rest counted
        reasons = short_reasons(quality) or quality["reasons"]
        first = reasons[0]
        if len(first) > SUMMARY_REASON_CHARS:
            first = first[:SUMMARY_REASON_CHARS - 1].rstrip() + "…"
        more = len(reasons) - 1
        verdict = f"⚠ flagged: {first}" + (f" (+{more} more)" if more > 0 else "")
    if res.meta.get("source") == "simulated":  # a prediction: "clean" alone read as a measurement
        verdict = f"simulated (a prediction, not a measurement), {verdict}"
    if res.partial:
        verdict = f"incomplete ({len(doc['points'])} point(s)); {verdict}"
    where = f"site: {site}" if site else "site: not built with this run yet (snakemake --cores 1 committed builds it)"
    return f"run {run_id}: {verdict} · see: batchmark show {run_id} · {where}"
