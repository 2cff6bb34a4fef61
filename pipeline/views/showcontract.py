"""The ``show --json`` contract as pydantic models: every key :func:`pipeline.views.show.show_run` writes, its type,
unit and meaning (docs/definitions.md, "The show --json contract"); the schema committed as
``docs/reference/show.schema.json``.

Closed where the shape is the contract's own (no other key allowed); a block copied from a stored file (a point's
``server``, ``interference``, ``lengths``; a model's ``adaptive``, ``rate_sweeps``; ``tuning``) is an object whose
keys its own writer documents.  A figure a source cannot supply is null, never invented: every such field is
nullable.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pipeline.core.contracts import Closed, RunQuality, field

#: The contract's version (the schema's ``version``): raised when a key is removed or changes meaning or type.
VERSION = 1


class Distribution(Closed):
    """One latency's distribution over a point's requests (null: the source did not state it)."""

    p50: float | None = field("median", "s")
    p90: float | None = field("90th percentile", "s")
    p99: float | None = field("99th percentile", "s")
    mean: float | None = field("mean", "s")


class Tail(Closed):
    """A latency's far tail over every value of the point (numpy's linear-interpolation percentiles)."""

    p95: float | None = field("95th percentile", "s")
    p99_9: float | None = field("99.9th percentile", "s")


class Tails(Closed):
    """What ``vllm bench serve`` prints beside the contract's percentiles, per latency (null: none stated)."""

    ttft: Tail | None = field("time to first token")
    tpot: Tail | None = field("time per output token")
    itl: Tail | None = field("inter-token latency, per token")
    itl_chunk: Tail | None = field("inter-token latency, per chunk")
    e2el: Tail | None = field("end-to-end latency")


class Hardware(Closed):
    """The hardware the run measured on (the analysis' hardware block)."""

    name: str | None = field("hardware profile name")
    bandwidth_gb_s_spec: float | None = field("memory bandwidth the profile states", "GB/s")
    bandwidth_gb_s_measured: float | None = field(
        "memory bandwidth this machine's probe measured (the analysis' bandwidth_gb_s_probed; the contract keeps "
        "its older name)", "GB/s")
    peak_tflops_spec: float | None = field("peak compute the profile states", "TFLOP/s")
    memory_gb: float | None = field("accelerator (or unified) memory", "GB")


class PointQuality(Closed):
    """A point's own verdict (pipeline.analysis.quality.point_verdict)."""

    verdict: Literal["clean", "flagged"] = field("clean, or flagged by its repeats' spread or the outside load")
    reasons: list[str] = field("why it is flagged, in words ([] when clean)")


class RepeatSpread(Closed):
    """The output throughput's spread over the point's repeats."""

    n: int = field("repeats with a throughput", "count")
    min: float = field("lowest repeat", "tok/s")
    max: float = field("highest repeat", "tok/s")
    ratio: float = field("max / min", "ratio")


class PointSlo(Closed):
    """A point against the run's SLO (goodput limits per request, p99 bounds per point)."""

    goodput_ttft_ms: float | None = field("a good request's TTFT limit", "ms")
    goodput_tpot_ms: float | None = field("a good request's TPOT limit", "ms")
    goodput_e2el_ms: float | None = field("a good request's E2EL limit", "ms")
    ttft_p99_max_ms: float | None = field("the point's TTFT p99 bound", "ms")
    tpot_p99_max_ms: float | None = field("the point's TPOT p99 bound", "ms")
    e2el_p99_max_ms: float | None = field("the point's E2EL p99 bound", "ms")
    good: int | None = field("requests within every goodput limit", "count")
    measured: int | None = field("requests measured", "count")
    share_ok: float | None = field("good / measured", "fraction")
    goodput_rps: float | None = field("good requests per second", "req/s")
    goodput_tok_s: float | None = field("output tokens of good requests per second", "tok/s")
    p99_ok: dict[str, bool | None] | None = field("each p99 bound (by metric) met, null where not stated")
    met: bool | None = field("every p99 bound met")


