"""The statistics of a run diff (pure, no I/O): Welch's t-test on per-repeat values, Benjamini–Hochberg, the
minimum effect, and the rank-test floor kept for the record.  The t-test and Benjamini–Hochberg are scipy's
(``scipy.stats.ttest_ind(equal_var=False)``, ``scipy.stats.false_discovery_control``); what is ours is the thin
wrapper around them: no test below 2 values a side, and a certain answer where neither side has any spread.

Why these (argued in ``docs/diff-statistics.md``):

- The unit of replication is the repeat.  Requests of one repeat share batches, a server state and a
  machine state, so they are not independent samples; a test on requests calls noise significant
  (173 of 200 A/A comparisons at α = 0.05).  Kalibera & Jones, "Rigorous Benchmarking in
  Reasonable Time" (ISMM 2013) make the same point for benchmark repetitions: the variation between
  executions dominates, and the execution (here: the repeat) is what must be replicated.
- Welch's unequal-variances t-test (Welch 1947, Biometrika 34:28–35) on one value per repeat: it can reach
  any p with 2 or more values a side, where a rank test cannot: the exact two-sided Mann-Whitney p
  never falls below ``2 / C(n_a + n_b, n_a)`` (0.1 with 3 + 3; :func:`min_two_sided_p`).
- A change is *called* only when it is unlikely under noise (the Benjamini–Hochberg adjusted p, the
  q value, ≤ α) and larger than a minimum effect (asv's ``compare --factor``, default 1.1;
  ours, ``MIN_EFFECT``, from the A/A benchmark ``benchmarks/diff_power.py``).
- Benjamini & Hochberg, "Controlling the false discovery rate", JRSS B 57:289–300 (1995): of the changes
  called among the points of one metric, the expected share of false ones is at most α.  One family per
  metric (Efron, "Simultaneous inference: when should hypothesis testing problems be combined?", Ann. Appl.
  Stat. 2:197–223, 2008: control within each class keeps the combined rate, a weighted mean, at most α too,
  and a change that moves one metric at every point is not drowned by the metrics it leaves alone).  The
  tests of one family are positively dependent (neighbouring points share the machine), under which BH keeps
  its guarantee (Benjamini & Yekutieli 2001, Ann. Statist. 29:1165–1188).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

#: Default minimum effect: a change smaller than 5 % (relative) is never called, whatever its p.  Chosen from
#: the A/A benchmark (benchmarks/diff_power.py, docs/diff-statistics.md): with per-repeat drift of 3 % it keeps
#: A/A calls far below 5 % of metric-points while a 10 % change is still called 9 times in 10 with 5 repeats.
MIN_EFFECT = 0.05
TEST_NAME = "Welch's t-test on per-repeat values, Benjamini–Hochberg over each metric's points"


@dataclass(frozen=True)
class Welch:
    """Welch's two-sample t-test of B against A.

    Attributes:
        t: (mean_B − mean_A) / sqrt(var_A / n_A + var_B / n_B) (sample variances, ddof = 1); ±inf when
            both variances are 0 and the means differ, 0 when both are 0 and the means are equal.
        df: Welch–Satterthwaite degrees of freedom
            (var_A/n_A + var_B/n_B)² / ((var_A/n_A)² / (n_A − 1) + (var_B/n_B)² / (n_B − 1));
            n_A + n_B − 2 when both variances are 0.
        p_value: two-sided, 2 × P(T_df ≥ |t|) (``scipy.stats.ttest_ind(equal_var=False)``).
    """

    t: float
    df: float
    p_value: float


def welch_stat(a: list[float], b: list[float]) -> tuple[float, float] | None:
    """``(t, df)`` of Welch's test (see :class:`Welch`); None when a side has fewer than 2 values."""
    w = welch(a, b)
    return None if w is None else (w.t, w.df)


def welch(a: list[float], b: list[float]) -> Welch | None:
    """Welch's t-test of samples ``b`` against ``a`` (any counts ≥ 2 a side; None below that)."""
    return welch_many([(a, b)])[0]


