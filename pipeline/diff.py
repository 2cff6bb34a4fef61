"""Run vs run, the statistics: matched points, their changes, significance and comparability (pure).

Points are matched by (model, engine, input length, output length, concurrency).  For each
matched point and each metric below, the diff reports A's and B's value, the relative change
(B − A) / A (for shares, MBU and MFU, the change B − A in percentage points instead: a relative
change of a percentage reads as a percentage and misleads), and a two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``) of A's samples
against B's at level α; a change whose p exceeds α is shown as ``~`` (as benchstat and asv do).

Metrics and the samples each one is tested on (``PointSummary.samples``):

=====================  ==========================  ==========================================
metric                 value shown                 samples tested
=====================  ==========================  ==========================================
output throughput      median over repeats         one per repeat
per-user throughput    1 / median TPOT             one per repeat (1 / the repeat's median TPOT)
TTFT p50, TTFT p99     percentile over requests    per request (served engines); per-repeat
TPOT p50, TPOT p99                                 medians for static batches, whose requests
                                                   share one prefill and one decode loop, so a
                                                   repeat is one independent sample, not B
MBU, MFU               from analysis.json          share × step time / step time of each sample
                                                   (derived: MBU, MFU ∝ 1 / step time at fixed
                                                   bytes, FLOPs, bandwidth and peak); step samples are per repeat
                                                   (static batch) or per-request TPOT (served)
=====================  ==========================  ==========================================

The U test compares whole distributions, so for p99 it asks whether B's latencies are
shifted against A's, not whether the tail alone moved.

Too few samples: with n₁ and n₂ samples and no ties, the most extreme arrangement (every
sample of one side below every sample of the other) has probability 1 / C(n₁ + n₂, n₁)
under the null hypothesis, so the smallest two-sided p any test can return is
``min(1, 2 / C(n₁ + n₂, n₁))`` — derived from the exact permutation distribution of U
(Mann & Whitney 1947); 3 + 3 gives 2 / 20 = 0.1, 5 + 5 gives 2 / 252 ≈ 0.0079.  When that
exceeds α the diff says no change can be significant instead of reporting one.

Comparability: the provenance of both runs (hardware, probed bandwidth, engine, its version
and flags, model revisions, input/output lengths, batchmark and package versions) is
compared; a different hardware profile or workload is stated in the headline, which every
output format puts first.  Probed bandwidth (issue 13): every bandwidth-bound figure (single
stream, throughput before the knee, MBU) moves with the memory bandwidth the machine delivers,
so two runs whose probed bandwidths differ by more than ``BANDWIDTH_LIMIT`` (10 %, relative to
A) are NOT COMPARABLE (the machine changed, or another load shared it); above
``BANDWIDTH_TOLERANCE`` (5 %, the probe's own noise) and up to 10 % they are comparable with a
warning.  The JSON carries ``bandwidth_change`` (B / A − 1, null when a run has no probe),
``bandwidth_limit`` and ``warnings`` (a flagged run is one), ``quality_a`` and ``quality_b`` (each run's
verdict, :func:`pipeline.quality.run_quality`; a point flagged in either run is marked ⚠ in the tables).

The ``--json`` document (:meth:`RunDiff.as_dict`): ``{"headline", "comparable", "run_a",
"run_b" ({"run_id", "source", "hardware"}), "alpha", "provenance": [{"field", "label", "a",
"b", "differs"}], "changes": [{"model", "engine", "input_len", "output_len", "concurrency",
"metric", "label", "unit", "higher_is_better", "a", "b", "change" (fraction: relative, or for
unit "fraction" the difference B − A, i.e. percentage points / 100), "change_kind" ("relative" |
"points"), "p_value", "n_a", "n_b", "p_floor" (the smallest p the counts can reach; ``min_p`` before
issue 14, renamed apart from the sampling parameter), "sample_unit", "significant", "verdict" ("better" |
"worse" | "~" | "n/a"), "note"}], "models": [{"model", "engine", "input_len", "output_len", "field", "label", "a", "b",
"change", "changed"}], "only_in_a", "only_in_b": [{"model", "engine", "input_len",
"output_len", "concurrency"}], "test", "notes", "bandwidth_change", "bandwidth_limit", "warnings",
"quality_a", "quality_b"}``.

The report of a diff (text, Markdown, CSV, JSON) is :mod:`pipeline.diffreport`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from scipy.stats import mannwhitneyu

from pipeline.errors import BatchmarkError
from pipeline.metrics import PointSummary
from pipeline.records import PointKey, Workload, workload_of


class RunData(Protocol):
    """What the diff reads of a run: the view :func:`pipeline.stages.load_run` returns (``RunResults``).

    The diff never reads storage itself; its caller (the CLI, the Changes page) loads both runs.
    """

    @property
    def run_id(self) -> str: ...
    meta: dict[str, Any]
    summaries: list[PointSummary]
    analysis: dict[str, Any]


TEST_NAME = "two-sided Mann-Whitney U (scipy.stats.mannwhitneyu)"
BANDWIDTH_TOLERANCE = 0.05  # probed bandwidths within 5 % are probe noise, not a different machine
BANDWIDTH_LIMIT = 0.10  # beyond 10 % apart the runs are not comparable (module docstring)


@dataclass(frozen=True)
class MetricSpec:
    """One compared metric: its key, label, unit and which direction is better."""

    key: str
    label: str
    unit: str
    higher_is_better: bool
    throughput: bool = False


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("output_throughput_tok_s", "output throughput", "tok/s", True, throughput=True),
    MetricSpec("per_user_tok_s", "per-user throughput", "tok/s", True, throughput=True),
    MetricSpec("ttft_p50_s", "TTFT p50", "s", False),
    MetricSpec("ttft_p99_s", "TTFT p99", "s", False),
    MetricSpec("tpot_p50_s", "TPOT p50", "s", False),
    MetricSpec("tpot_p99_s", "TPOT p99", "s", False),
    MetricSpec("mbu", "MBU", "fraction", True),
    MetricSpec("mfu", "MFU", "fraction", True),
)
#: Metrics that are shares of a peak (unit "fraction"): their change is B − A in percentage points.
SHARE_METRICS = ("mbu", "mfu")
METRIC_BY_KEY = {m.key: m for m in METRICS}
MODEL_FIELDS = (("ceiling_tok_s", "ceiling (tok/s)"), ("knee_concurrency", "knee (concurrency)"),
                ("post_knee", "post-knee"), ("peak_output_throughput_tok_s", "peak output throughput (tok/s)"))


# -- statistics -----------------------------------------------------------------------------

def min_two_sided_p(n_a: int, n_b: int) -> float:
    """Smallest two-sided Mann-Whitney p reachable with ``n_a`` and ``n_b`` samples (no ties).

    ``min(1, 2 / C(n_a + n_b, n_a))``, derived in the module docstring; 1.0 when a side is
    empty.  Examples: (3, 3) → 0.1, (5, 5) → 2/252.
    """
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, math.exp(log_min_two_sided_p(n_a, n_b)))


def log_min_two_sided_p(n_a: int, n_b: int) -> float:
    """Natural log of ``2 / C(n_a + n_b, n_a)``, computed with ``math.lgamma`` so that it never overflows.

    ``ln C(n + m, n) = lgamma(n + m + 1) − lgamma(n + 1) − lgamma(m + 1)``.  ``2 / math.comb(…)``
    raised ``OverflowError`` from 515 samples a side (C(1030, 515) > 1.8e308, the largest float;
    issue 22); here ``exp`` of a very negative log simply underflows to 0.0.  Requires n_a, n_b ≥ 1.
    """
    return math.log(2.0) - (math.lgamma(n_a + n_b + 1) - math.lgamma(n_a + 1) - math.lgamma(n_b + 1))


@dataclass
class Significance:
    """Outcome of one significance test.

    Attributes:
        p_value: two-sided Mann-Whitney p (None when a side has no samples).
        n_a / n_b: sample counts.
        p_floor: smallest p these counts can give (:func:`min_two_sided_p`); named so (not
            ``min_p``, a sampling parameter of the engines) since issue 14.
        significant: p ≤ α and the counts can reach α at all.
        note: why no change can be significant, when that is so; else None.
    """

    p_value: float | None
    n_a: int
    n_b: int
    p_floor: float
    significant: bool
    note: str | None


def significance(samples_a: list[float], samples_b: list[float], alpha: float) -> Significance:
    """Two-sided Mann-Whitney U of two sample lists at level ``alpha``.

    scipy chooses the exact distribution for small samples without ties and the normal
    approximation otherwise.  Identical samples (all tied) give p = 1.  When the counts
    cannot reach ``alpha`` the p value is still reported but never called significant.
    """
    n_a, n_b = len(samples_a), len(samples_b)
    if n_a == 0 or n_b == 0:
        return Significance(None, n_a, n_b, min_two_sided_p(n_a, n_b), False, f"no samples to test (n={n_a}+{n_b})")
    return _significance_of(float(mannwhitneyu(samples_a, samples_b, alternative="two-sided").pvalue), n_a, n_b, alpha)


def significance_many(pairs: list[tuple[list[float], list[float]]], alpha: float) -> list[Significance]:
    """:func:`significance` of each ``(samples_a, samples_b)`` pair, the same results, with one scipy call per group.

    ``mannwhitneyu`` costs about 2 ms a call, nearly all of it per-call overhead; a site diffing
    10 runs of 50 models makes some 25,000 tests (issue 13, "A site for a lab").  Pairs with the
    same sample counts and tie status (any equal values among the two samples) are tested as
    the rows of one 2-D call (``axis=1``): scipy chooses the exact or the normal method from the
    counts and from whether there are ties anywhere in the call, so grouping by tie status keeps
    each row's method, and p value, what a call of its own would give.
    """
    import numpy as np

    out: list[Significance | None] = [None] * len(pairs)
    groups: dict[tuple[int, int, bool], list[int]] = {}
    for i, (xa, xb) in enumerate(pairs):
        if not xa or not xb:
            out[i] = significance(xa, xb, alpha)
            continue
        ties = len(set(xa) | set(xb)) < len(xa) + len(xb)
        groups.setdefault((len(xa), len(xb), ties), []).append(i)
    for (n_a, n_b, _), rows in groups.items():
        ps = mannwhitneyu(np.array([pairs[i][0] for i in rows], dtype=float),
                          np.array([pairs[i][1] for i in rows], dtype=float), alternative="two-sided", axis=1).pvalue
        for i, p in zip(rows, np.atleast_1d(ps)):
            out[i] = _significance_of(float(p), n_a, n_b, alpha)
    return out  # type: ignore[return-value]


def _significance_of(p: float, n_a: int, n_b: int, alpha: float) -> Significance:
    """The :class:`Significance` of a two-sided p value from ``n_a`` + ``n_b`` samples (NaN, all tied: p = 1)."""
    floor = min_two_sided_p(n_a, n_b)
    if math.isnan(p):
        p = 1.0
    if floor > alpha:
        return Significance(p, n_a, n_b, floor, False,
                          f"n={n_a}+{n_b}: the smallest two-sided p is {floor:.3g} > α = {alpha:g}, "
                          f"so no change can be significant; measure at least {_repeats_needed(alpha)} repeats")
    return Significance(p, n_a, n_b, floor, p <= alpha, None)


def _repeats_needed(alpha: float) -> int:
    """Smallest n with n + n samples able to reach ``alpha`` (5 at α = 0.05)."""
    n = 1
    while min_two_sided_p(n, n) > alpha:
        n += 1
    return n


def relative_change(a: float | None, b: float | None) -> float | None:
    """(b − a) / a as a fraction; None when either is missing or a is 0."""
    if a is None or b is None or a == 0:
        return None
    return (b - a) / a


# -- per-point values and samples -----------------------------------------------------------

def _static(s: PointSummary) -> bool:
    """True for a static-batch point (one decode loop per repeat; step times are recorded)."""
    return bool(s.samples.get("step_time_s"))


def _latency_samples(s: PointSummary, name: str) -> tuple[list[float], str]:
    per_repeat = s.samples.get(f"{name}_per_repeat")
    if _static(s) and per_repeat:
        return list(per_repeat), "repeat"
    return list(s.samples.get(name) or []), "request"


def metric_value(spec: MetricSpec, s: PointSummary, analysis_point: dict[str, Any] | None) -> float | None:
    """The value of one metric at one point (tokens/s, seconds or MBU fraction); None if unknown."""
    if spec.key in ("output_throughput_tok_s", "per_user_tok_s"):
        return getattr(s, spec.key)
    if spec.key in SHARE_METRICS:
        return (analysis_point or {}).get(spec.key)
    name, pct = spec.key.rsplit("_", 2)[0], spec.key.split("_")[1]
    block = getattr(s, f"{name}_s")
    return block.get(pct) if block else None


def metric_samples(spec: MetricSpec, s: PointSummary, analysis_point: dict[str, Any] | None) -> tuple[list[float], str]:
    """Samples to test one metric on, and their unit (``"repeat"`` or ``"request"``); see the module docstring."""
    if spec.key in ("output_throughput_tok_s", "per_user_tok_s"):
        return list(s.samples.get(spec.key) or []), "repeat"
    if spec.key in SHARE_METRICS:
        mbu = (analysis_point or {}).get(spec.key)
        if mbu is None or not s.step_time_s:
            return [], "repeat"
        steps, unit = (s.samples.get("step_time_s"), "repeat") if _static(s) else (s.samples.get("tpot_s"), "request")
        return [mbu * s.step_time_s / t for t in (steps or []) if t], unit
    return _latency_samples(s, spec.key.rsplit("_", 2)[0] + "_s")


# -- result types ---------------------------------------------------------------------------

@dataclass
class MetricChange:
    """One metric at one matched point."""

    model: str
    engine: str
    input_len: int
    output_len: int
    concurrency: int
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

    @property
    def key(self) -> PointKey:
        """The matched point's :class:`PointKey`."""
        return PointKey(self.model, self.engine, self.input_len, self.output_len, self.concurrency, self.load, self.rate_rps)

    @property
    def point(self) -> str:
        """The point's column in tables: the concurrency (closed loop) or its :meth:`PointKey.label` (open loop)."""
        return str(self.concurrency) if not self.key.open_loop else self.key.label()