class Point(Closed):
    """One point: (model, engine, variant, input length, output length, concurrency or rate), over its repeats."""

    model: str = field("model name")
    engine: str = field("serving engine that produced the tokens (vllm, llama.cpp, transformers, ...)")
    variant: str = field("named server setting it was measured under (default: none)")
    concurrency: int | None = field("requests in flight (closed loop); null on an open-loop point", "requests")
    input_len: int = field("prompt length configured", "tokens")
    output_len: int = field("output length configured", "tokens")
    repeats: int = field("repeats measured", "count")
    completed: int = field("requests completed", "count")
    failed: int = field("requests failed", "count")
    output_throughput_tok_s: float | None = field("output tokens / measured window, all requests together", "tok/s")
    per_user_tok_s: float | None = field("1 / median streamed TPOT", "tok/s")
    ttft_s: Distribution | None = field("time to first token", "s")
    tpot_s: Distribution | None = field("time per output token, (E2EL - TTFT) / (output_tokens - 1)", "s")
    itl_s: Distribution | None = field("inter-token latency, per token", "s")
    e2el_s: Distribution | None = field("end-to-end latency", "s")
    prefill_throughput_tok_s: float | None = field("prompt tokens / prefill time (static batches)", "tok/s")
    output_throughput_window: str | None = field("the window the throughput is over (steady_state, decode_phase, ...)")
    itl_chunk_s: Distribution | None = field("inter-token latency, per chunk", "s")
    tpot_streamed_s: Distribution | None = field("TPOT over the tokens streamed (hidden tokens left out)", "s")
    steady_output_throughput_tok_s: float | None = field("output throughput with every slot busy", "tok/s")
    duration_s: float | None = field("measured window", "s")
    input_tokens_served: float | None = field("prompt tokens the server counted, per request", "tokens")
    output_tokens_served: float | None = field("output tokens the server counted, per request", "tokens")
    achieved_concurrency: float | None = field("mean requests in flight in the window", "requests")
    client_lag_s: Distribution | None = field("the client's event-loop lag", "s")
    client_read_wait_s: float | None = field("a ready read's wait in the client", "s")
    client_cpu_share: float | None = field("the client's CPU use", "fraction of one core")
    connect_s: Distribution | None = field("connection set-up", "s")
    first_byte_s: Distribution | None = field("send to the response's first byte", "s")
    client_bound: bool | None = field("the client, not the server, was the limit")
    client_bound_reason: str | None = field("why the point is client-bound")
    delivered_output_throughput_tok_s: float | None = field("output tokens the server delivered in the window", "tok/s")
    itl_unresolved_share: float | None = field("chunks read together with the one before", "fraction")
    ttst_s: Distribution | None = field("time to second token", "s")
    tokens_per_chunk: float | None = field("mean tokens per streamed chunk", "tokens")
    chunks_per_request: float | None = field("mean chunks per request", "count")
    ci95: dict[str, list[float] | None] | None = field(
        "95 % interval [low, high] over repeats (Student's t) of each figure tested per repeat, in its own unit")
    lengths: dict[str, Any] | None = field(
        "the length distribution: input and output {mean, p50, min, max} tokens, and the stated draw; null at fixed "
        "lengths")
    load: str = field("closed, or the open loop's arrivals (poisson, constant, gamma, trace)")
    rate_rps: float | None = field("offered rate (open loop)", "req/s")
    send_rate_rps: float | None = field("rate the client sent at", "req/s")
    schedule_rate_rps: float | None = field("rate of the drawn schedule", "req/s")
    achieved_rate_rps: float | None = field("completions per second", "req/s")
    schedule_lag_s: Distribution | None = field("sends behind their schedule", "s")
    schedule_kept: bool | None = field("the client kept its schedule")
    burstiness: float | None = field("gamma arrivals' shape (1: Poisson)", "dimensionless")
    slo: PointSlo | None = field("the point against the run's SLO; null without one")
    max_concurrency: int | None = field("open loop's cap on requests in flight; null when uncapped", "requests")
    mbu: float | None = field("model bandwidth utilisation: bytes per step / step time / bandwidth", "fraction")
    mfu: float | None = field("model FLOP/s utilisation against the compute roof", "fraction")
    mfu_withheld: str | None = field("why MFU is withheld (an under-read roof)")
    routing: str | None = field("the expert routing an MoE point's bytes are counted at")
    mbu_implausible: str | None = field("why an MBU above 1 at those bytes is no result")
    regime: str | None = field("what the point measured: batching, queueing, kv_cache_full, ...")
    batch: int | None = field("the batch it really decoded", "sequences")
    server: dict[str, Any] | None = field("the server's /metrics and limits while it ran")
    failure_rate: float | None = field("failed / (completed + failed)", "fraction")
    caveats: list[str] = field("what sets its evidence aside (failed requests, token counts)")
    caveat_counts: dict[str, int] = field("requests with each caveat", "count")
    token_count_sources: dict[str, int] = field("requests whose output count came from each source", "count")
    errors: list[str] = field("its failed requests' first ten distinct errors")
    excluded: bool = field("left out of knee, peak and scaling")
    excluded_reason: str | None = field("why it is left out")
    implausible: str | None = field("a number that cannot be right, and why; null when none")
    mfu_implausible: str | None = field("why an MFU above 1 is no result")
    interference: dict[str, Any] | None = field("outside load on the machine while it ran; null when not measured")
    request_throughput_rps: float | None = field("requests per second, by request_throughput_basis", "req/s")
    request_throughput_basis: Literal["stated", "tokens_over_window", "c_over_e2el"] | None = field(
        "how the request rate was found; null: unknown")
    total_token_throughput_tok_s: float | None = field("(input_len + output_len) x request throughput", "tok/s")
    tails_s: Tails = field("far tails of each latency", "s")
    repeat_spread: RepeatSpread | None = field("output throughput's spread over repeats")
    quality: PointQuality = field("the point's own verdict")


