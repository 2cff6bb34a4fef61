"""``batchmark diff``'s work: check the options, diff two runs, print the report, gate on ``--fail-above``."""

from __future__ import annotations

import math
import sys

from pipeline.commands import print  # noqa: A004 (escapes control characters; see pipeline.commands.print)
from pipeline.diff.metrics import MetricChange
from pipeline.diff.stats import MIN_EFFECT
from pipeline.core.errors import BatchmarkError


def _where(c: MetricChange) -> str:
    """A diffed point in a message: ``c=8`` (closed loop) or ``poisson 2.4 req/s, cap 64`` (open loop)."""
    return f"c={c.concurrency}" if c.load == "closed" else c.point


def diff(run_a: str, run_b: str | None, *, fmt: str = "text", fail_above: str | None = None, alpha: float = 0.05,
         min_effect_pct: float = MIN_EFFECT * 100, variants: tuple[str, str] | None = None) -> int:
    """``batchmark diff``: print the diff of run A (before) and run B (after) and gate on ``--fail-above``.

    Args:
        run_a, run_b: run ids or paths; with ``variants`` one run (``run_b`` None or the same run).
        variants: ``(A, B)``: diff variant A's points of ``run_a`` against variant B's, shape by shape and
            concurrency by concurrency (:func:`pipeline.diff.match.variant_sides`).
        fmt: ``"text"``, ``"markdown"``, ``"csv"`` (the headline to stderr) or ``"json"``.
        fail_above: ``--fail-above``'s text (:func:`pipeline.diff.gate.parse_fail_above`), or None for no gate.
        alpha: the false discovery rate, 0 < α < 1.
        min_effect_pct: the minimum effect in percent, ≥ 0.

    Returns:
        0, or 1 when a gated metric regressed beyond its threshold (each regression named on stderr).

    Raises:
        BatchmarkError: a bad threshold, α or minimum effect, an unreadable run, or a gate on runs not comparable.
    """
    from pipeline.analysis import stages
    from pipeline.diff import report as diffreport
    from pipeline.diff.rundiff import diff_runs
    from pipeline.diff.gate import parse_fail_above, regressions, untestable_drops

    gates = parse_fail_above(fail_above) if fail_above is not None else None
    if not (math.isfinite(alpha) and 0 < alpha < 1):
        raise BatchmarkError(f"--alpha {alpha:g}: must be a significance level between 0 and 1")
    if not (math.isfinite(min_effect_pct) and min_effect_pct >= 0):
        raise BatchmarkError(f"--min-effect {min_effect_pct:g}: must be a finite percentage >= 0")
    if variants is not None:
        from pipeline.diff.match import variant_sides

        if run_b is not None and run_b != run_a:
            raise BatchmarkError("--variants: give one run (its two variants are diffed), not two")
        side_a, side_b = variant_sides(stages.load_run(run_a), *variants)
    elif run_b is None:
        raise BatchmarkError("diff: give two runs (RUN_A RUN_B), or one run and --variants A B")
    else:
        side_a, side_b = stages.load_run(run_a), stages.load_run(run_b)
    result = diff_runs(side_a, side_b, alpha=alpha, min_effect=min_effect_pct / 100)
    if fmt == "json":
        print(diffreport.format_json(result), end="")
    elif fmt == "markdown":
        print(diffreport.format_markdown(result), end="")
    elif fmt == "csv":
        print(result.headline, file=sys.stderr)
        print(diffreport.format_csv(result), end="")
    else:
        print(diffreport.format_text(result), end="")
    if gates is None:
        return 0
    if not result.comparable:
        raise BatchmarkError(f"--fail-above: the runs are not comparable ({result.headline}); refusing to gate")
    untestable = untestable_drops(result, gates)
    if untestable:
        c = untestable[0]
        print(f"batchmark: warning: {len(untestable)} gated change(s) beyond their --fail-above threshold cannot be "
              f"significant with these repeats (e.g. {c.model} {_where(c)} {c.label} {diffreport.format_change(c.change, c.unit)}, "
              f"a side has fewer than 2 repeats, so there is no test); measure >= 2 repeats per side to gate "
              "(docs/diff-statistics.md: what each count detects)",
              file=sys.stderr)
    regs = regressions(result, gates)
    for c in regs:
        print(f"batchmark: regression: {c.model} {c.engine} in {c.input_len}/out {c.output_len} {_where(c)} "
              f"{c.label} {diffreport.format_change(c.change, c.unit)} (p={c.p_value:.3g}, q={c.q_value:.3g}) exceeds "
              f"--fail-above {gates[c.metric]:g}%",
              file=sys.stderr)
    return 1 if regs else 0