@dataclass
class ModelChange:
    """One per-workload analysis figure (ceiling, knee, post-knee, peak) in both runs."""

    model: str
    engine: str
    input_len: int
    output_len: int
    field: str
    label: str
    a: Any
    b: Any
    change: float | None
    changed: bool


@dataclass
class ProvenanceItem:
    """One provenance field of both runs and whether it differs."""

    field: str
    label: str
    a: Any
    b: Any
    differs: bool


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

    def flagged_points(self) -> set[PointKey]:
        """The key of every point flagged in A or B."""
        return {PointKey.of(p) for q in (self.quality_a, self.quality_b) for p in q.get("points") or []}

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form (the ``--json`` output); the headline is the first key."""
        return asdict(self)


# -- comparability --------------------------------------------------------------------------

def _engine_name(meta: dict[str, Any], summaries: list[PointSummary]) -> str | None:
    eng = meta.get("engine")
    if isinstance(eng, dict) and eng.get("engine"):
        return str(eng["engine"])
    if (meta.get("config") or {}).get("engine"):
        return str(meta["config"]["engine"])
    names = sorted({s.engine for s in summaries})
    return ", ".join(names) or None


def provenance_of(r: RunData) -> dict[str, Any]:
    """The provenance fields a diff compares, read from ``run.json`` and the summaries.

    Keys: hardware, bandwidth_gb_s_probed, engine, engine_version, engine_flags (dict),
    model_revisions (dict by model), workloads (sorted ``in X / out Y`` strings), models
    (sorted names), batchmark_version, versions (other packages), driver, source.  A field a
    run does not record is None (imports record less than measured runs).
    """
    meta = r.meta
    eng = meta.get("engine") if isinstance(meta.get("engine"), dict) else {}
    versions = dict(meta.get("versions") or {})
    name = _engine_name(meta, r.summaries)
    version = (eng.get(f"{name}_version") or eng.get("version") or versions.get(name or "")) if name else None
    flags = {k: v for k, v in eng.items() if k != "engine" and not k.endswith("version")}
    cfg = meta.get("config") or {}
    if name and isinstance(cfg.get(name), dict):
        flags.update({f"config.{k}": v for k, v in cfg[name].items()})
    revisions: dict[str, Any] = {}
    for m in cfg.get("models") or []:
        if isinstance(m, dict) and m.get("name"):
            revisions[m["name"]] = {k: v for k, v in m.items() if k != "name" and v is not None}
    for k, v in (meta.get("model_revisions") or {}).items():
        revisions.setdefault(k, {})["revision"] = v
    probe = meta.get("probe") or {}
    return {
        "hardware": (meta.get("hardware") or {}).get("name"),
        "bandwidth_gb_s_probed": probe.get("bandwidth_gb_s"),
        "engine": name,
        "engine_version": version,
        "engine_flags": flags,
        "model_revisions": revisions,
        "workloads": sorted({f"in {s.input_len} / out {s.output_len}" for s in r.summaries}),
        "models": sorted({s.model for s in r.summaries}),
        "batchmark_version": versions.pop("batchmark", None),
        "versions": {k: v for k, v in versions.items() if k != (name or "")},
        "driver": meta.get("driver"),
        "source": meta.get("source", "measured"),
    }


def _round1(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


def compare_provenance(pa: dict[str, Any], pb: dict[str, Any]) -> list[ProvenanceItem]:
    """Field-by-field comparison of two :func:`provenance_of` dicts; dicts are compared per key."""
    items: list[ProvenanceItem] = []

    def add(fld: str, label: str, a: Any, b: Any, differs: bool | None = None) -> None:
        items.append(ProvenanceItem(fld, label, a, b, (a != b) if differs is None else differs))

    add("hardware", "hardware", pa["hardware"], pb["hardware"])
    bw_a, bw_b = pa["bandwidth_gb_s_probed"], pb["bandwidth_gb_s_probed"]
    rel = relative_change(bw_a, bw_b)
    add("bandwidth_gb_s_probed", "probed bandwidth (GB/s)", _round1(bw_a), _round1(bw_b),
        (bw_a is None) != (bw_b is None) or (rel is not None and abs(rel) > BANDWIDTH_TOLERANCE))
    add("engine", "engine", pa["engine"], pb["engine"])
    add("engine_version", "engine version", pa["engine_version"], pb["engine_version"])
    for k in sorted(set(pa["engine_flags"]) | set(pb["engine_flags"])):
        add(f"engine_flags.{k}", f"engine flag {k}", pa["engine_flags"].get(k), pb["engine_flags"].get(k))
    for m in sorted(set(pa["model_revisions"]) & set(pb["model_revisions"])):
        add(f"model_revisions.{m}", f"model {m}", pa["model_revisions"][m], pb["model_revisions"][m])
    add("workloads", "input / output lengths", pa["workloads"], pb["workloads"])
    add("models", "models", pa["models"], pb["models"])
    add("batchmark_version", "batchmark version", pa["batchmark_version"], pb["batchmark_version"])
    for k in sorted(set(pa["versions"]) | set(pb["versions"])):
        add(f"versions.{k}", f"{k} version", pa["versions"].get(k), pb["versions"].get(k))
    add("driver", "driver", pa["driver"], pb["driver"])
    add("source", "source", pa["source"], pb["source"])
    return items


def bandwidth_words(pa: dict[str, Any], pb: dict[str, Any]) -> tuple[float | None, str | None, bool]:
    """``(B / A − 1, sentence or None, comparable)`` for the probed bandwidths of two :func:`provenance_of` dicts.

    More than ``BANDWIDTH_LIMIT`` apart: not comparable; more than ``BANDWIDTH_TOLERANCE``: a warning.
    """
    bw_a, bw_b = pa.get("bandwidth_gb_s_probed"), pb.get("bandwidth_gb_s_probed")
    rel = relative_change(bw_a, bw_b)
    if rel is None or abs(rel) <= BANDWIDTH_TOLERANCE:
        return rel, None, True
    text = (f"probed bandwidth differs by {rel * 100:+.1f} % (A {bw_a:,.1f} GB/s, B {bw_b:,.1f} GB/s; "
            + (f"more than the {BANDWIDTH_LIMIT * 100:.0f} % limit: the machine or its load changed, and every "
               "bandwidth-bound figure moves with it)" if abs(rel) > BANDWIDTH_LIMIT else
               f"above the {BANDWIDTH_TOLERANCE * 100:.0f} % of probe noise, within the {BANDWIDTH_LIMIT * 100:.0f} % limit)"))
    return rel, text, abs(rel) <= BANDWIDTH_LIMIT


def headline(pa: dict[str, Any], pb: dict[str, Any], n_matched: int) -> tuple[str, bool]:
    """The first line of every diff output and whether the runs are like for like.

    Different hardware, a different workload (models, engine or input/output lengths) or probed
    bandwidths more than ``BANDWIDTH_LIMIT`` apart are said here rather than compared silently;
    bandwidths more than ``BANDWIDTH_TOLERANCE`` apart (and within the limit) give a warning.
    """
    problems = []
    if pa["hardware"] != pb["hardware"]:
        problems.append(f"different hardware: A ran on {pa['hardware']}, B on {pb['hardware']}")
    _, bw_text, bw_ok = bandwidth_words(pa, pb)
    if not bw_ok:
        problems.append(bw_text)
    wl = []
    if pa["workloads"] != pb["workloads"]:
        wl.append(f"input/output lengths A {', '.join(pa['workloads']) or 'none'} vs B {', '.join(pb['workloads']) or 'none'}")
    if pa["engine"] != pb["engine"]:
        wl.append(f"engine A {pa['engine']} vs B {pb['engine']}")
    if pa["models"] != pb["models"]:
        only_a = sorted(set(pa["models"]) - set(pb["models"]))
        only_b = sorted(set(pb["models"]) - set(pa["models"]))
        parts = ([f"only in A: {', '.join(only_a)}"] if only_a else []) + ([f"only in B: {', '.join(only_b)}"] if only_b else [])
        wl.append("models " + "; ".join(parts))
    if wl:
        problems.append("different workload: " + "; ".join(wl))
    if n_matched == 0:
        problems.append("no point of A matches a point of B")
    if problems:
        return "NOT COMPARABLE — " + "; ".join(problems) + ". Changes below are not like for like.", False
    same = (f"same hardware ({pa['hardware']}), engine ({pa['engine']}) and workload "
            f"({', '.join(pa['workloads'])}; {len(pa['models'])} model(s))")
    if bw_text:
        return f"Comparable, with a warning: {bw_text}; {same}.", True
    return f"Comparable: {same}.", True


# -- the diff -------------------------------------------------------------------------------

def _key(s: PointSummary) -> PointKey:
    """Points of two runs match by their whole key: workload, load pattern, concurrency (or cap) and rate."""
    return s.key


def _analysis_points(analysis: dict[str, Any]) -> dict[PointKey, dict[str, Any]]:
    return {PointKey.of(p): p for p in analysis.get("points", [])}


def _analysis_models(analysis: dict[str, Any]) -> dict[Workload, dict[str, Any]]:
    return {workload_of(m): m for m in analysis.get("models", [])}


def _point_dict(k: PointKey) -> dict[str, Any]:
    return k.as_dict()


def diff_runs(a: RunData, b: RunData, alpha: float = 0.05) -> RunDiff:
    """Compare run A (before) with run B (after).

    Args:
        a, b: the two runs as read by :func:`pipeline.stages.load_run`.
        alpha: significance level of the two-sided Mann-Whitney U test, 0 < α < 1.

    Returns:
        A :class:`RunDiff`: headline, provenance comparison, one :class:`MetricChange` per
        (matched point, metric), per-workload :class:`ModelChange` rows, and the points
        present in one run only.

    Raises:
        BatchmarkError: ``alpha`` outside (0, 1).
    """
    if not 0 < alpha < 1:
        raise BatchmarkError(f"--alpha {alpha}: must be between 0 and 1")
    sa = {_key(s): s for s in a.summaries}
    sb = {_key(s): s for s in b.summaries}
    pa_pts, pb_pts = _analysis_points(a.analysis), _analysis_points(b.analysis)
    matched = sorted(set(sa) & set(sb))
    changes: list[MetricChange] = []
    samples = [(k, spec, metric_samples(spec, sa[k], pa_pts.get(k)), metric_samples(spec, sb[k], pb_pts.get(k)))
               for k in matched for spec in METRICS]
    tests = significance_many([(xa, xb) for _, _, (xa, _), (xb, _) in samples], alpha)
    for (k, spec, (xa, unit_a), (xb, unit_b)), res in zip(samples, tests):
        va, vb = metric_value(spec, sa[k], pa_pts.get(k)), metric_value(spec, sb[k], pb_pts.get(k))
        note = res.note
        if unit_a != unit_b:
            note = ((note + "; ") if note else "") + f"A tested per {unit_a}, B per {unit_b}"
        points = spec.unit == "fraction"
        rel = (vb - va if va is not None and vb is not None else None) if points else relative_change(va, vb)
        if va is None and vb is None:
            verdict = "n/a"
        elif not res.significant or rel is None or rel == 0:
            verdict = "~"
        else:
            verdict = "better" if (rel > 0) == spec.higher_is_better else "worse"
        changes.append(MetricChange(k.model, k.engine, k.input_len, k.output_len, k.concurrency,
                                    load=k.load, rate_rps=k.rate_rps, metric=spec.key, label=spec.label, unit=spec.unit,
                                    higher_is_better=spec.higher_is_better, a=va, b=vb, change=rel,
                                    p_value=res.p_value, n_a=res.n_a, n_b=res.n_b, p_floor=res.p_floor,
                                    sample_unit=unit_a if unit_a == unit_b else f"{unit_a}/{unit_b}",
                                    significant=res.significant and verdict in ("better", "worse"),
                                    verdict=verdict, note=note, change_kind="points" if points else "relative"))
    ma, mb = _analysis_models(a.analysis), _analysis_models(b.analysis)
    models: list[ModelChange] = []
    for w in sorted(set(ma) & set(mb)):
        for fld, label in MODEL_FIELDS:
            va, vb = ma[w].get(fld), mb[w].get(fld)
            num = isinstance(va, (int, float)) and isinstance(vb, (int, float)) and fld != "knee_concurrency"
            models.append(ModelChange(*w, field=fld, label=label, a=va, b=vb,
                                      change=relative_change(va, vb) if num else None, changed=va != vb))
    prov_a, prov_b = provenance_of(a), provenance_of(b)
    line, ok = headline(prov_a, prov_b, len(matched))
    bw_change, bw_text, _ = bandwidth_words(prov_a, prov_b)
    notes = sorted({c.note for c in changes if c.note})
    from pipeline.quality import run_quality

    qa, qb = (run_quality(r.meta, [s.as_dict() for s in r.summaries], r.analysis.get("models") or [])
              for r in (a, b))
    flagged_runs = [f"{name} = {r.run_id} is a flagged run: " + "; ".join(q["reasons"])
                    for name, r, q in (("A", a, qa), ("B", b, qb)) if q["verdict"] == "flagged"]
    return RunDiff(
        headline=line, comparable=ok,
        run_a={"run_id": a.run_id, "source": prov_a["source"], "hardware": prov_a["hardware"]},
        run_b={"run_id": b.run_id, "source": prov_b["source"], "hardware": prov_b["hardware"]},
        alpha=alpha, provenance=compare_provenance(prov_a, prov_b), changes=changes, models=models,
        only_in_a=[_point_dict(k) for k in sorted(set(sa) - set(sb))],
        only_in_b=[_point_dict(k) for k in sorted(set(sb) - set(sa))], notes=notes,
        bandwidth_change=bw_change, warnings=([bw_text] if bw_text else []) + flagged_runs,
        quality_a=qa, quality_b=qb)


def comparison_key(prov: dict[str, Any]) -> tuple[Any, ...]:
    """What two runs must share to be diffed on the site: hardware, engine and input/output lengths."""
    return (prov["hardware"], prov["engine"], tuple(prov["workloads"]))


def previous_runs(provenances: list[tuple[str, dict[str, Any]]]) -> dict[str, str | None]:
    """For each run, the latest earlier run of the same hardware and workload (None for the first).

    Args:
        provenances: ``[(run_id, provenance_of(run)), ...]`` in any order; run ids sort by
            start time (``YYYYMMDDTHHMMSSZ-<host>``), so "earlier" is "sorts before".

    Returns:
        ``{run_id: previous run_id or None}``; a run must also share at least one model with
        its predecessor, else the search goes further back.
    """
    out: dict[str, str | None] = {}
    ordered = sorted(provenances, key=lambda x: x[0])
    for i, (run_id, prov) in enumerate(ordered):
        out[run_id] = next((rid for rid, p in reversed(ordered[:i])
                            if comparison_key(p) == comparison_key(prov) and set(p["models"]) & set(prov["models"])),
                           None)
    return out


def regressions(d: RunDiff, fail_above_pct: float) -> list[MetricChange]:
    """Significant throughput regressions larger than ``fail_above_pct`` percent (for ``--fail-above``).

    A throughput metric (output or per-user tokens/s) regresses when it is significantly
    lower in B; it counts when the drop exceeds the threshold: change < −pct / 100.
    """
    return [c for c in d.changes
            if METRIC_BY_KEY[c.metric].throughput and c.significant and c.change is not None
            and c.change < -fail_above_pct / 100]


def changes_of(d: RunDiff, metric: str) -> list[MetricChange]:
    """The rows of one metric (e.g. ``output_throughput_tok_s``), in point order."""
    return [c for c in d.changes if c.metric == metric]