class ImplausibleDiagnosis(Closed):
    """An impossible figure's causes in order of evidence and advice that fits the run."""

    facts: str = field("the figures that cannot be right")
    causes: list[str] = field("likely causes, most likely first")
    title: str = field("the most likely cause, short")
    advice: str = field("what to do")
    text: str = field("the whole diagnosis in one line")


class SloConcurrency(Closed):
    """The concurrencies a closed-loop curve held its SLO to."""

    max_ok: int | None = field("largest concurrency meeting the SLO", "requests")
    first_failing: int | None = field("smallest concurrency missing it", "requests")


class Model(Closed):
    """One workload (model, engine, variant, input length, output length): its card's figures and its curve."""

    model: str = field("model name")
    engine: str = field("serving engine")
    variant: str | None = field("named server setting")
    input_len: int | None = field("prompt length", "tokens")
    output_len: int | None = field("output length", "tokens")
    kind: str | None = field("dense or moe")
    total_params: int | None = field("parameters", "count")
    active_params: int | None = field("parameters active per token", "count")
    weight_bytes: int | float | None = field("weights read per step at batch 1", "bytes")
    kv_bytes_per_token: int | float | None = field("KV cache per token", "bytes")
    ceiling_tok_s: float | None = field("single-stream bandwidth ceiling: bandwidth / bytes per step", "tok/s")
    knee_concurrency: int | None = field("the knee; null when not reached", "requests")
    post_knee: str | None = field("past the knee: plateau, decline or not_reached")
    peak_output_throughput_tok_s: float | None = field("the curve's peak", "tok/s")
    scaling_efficiency: dict[str, float | None] | None = field("per concurrency c: T(c) / (c x T(1))", "fraction")
    excluded_concurrency: list[int | None] = field("concurrencies left out of knee, peak and scaling")
    caveat_concurrency: list[int | None] = field("concurrencies with a caveat")
    post_knee_cause: str | None = field("why the curve does what it does past the knee")
    server_limits: dict[str, Any] | None = field("the server's limits (max_num_seqs, KV cache size, ...)")
    implausible: str | None = field("a number that cannot be right, in words; null when none")
    rate_sweeps: list[dict[str, Any]] | None = field(
        "open-loop rate sweeps per load and cap: points, saturation_rate_rps, max_achieved_rps, slo")
    slo_concurrency: SloConcurrency | None = field("the SLO's concurrency limit; null without an SLO")
    compute_roof_tflops: float | None = field("the compute roof MFU and the roofline use", "TFLOP/s")
    compute_roof_dtype: str | None = field("the dtype the roof was probed in")
    compute_roof_under_read: str | None = field("a roof a measured point beat, and why")
    coverage_not_measured: str | None = field("an MoE's expert coverage not measured: bytes at identical routing")
    knee_per_repeat: list[int | None] = field("the knee of each repeat's curve", "requests")
    knee_settled: bool | None = field("every repeat has the same knee; null with none")
    adaptive: dict[str, Any] | None = field("an adaptive sweep's choices: each grid point measured or predicted, why")
    implausible_diagnosis: ImplausibleDiagnosis | None = field("the impossible figure's diagnosis; null when none")
    run_quality: RunQuality = field("the run's verdict")
    workload: str | None = field("the shape's lengths and arrivals in words")


class ShowDocument(Closed):
    """``batchmark show RUN --json``: a run's points and per-workload analysis."""

    run_id: str | None = field("the run id, YYYYMMDDTHHMMSSZ-<host>")
    source: str = field("measured, imported:<format>, or simulated (a prediction)")
    hardware: Hardware = field("the hardware block")
    points: list[Point] = field("one entry per point")
    models: list[Model] = field("one entry per workload (model, engine, variant, input and output length)")
    adaptive_frontiers: list[dict[str, Any]] | None = Field(
        None, description="an adaptive sweep over a tuning space: each model x shape's frontier (only then)")
    tuning: dict[str, Any] | None = Field(
        None, description="a run of several variants: variants, frontiers, what each setting bought (only then)")
    partial: Literal[True] | None = Field(None, description="an incomplete run's finished points (only then)")
