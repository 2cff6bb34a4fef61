"""Run vs run, the statistics: matched points, their changes, significance and comparability (pure).

Points are matched by (model, engine, input length, output length, concurrency); open-loop points by their
place in the rate sweep (:func:`match_open_loop`: rank, or the rate as a fraction of the sweep's highest).  For each matched point and each metric below, the diff
reports A's and B's value, the relative change (B − A) / A (for shares, MBU and MFU, the change B − A in
percentage points instead: a relative change of a percentage reads as a percentage and misleads), and a
test of A's per-repeat values against B's (:mod:`pipeline.diff.stats`, argued in docs/diff-statistics.md):

- the unit of replication is the repeat: requests of one repeat share batches, a server state and a
  machine state, so every metric is tested on one value per repeat;
- Welch's two-sided t-test (it reaches any p with 2 or more repeats a side, where the exact
  Mann-Whitney p cannot fall below 2 / C(n₁ + n₂, n₁), 0.1 with 3 + 3);
- a change is called (better / worse) only when its Benjamini–Hochberg q value among the points of its
  metric (one family per metric) is ≤ α AND its relative size is at least the minimum effect
  (``MIN_EFFECT``, ``--min-effect``);
  otherwise it is shown as ``~`` (as benchstat and asv do).  The headline's second sentence
  (:func:`calls_sentence`) says how many calls were made among how many tests, and what chance makes.

Metrics and the value per repeat each one is tested on (``PointSummary.samples``):

=====================  ==========================  ==========================================
metric                 value shown                 value per repeat tested
=====================  ==========================  ==========================================
output throughput      median over repeats         the repeat's throughput
per-user throughput    1 / median streamed TPOT    1 / the repeat's median streamed TPOT
TTFT p50, TPOT p50     percentile over requests    the repeat's median
TTFT p99, TPOT p99                                 the repeat's p99 (``*_p99_s_per_repeat``; runs summarized
                                                   before it was kept: the repeat's median)
MBU, MFU               from analysis.json          share × step time / the repeat's step time (static
                                                   batch) or median TPOT (served) (derived: MBU, MFU ∝
                                                   1 / step time at fixed bytes, FLOPs, bandwidth, peak)
=====================  ==========================  ==========================================

Comparability (the provenance of both runs compared, the probed bandwidth's limit, the headline) is
:mod:`pipeline.diff.comparability`; which points pair is :mod:`pipeline.diff.match`; the metrics and their tests
:mod:`pipeline.diff.metrics`; a flagged run's or point's verdicts taken back :mod:`pipeline.diff.withhold`;
``--fail-above`` :mod:`pipeline.diff.gate`.  The JSON carries ``bandwidth_change`` (B / A − 1, null when a run
has no probe), ``bandwidth_limit`` and ``warnings`` (a flagged run is one), ``quality_a`` and ``quality_b``
(each run's verdict, :func:`pipeline.analysis.quality.run_quality`; a point flagged in either run is marked ⚠ in the tables).

The ``--json`` document (:meth:`RunDiff.as_dict`): ``{"headline", "comparable", "run_a",
"run_b" ({"run_id", "source", "hardware"}), "alpha", "provenance": [{"field", "label", "a",
"b", "differs"}], "changes": [{"model", "engine", "input_len", "output_len", "concurrency",
"metric", "label", "unit", "higher_is_better", "a", "b", "change" (fraction: relative, or for
unit "fraction" the difference B − A, i.e. percentage points / 100), "change_kind" ("relative" |
"points"), "p_value" (Welch), "q_value" (Benjamini–Hochberg), "effect" (relative change, also for shares),
"n_a", "n_b" (repeats), "p_floor" (the smallest p the counts can reach: 0, or 1 below 2 repeats a side; ``min_p``
once, renamed apart from the sampling parameter), "sample_unit", "significant" (called), "verdict" ("better" |
"worse" | "~" | "n/a"), "note", "load", "rate_rps" (B's), "rate_a_rps" (A's, matched by rank), "ci95_a", "ci95_b"
(``[low, high]``: the 95 % Student-t interval of the mean of each side's values tested per repeat, null under two
repeats; what the text and Markdown tables print as ± after A and B)}],
"models": [{"model", "engine", "input_len", "output_len", "field", "label", "a", "b",
"change", "changed"}], "only_in_a", "only_in_b": [{"model", "engine", "input_len",
"output_len", "concurrency"}], "test", "notes", "bandwidth_change", "bandwidth_limit", "warnings",
"quality_a", "quality_b", "min_effect", "n_tests", "n_called", "calls"}``.

The report of a diff (text, Markdown, CSV, JSON) is :mod:`pipeline.diff.report`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.diff.comparability import (BANDWIDTH_LIMIT, ProvenanceItem, RunData, bandwidth_words, compare_provenance,
                                    headline, provenance_of)
from pipeline.diff.contract import DiffDocument
from pipeline.diff.match import match_points
from pipeline.diff.metrics import METRICS, MetricChange, metric_samples, metric_value, relative_change, significance_many
from pipeline.diff.stats import MIN_EFFECT, TEST_NAME, benjamini_hochberg, called
from pipeline.diff.withhold import withhold_flagged
from pipeline.metrics.definitions import repeat_ci95
from pipeline.core.contracts import checked
from pipeline.core.errors import BatchmarkError
from pipeline.core.records import PointKey, Workload, workload_of

MODEL_FIELDS = (("ceiling_tok_s", "ceiling (tok/s)"), ("knee_concurrency", "knee (concurrency)"),
                ("post_knee", "post-knee"), ("peak_output_throughput_tok_s", "peak output throughput (tok/s)"))



@dataclass
class ModelChange:
    """One per-workload analysis figure (ceiling, knee, post-knee, peak) in both runs."""

    model: str
    engine: str
    variant: str
    input_len: int
    output_len: int
    field: str
    label: str
    a: Any
    b: Any
    change: float | None
    changed: bool


@dataclass
class RunDiff:
    """The whole comparison of run A (before) with run B (after)."""

    headline: str
    comparable: bool
    run_a: dict[str, Any]
    run_b: dict[str, Any]
    alpha: float
    provenance: list[ProvenanceItem]
    changes: list[MetricChange]
    models: list[ModelChange]
    only_in_a: list[dict[str, Any]]
    only_in_b: list[dict[str, Any]]
    test: str = TEST_NAME
    notes: list[str] = field(default_factory=list)
    bandwidth_change: float | None = None
    bandwidth_limit: float = BANDWIDTH_LIMIT
    warnings: list[str] = field(default_factory=list)
    quality_a: dict[str, Any] = field(default_factory=dict)
    quality_b: dict[str, Any] = field(default_factory=dict)
    min_effect: float = MIN_EFFECT
    n_tests: int = 0
    n_called: int = 0
    calls: str = ""

    def flagged_points(self) -> set[PointKey]:
        """The key of every point flagged in A or B."""
        return {PointKey.of(p) for q in (self.quality_a, self.quality_b) for p in q.get("points") or []}

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form (the ``--json`` output, :class:`pipeline.diff.contract.DiffDocument`); the headline is the
        first key."""
        return checked(DiffDocument, asdict(self))