def _welch_rows(a: "np.ndarray", b: "np.ndarray") -> list[Welch]:
    """Welch's test of each row of ``b`` against the same row of ``a`` (k × n_A and k × n_B arrays, n ≥ 2).

    ``scipy.stats.ttest_ind(b, a, equal_var=False)`` where the standard error is positive and finite; where it is
    0 (neither side has spread) or overflows, t = 0 when the means are equal, else ±inf (a certain difference:
    p = 0), df = n_A + n_B − 2 — scipy's 0 / 0 gives NaN there, which would be no verdict where the answer is certain.
    """
    import warnings

    import numpy as np
    from scipy.stats import ttest_ind

    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing spread is the edge case, not an error
        se2 = a.var(axis=1, ddof=1) / a.shape[1] + b.var(axis=1, ddof=1) / b.shape[1]
        ma, mb = a.mean(axis=1), b.mean(axis=1)
    live = (se2 > 0) & np.isfinite(se2)
    t = np.where(ma == mb, 0.0, np.copysign(np.inf, mb - ma))
    df = np.full(len(se2), float(a.shape[1] + b.shape[1] - 2))
    p = np.where(t == 0, 1.0, 0.0)
    if live.any():
        with warnings.catch_warnings():  # scipy's warning on nearly equal values: the t it returns is still right
            warnings.simplefilter("ignore", RuntimeWarning)
            res = ttest_ind(b[live], a[live], axis=1, equal_var=False)
        t[live], df[live], p[live] = res.statistic, res.df, res.pvalue
    return [Welch(float(ti), float(di), min(1.0, float(pi))) for ti, di, pi in zip(t, df, p)]


def welch_many(pairs: list[tuple[list[float], list[float]]]) -> list[Welch | None]:
    """:func:`welch` of each pair, one vectorised scipy call per pair of sample counts (a site diffs ~25,000 pairs,
    nearly all of one count).  The thin part that is ours: None for a side with fewer than 2 values (no
    variance), and the zero-spread case of :func:`_welch_rows`.
    """
    import numpy as np

    out: list[Welch | None] = [None] * len(pairs)
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (a, b) in enumerate(pairs):
        if len(a) >= 2 and len(b) >= 2:
            groups.setdefault((len(a), len(b)), []).append(i)
    for rows in groups.values():
        tests = _welch_rows(np.array([pairs[i][0] for i in rows], dtype=float),
                            np.array([pairs[i][1] for i in rows], dtype=float))
        for i, w in zip(rows, tests):
            out[i] = w
    return out


def benjamini_hochberg(p_values: list[float | None]) -> list[float | None]:
    """Benjamini–Hochberg adjusted p values (q values), in the order given; None stays None (not tested).

    ``scipy.stats.false_discovery_control(p, method="bh")`` of the tested p values: with the m tested p values
    sorted ascending, p₍₁₎ ≤ … ≤ p₍ₘ₎, q₍ᵢ₎ = min over j ≥ i of min(1, p₍ⱼ₎ × m / j) (Benjamini & Hochberg 1995;
    the step-up rule as adjusted p values, as in R's ``p.adjust(method = "BH")``).  Calling every test with
    q ≤ α keeps the false discovery rate ≤ α.
    """
    from scipy.stats import false_discovery_control

    tested = [i for i, p in enumerate(p_values) if p is not None]
    out: list[float | None] = [None] * len(p_values)
    if tested:
        qs = false_discovery_control([p_values[i] for i in tested], method="bh")
        for i, q in zip(tested, qs):
            out[i] = float(q)
    return out


def called(q_value: float | None, effect: float | None, alpha: float, min_effect: float) -> bool:
    """Whether a change is called: tested, q ≤ α and |effect| ≥ ``min_effect`` (both fractions; effect relative)."""
    return q_value is not None and effect is not None and q_value <= alpha and abs(effect) >= min_effect


