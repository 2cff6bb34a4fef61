"""Render the site's Markdown pages into MkDocs' docs_dir from complete runs (Jinja2 + embedded Vega-Lite).

Charts are embedded as a ``<div>`` plus a JSON ``<script>`` holding the Vega-Lite spec;
``assets/javascripts/charts.js`` renders every one with vega-embed as SVG.  The Vega, Vega-Lite
and vega-embed JavaScript is bundled locally (``vl_convert.javascript_bundle``), never
loaded from a CDN, so the site works offline.
"""

from __future__ import annotations

import dataclasses

import json
import math
from pathlib import Path
from typing import Any, Callable

import jinja2
from markupsafe import Markup

from pipeline.core import paths
from pipeline.store import runs
from pipeline.pages import charts, explain, lengthchart, throughputchart
from pipeline.pages.assets import write_assets
from pipeline.pages.downloads import write_downloads
from pipeline.pages.guide import included_page, write_guide
from pipeline.pages.escape import (anchor, code, csv_cell, html_text, md_text, url_path,  # noqa: F401  (importable from here)
                                   visible_controls)
from pipeline.pages.indexviews import (change_page_path, clean_first, headline_runs, headline_series, knee_threshold_pct,
                                       model_pages, newest_run, run_page_path)
from pipeline.pages.pointrows import ci_note, fmt, point_rows, stream_rows  # noqa: F401  (the templates' filters)
from pipeline.pages.views import RunView, WorkloadView, view_of  # noqa: F401
from pipeline.pages.tuning import tuning_section
from pipeline.analysis.stages import RunResults

#: Extra template context of a page: ``hook(views, run_dirs, reference_views)``.
PAGE_CONTEXT: dict[str, Callable[[list["RunView"], list[Path], list["RunView"]], dict[str, Any]]] = {}
# The explainer and capacity pages get model cards, capacity tables and worked numbers.
PAGE_CONTEXT.update(dict.fromkeys(explain.PAGES, explain.page_context))


def _changes_page_context(views: list["RunView"], run_dirs: list[Path], reference: list["RunView"]) -> dict[str, Any]:
    """Changes page: each run diffed against its predecessor (``pipeline/pages/changes.py``; imports scipy lazily)."""
    from pipeline.pages.changes import changes_page_context

    return changes_page_context(views, run_dirs)


def _runs_page_context(views: list["RunView"], run_dirs: list[Path], reference: list["RunView"]) -> dict[str, Any]:
    """Runs page: which run each run is compared with on the Changes page, for the link."""
    from pipeline.pages.changes import runs_page_context

    return runs_page_context(views, run_dirs)


PAGE_CONTEXT["changes.md"] = _changes_page_context
PAGE_CONTEXT["runs.md"] = _runs_page_context


#: Templates of pages rendered once per item (under ``templates/each/``): {template: (folder of the pages, context
#: name of the item)}.  A model page per model, a run page per run, a Changes page per comparison ("A site
#: for a lab": one page for all of them grew to 17.7 MB and 22 MB with 50 models × 10 runs).
EACH_DIR = "each"
EACH = {"model.md.j2": ("models", "mp"), "run.md.j2": ("runs", "run"), "change.md.j2": ("changes", "comparison")}


def page_templates(templates_dir: Path | None = None) -> list[str]:
    """Every page template rendered once (``**/*.md.j2`` under templates/ outside ``each/``, relative, sorted);
    each renders to its name minus ``.j2``."""
    base = templates_dir or paths.root() / "templates"
    return sorted(str(p.relative_to(base)) for p in base.rglob("*.md.j2")
                  if p.relative_to(base).parts[0] != EACH_DIR)


def _finalize(value: Any) -> Any:
    """Every ``{{ … }}`` output: Markup as it is, None as a dash, anything else through :func:`md_text`."""
    if value is None or isinstance(value, Markup):
        return "–" if value is None else value
    return md_text(value)


_fmt = fmt


def _gb(value: Any) -> str:
    return "–" if value is None else f"{value / 1e9:.2f} GB"


def _ms(value: Any, digits: int = 1) -> str:
    """Seconds shown as milliseconds (``–`` for None)."""
    return "–" if value is None else fmt(value * 1e3, digits)


