"""The typed parts of ``analysis.json`` (:class:`pipeline.store.schemas.AnalysisFile`): the figures of a point and of
a model (one workload) that ``show``, ``diff`` and the pages compute with or format, checked strictly when the file
is read."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class _Typed(BaseModel):
    """Base of the typed parts of a derived file: every other key allowed as stored; the typed ones strict (an int
    is a float, a bool or a string is no number), so a damaged value is named when the file is read, not met as a
    Python error where a page or ``show`` formats it (derived files are read as stored)."""

    model_config = ConfigDict(extra="allow", strict=True)


class AnalysisPoint(_Typed):
    """The figures of an ``analysis.json`` point that ``show``, ``diff`` and the pages compute with or format."""

    model: str | None = None
    engine: str | None = None
    variant: str | None = None
    input_len: int | None = None
    output_len: int | None = None
    concurrency: int | None = None
    max_concurrency: int | None = None
    batch: int | None = None
    bytes_per_step: float | None = None
    flops_per_step: float | None = None
    mbu: float | None = None
    mbu_spec: float | None = None
    mbu_probed: float | None = None
    mfu: float | None = None
    roofline_tok_s: float | None = None
    achieved_gb_s: float | None = None
    failure_rate: float | None = None
    excluded: bool = False
    regime: str | None = None
    routing: str | None = None
    mbu_implausible: str | None = None


class AnalysisModel(_Typed):
    """The figures of an ``analysis.json`` model (one workload) that ``show``, ``diff`` and the pages compute with or
    format."""

    model: str | None = None
    engine: str | None = None
    variant: str | None = None
    input_len: int | None = None
    output_len: int | None = None
    ceiling_tok_s: float | None = None
    ceiling_tok_s_spec: float | None = None
    ceiling_tok_s_probed: float | None = None
    single_stream_tok_s: float | None = None
    knee_concurrency: int | None = None
    knee_threshold: float | None = None
    peak_output_throughput_tok_s: float | None = None
    peak_concurrency: int | None = None
    max_failure_rate: float | None = None
    excluded_concurrency: list[int] | None = None
    caveat_concurrency: list[int | None] | None = None
    rate_sweeps: list[dict[str, Any]] | None = None
    coverage_not_measured: str | None = None
