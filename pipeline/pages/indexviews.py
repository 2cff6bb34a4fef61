"""The lab's index views: Home's headline (per hardware, its newest clean run), one page per model across runs,
and the paths of the run and comparison pages.  Built from run views (:mod:`pipeline.pages.views`); rendered by
:mod:`pipeline.pages.render`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from pipeline.pages.escape import anchor
from pipeline.pages.views import RunView, WorkloadView


def hardware_name(view: RunView) -> str:
    """The hardware a run was measured on, as pages group runs (``"unknown hardware"`` when unnamed)."""
    return str(view.hardware.get("name") or "unknown hardware")


def clean_first(views: list[RunView]) -> list[RunView]:
    """``views`` in their order, except that a flagged run comes after every clean run when a clean run of its
    hardware exists (a flagged run is never listed first over a clean one of the same hardware)."""
    clean_hw = {hardware_name(v) for v in views if not v.flagged}
    return sorted(views, key=lambda v: v.flagged and hardware_name(v) in clean_hw)


def newest_run(views: list[RunView]) -> RunView | None:
    """The newest measured or imported run of the site, flagged or clean, by its id (``YYYYMMDDTHHMMSSZ-host``: the
    time it started), None without one: Home names it first, with its verdict, so a user finds the run just measured
    whatever it became (a flagged run is never a headline, and was found nowhere on Home).  A simulated run is a
    prediction, not a run of the user's, and is never named there."""
    return max((v for v in views if not v.simulated), key=lambda v: v.run_id, default=None)


def has_curve(view: RunView) -> bool:
    """Whether a run measured a curve: a workload at two concurrencies or more (a one-point import shows no
    batching and is never a headline)."""
    return any(len({p.get("concurrency") for p in w.points if p.get("concurrency")}) >= 2 for w in view.workloads)


def headline_runs(views: list[RunView]) -> list[dict[str, Any]]:
    """Home's headline: per hardware, its newest clean run that measured a curve (:func:`has_curve`); never a
    simulated run (a prediction), never a one-point run (a hardware with only those gets a sentence, no chart).

    Returns ``[{"hardware", "view", "older": [run views], "sentence", "flagged_only"}]`` sorted by hardware name;
    the sentence says what the chart shows, one clause per model (peak, knee with its uncertainty).  A hardware
    whose every run is flagged gets no headline (a flagged run's numbers are never a headline):
    ``flagged_only`` is True, ``view`` its newest run, and the sentence says why no chart is drawn.
    """
    by_hw: dict[str, list[RunView]] = {}
    for v in sorted((v for v in views if not v.simulated), key=lambda v: v.run_id, reverse=True):
        by_hw.setdefault(hardware_name(v), []).append(v)
    out = []
    for hw, vs in sorted(by_hw.items()):
        head = next((v for v in vs if not v.flagged and has_curve(v)), None)
        if head is None and any(not v.flagged for v in vs):
            sentence = (f"On {hw} no run measured more than one concurrency of a workload ({len(vs)} run(s), the "
                        f"newest {vs[0].run_id}), so none is a headline: one point shows no batching. Each is on its "
                        "run and model pages.")
            out.append({"hardware": hw, "view": vs[0], "older": vs[1:], "sentence": sentence, "flagged_only": True})
            continue
        head = head or vs[0]
        if head.flagged:
            sentence = (f"On {hw} every run is flagged ({len(vs)} run(s), the newest {head.run_id}), so none is a "
                        "headline: each is on its run and model pages, marked with its reasons. Measure again on a "
                        "quiet machine.")
            out.append({"hardware": hw, "view": head, "older": vs[1:], "sentence": sentence, "flagged_only": True})
            continue
        clauses = []
        for w in head.workloads:
            m = w.model
            peak = m.get("peak_output_throughput_tok_s")
            clauses.append(f"{m['model']} ({m['input_len']} in / {m['output_len']} out) "
                           + (f"peaks at {peak:,.1f} tok/s at c = {m.get('peak_concurrency')}, knee {w.knee_text}"
                              if peak else "measured nothing"))
        sentence = f"On {hw}, run {head.run_id}: " + ("; ".join(clauses) if clauses else "no models") + "."
        out.append({"hardware": hw, "view": head, "older": [v for v in vs if v is not head], "sentence": sentence,
                    "flagged_only": False})
    return out

