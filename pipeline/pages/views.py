"""Run views: what the page templates see of one run (its workloads, their points and analysis).

Read through :func:`pipeline.analysis.stages.load_run` (reading never writes); rendered by
:mod:`pipeline.pages.render`, used by the explainers (:mod:`pipeline.pages.explain`) too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.store import runs
from pipeline.pages.escape import anchor
from pipeline.core.words import POST_KNEE_CAUSE_TEXT, knee_spread_words, knee_words
from pipeline.core.records import DEFAULT_VARIANT, PointKey, server_key, workload_of
from pipeline.analysis.stages import RunResults
from pipeline.metrics.registry import metric


@dataclass
class WorkloadView:
    """What a page shows of one workload (:class:`pipeline.core.records.Workload`: model, engine, variant, shape) of a
    run: its analysed model, its points and their analysis."""

    model: dict[str, Any]
    points: list[dict[str, Any]]
    analysis_points: list[dict[str, Any]]
    #: Open-loop points, by load, cap and rate; ``points`` and ``analysis_points`` are the
    #: closed-loop grid the concurrency charts and tables show.
    rate_points: list[dict[str, Any]] = field(default_factory=list)
    #: The run's probe warning (``run.json`` ``probe.warning``), None when its probe was steady: MBU is measured
    #: against that probe, so a noisy one makes every MBU of the run unreliable.
    probe_warning: str | None = None
    #: The dtype the run's compute roof was probed in and the dtype the model ran in (MFU above 1).
    roof_dtype: str | None = None
    model_dtype: str | None = None
    #: The calibrated per-step model's prediction of this workload (:func:`pipeline.views.predict.predict_workload`):
    #: its fit, the predicted curve and the call-outs; None for a simulated run (already a
    #: prediction) or a workload without closed-loop points.  Its ``error`` says why no fit was made.
    prediction: dict[str, Any] | None = None
    #: The run's ``run.json``: how it was made and what its probe said, for an impossible figure's diagnosis.
    run_meta: dict[str, Any] = field(default_factory=dict)

    @property
    def slug(self) -> str:
        """Anchor-safe id (see :func:`anchor`)."""
        m = self.model
        v = m.get("variant") or DEFAULT_VARIANT
        model = m["model"] if v == DEFAULT_VARIANT else f"{m['model']}-{v}"
        return anchor(f"{model}-in{m['input_len']}-out{m['output_len']}".replace(".", "-"))

    @property
    def workload_text(self) -> str:
        """This workload's lengths and arrivals in words (:func:`pipeline.views.showworkload.shape_words`)."""
        from pipeline.views.showworkload import shape_words

        m = self.model
        return shape_words(self.run_meta, self.points + self.rate_points, m["input_len"], m["output_len"])

    def roofline_over_measured(self) -> float | None:
        """Median over the grid of roofline prediction ÷ measured output throughput (how far the bound sits above
        the curve: 1 = the arithmetic alone explains it); None without both figures at any point."""
        import statistics

        roof = {a["concurrency"]: a.get("roofline_tok_s") for a in self.analysis_points}
        ratios = [roof[p["concurrency"]] / p["output_throughput_tok_s"] for p in self.points
                  if roof.get(p["concurrency"]) and p.get("output_throughput_tok_s")]
        return statistics.median(ratios) if ratios else None

    def point(self, concurrency: int) -> dict[str, Any] | None:
        """The point summary at a concurrency, or None."""
        return next((p for p in self.points if p["concurrency"] == concurrency), None)

    def quality(self, concurrency: int) -> dict[str, Any]:
        """The analysis' row of a point (``caveats``, ``excluded``, ``excluded_reason``, ``failure_rate``, MBU …)."""
        return next((a for a in self.analysis_points if a["concurrency"] == concurrency), {})

    def note(self, concurrency: int) -> str:
        """Short note on a point with a verdict, caveats or an exclusion for the tables (``""`` when none); see
        :func:`pipeline.views.showtable.point_note`."""
        from pipeline.analysis.quality import point_verdict
        from pipeline.views.showtable import point_note

        p, a = self.point(concurrency) or {}, self.quality(concurrency)
        caveats = a.get("caveats") or sorted(set(p.get("caveats") or {}) | ({"failed_requests"} if p.get("failed") else set()))
        return point_note({**p, "caveats": caveats, "caveat_counts": p.get("caveats") or {}, "excluded": a.get("excluded"),
                           "quality": point_verdict(p) if p else None,
                           "implausible": self.implausible_at(concurrency)})

    def rate_rows(self) -> list[dict[str, str]]:
        """Open-loop table rows, formatted: offered / sent / achieved rate (req/s), p99 TTFT, TPOT, E2EL (ms),
        SLO (share of requests meeting it, met or not), goodput (req/s), whether the client kept its schedule."""
        def num(v: Any, scale: float = 1.0, digits: int = 2) -> str:
            return "–" if v is None else f"{v * scale:,.{digits}f}"

        rows = []
        for p in self.rate_points:
            slo = p.get("slo") or {}
            rows.append({
                "point": PointKey.of(p).label(), "offered": num(p.get("rate_rps"), digits=3),
                "sent": num(p.get("send_rate_rps"), digits=3), "achieved": num(p.get("achieved_rate_rps"), digits=3),
                **{m: num((p.get(f"{m}_s") or {}).get("p99"), 1e3, 1) for m in ("ttft", "tpot", "e2el")},
                "slo": "–" if not slo else (f"{'met' if slo.get('met') else 'missed'} ({num(slo.get('share_ok'), 100, 0)} % of requests)"),
                "goodput": num(slo.get("goodput_rps"), digits=3),
                "kept": {True: "yes", False: "NO: client fell behind", None: "–"}[p.get("schedule_kept")]})
        return rows

    @property
    def implausible(self) -> str | None:
        """Why this workload's numbers cannot be right (MBU above 1, single stream above its ceiling), or None
        (:func:`pipeline.analysis.quality.implausible_model`; computed when an older analysis.json lacks the field)."""
        from pipeline.analysis.quality import implausible_model

        return self.model.get("implausible") or implausible_model(self.model, self.analysis_points)

    @property
    def diagnosis(self) -> dict[str, Any] | None:
        """The impossible figure's causes in order of evidence and the advice that fits how the run was made
        (:func:`pipeline.analysis.quality.implausible_diagnosis`), None when nothing is impossible."""
        from pipeline.analysis.quality import implausible_diagnosis

        return implausible_diagnosis(self.run_meta, self.implausible)

    def implausible_at(self, concurrency: int) -> str | None:
        """Why the point at ``concurrency`` cannot be right (its MBU is above 1) and its most likely cause, or None."""
        from pipeline.analysis.quality import implausible_cause, implausible_point

        a = self.quality(concurrency)
        return implausible_cause(self.run_meta, a.get("implausible") or implausible_point(a)) if a else None

    def mbu_cell(self, concurrency: int, digits: int = metric("mbu").display.digits) -> str:
        """MBU for a table cell (``digits``: the registry's, :mod:`pipeline.metrics.registry`); an impossible one (above 1) is marked as such, and one measured against a probe the
        run itself calls noisy as unreliable: never shown as a plain result."""
        v = self.mbu(concurrency)
        if v is None:
            return "–"
        if self.implausible_at(concurrency):
            return f"⚠ {v:.{digits}f}: above 1, impossible"
        if self.quality(concurrency).get("mbu_implausible"):  # above 1 at the bytes counted (routing.implausible_mbu)
            return f"⚠ {v:.{digits}f}: above 1 at the bytes counted, not a result"
        if self.probe_warning:
            return f"⚠ {v:,.{digits}f}: unreliable, noisy probe"
        return f"{v:,.{digits}f}"

    def post_knee_cause_text(self, run_flagged: bool = False) -> str:
        """Why the curve does what it does past the knee, in words for the model page (``""`` before a knee).

        Never "batching itself" from a flagged run or a workload whose points the interference check flagged
       : a busy machine's plateau is no finding about batching, and an analysis.json written before
        the ``interference`` cause existed says "batching" for it.
        """
        cause = self.model.get("post_knee_cause")
        if cause == "batching" and run_flagged:
            cause = "interference"
        text = POST_KNEE_CAUSE_TEXT.get(cause, "") if cause else ""
        roof, dtype = self.model.get("compute_roof_tflops"), self.model.get("compute_roof_dtype")
        if cause == "compute" and roof:
            rate = f"{roof * 1e3:,.1f} GFLOP/s" if roof < 1 else f"{roof:,.1f} TFLOP/s"
            text += f" (the roof it hit: {rate}{' in ' + dtype if dtype else ''})"
        return text

    def mfu_implausible_at(self, concurrency: int) -> str | None:
        """Why the MFU at ``concurrency`` cannot be right (above 1: :func:`pipeline.analysis.quality.implausible_mfu`), or None;
        computed from the run's probe and card dtypes when an older analysis.json lacks the field."""
        from pipeline.analysis.quality import implausible_mfu

        a = self.quality(concurrency)
        if not a:
            return None
        return a.get("mfu_implausible") or implausible_mfu(a, self.roof_dtype, self.model_dtype)

    def mfu_cell(self, concurrency: int, digits: int = metric("mfu").display.digits) -> str:
        """MFU for a table cell (``digits``: the registry's); one above 1 is marked with why its roof is wrong, never shown as a plain result."""
        v = self.quality(concurrency).get("mfu")
        if v is None:  # withheld against a roof a point beat (pipeline.analysis.underread), else not computable
            return "withheld: the probe under-read the compute roof" if self.quality(concurrency).get("mfu_withheld") else "–"
        if self.mfu_implausible_at(concurrency):
            dtypes = (f" (roof probed in {self.roof_dtype}, model in {self.model_dtype})"
                      if self.roof_dtype and self.model_dtype and self.roof_dtype != self.model_dtype else "")
            return f"⚠ {v:.{digits}f}: above 1, impossible{dtypes}"
        return f"{v:,.{digits}f}"

    def ceiling_cell(self) -> str:
        """The single-stream ceiling for a table cell, marked when the single stream exceeds it."""
        v = self.model.get("ceiling_tok_s")
        if v is None:
            return "–"
        short = {"the probe under-read the machine": "probe under-read?"}.get((self.diagnosis or {}).get("title"),
                                                                               "wrong card or format?")
        return f"⚠ {v:,.1f}: exceeded, {short}" if self.implausible else f"{v:,.1f}"

    def caveat_summary(self) -> str:
        """Run-table cell: which points are excluded or have caveats (``"–"`` when none)."""
        excluded = self.model.get("excluded_concurrency") or []
        noted = [c for c in self.model.get("caveat_concurrency") or [] if c not in excluded]
        parts = []
        if excluded:
            parts.append("c = " + ", ".join(map(str, excluded)) + " excluded (failures)")
        if noted:
            parts.append("c = " + ", ".join(map(str, noted)) + " with caveats")
        if self.model.get("coverage_not_measured"):  # routing.COVERAGE_NOT_MEASURED: one prompt repeated
            parts.append("expert coverage not measured (one prompt repeated: MBU, roofline at k/E)")
        if self.implausible:
            parts.insert(0, f"⚠ implausible: {self.diagnosis['title']}?")
        return "; ".join(parts) or "–"

    @property
    def knee_uncertainty(self) -> dict[str, Any]:
        """``knee_per_repeat`` and ``knee_settled`` (:func:`pipeline.analysis.knee.knee_uncertainty_of`)."""
        from pipeline.analysis.knee import knee_uncertainty_of

        return knee_uncertainty_of(self.model, self.points, self.analysis_points)

    @property
    def knee_text(self) -> str:
        """The knee with its uncertainty in words (``"c = 16, not settled: repeats give 16, 32, 16"``)."""
        u = self.knee_uncertainty
        return knee_words(self.model.get("knee_concurrency"), u["knee_per_repeat"], u["knee_settled"])

    @property
    def knee_spread_text(self) -> str:
        """What follows the knee in :attr:`knee_text` (``", not settled: repeats give 16, 32, 16"``)."""
        u = self.knee_uncertainty
        return knee_spread_words(self.model.get("knee_concurrency"), u["knee_per_repeat"], u["knee_settled"])

    def mbu(self, concurrency: int) -> float | None:
        """MBU at a concurrency, or None."""
        return next((a.get("mbu") for a in self.analysis_points if a["concurrency"] == concurrency), None)


