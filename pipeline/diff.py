"""Run vs run, the statistics: matched points, their changes, significance and comparability (pure).

Points are matched by (model, engine, input length, output length, concurrency); open-loop points by their
place in the rate sweep (:func:`match_open_loop`: rank, or the rate as a fraction of the sweep's highest).  For each matched point and each metric below, the diff
reports A's and B's value, the relative change (B − A) / A (for shares, MBU and MFU, the change B − A in
percentage points instead: a relative change of a percentage reads as a percentage and misleads), and a
test of A's per-repeat values against B's (:mod:`pipeline.diffstats`, argued in docs/diff-statistics.md):

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
per-user throughput    1 / median TPOT             1 / the repeat's median TPOT
TTFT p50, TPOT p50     percentile over requests    the repeat's median
TTFT p99, TPOT p99                                 the repeat's p99 (``*_p99_s_per_repeat``; runs summarized
                                                   before it was kept: the repeat's median)
MBU, MFU               from analysis.json          share × step time / the repeat's step time (static
                                                   batch) or median TPOT (served) (derived: MBU, MFU ∝
                                                   1 / step time at fixed bytes, FLOPs, bandwidth, peak)
=====================  ==========================  ==========================================

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
"points"), "p_value" (Welch), "q_value" (Benjamini–Hochberg), "effect" (relative change, also for shares),
"n_a", "n_b" (repeats), "p_floor" (the smallest p the counts can reach: 0, or 1 below 2 repeats a side; ``min_p``
before issue 14, renamed apart from the sampling parameter), "sample_unit", "significant" (called), "verdict" ("better" |
"worse" | "~" | "n/a"), "note", "load", "rate_rps" (B's), "rate_a_rps" (A's, matched by rank)}],
"models": [{"model", "engine", "input_len", "output_len", "field", "label", "a", "b",
"change", "changed"}], "only_in_a", "only_in_b": [{"model", "engine", "input_len",
"output_len", "concurrency"}], "test", "notes", "bandwidth_change", "bandwidth_limit", "warnings",
"quality_a", "quality_b", "min_effect", "n_tests", "n_called", "calls"}``.

The report of a diff (text, Markdown, CSV, JSON) is :mod:`pipeline.diffreport`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from pipeline.diffstats import (MIN_EFFECT, TEST_NAME, benjamini_hochberg, called, log_min_two_sided_p,  # noqa: F401
                                min_two_sided_p, welch_many)
from pipeline.errors import BatchmarkError
from pipeline.records import PointKey, PointSummary, Workload, workload_of


class RunData(Protocol):
    """What the diff reads of a run: the view :func:`pipeline.stages.load_run` returns (``RunResults``).

    The diff never reads storage itself; its caller (the CLI, the Changes page) loads both runs.
    """

    @property
    def run_id(self) -> str: ...
    meta: dict[str, Any]
    summaries: list[PointSummary]
    analysis: dict[str, Any]


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


# -- statistics (the formulas are in pipeline.diffstats) --------------------------------------

@dataclass
class Significance:
    """Outcome of one test of A's per-repeat values against B's.

    Attributes:
        p_value: two-sided Welch p (:func:`pipeline.diffstats.welch`); None when a side has fewer than 2 values.
        n_a / n_b: value counts (repeats).
        p_floor: smallest p these counts can give: 0.0 with 2 or more values a side (Welch's t reaches any p),
            1.0 below that (no test).  Named so (not ``min_p``, a sampling parameter of the engines) since issue 14.
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
    """One value per repeat: the repeat's own p99 for a p99 metric (``<name>_p99_per_repeat``), its median for p50.

    A run summarized before the per-repeat p99 was kept (issue 22) tests its p99 on the per-repeat medians,
    unit ``"repeat median"`` (the diff notes it when the two runs' units differ).
    """
    if pct == "p99" and s.samples.get(f"{name.removesuffix('_s')}_p99_s_per_repeat"):
        return list(s.samples[f"{name.removesuffix('_s')}_p99_s_per_repeat"]), "repeat"
    per_repeat = list(s.samples.get(f"{name}_per_repeat") or [])
    return per_repeat, "repeat" if pct == "p50" or not per_repeat else "repeat median"


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
    """Values to test one metric on, one per repeat, and their unit (``"repeat"``); see the module docstring."""
    if spec.key in ("output_throughput_tok_s", "per_user_tok_s"):
        return list(s.samples.get(spec.key) or []), "repeat"
    if spec.key in SHARE_METRICS:
        mbu = (analysis_point or {}).get(spec.key)
        if mbu is None or not s.step_time_s:
            return [], "repeat"
        steps = s.samples.get("step_time_s") if _static(s) else s.samples.get("tpot_s_per_repeat")
        return [mbu * s.step_time_s / t for t in (steps or []) if t], "repeat"
    return _latency_samples(s, spec.key.rsplit("_", 2)[0] + "_s", spec.key.split("_")[1])


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
    q_value: float | None = None
    effect: float | None = None
    rate_a_rps: float | None = None

    @property
    def key(self) -> PointKey:
        """The matched point's :class:`PointKey`."""
        return PointKey(self.model, self.engine, self.input_len, self.output_len, self.concurrency, self.load, self.rate_rps)

    @property
    def point(self) -> str:
        """The point's column in tables: the concurrency (closed loop) or its :meth:`PointKey.label` (open loop; B's
        rate, with A's beside it when the rate-sweep match paired different rates)."""
        if not self.key.open_loop:
            return str(self.concurrency)
        if self.rate_a_rps is None or self.rate_a_rps == self.rate_rps:
            return self.key.label()
        return f"{self.key.label()} (A {self.rate_a_rps:g})"


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
    min_effect: float = MIN_EFFECT
    n_tests: int = 0
    n_called: int = 0
    calls: str = ""

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
    from pipeline.engines.served import server_version

    version = (eng.get(f"{name}_version") or eng.get("version") or versions.get(name or "")
               or server_version(eng)) if name else None
    # ``servers`` (port, pid, start time, log of each model's server) differs in every run: no flag to compare
    flags = {k: v for k, v in eng.items() if k not in ("engine", "servers") and not k.endswith("version")}
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
    kind = source_words(pa, pb)
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
        return kind + "NOT COMPARABLE — " + "; ".join(problems) + ". Changes below are not like for like.", False
    same = (f"same hardware ({pa['hardware']}), engine ({pa['engine']}) and workload "
            f"({', '.join(pa['workloads'])}; {len(pa['models'])} model(s))")
    if bw_text:
        return f"{kind}Comparable, with a warning: {bw_text}; {same}.", True
    return f"{kind}Comparable: {same}.", True


def source_words(pa: dict[str, Any], pb: dict[str, Any]) -> str:
    """The start of a diff's headline when a run is simulated (``source: simulated``, a prediction), else ``""``.

    A simulated run against a measured one compares a prediction with a measurement, never two
    measurements; two simulated runs compare two predictions.
    """
    sim_a, sim_b = pa.get("source") == "simulated", pb.get("source") == "simulated"
    if sim_a and sim_b:
        return "PREDICTION vs PREDICTION — both runs are simulated (predictions, not measurements). "
    if sim_a or sim_b:
        return (f"PREDICTION vs MEASUREMENT — {'A' if sim_a else 'B'} is simulated (a prediction, not a measurement): "
                "this compares a prediction with a measurement. ")
    return ""


# -- the diff -------------------------------------------------------------------------------

def _key(s: PointSummary) -> PointKey:
    """Points of two runs match by their whole key: workload, load pattern, concurrency (or cap) and rate."""
    return s.key


#: Open-loop points of sweeps with different rate counts match when their offered rates, as fractions of their
#: sweep's highest rate, are within this of each other (absolute, on the 0–1 fraction).
RATE_FRACTION_TOLERANCE = 0.05


def _sweep_group(k: PointKey) -> tuple[Any, ...]:
    """An open-loop point's rate sweep: workload, load pattern and cap (the rate left out)."""
    return (*k.workload, k.load, k.concurrency)


def match_open_loop(keys_a: list[PointKey], keys_b: list[PointKey]) -> list[tuple[PointKey, PointKey]]:
    """Open-loop points of A and B matched by their place in the rate sweep, not by the float rate.

    ``rates: auto`` places rates from each run's own measured peak, so two runs of one config share no rate
    (issue 22 item 4).  Within one sweep (workload, load pattern, cap): a rate both runs measured pairs with
    itself; of the others, when both runs have the same number left, the i-th lowest rate of A matches the
    i-th lowest of B (rank); otherwise a rate matches the rate
    of the other run whose fraction of its sweep's highest rate (the rate sweep's top, a proxy for the measured
    saturation rate) is nearest, within ``RATE_FRACTION_TOLERANCE``, each point used once.

    Args:
        keys_a / keys_b: the open-loop point keys of each run (closed-loop keys are ignored).

    Returns:
        ``[(key in A, key in B)]`` in sweep order of B.
    """
    groups: dict[tuple[Any, ...], tuple[list[PointKey], list[PointKey]]] = {}
    for side, keys in ((0, keys_a), (1, keys_b)):
        for k in keys:
            if k.open_loop:
                groups.setdefault(_sweep_group(k), ([], []))[side].append(k)
    pairs: list[tuple[PointKey, PointKey]] = []
    for ga, gb in groups.values():
        if not ga or not gb:
            continue
        top_a, top_b = max(k.rate_rps or 0.0 for k in ga) or 1.0, max(k.rate_rps or 0.0 for k in gb) or 1.0
        same = set(ga) & set(gb)  # the very same rate (explicit rates: configured alike) pairs first
        pairs += [(k, k) for k in same]
        ga = sorted(set(ga) - same, key=lambda k: k.rate_rps or 0.0)
        gb = sorted(set(gb) - same, key=lambda k: k.rate_rps or 0.0)
        if len(ga) == len(gb):
            pairs += list(zip(ga, gb))
            continue
        free = list(ga)
        for kb in gb:
            fb = (kb.rate_rps or 0.0) / top_b
            best = min(free, key=lambda ka: abs((ka.rate_rps or 0.0) / top_a - fb), default=None)
            if best is not None and abs((best.rate_rps or 0.0) / top_a - fb) <= RATE_FRACTION_TOLERANCE:
                pairs.append((best, kb))
                free.remove(best)
    return sorted(pairs, key=lambda p: p[1])


def match_points(sa_list: list[PointSummary], sb_list: list[PointSummary]
                 ) -> tuple[dict[PointKey, PointSummary], dict[PointKey, PointSummary], list[tuple[PointKey, PointKey]]]:
    """Points of A and B by key, and the matched pairs ``(key in A, key in B)`` in sweep order.

    Closed-loop points match by their whole key (workload and concurrency); open-loop points by their
    place in the rate sweep (:func:`match_open_loop`).
    """
    sa = {_key(s): s for s in sa_list}
    sb = {_key(s): s for s in sb_list}
    closed = [(k, k) for k in sorted(set(sa) & set(sb)) if not k.open_loop]
    return sa, sb, sorted(closed + match_open_loop(list(sa), list(sb)), key=lambda p: p[1])


def _analysis_points(analysis: dict[str, Any]) -> dict[PointKey, dict[str, Any]]:
    return {PointKey.of(p): p for p in analysis.get("points", [])}


def _analysis_models(analysis: dict[str, Any]) -> dict[Workload, dict[str, Any]]:
    return {workload_of(m): m for m in analysis.get("models", [])}


def _point_dict(k: PointKey) -> dict[str, Any]:
    return k.as_dict()


def diff_runs(a: RunData, b: RunData, alpha: float = 0.05, min_effect: float = MIN_EFFECT) -> RunDiff:
    """Compare run A (before) with run B (after).

    Args:
        a, b: the two runs as read by :func:`pipeline.stages.load_run`.
        alpha: false discovery rate of the Benjamini–Hochberg rule over the points of each metric, 0 < α < 1.
        min_effect: smallest relative change ever called (fraction, ≥ 0; asv's ``--factor`` − 1).

    Returns:
        A :class:`RunDiff`: headline, provenance comparison, one :class:`MetricChange` per
        (matched point, metric), per-workload :class:`ModelChange` rows, and the points
        present in one run only.  A change is called (``significant``, verdict better / worse) when its
        q value is ≤ α and its relative effect is at least ``min_effect`` (:func:`pipeline.diffstats.called`).

    Raises:
        BatchmarkError: ``alpha`` outside (0, 1) or ``min_effect`` negative or not finite.
    """
    if not 0 < alpha < 1:
        raise BatchmarkError(f"--alpha {alpha}: must be between 0 and 1")
    if not (min_effect >= 0 and min_effect < float("inf")):
        raise BatchmarkError(f"--min-effect {min_effect * 100:g}: must be a finite percentage >= 0")
    sa, sb, matched = match_points(a.summaries, b.summaries)
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
        points = spec.unit == "fraction"
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
        changes.append(MetricChange(k.model, k.engine, k.input_len, k.output_len, k.concurrency,
                                    load=k.load, rate_rps=k.rate_rps, metric=spec.key, label=spec.label, unit=spec.unit,
                                    higher_is_better=spec.higher_is_better, a=va, b=vb, change=rel,
                                    p_value=res.p_value, n_a=res.n_a, n_b=res.n_b, p_floor=res.p_floor,
                                    sample_unit=unit_a if unit_a == unit_b else f"{unit_a}/{unit_b}",
                                    significant=verdict in ("better", "worse"), q_value=q, effect=effect,
                                    rate_a_rps=ka.rate_rps,
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
    from pipeline.quality import run_quality

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


def withhold_flagged(changes: list[MetricChange], quality_a: dict[str, Any], quality_b: dict[str, Any]) -> None:
    """Take back every better / worse verdict of a flagged run or point (issue 24), in place.

    A run measured on a busy machine (its quality verdict, :func:`pipeline.quality.run_quality`) or a point the
    interference check or its repeats' spread flagged gives no finding, nor does an MBU or MFU above 1 (an
    impossible figure: its roof or model card is wrong): its change becomes ``"~"``, not significant, with a note
    that says why (``--fail-above`` does not gate on it either).
    """
    runs = [name for name, q in (("A", quality_a), ("B", quality_b)) if q.get("verdict") == "flagged"]
    points = {PointKey.of(p) for q in (quality_a, quality_b) for p in q.get("points") or []}
    for c in changes:
        if c.verdict not in ("better", "worse"):
            continue
        impossible = c.metric in ("mbu", "mfu") and any(v is not None and v > 1 for v in (c.a, c.b))
        why = (f"run {' and '.join(runs)} flagged" if runs else "point flagged" if c.key in points else
               f"{c.label} above 1 is impossible (a wrong roof or model card)" if impossible else None)
        if why:
            c.note = ((c.note + "; ") if c.note else "") + f"no verdict: {why}"
            c.verdict, c.significant = "~", False


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


#: Short metric names accepted by ``--fail-above NAME:PCT%`` (the full keys of ``METRICS`` are accepted too).
GATE_NAMES = {"output_throughput": "output_throughput_tok_s", "per_user": "per_user_tok_s",
              "per_user_throughput": "per_user_tok_s", "ttft_p50": "ttft_p50_s", "ttft_p99": "ttft_p99_s",
              "tpot_p50": "tpot_p50_s", "tpot_p99": "tpot_p99_s", "mbu": "mbu", "mfu": "mfu"}


def parse_fail_above(text: str) -> dict[str, float]:
    """``--fail-above``'s value → ``{metric key: percent}``.

    ``"10"`` (one threshold, as before issue 22) gates both throughput metrics (output and per-user) at 10 %;
    ``"output_throughput:5%,ttft_p99:10%"`` gates each named metric at its own percentage (the ``%`` is optional;
    names: :data:`GATE_NAMES` or a metric key).  A percentage is of the relative change, the worse way.

    Raises:
        BatchmarkError: an unknown metric name, a metric named twice, or a percentage that is not a finite number ≥ 0.
    """
    def pct(v: str, where: str) -> float:
        try:
            x = float(v.strip().removesuffix("%"))
        except ValueError:
            x = float("nan")
        if not (x == x and x >= 0 and x != float("inf")):
            # nan compares false with everything and inf exceeds every change: either would switch the gate off
            raise BatchmarkError(f"--fail-above {where}: must be a finite percentage >= 0")
        return x

    text = text.strip()
    if ":" not in text:
        p = pct(text, text)
        return {m.key: p for m in METRICS if m.throughput}
    out: dict[str, float] = {}
    for item in text.split(","):
        name, _, value = item.partition(":")
        key = GATE_NAMES.get(name.strip(), name.strip() if name.strip() in METRIC_BY_KEY else None)
        if key is None:
            raise BatchmarkError(f"--fail-above {item.strip()}: unknown metric {name.strip()!r}; one of "
                                 + ", ".join(sorted(GATE_NAMES)))
        if key in out:
            raise BatchmarkError(f"--fail-above {text}: metric {name.strip()!r} given twice")
        out[key] = pct(value, item.strip())
    return out


def regressions(d: RunDiff, fail_above: float | dict[str, float]) -> list[MetricChange]:
    """Called regressions larger than their threshold (for ``--fail-above``).

    Args:
        fail_above: one percentage for both throughput metrics (output and per-user tokens/s), or
            ``{metric key: percent}`` (:func:`parse_fail_above`).

    A metric regresses when its change is called worse (:func:`diff_runs`); it counts when its relative change
    the worse way exceeds the threshold: |effect| > pct / 100.
    """
    gates = fail_above if isinstance(fail_above, dict) else {m.key: float(fail_above) for m in METRICS if m.throughput}
    return [c for c in d.changes
            if c.metric in gates and c.verdict == "worse" and c.effect is not None
            and abs(c.effect) > gates[c.metric] / 100]


def untestable_drops(d: RunDiff, gates: dict[str, float]) -> list[MetricChange]:
    """Gated changes beyond their threshold the worse way that could not be tested (fewer than 2 repeats a side)."""
    out = []
    for c in d.changes:
        if c.metric not in gates or c.effect is None or c.p_value is not None:
            continue
        worse = (c.effect < 0) == METRIC_BY_KEY[c.metric].higher_is_better
        if worse and abs(c.effect) > gates[c.metric] / 100:
            out.append(c)
    return out


def changes_of(d: RunDiff, metric: str) -> list[MetricChange]:
    """The rows of one metric (e.g. ``output_throughput_tok_s``), in point order."""
    return [c for c in d.changes if c.metric == metric]