def _analysis_points(analysis: dict[str, Any]) -> dict[PointKey, dict[str, Any]]:
    return {PointKey.of(p): p for p in analysis.get("points", [])}


def _analysis_models(analysis: dict[str, Any]) -> dict[Workload, dict[str, Any]]:
    return {workload_of(m): m for m in analysis.get("models", [])}


def _point_dict(k: PointKey) -> dict[str, Any]:
    return k.as_dict()


def _metric_changes(a: RunData, b: RunData, sa: dict[PointKey, Any], sb: dict[PointKey, Any],
                    matched: list[tuple[PointKey, PointKey]], alpha: float, min_effect: float) -> list[MetricChange]:
    """One :class:`MetricChange` per (matched point, metric): A's and B's values, the change, Welch's p and the
    Benjamini–Hochberg q of its metric's family, and the verdict (called only at q ≤ ``alpha`` and an effect of at
    least ``min_effect``)."""
    pa_pts, pb_pts = _analysis_points(a.analysis), _analysis_points(b.analysis)
    changes: list[MetricChange] = []
    samples = [(ka, kb, spec, metric_samples(spec, sa[ka], pa_pts.get(ka)),
                metric_samples(spec, sb[kb], pb_pts.get(kb))) for ka, kb in matched for spec in METRICS]
    tests = significance_many([(xa, xb) for _, _, _, (xa, _), (xb, _) in samples], alpha)
    qs: list[float | None] = [None] * len(tests)
    for spec in METRICS:  # one Benjamini–Hochberg family per metric (Efron 2008, docs/diff-statistics.md)
        rows = [i for i, (_, _, sp, _, _) in enumerate(samples) if sp.key == spec.key]
        for i, q in zip(rows, benjamini_hochberg([tests[i].p_value for i in rows])):
            qs[i] = q
    for (ka, kb, spec, (xa, unit_a), (xb, unit_b)), res, q in zip(samples, tests, qs):
        va, vb = metric_value(spec, sa[ka], pa_pts.get(ka)), metric_value(spec, sb[kb], pb_pts.get(kb))
        note = res.note
        if unit_a != unit_b:
            note = ((note + "; ") if note else "") + f"A tested per {unit_a}, B per {unit_b}"
        points = spec.share
        effect = relative_change(va, vb)
        rel = (vb - va if va is not None and vb is not None else None) if points else effect
        yes = called(q, effect, alpha, min_effect) and bool(rel)
        if va is None and vb is None:
            verdict = "n/a"
        elif not yes or rel is None:
            verdict = "~"
        else:
            verdict = "better" if (rel > 0) == spec.higher_is_better else "worse"
        k = kb
        changes.append(MetricChange(k.model, k.engine, k.input_len, k.output_len, k.concurrency, variant=k.variant,
                                    load=k.load, rate_rps=k.rate_rps, max_concurrency=k.max_concurrency, metric=spec.key, label=spec.label, unit=spec.unit,
                                    higher_is_better=spec.higher_is_better, a=va, b=vb, change=rel,
                                    p_value=res.p_value, n_a=res.n_a, n_b=res.n_b, p_floor=res.p_floor,
                                    sample_unit=unit_a if unit_a == unit_b else f"{unit_a}/{unit_b}",
                                    significant=verdict in ("better", "worse"), q_value=q, effect=effect,
                                    rate_a_rps=ka.rate_rps, ci95_a=repeat_ci95(xa), ci95_b=repeat_ci95(xb),
                                    verdict=verdict, note=note, change_kind="points" if points else "relative"))
    return changes