def _pct(value: Any, digits: int = 0) -> str:
    """A fraction shown as a percentage number (``0.25`` → ``25``; ``–`` for None)."""
    return "–" if value is None else fmt(value * 100, digits)


def _kb(value: Any, digits: int = 1) -> str:
    """Bytes shown as kB (10³ bytes), the number only (``–`` for None)."""
    return "–" if value is None else fmt(value / 1e3, digits)


def _gib(value: Any, digits: int = 2) -> str:
    """Bytes shown as GiB (2³⁰ bytes), the number only (``–`` for None)."""
    return "–" if value is None else fmt(value / 2**30, digits)


def _params(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value / 1e9:.2f} B" if value >= 1e9 else f"{value / 1e6:.0f} M"


def run_count_sources(view: "RunView") -> tuple[dict[str, int], dict[str, int]]:
    """({token count source: completed requests}, {caveat: requests}) over every point of a run (sorted keys)."""
    sources: dict[str, int] = {}
    caveats: dict[str, int] = {}
    for w in view.workloads:
        for p in w.points:
            for k, v in (p.get("token_count_sources") or {}).items():
                sources[k] = sources.get(k, 0) + v
            for k, v in (p.get("caveats") or {}).items():
                caveats[k] = caveats.get(k, 0) + v
    return dict(sorted(sources.items())), dict(sorted(caveats.items()))


def _finite(obj: Any) -> Any:
    """``obj`` with every NaN/±Infinity float replaced by None (JSON null: a gap, never a broken spec) and every
    string's bidirectional controls made visible (:func:`pipeline.pages.escape.visible_controls`)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, str):  # a chart's titles, labels and data: bidirectional controls shown, never obeyed
        return visible_controls(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def chart_json(spec: dict[str, Any]) -> str:
    """A Vega-Lite spec as JSON safe inside a ``<script>`` element of a Markdown page.

    ``<``, ``>`` and ``&`` become ``\\u003c``, ``\\u003e``, ``\\u0026`` (still the same JSON
    strings), so no ``</script>`` or ``<!--`` can end or bend the element; a non-finite number
    becomes null (``NaN`` is not JSON, and would blank the chart).
    """
    blob = json.dumps(_finite(spec), separators=(",", ":"), allow_nan=False)
    return blob.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class ChartRegistry:
    """Turns Vega-Lite specs into embeddable HTML with page-unique ids."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, spec: dict[str, Any]) -> str:
        """HTML for one chart: a target ``div`` and its spec in a JSON ``script``."""
        self.count += 1
        cid = f"chart-{self.count}"
        return Markup(f'<div class="vega-chart" id="{cid}"></div>\n'
                      f'<script type="application/json" class="vega-spec" data-target="{cid}">{chart_json(spec)}</script>')


def make_env(templates_dir: Path | None = None) -> jinja2.Environment:
    """The Jinja2 environment of the page templates (strict: an undefined name is an error)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir or paths.root() / "templates")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True, finalize=_finalize)
    env.filters.update(fmt=_fmt, gb=_gb, params=_params, ms=_ms, pct=_pct, kb=_kb, gib=_gib, md=md_text, md_cell=md_text, html=html_text,
                       code=code, anchor=anchor, url_path=url_path)
    from pipeline.config.sweepconfig import EXCLUSION_FAILURE_RATE
    from pipeline.analysis.knee import DECLINE_FRACTION, KNEE_THRESHOLD
    from pipeline.loadgen import streamcaps, streamrecord, tokencount

    env.globals.update(charts=charts, lengthchart=lengthchart, throughputchart=throughputchart, knee_default=KNEE_THRESHOLD, decline_fraction=DECLINE_FRACTION,
                       max_failure_rate_default=EXCLUSION_FAILURE_RATE, count_flag_text=tokencount.FLAG_TEXT,
                       count_sources=tokencount.SOURCES, count_disagree_factor=tokencount.DISAGREE_FACTOR,
                       run_count_sources=run_count_sources, headline_runs=headline_runs, headline_series=headline_series,
                       newest_run=newest_run,
                       point_rows=point_rows, stream_rows=stream_rows, ci_note=ci_note, model_pages_of=model_pages, knee_threshold_pct=knee_threshold_pct, run_page=run_page_path,
                       change_page=change_page_path, clean_first=clean_first, model_page=lambda name: Markup(f"models/{anchor(name)}.md"),
                       guide_page=included_page, tuning_section=tuning_section)
    from pipeline.machine.interference import OUTSIDE_SHARE_LIMIT
    from pipeline.analysis.quality import PROBE_DRIFT_LIMIT, REPEAT_SPREAD_LIMIT

    env.globals.update(repeat_spread_limit=REPEAT_SPREAD_LIMIT, probe_drift_limit=PROBE_DRIFT_LIMIT,
                       outside_share_limit=OUTSIDE_SHARE_LIMIT)
    env.globals.update(stream_caps=streamcaps, failed_finish=streamrecord.FAILED_FINISH)
    return env


def _write_change_tables(docs_dir: Path, comparisons: list[Any]) -> list[Path]:
    """Each comparison's every metric at every point as CSV (``downloads/changes/<run>.csv``, :func:`changes.every_csv`)."""
    from pipeline.pages.changes import every_csv

    out = []
    for c in comparisons:
        runs.atomic_write_text(docs_dir / c.every_csv, every_csv(c))
        out.append(docs_dir / c.every_csv)
    return out


