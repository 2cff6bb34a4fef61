"""The ``plan --json`` contract as pydantic models: every key of :meth:`pipeline.plan.estimate.Plan.as_dict`, its type,
unit and meaning (the dataclasses of :mod:`pipeline.plan.estimate`); the schema committed as
``docs/reference/plan.schema.json``.  Every figure is a prediction (the simulated server on the sweep's own
requests), never a measurement."""

from __future__ import annotations

from pipeline.core.contracts import Closed, field

#: The contract's version (the schema's ``version``): raised when a key is removed or changes meaning or type.
VERSION = 1


class PlanPoint(Closed):
    """One point of the plan: closed loop at ``concurrency``, or open loop at ``rate_rps`` (``load``)."""

    concurrency: int | None = field("requests in flight (closed loop); null on an open-loop point", "requests")
    wall_s: float = field("predicted wall time of the point, every repeat", "s")
    fits: bool = field("weights + KV cache of c sequences fit, and the request fits max_model_len")
    fits_reason: str = field("why it does not fit ('' when it does)")
    runs: bool = field("the point runs (the server can take one request)")
    tpot_s: float | None = field("predicted median TPOT", "s")
    ttft_s: float | None = field("predicted median TTFT", "s")
    output_throughput_tok_s: float | None = field("predicted output throughput", "tok/s")
    requests_per_repeat: int = field("measured requests per repeat", "count")
    warmup_per_repeat: int = field("warm-up requests per repeat", "count")
    repeats: int = field("repeats", "count")
    load: str = field("closed, or the open loop's arrivals (poisson, constant, gamma, trace)")
    rate_rps: float | None = field("offered rate (open loop)", "req/s")
    kv_bytes_needed: float | None = field("KV cache the point needs", "bytes")
    max_concurrency: int | None = field("open loop's cap on requests in flight; null when uncapped", "requests")


class PlanModel(Closed):
    """One model (one cell of the tuning space: model x variant x shape) of the plan."""

    model: str = field("model name")
    wall_s: float = field("predicted wall time of the model: server start, weights, points", "s")
    server_start_s: float = field("server start and weight loading", "s")
    points: list[PlanPoint] = field("grid points first, then the open-loop rates")
    stops_after: int | None = field("the predicted stop after weak doublings", "requests")
    note: str | None = field("what else to know of the model's points (a harness, a cut)")
    kv_sequences: int | None = field("sequences whose KV cache fits beside the weights; null when they do not fit",
                                     "sequences")
    variant: str = field("named server setting")
    input_len: int | None = field("prompt length", "tokens")
    output_len: int | None = field("output length", "tokens")
    tuned: bool = field("one cell of several (variants or shapes)")


class PlanDocument(Closed):
    """``batchmark plan CONFIG --json``: what a sweep will cost and predict before it runs."""

    config: str = field("the config's path")
    hardware: str = field("hardware profile name")
    backend: str = field("the config's backend")
    wall_s: float = field("predicted wall time of the whole sweep, probes included", "s")
    models: list[PlanModel] = field("one entry per model (per cell of a tuning space)")
    repeats: int = field("repeats per point", "count")
    requests_per_slot: int = field("measured requests per request in flight", "count")
    min_requests: int = field("least measured requests per repeat", "count")
    budget_s: float | None = field("the budget; null without one", "s")
    dropped: list[str] = field("what the budget dropped, in words")
    certainty: list[str] = field("what each budget step costs in certainty, in words")
    fits_budget: bool | None = field("the plan fits the budget; null without one")
    adaptive: bool = field("an adaptive config: the sweep measures part of the grid planned")
    hardware_note: str | None = field("where the hardware figures come from when the profile states none")
    step_terms: str | None = field("the engine whose terms cost each step; null: roofline + overhead")
    workload: str | None = field("each request's lengths drawn, in words; null: fixed lengths")
    step_terms_note: str | None = field("another engine's terms standing in, or terms that are priors")