def headline_series(view: RunView) -> list[dict[str, Any]]:
    """The lines of Home's headline chart for one run (:func:`pipeline.pages.charts.headline_chart`'s ``workloads``)."""
    return [{"label": f"{w.model['model']} ({w.model['input_len']}/{w.model['output_len']})", "model": w.model,
             "points": w.points} for w in view.workloads]


def _unique_slugs(names: list[str]) -> dict[str, str]:
    """``{name: file stem}``: :func:`anchor` of each name, made unique (names that differ only in case get a hash)."""
    import hashlib

    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in sorted(names):
        slug = str(anchor(name))
        if slug in taken:
            slug = f"{slug}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
        taken.add(slug)
        out[name] = slug
    return out


@dataclass
class ModelPage:
    """One model's page, ``models/<slug>.md``: every workload of the model in every run, clean runs first, newest first.

    ``entries``: ``[(run view, [workloads of this model in that run])]``.
    """

    model: str
    slug: str
    entries: list[tuple[RunView, list[WorkloadView]]] = field(default_factory=list)

    @property
    def path(self) -> Markup:
        """The page, relative to the docs dir (Markup: the slug is ``[a-z0-9_-]``, a link target as it is)."""
        return Markup(f"models/{self.slug}.md")

    @property
    def newest(self) -> tuple[RunView, WorkloadView]:
        """The workload the index row shows: of the newest clean run holding the model (the newest run when none is clean)."""
        view, ws = next(((v, ws) for v, ws in self.entries if not v.flagged), self.entries[0])
        return view, ws[0]

    @property
    def kinds(self) -> str:
        """The model's kind(s) as the analysis gives them (``dense``, ``moe``, ``–`` without a card)."""
        return ", ".join(sorted({w.model.get("kind") or "–" for _, ws in self.entries for w in ws}))

    @property
    def hardware(self) -> str:
        """Every hardware the model was measured on, comma-separated."""
        return ", ".join(sorted({str(v.hardware.get("name") or "?") for v, _ in self.entries}))


def model_pages(views: list[RunView]) -> list[ModelPage]:
    """One :class:`ModelPage` per model name across ``views`` (newest run first, but a flagged run after the clean
    runs of its hardware: :func:`clean_first`), sorted by name (case-insensitive).

    Linear in the workloads: each run's workloads are grouped by model once.
    """
    by_model: dict[str, list[tuple[RunView, list[WorkloadView]]]] = {}
    for v in clean_first(sorted(views, key=lambda v: v.run_id, reverse=True)):
        mine: dict[str, list[WorkloadView]] = {}
        for w in v.workloads:
            mine.setdefault(str(w.model["model"]), []).append(w)
        for name, ws in mine.items():
            by_model.setdefault(name, []).append((v, ws))
    slugs = _unique_slugs(list(by_model))
    return [ModelPage(model=name, slug=slugs[name], entries=by_model[name])
            for name in sorted(by_model, key=lambda n: (n.lower(), n))]


def run_page_path(run_id: str) -> Markup:
    """A run's own page, relative to the docs dir: ``runs/<anchor of the run id>.md`` (run ids are unique folder names;
    Markup: a link target as it is)."""
    return Markup(f"runs/{anchor(run_id)}.md")


def built_site(run_id: str) -> str | None:
    """``"site/index.html"`` when the project's built site (``<root>/site``, mkdocs.yml's ``site_dir``) has this run's
    page (:func:`run_page_path` built to ``site/runs/<anchor>.html``), else None: a site built before the run, or none.

    Regression (new-user trial): right after the main job, ``batchmark summary RUN`` said "not built"."""
    from pipeline.core import paths

    site = paths.root() / "site"
    page = site / (str(run_page_path(run_id)).removesuffix(".md") + ".html")
    return "site/index.html" if (site / "index.html").is_file() and page.is_file() else None


def change_page_path(run_id: str) -> Markup:
    """The Changes page of run ``run_id`` against its predecessor, relative to the docs dir: ``changes/<anchor>.md``."""
    return Markup(f"changes/{anchor(run_id)}.md")


def knee_threshold_pct(views: list[RunView], default: float = 0.15) -> str:
    """The knee threshold the Home page quotes, in whole percent: the newest run's first workload's, else ``default``."""
    for v in views:
        for w in v.workloads:
            return f"{(w.model.get('knee_threshold') or default) * 100:.0f}"
    return f"{default * 100:.0f}"
