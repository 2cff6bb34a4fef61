"""The ``diff --json`` contract as pydantic models: every key of :meth:`pipeline.diff.rundiff.RunDiff.as_dict`, its
type, unit and meaning (the module docstring of :mod:`pipeline.diff.rundiff`); the schema committed as
``docs/reference/diff.schema.json``.  A run's provenance values (``provenance[].a`` / ``.b``, a model figure's
``a`` / ``b``) are any JSON value: a version, a flag, a number, null where the run does not say."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pipeline.core.contracts import Closed, RunQuality, field

#: The contract's version (the schema's ``version``): raised when a key is removed or changes meaning or type.
VERSION = 1


class RunSide(Closed):
    """One side of the diff: which run."""

    run_id: str = field("the run id")
    source: str | None = field("measured, imported:<format>, or simulated")
    hardware: str | None = field("hardware profile name")


class ProvenanceRow(Closed):
    """One provenance field of both runs."""

    field: str = Field(description="the provenance field (versions, flags, hardware, probe, workload, ...)")
    label: str = Field(description="the field in words")
    a: Any = Field(description="run A's value (any JSON value; null where A does not say)")
    b: Any = Field(description="run B's value")
    differs: bool = Field(description="A's and B's values differ")


class Change(Closed):
    """One metric at one matched point: both values, the change, its test and verdict."""

    model: str = field("model name")
    engine: str = field("serving engine")
    variant: str = field("named server setting")
    input_len: int = field("prompt length", "tokens")
    output_len: int = field("output length", "tokens")
    concurrency: int | None = field("requests in flight; null on an open-loop point", "requests")
    metric: str = field("the metric's key (output_throughput_tok_s, ttft_p50_s, mbu, ...)")
    label: str = field("the metric in words")
    unit: str = field("the unit of a and b (tok/s, s, fraction)")
    higher_is_better: bool = field("a rise is an improvement")
    a: float | None = field("A's value, in unit")
    b: float | None = field("B's value, in unit")
    change: float | None = field("(B - A) / A, or for a fraction B - A (change_kind points)", "fraction")
    change_kind: Literal["relative", "points"] = field("how change is taken")
    p_value: float | None = field("Welch's two-sided p on per-repeat values; null under 2 repeats a side")
    q_value: float | None = field("Benjamini-Hochberg q among the metric's points")
    effect: float | None = field("relative change, also for shares", "fraction")
    n_a: int = field("A's values tested", "repeats")
    n_b: int = field("B's values tested", "repeats")
    p_floor: float = field("the smallest p the counts can reach (0, or 1 below 2 repeats a side)")
    sample_unit: str = field("what one tested value is (repeat)")
    significant: bool = field("called: q <= alpha and effect >= min_effect")
    verdict: Literal["better", "worse", "~", "n/a"] = field("the call")
    note: str | None = field("why there is no test, or what else to know")
    load: str = field("closed, or the open loop's arrivals")
    rate_rps: float | None = field("B's offered rate (open loop)", "req/s")
    rate_a_rps: float | None = field("A's offered rate, matched by rank", "req/s")
    max_concurrency: int | None = field("open loop's cap on requests in flight", "requests")
    ci95_a: list[float] | None = field("95 % Student-t interval [low, high] of A's per-repeat mean, in unit")
    ci95_b: list[float] | None = field("95 % Student-t interval [low, high] of B's per-repeat mean, in unit")


class ModelRow(Closed):
    """One per-workload analysis figure (ceiling, knee, post-knee, peak) in both runs."""

    model: str = field("model name")
    engine: str = field("serving engine")
    variant: str = field("named server setting")
    input_len: int = field("prompt length", "tokens")
    output_len: int = field("output length", "tokens")
    field: str = Field(description="the figure: ceiling_tok_s, knee_concurrency, post_knee, peak_output_throughput_tok_s")
    label: str = Field(description="the figure in words, with its unit")
    a: float | int | str | None = Field(description="A's figure (tok/s, requests, or a word)")
    b: float | int | str | None = Field(description="B's figure")
    change: float | None = Field(description="(B - A) / A of a number (not the knee); null otherwise (unit: fraction)")
    changed: bool = Field(description="A's and B's figures differ")


class OnlyIn(Closed):
    """A point present in one run only (its key)."""

    model: str = field("model name")
    engine: str = field("serving engine")
    variant: str = field("named server setting")
    input_len: int = field("prompt length", "tokens")
    output_len: int = field("output length", "tokens")
    concurrency: int | None = field("requests in flight; null on an open-loop point", "requests")
    load: str | None = Field(None, description="the open loop's arrivals (an open-loop key only)")
    rate_rps: float | None = Field(None, description="offered rate (an open-loop key only) (unit: req/s)")
    max_concurrency: int | None = Field(None, description="the open loop's cap (an open-loop key only) (unit: requests)")


class DiffDocument(Closed):
    """``batchmark diff A B --json``: run B (after) against run A (before)."""

    headline: str = field("the comparison in one sentence: comparable or not, and why")
    comparable: bool = field("the runs may be compared (hardware, probe within bandwidth_limit, ...)")
    run_a: RunSide = field("run A (before)")
    run_b: RunSide = field("run B (after)")
    alpha: float = field("false discovery rate of the Benjamini-Hochberg rule", "fraction")
    provenance: list[ProvenanceRow] = field("provenance compared field by field")
    changes: list[Change] = field("one row per matched point and metric")
    models: list[ModelRow] = field("one row per workload in both runs and figure")
    only_in_a: list[OnlyIn] = field("points of A without a match in B")
    only_in_b: list[OnlyIn] = field("points of B without a match in A")
    test: str = field("the test's name")
    notes: list[str] = field("distinct notes of the changes")
    bandwidth_change: float | None = field("B's probed bandwidth / A's - 1; null when a run has no probe", "fraction")
    bandwidth_limit: float = field("beyond this bandwidth change the runs are not comparable", "fraction")
    warnings: list[str] = field("the bandwidth's move, a flagged run")
    quality_a: RunQuality = field("run A's verdict")
    quality_b: RunQuality = field("run B's verdict")
    min_effect: float = field("smallest relative change ever called", "fraction")
    n_tests: int = field("changes tested", "count")
    n_called: int = field("changes called", "count")
    calls: str = field("the headline's second sentence: calls among tests, and what chance makes")