@dataclass
class RunView:
    """What the templates see of one run."""

    run_id: str
    meta: dict[str, Any]
    analysis: dict[str, Any]
    workloads: list[WorkloadView] = field(default_factory=list)
    #: The run as :func:`pipeline.analysis.stages.load_run` read it (for pages that diff runs), or None.
    results: Any = field(default=None, repr=False, compare=False)

    @property
    def hardware(self) -> dict[str, Any]:
        """The analysis' hardware block."""
        return self.analysis.get("hardware", {})

    @staticmethod
    def workloads_analysis_points(key: tuple, aps_by_key: dict[tuple, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """The closed-loop analysis rows of one workload."""
        return [a for a in aps_by_key.get(key, []) if a.get("load", "closed") == "closed"]

    @property
    def quality(self) -> dict[str, Any]:
        """The run's quality verdict (:func:`pipeline.analysis.quality.run_quality`): probe warning, disagreeing repeats,
        implausible numbers; computed from the run's own files."""
        if "_quality" not in self.__dict__:
            from pipeline.analysis.quality import run_quality

            self.__dict__["_quality"] = run_quality(
                self.meta, [p for w in self.workloads for p in w.points],
                [{**w.model, "implausible": w.implausible} for w in self.workloads])
        return self.__dict__["_quality"]

    @property
    def variants(self) -> list[str]:
        """The variants (server settings) the run's workloads were measured under, in order (``default`` for a
        workload that names none): the run page's model table names each row's where there are more than one."""
        return list(dict.fromkeys(w.model.get("variant") or DEFAULT_VARIANT for w in self.workloads))

    @property
    def model_names(self) -> list[str]:
        """The run's models, each once in order (the runs table's "models": a model measured under two variants at
        three shapes is one model, not six workloads)."""
        return list(dict.fromkeys(w.model.get("model") for w in self.workloads))

    @property
    def simulated(self) -> bool:
        """True for a run of the simulated server (``source: simulated``): a prediction, never a headline or an
        explainer's example, labelled wherever it is shown."""
        return self.meta.get("source") == "simulated"

    @property
    def status_cell(self) -> str:
        """The run-quality cell of the tables: ``simulated (a prediction)``, ``clean`` or ``⚠ flagged``."""
        if self.simulated:
            return "simulated (a prediction)" + (" ⚠ flagged" if self.flagged else "")
        return "clean" if not self.flagged else "⚠ flagged"

    @property
    def flagged(self) -> bool:
        """True when the run's quality verdict is ``flagged`` (sorts after clean runs: False < True)."""
        return self.quality["verdict"] == "flagged"

    @property
    def engine_version(self) -> str | None:
        """The engine's version: ``versions.<engine>`` of ``run.json``, else what its servers reported
        (``server.servers``; the run page showed no vLLM version), else None."""
        from pipeline.backends.served import server_version

        eng = self.meta.get("server") if isinstance(self.meta.get("server"), dict) else {}
        name = eng.get("engine")
        versions = self.meta.get("versions") or {}
        return (versions.get(name) if name else None) or eng.get(f"{name}_version") or server_version(eng)

    @property
    def server_commands(self) -> list[tuple[str, str]]:
        """``[(model, the exact server command)]`` of a run whose backend started servers (``server.servers``)."""
        eng = self.meta.get("server") if isinstance(self.meta.get("server"), dict) else {}
        servers = eng.get("servers") if isinstance(eng.get("servers"), dict) else {}
        return [(str(m), str(s["command"])) for m, s in sorted(servers.items())
                if isinstance(s, dict) and s.get("command")]

    @property
    def quality_lines(self) -> list[str]:
        """The verdict's reasons condensed to one short line each (:func:`pipeline.analysis.quality.short_reasons`), for the Runs
        index; the run page has them in full."""
        from pipeline.analysis.quality import short_reasons

        return short_reasons(self.quality)

    @property
    def interfered(self) -> bool:
        """True when the run is flagged because the machine was busy or changed while it measured (not only for an
        impossible figure, which the pages mark where it stands): such a run is never an explainer's example."""
        return bool(self.quality.get("interference", self.flagged))

    @property
    def quality_text(self) -> str:
        """The verdict in one line for tables (:func:`pipeline.analysis.quality.verdict_text`)."""
        from pipeline.analysis.quality import verdict_text

        return verdict_text(self.quality)


def view_of(res: "RunResults") -> RunView:
    """The :class:`RunView` of a run read by :func:`pipeline.analysis.stages.load_run`."""
    meta, analysis = res.meta, res.analysis
    summaries = [x.as_dict() for x in res.summaries]
    view = RunView(run_id=res.run_dir.name, meta=meta, analysis=analysis, results=res)
    # grouped once by workload: linear in the points (a scan per workload was quadratic at a lab's scale)
    by_key: dict[tuple, list[dict[str, Any]]] = {}  # by workload and variant (PointKey.variant): one curve each
    for s in summaries:
        by_key.setdefault(workload_of(s), []).append(s)
    aps_by_key: dict[tuple, list[dict[str, Any]]] = {}
    for a in analysis.get("points", []):
        aps_by_key.setdefault(workload_of(a), []).append(a)
    def closed(p: dict[str, Any]) -> bool:
        return p.get("load", "closed") == "closed"

    probe = meta.get("probe") or {}
    cards = runs.load_model_cards(res.run_dir) if (res.run_dir / "models").is_dir() else {}
    summaries_by_key: dict[tuple, list[Any]] = {}
    for s in res.summaries:
        if s.load == "closed":
            summaries_by_key.setdefault(workload_of(s), []).append(s)

    for m in analysis.get("models", []):
        key = workload_of(m)
        mine = by_key.get(key, [])
        pts = sorted((s for s in mine if closed(s)), key=lambda s: s["concurrency"])
        rate_pts = sorted((s for s in mine if not closed(s)), key=lambda s: PointKey.of(s).sort_key())
        view.workloads.append(WorkloadView(model=m, points=pts, rate_points=rate_pts,
                                       analysis_points=[a for a in aps_by_key.get(key, []) if closed(a)],
                                       probe_warning=probe.get("warning"),
                                       roof_dtype=probe.get("dtype") if view.hardware.get("peak_tflops_probed",
                                                                                         probe.get("peak_tflops")) else None,
                                       model_dtype=(_card(cards, m) or {}).get("quantization"), run_meta=meta,
                                       prediction=None if view.simulated else _prediction(
                                           summaries_by_key.get(key), view.workloads_analysis_points(key, aps_by_key),
                                           _card(cards, m), view.hardware, meta,
                                           server_key(m["model"], m.get("variant") or DEFAULT_VARIANT))))
    return view


def _card(cards: dict[str, Any], m: dict[str, Any]) -> dict[str, Any] | None:
    """A workload's model card: its variant's own where the run stores one (an FP8 KV cache counts other bytes,
    :func:`pipeline.core.records.server_key`), else the model's."""
    return cards.get(server_key(m["model"], m.get("variant") or DEFAULT_VARIANT)) or cards.get(m["model"])


def _prediction(points: list[Any] | None, analysis_points: list[dict[str, Any]], card: dict[str, Any] | None,
                hardware: dict[str, Any], meta: dict[str, Any], model: str) -> dict[str, Any] | None:
    """The calibrated prediction of one workload (:func:`pipeline.views.predict.predict_workload`), None without points."""
    from pipeline.cards.modelcards import ModelCard
    from pipeline.views.predict import predict_workload

    if not points:
        return None
    try:
        model_card = ModelCard.from_dict(card) if card else None
    except TypeError:
        model_card = None
    server = ((meta.get("server") or {}).get("servers") or {}).get(model)
    limits = (server.get("limits") if isinstance(server, dict) else None) or {}
    rows = {a["concurrency"]: a for a in analysis_points if a.get("concurrency") is not None}
    return predict_workload(points, rows, model_card, hardware, None, limits)
