"""Run vs run, the compared metrics: what each one is, its value at a point, its values per repeat, their test.

Each metric is a :class:`MetricSpec`, made from the metric registry's entry (:mod:`pipeline.metrics.registry`: its name,
label, unit, better direction, and which of its figures the diff compares), whose fields say where its value lives (``source``: a summary field, a
latency distribution's percentile, or an analysis share), so no code parses a key string.  The table of what is
shown and what is tested per repeat, and why, is in :mod:`pipeline.diff.rundiff`'s docstring and docs/diff-statistics.md.
One metric at one matched point is a :class:`MetricChange`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pipeline.diff.stats import welch_many
from pipeline.metrics import registry
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import DEFAULT_VARIANT, PointKey


@dataclass(frozen=True)
class MetricSpec:
    """One compared metric: its key, label, unit, which direction is better, and where its value lives.

    Attributes:
        key: the metric's name in every output (``output_throughput_tok_s``, ``ttft_p99_s``, ``mbu``, …).
        label, unit: how a reader sees it (unit ``"fraction"``: a share of a peak, changed in percentage points).
        higher_is_better: the better direction.
        source: ``"summary"`` (the :class:`PointSummary` field named ``key``, tested on ``samples[key]``),
            ``"latency"`` (the percentile ``percentile`` of the distribution ``distribution``), or ``"analysis"``
            (the analysis point's ``key``, a share of a peak).
        distribution: for ``"latency"``: the distribution's name without unit (``"ttft"``, ``"tpot"``).
        percentile: for ``"latency"``: ``"p50"`` or ``"p99"``.
        throughput: gated by a bare ``--fail-above PCT``.
    """

    key: str
    label: str
    unit: str
    higher_is_better: bool
    source: Literal["summary", "latency", "analysis"]
    distribution: str | None = None
    percentile: str | None = None
    throughput: bool = False

    @property
    def share(self) -> bool:
        """True for a share of a peak (MBU, MFU): its change is B − A in percentage points."""
        return self.source == "analysis"


def registry_specs() -> tuple[MetricSpec, ...]:
    """The diff's metrics, from the metric registry (:mod:`pipeline.metrics.registry`): one :class:`MetricSpec` per
    entry of each registry metric's ``diff``, in registry order: a scalar under its own name (``source`` ``summary``,
    or ``analysis`` for a share of a peak), a distribution's percentile as ``<name>_<percentile>_s``
    (``ttft_p99_s``: the distribution ``ttft``'s ``p99``), labelled ``<label> <percentile>``."""
    out = []
    for m in registry.METRICS:
        for stat in m.diff:
            if m.kind == "distribution":
                dist = m.name.removesuffix("_s")
                out.append(MetricSpec(f"{dist}_{stat}_s", f"{m.label} {stat}", m.unit, bool(m.higher_is_better),
                                      "latency", dist, stat))
            else:
                out.append(MetricSpec(m.name, m.label, m.unit, bool(m.higher_is_better), m.source, throughput=m.gated))
    return tuple(out)


METRICS: tuple[MetricSpec, ...] = registry_specs()
METRIC_BY_KEY = {m.key: m for m in METRICS}


@dataclass
class Significance:
    """Outcome of one test of A's per-repeat values against B's.

    Attributes:
        p_value: two-sided Welch p (:func:`pipeline.diff.stats.welch`); None when a side has fewer than 2 values.
        n_a / n_b: value counts (repeats).
        p_floor: smallest p these counts can give: 0.0 with 2 or more values a side (Welch's t reaches any p),
            1.0 below that (no test).  Named so (not ``min_p``, a sampling parameter of the engines).
        significant: p ≤ α (before the Benjamini–Hochberg adjustment and the minimum effect of :func:`diff_runs`).
        note: why there is no test, when that is so; else None.
    """

    p_value: float | None
    n_a: int
    n_b: int
    p_floor: float
    significant: bool
    note: str | None


def significance(samples_a: list[float], samples_b: list[float], alpha: float) -> Significance:
    """Welch's two-sided t-test of two lists of per-repeat values at level ``alpha`` (:func:`significance_many`)."""
    return significance_many([(samples_a, samples_b)], alpha)[0]


def significance_many(pairs: list[tuple[list[float], list[float]]], alpha: float) -> list[Significance]:
    """:func:`significance` of each ``(samples_a, samples_b)`` pair, with one vectorised scipy call for all of them.

    A side with no values: "no samples to test"; with one value: no test either (a variance needs two;
    measure at least 2 repeats).  Numerically safe at any count (sums by ``math.fsum``, the t tail by
    ``scipy.special.stdtr``), 10,000 values a side included.
    """
    out = []
    for (xa, xb), w in zip(pairs, welch_many(pairs)):
        n_a, n_b = len(xa), len(xb)
        if w is not None:
            out.append(Significance(w.p_value, n_a, n_b, 0.0, w.p_value <= alpha, None))
        elif n_a == 0 or n_b == 0:
            out.append(Significance(None, n_a, n_b, 1.0, False, f"no samples to test (n={n_a}+{n_b})"))
        else:
            out.append(Significance(None, n_a, n_b, 1.0, False,
                                    f"n={n_a}+{n_b}: a side has one repeat, so there is no spread to test against; "
                                    "measure at least 2 repeats (docs/diff-statistics.md: what each count detects)"))
    return out


def relative_change(a: float | None, b: float | None) -> float | None:
    """(b − a) / a as a fraction; None when either is missing or a is 0."""
    if a is None or b is None or a == 0:
        return None
    return (b - a) / a



# -- per-point values and samples -----------------------------------------------------------

def _static(s: PointSummary) -> bool:
    """True for a static-batch point (one decode loop per repeat; step times are recorded)."""
    return bool(s.samples.get("step_time_s"))


def _latency_samples(s: PointSummary, name: str, pct: str) -> tuple[list[float], str]:
    """One value per repeat of the distribution ``name`` (``"ttft"``, ``"tpot"``): the repeat's own p99 for p99
    (``<name>_p99_s_per_repeat``), its median for p50 (``<name>_s_per_repeat``).

    A run summarized before the per-repeat p99 was kept tests its p99 on the per-repeat medians,
    unit ``"repeat median"`` (the diff notes it when the two runs' units differ).
    """
    m = registry.metric(f"{name}_s")
    p99_key, median_key = m.repeat_sample_of("p99"), m.repeat_sample_of("p50")
    if pct == "p99" and p99_key and s.samples.get(p99_key):
        return list(s.samples[p99_key]), "repeat"
    per_repeat = list(s.samples.get(median_key or "") or [])
    return per_repeat, "repeat" if pct == "p50" or not per_repeat else "repeat median"


def metric_value(spec: MetricSpec, s: PointSummary, analysis_point: dict[str, Any] | None) -> float | None:
    """The value of one metric at one point (tokens/s, seconds or MBU fraction); None if unknown."""
    if spec.source == "summary":
        return getattr(s, spec.key)
    if spec.source == "analysis":
        return (analysis_point or {}).get(spec.key)
    block = getattr(s, f"{spec.distribution}_s")
    return block.get(spec.percentile) if block else None


def metric_samples(spec: MetricSpec, s: PointSummary, analysis_point: dict[str, Any] | None) -> tuple[list[float], str]:
    """Values to test one metric on, one per repeat, and their unit (``"repeat"``); see :mod:`pipeline.diff.rundiff`."""
    if spec.source == "summary":
        return list(s.samples.get(registry.metric(spec.key).repeat_sample or spec.key) or []), "repeat"
    if spec.source == "analysis":
        share = (analysis_point or {}).get(spec.key)
        if share is None or not s.step_time_s:
            return [], "repeat"
        steps = s.samples.get("step_time_s") if _static(s) else s.samples.get("tpot_s_per_repeat")
        return [share * s.step_time_s / t for t in (steps or []) if t], "repeat"
    return _latency_samples(s, str(spec.distribution), str(spec.percentile))


@dataclass
class MetricChange:
    """One metric at one matched point: A's and B's values, the change, its test and verdict, and each side's 95 %
    interval over repeats (``ci95_a``, ``ci95_b``)."""

    model: str
    engine: str
    variant: str = field(default=DEFAULT_VARIANT, kw_only=True)
    input_len: int
    output_len: int
    concurrency: int | None
    metric: str
    label: str
    unit: str
    higher_is_better: bool
    a: float | None
    b: float | None
    change: float | None
    p_value: float | None
    n_a: int
    n_b: int
    p_floor: float
    sample_unit: str
    significant: bool
    verdict: str
    note: str | None
    change_kind: str = "relative"
    load: str = "closed"
    rate_rps: float | None = None
    q_value: float | None = None
    effect: float | None = None
    rate_a_rps: float | None = None
    max_concurrency: int | None = None
    #: The 95 % confidence interval ``[low, high]`` of the mean of A's / B's values tested per repeat (Student's t,
    #: :func:`pipeline.metrics.definitions.repeat_ci95`); None under two repeats a side.  The spread each side's
    #: test saw, not a second test: the verdict is Welch's and Benjamini–Hochberg's alone.
    ci95_a: list[float] | None = None
    ci95_b: list[float] | None = None

    @property
    def key(self) -> PointKey:
        """The matched point's :class:`PointKey`."""
        return PointKey(self.model, self.engine, self.input_len, self.output_len, self.concurrency, self.load, self.rate_rps,
                        self.max_concurrency, variant=self.variant)

    @property
    def point(self) -> str:
        """The point's column in tables: the concurrency (closed loop) or its :meth:`PointKey.label` (open loop; B's
        rate, with A's beside it when the rate-sweep match paired different rates)."""
        if not self.key.open_loop:
            return str(self.concurrency)
        if self.rate_a_rps is None or self.rate_a_rps == self.rate_rps:
            return self.key.label()
        return f"{self.key.label()} (A {self.rate_a_rps:g})"