def log_min_two_sided_p(n_a: int, n_b: int) -> float:
    """Natural log of ``2 / C(n_a + n_b, n_a)``, computed with ``math.lgamma`` so that it never overflows.

    ``ln C(n + m, n) = lgamma(n + m + 1) − lgamma(n + 1) − lgamma(m + 1)``.  ``2 / math.comb(…)``
    raised ``OverflowError`` from 515 samples a side (C(1030, 515) > 1.8e308, the largest float: an
    exact binomial coefficient overflowing a float); here ``exp`` of a very negative log simply underflows to 0.0.  Requires n_a, n_b ≥ 1.
    """
    return math.log(2.0) - (math.lgamma(n_a + n_b + 1) - math.lgamma(n_a + 1) - math.lgamma(n_b + 1))


def min_two_sided_p(n_a: int, n_b: int) -> float:
    """Smallest two-sided Mann-Whitney p reachable with ``n_a`` and ``n_b`` samples (no ties): why the diff uses no rank test.

    With no ties, the most extreme arrangement (every sample of one side below every sample of the other)
    has probability 1 / C(n_a + n_b, n_a) under the null hypothesis (the exact permutation distribution of
    U, Mann & Whitney 1947), so the floor is ``min(1, 2 / C(n_a + n_b, n_a))``; 1.0 when a side is empty.
    Examples: (3, 3) → 2 / 20 = 0.1, (5, 5) → 2 / 252.  Safe at any count (:func:`log_min_two_sided_p`).
    """
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, math.exp(log_min_two_sided_p(n_a, n_b)))


# -- steps in a history (asv's step detection, least squares) --------------------------------------

def segment_cost(values: list[float], start: int, end: int) -> float:
    """Sum of squared deviations of ``values[start:end]`` from their mean (the segment's least-squares cost)."""
    seg = values[start:end]
    m = math.fsum(seg) / len(seg)
    return math.fsum((v - m) ** 2 for v in seg)


def detect_steps(values: list[float], penalty: float) -> list[int]:
    """Where a history steps: the start index of every new level, by penalized least squares (optimal partitioning).

    Minimises Σ over segments of the squared deviations from the segment's mean + ``penalty`` × (segments − 1)
    exactly, by dynamic programming over the last step's position (Jackson et al., "An algorithm for optimal
    partitioning of data on an interval", IEEE Signal Processing Letters 12, 2005; the L2 form of the Potts
    problem asv's ``step_detect.py`` solves in L1), O(n²) for n values.

    Args:
        values: one value per run, oldest first (the run's median over repeats).
        penalty: cost of one more step, in the values' squared units (:func:`step_penalty`); > 0.

    Returns:
        Sorted indices i (0 < i < n) where a new level begins at ``values[i]``; [] for no step.
    """
    n = len(values)
    if n < 2:
        return []
    best = [0.0] * (n + 1)  # best[j]: the least cost of values[:j]
    last = [0] * (n + 1)  # last[j]: where the last segment of that best partition starts
    for j in range(1, n + 1):
        best[j], last[j] = min((best[i] + segment_cost(values, i, j) + (penalty if i > 0 else 0.0), i)
                               for i in range(j))
    steps, j = [], n
    while j > 0:
        if last[j] > 0:
            steps.append(last[j])
        j = last[j]
    return sorted(steps)


def step_penalty(values: list[float], noise_floor: float = 0.02) -> float:
    """The step penalty for a history: 2 σ² ln n (BIC's; Yao, "Estimating the number of change-points via
    Schwarz' criterion", Stat. Probab. Lett. 6, 1988), σ the noise of one value.

    σ = max(robust σ of successive differences, ``noise_floor`` × the median |value|): the median absolute
    successive difference / (0.6745 × √2) estimates σ and ignores the few large jumps that are the steps
    themselves (a step moves one difference, noise moves all); the floor (2 % by default: the repeats' drift)
    keeps a history of near-identical values from calling every wiggle a step.
    """
    n = len(values)
    if n < 2:
        return math.inf
    diffs = sorted(abs(b - a) for a, b in zip(values, values[1:]))
    mad = diffs[len(diffs) // 2] if len(diffs) % 2 else (diffs[len(diffs) // 2 - 1] + diffs[len(diffs) // 2]) / 2
    level = sorted(abs(v) for v in values)[n // 2]
    sigma = max(mad / (0.6745 * math.sqrt(2)), noise_floor * level)
    return 2 * sigma ** 2 * math.log(n)