def read_site_runs(runs_dir: Path, log: Callable[[str], None],
                   only: list[Path] | None = None) -> tuple[list["RunResults"], list[tuple[str, str]]]:
    """Every readable complete run under ``runs_dir`` (read by :func:`pipeline.analysis.stages.load_run`; with ``only``, those
    run folders) and the unreadable ones as (run folder name, reason), each reason logged as one line (a run
    that dropped off the site without a word was the fault).  The unreadable ones are every run under ``runs_dir`` whose ``run.json`` cannot be read, whether
    named in ``only`` or not (the workflow names the runs it lists, and its list cannot hold those).

    A run is unreadable when its ``run.json`` cannot be read (:func:`pipeline.store.runs.survey_runs`) or
    when reading it whole fails (a derived file of a newer version or corrupt, or missing: the reason names
    the command that writes it): the site is
    built from the others and names it, on the Runs page and in the build output.  Reasons name
    the file relative to ``runs_dir`` (the machine's own paths stay off the site).
    """
    from pipeline.core.errors import BatchmarkError
    from pipeline.analysis.stages import load_run

    complete, bad = runs.survey_runs(runs_dir)
    if only is not None:
        complete = only
    results, unreadable = [], [(p.name, why) for p, why in bad]
    for rd in complete:
        try:
            results.append(load_run(rd))
        except BatchmarkError as exc:
            unreadable.append((rd.name, str(exc)))
    prefix = f"{runs_dir}/"
    unreadable = sorted(dict((name, why.replace(prefix, "")) for name, why in reversed(unreadable)).items())
    for name, why in unreadable:
        log(f"warning: run {name} is not on the site: {why}")
    return results, unreadable


def _fixed_pages(env: Any, templates_dir: Path | None, docs_dir: Path, views: tuple[list[Any], list[Any]],
                 run_dirs: list[Path], reference_views: list[Any], unreadable: list[tuple[str, str]],
                 written: list[Path]) -> dict[str, dict[str, Any]]:
    """Render the fixed pages (``templates/*.md.j2``) into ``docs_dir``, appending each path to ``written``;
    ``views``: (every run's views, for Benchmarks; the views without rate-only workloads, for the rest).  Returns each
    page's context from its :data:`PAGE_CONTEXT` hook (a hook serving several pages runs once)."""
    every_view, grid_views = views
    contexts: dict[str, dict[str, Any]] = {}
    hooked: dict[tuple[Callable[..., dict[str, Any]], int], dict[str, Any]] = {}
    for name in page_templates(templates_dir):
        page = name.removesuffix(".j2")
        mine = every_view if page == "benchmarks.md" else grid_views
        hook = PAGE_CONTEXT.get(page)
        if hook is not None and (hook, id(mine)) not in hooked:  # a hook that serves several pages runs once a site
            hooked[hook, id(mine)] = hook(mine, run_dirs, reference_views)
        extra = contexts[page] = hooked[hook, id(mine)] if hook is not None else {}
        if page == "runs.md":
            extra["unreadable"] = unreadable
        text = env.get_template(name).render(runs=mine, chart=ChartRegistry(), page=page, **extra)
        path = docs_dir / page
        runs.atomic_write_text(path, text)
        written.append(path)
    return contexts


