"""The ``predict --json`` contract as pydantic models: every key :func:`pipeline.views.predict.predict_run` writes,
its type, unit and meaning (the module docstring of :mod:`pipeline.views.predict`); the schema committed as
``docs/reference/predict.schema.json``.  Every ``predicted`` figure is a prediction of the calibrated per-step model,
never a measurement."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pipeline.core.contracts import Closed, field

#: The contract's version (the schema's ``version``): raised when a key is removed or changes meaning or type.
VERSION = 1


class Measured(Closed):
    """A measured point's figures."""

    output_throughput_tok_s: float | None = field("output throughput", "tok/s")
    tpot_s: float | None = field("median TPOT", "s")
    ttft_s: float | None = field("median TTFT", "s")


class Predicted(Measured):
    """A point's predicted figures."""

    band: list[float] | None = field("the output throughput's band [low, high] from the fit's spread over repeats",
                                     "tok/s")


class PredictPoint(Closed):
    """One grid point (or a doubling beyond the grid): measured beside predicted."""

    concurrency: int = field("requests in flight", "requests")
    calibration: bool = field("the fit was calibrated on this point")
    measured: Measured | None = field("the measurement; null beyond the grid")
    predicted: Predicted = field("the prediction")
    error: dict[str, float | None] | None = field("per metric: predicted / measured - 1; null without a measurement",
                                                  "fraction")
    call_out: Literal["queueing", "kv_cache_full", "unexplained", "calibration_missed"] | None = field(
        "a point off its prediction by more than the call-out fraction, and what explains it")


class PredictModel(Closed):
    """One closed-loop workload: the fit and its predictions (``error`` and no points where no fit was made)."""

    model: str = field("model name")
    engine: str = field("serving engine")
    variant: str = field("named server setting")
    input_len: int = field("prompt length", "tokens")
    output_len: int = field("output length", "tokens")
    kind: str | None = field("dense or moe; null without a card")
    method: Literal["static_batch", "static_batch_engine_terms", "simulated_server"] = field(
        "static_batch: B / T(B); static_batch_engine_terms: the engine-terms fit; simulated_server: the simulated "
        "server on the calibrated terms")
    calibrated_on: list[int] | None = field("concurrencies the fit was calibrated on", "requests")
    calibration_reason: str | None = field("why those")
    fit: dict[str, Any] | None = field(
        "the fitted terms (overhead_s in s, bandwidth_fraction and compute_fraction as fractions, prefill_tok_s in "
        "tok/s, prefill_overhead_s in s), each term's *_spread over repeats, engine_terms where that fit ran, words")
    error: str | None = field("why no fit was made; null when one was")
    median_abs_error: float | None = field("median |error| of output throughput at the points not calibrated on",
                                           "fraction")
    worst_abs_error: float | None = field("largest of those", "fraction")
    points: list[PredictPoint] = field("the grid's points, then the doublings beyond it")
    fit_note: str | None = Field(None, description="a calibration point the fit misses, in words (present with a fit)")


class PredictDocument(Closed):
    """``batchmark predict RUN --json``: the calibrated per-step model's predictions beside the run's measurements."""

    run_id: str = field("the run id")
    source: str = field("measured, imported:<format>, or simulated")
    models: list[PredictModel] = field("one entry per closed-loop workload")
    flagged: list[str] | None = field("a flagged run's reasons, short; null for a clean run")