def _model_changes(a: RunData, b: RunData) -> list[ModelChange]:
    """One :class:`ModelChange` per (workload in both runs, model field of :data:`MODEL_FIELDS`)."""
    ma, mb = _analysis_models(a.analysis), _analysis_models(b.analysis)
    models: list[ModelChange] = []
    for w in sorted(set(ma) & set(mb)):
        for fld, label in MODEL_FIELDS:
            va, vb = ma[w].get(fld), mb[w].get(fld)
            num = isinstance(va, (int, float)) and isinstance(vb, (int, float)) and fld != "knee_concurrency"
            models.append(ModelChange(*w, field=fld, label=label, a=va, b=vb,
                                      change=relative_change(va, vb) if num else None, changed=va != vb))
    return models


def diff_runs(a: RunData, b: RunData, alpha: float = 0.05, min_effect: float = MIN_EFFECT) -> RunDiff:
    """Compare run A (before) with run B (after).

    Args:
        a, b: the two runs as read by :func:`pipeline.analysis.stages.load_run`.
        alpha: false discovery rate of the Benjamini–Hochberg rule over the points of each metric, 0 < α < 1.
        min_effect: smallest relative change ever called (fraction, ≥ 0; asv's ``--factor`` − 1).

    Returns:
        A :class:`RunDiff`: headline, provenance comparison, one :class:`MetricChange` per
        (matched point, metric), per-workload :class:`ModelChange` rows, and the points
        present in one run only.  A change is called (``significant``, verdict better / worse) when its
        q value is ≤ α and its relative effect is at least ``min_effect`` (:func:`pipeline.diff.stats.called`).

    Raises:
        BatchmarkError: ``alpha`` outside (0, 1) or ``min_effect`` negative or not finite.
    """
    if not 0 < alpha < 1:
        raise BatchmarkError(f"--alpha {alpha}: must be between 0 and 1")
    if not (min_effect >= 0 and min_effect < float("inf")):
        raise BatchmarkError(f"--min-effect {min_effect * 100:g}: must be a finite percentage >= 0")
    sa, sb, matched = match_points(a.summaries, b.summaries)
    changes = _metric_changes(a, b, sa, sb, matched, alpha, min_effect)
    models = _model_changes(a, b)
    prov_a, prov_b = provenance_of(a), provenance_of(b)
    line, ok = headline(prov_a, prov_b, len(matched))
    from pipeline.analysis.quality import run_quality

    qa, qb = (run_quality(r.meta, [s.as_dict() for s in r.summaries], r.analysis.get("models") or [])
              for r in (a, b))
    flagged_runs = [f"{name} = {r.run_id} is a flagged run: " + "; ".join(q["reasons"])
                    for name, r, q in (("A", a, qa), ("B", b, qb)) if q["verdict"] == "flagged"]
    withhold_flagged(changes, qa, qb)
    n_tests = sum(c.p_value is not None for c in changes)
    n_called = sum(c.significant for c in changes)
    calls = calls_sentence(n_called, n_tests, alpha, min_effect)
    bw_change, bw_text, _ = bandwidth_words(prov_a, prov_b)
    notes = sorted({c.note for c in changes if c.note})
    return RunDiff(
        headline=line, comparable=ok,
        run_a={"run_id": a.run_id, "source": prov_a["source"], "hardware": prov_a["hardware"]},
        run_b={"run_id": b.run_id, "source": prov_b["source"], "hardware": prov_b["hardware"]},
        alpha=alpha, provenance=compare_provenance(prov_a, prov_b), changes=changes, models=models,
        only_in_a=[_point_dict(k) for k in sorted(set(sa) - {ka for ka, _ in matched})],
        only_in_b=[_point_dict(k) for k in sorted(set(sb) - {kb for _, kb in matched})], notes=notes,
        bandwidth_change=bw_change, warnings=([bw_text] if bw_text else []) + flagged_runs,
        quality_a=qa, quality_b=qb, min_effect=min_effect, n_tests=n_tests, n_called=n_called, calls=calls)


def calls_sentence(n_called: int, n_tests: int, alpha: float, min_effect: float) -> str:
    """The diff's second headline sentence: how many changes were called among how many tests, and what chance alone makes.

    By p alone (p ≤ α) about α × tests calls would come from noise; the Benjamini–Hochberg rule keeps the
    expected share of false calls among the called ones ≤ α (so ≤ α × calls), and the minimum effect removes
    the small ones (docs/diff-statistics.md).
    """
    if n_tests == 0:
        return "No change could be tested (no repeat values on one side or the other)."
    return (f"{n_called} change(s) called among {n_tests} tests (metric × point): called = q ≤ {alpha:g} "
            f"(Benjamini–Hochberg over each metric's points) and at least {min_effect * 100:g} % (the minimum effect); by p ≤ {alpha:g} alone "
            f"chance would make about {alpha * n_tests:.1f} calls, under this rule at most {alpha * n_called:.1f} "
            "of the called ones are expected to be false.")


def changes_of(d: RunDiff, metric: str) -> list[MetricChange]:
    """The rows of one metric (e.g. ``output_throughput_tok_s``), in point order."""
    return [c for c in d.changes if c.metric == metric]