def render_site(docs_dir: Path, runs: list[str] | None = None, runs_dir: Path | None = None,
                templates_dir: Path | None = None, reference: list[Path] | None = None,
                log: Callable[[str], None] | None = None) -> list[Path]:
    """Render every page into ``docs_dir`` from complete runs (all, or the ids in ``runs``).

    The fixed pages (``templates/**/*.md.j2``) once each, then the pages of :data:`EACH` once per
    item: ``models/<model>.md`` per model (Benchmarks' content: open-loop workloads too), ``runs/<run>.md`` per
    run, ``changes/<run>.md`` per
    comparison; a file the last render wrote (its manifest, :mod:`pipeline.pages.outdir`) and this one does not is
    removed, and nothing else: a folder holding a file batchmark did not write, or overlapping the run store or
    the model cards, is refused before anything is written.
    Each run is read once (:func:`pipeline.analysis.stages.load_run`, in memory) and every page renders
    from its run views, so the work grows linearly with the runs and models.

    ``reference``: folders of reference runs (the output of ``batchmark reference``,
    :mod:`pipeline.importers.reference`), shown by the explainers only; none by default.

    Without ``runs``, every complete run that can be read; each one that cannot is named in the
    build output (``log``, default stderr) and on the Runs page (:func:`read_site_runs`).

    Returns the written page paths.  Raises BatchmarkError for an unknown run named in ``runs``.
    """
    import sys

    from pipeline.store import runs as runs_mod
    from pipeline.analysis.stages import load_run

    from pipeline.pages import outdir

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    runs_dir = runs_dir or paths.runs_dir()
    previous = outdir.check_out(docs_dir, runs_dir)
    unreadable: list[tuple[str, str]] = []
    # in memory: pages never write into a run.  A run named in ``runs`` that does not exist is an error; one that
    # exists but cannot be read is named and left out, as every unreadable run is
    only = [runs_mod.resolve_run(r, runs_dir) for r in runs] if runs else None
    results, unreadable = read_site_runs(runs_dir, log, only)
    run_dirs = [r.run_dir for r in results]
    views = sorted((view_of(r) for r in results), key=lambda v: v.run_id, reverse=True)
    # Every page but Benchmarks reads the concurrency grid: a workload measured only at rates (open
    # loop) has none, and is shown on Benchmarks alone.
    grid_views = [dataclasses.replace(v, workloads=[w for w in v.workloads if w.points]) for v in views]
    reference_views = [view_of(load_run(Path(d))) for d in reference or []]
    env = make_env(templates_dir)
    docs_dir.mkdir(parents=True, exist_ok=True)
    files = write_assets(docs_dir) + write_downloads(docs_dir, results)
    written = write_guide(docs_dir)  # the Guide tab: docs/ as it is (pipeline/pages/guide.py)
    pages = model_pages(views)
    page_of = {mp.model: mp.path for mp in pages}
    env.globals["model_page"] = lambda name: page_of.get(str(name)) or Markup(f"models/{anchor(name)}.md")
    contexts = _fixed_pages(env, templates_dir, docs_dir, (views, grid_views), run_dirs, reference_views, unreadable,
                            written)
    items = {"model.md.j2": [(mp.path, mp, {}) for mp in pages],
             "run.md.j2": [(run_page_path(v.run_id), v, contexts.get("runs.md", {})) for v in grid_views],
             "change.md.j2": [(change_page_path(c.run_b), c, {}) for c in contexts.get("changes.md", {}).get("comparisons", [])]}
    for tname, (folder, key) in EACH.items():
        if not (templates_dir or paths.root() / "templates").joinpath(EACH_DIR, tname).is_file():
            continue
        template = env.get_template(f"{EACH_DIR}/{tname}")
        for page, item, extra in items[tname]:
            text = template.render(runs=views, chart=ChartRegistry(), page=page, **{**extra, key: item})
            path = docs_dir / page
            runs_mod.atomic_write_text(path, text)
            written.append(path)
    files += _write_change_tables(docs_dir, contexts.get("changes.md", {}).get("comparisons", []))
    left = outdir.finish(docs_dir, written + files, previous)
    if left:
        log(f"warning: {len(left)} file(s) under {docs_dir} an earlier batchmark wrote and this build did not, left in "
            f"place (first: {left[0]}); remove them by hand")
    return written
