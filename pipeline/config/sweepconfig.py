"""Sweep configuration: pydantic models, YAML loading, and one-line errors that name the field.

A config file (``config/*.yaml``) says which models to measure, with which backend (how batchmark gets the tokens:
``transformers`` in process, ``vllm`` started by batchmark, ``openai`` an endpoint already running, ``simulated``), on
which hardware profile, over which concurrency grid (closed loop) and, optionally, which request rates (``open_loop``,
served backends) and which SLO (``slo``).  Unknown keys are rejected so that a typo never silently falls back to a
default; types are strict (``repeats: "2"`` and ``concurrency: [true, 2]`` are refused, not coerced); NaN and
infinities are refused; a key given twice in one mapping is refused with its line (:class:`UniqueKeyLoader`).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pipeline.cards.servedformat import ServedFormat
from pydantic import Field, ValidationError, field_validator, model_validator

from pipeline.config.options import (DEPRECATED_SLO_KEYS, SLO, SLO_METRICS, UNSET_CLIENT_KEYS, Adaptive, ClusterOptions,
                                    OpenAIOptions, OpenLoop, StrictModel, TransformersOptions, VLLMOptions, migrate_engine_key, migrate_slo_keys)
from pipeline.config.variants import Shape, Variant, baseline_variants, check_variants
from pipeline.config.llamacppoptions import GGUF_TYPE, LlamaCppOptions, refuse_models, refuse_vllm_settings
from pipeline.config.tracefile import refuse_unsendable_workload
from pipeline.config.workload import Lengths, refuse_beyond_context
from pipeline.core import scrub
from pipeline.core.errors import BatchmarkError
from pipeline.config.durations import DURATION, parse_duration  # noqa: F401  (importable from here)
from pipeline.core.textfiles import UniqueKeyLoader, load_yaml_text, read_text_file  # noqa: F401  (importable from here)


#: Largest seed: numpy's ``np.random.seed`` takes 0 … 2**32 − 1, and vLLM's ``--seed`` seeds numpy,
#: random and torch with it; the transformers backend seeds torch generators with
#: seed × 1 000 003 + offsets, which stays below torch's 2**64 bound for every seed up to this one.
MAX_SEED = 2**32 - 1

#: Default of ``max_failure_rate``: a point whose share of failed measured requests is above this is *excluded*
#: from the knee, peak and scaling figures (:func:`pipeline.analysis.analyze.point_quality`); the importers refuse a
#: point above it at the same default (:data:`pipeline.importers.checks.REFUSAL_FAILURE_RATE`), so that an import
#: never holds a point the analysis would leave out.
EXCLUSION_FAILURE_RATE = 0.05
#: Default of ``knee_threshold``: a doubling that gains less than 15 % is weak (docs/definitions.md, "knee");
#: the knee's functions (:mod:`pipeline.analysis.knee`) take it from here, so the default is written once.
KNEE_THRESHOLD = 0.15


class ModelSpec(StrictModel):
    """One model of a sweep.

    For the ``transformers`` backend the model is either built with random weights from
    ``architecture`` (Hugging Face config keys, ``model_type`` required) or loaded from a
    local checkpoint ``path``.  Served backends (``vllm``, ``openai``) use ``served_name``.
    """

    name: str = Field(description="Short name used in file names and pages (at most 128 characters)",
                      pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=128)
    architecture: dict[str, Any] | None = Field(
        default=None, description="Hugging Face config keys; random weights are built from it")
    path: str | None = Field(default=None, description="Local checkpoint or model folder")
    served_name: str | None = Field(default=None, description="Model name as a server knows it")
    card: str | None = Field(default=None, description="Model card name in data/models/ for analysis")
    served: ServedFormat | None = Field(
        default=None, description="What the engine serves per tensor group (embeddings, attention, mlp, experts, head), KV "
                                  "dtype, file_gib; absent: the engine's default here (pipeline.cards.servedformat)")
    gguf_type: GGUF_TYPE | None = Field(default=None, description="llamacpp backend: the GGUF type its architecture is "
                                        "served in (F16 by default; Q8_0 and Q4_K_M made by llama-quantize)")

    @field_validator("architecture")
    @classmethod
    def _has_model_type(cls, arch: dict[str, Any] | None) -> dict[str, Any] | None:
        if arch is not None and "model_type" not in arch:
            raise ValueError("needs a model_type (e.g. llama, qwen3_moe)")
        return arch


class SimulatedOptions(StrictModel):
    """Options of the ``simulated`` backend: a continuous-batching server in virtual time (:mod:`pipeline.backends.simulated`).

    Its runs are predictions (``source: simulated``), never measurements.  The request counts are
    the served backends' (``max(requests_per_slot x N, min_requests)`` per closed-loop repeat, ten
    seconds of arrivals per open-loop repeat), so a simulated point costs what a measured one would.
    """

    max_num_seqs: int | None = Field(default=None, gt=0, description="vLLM --max-num-seqs; default the largest concurrency of the grid")
    max_num_batched_tokens: int = Field(default=8192, gt=0, le=10_000_000,
                                        description="vLLM --max-num-batched-tokens: tokens per step (chunked prefill budget)")
    max_model_len: int | None = Field(default=None, gt=0, description="vLLM --max-model-len; default input_len + output_len + 64")
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1,
                                                 description="Share of memory for weights + KV; default the hardware profile's")
    block_size: int = Field(default=16, gt=0, le=1024, description="Tokens per KV block (vLLM's default 16)")
    step_overhead_s: float | None = Field(default=None, ge=0, le=10,
                                          description="Seconds added to every step (scheduling, sampling); default the hardware profile's")
    step_time_cv: float = Field(default=0.0, ge=0, le=1, description="Noise: coefficient of variation of every step time")
    repeat_time_cv: float = Field(default=0.0, ge=0, le=1, description="Noise: coefficient of variation of a whole repeat's speed")
    requests_per_point: int | None = Field(default=None, ge=1, description="Measured requests per repeat, fixed")
    requests_per_slot: int = Field(default=4, ge=1, description="Measured requests per repeat per concurrency slot")
    min_requests: int = Field(default=32, ge=1, description="Fewest measured requests per repeat")


class SweepConfig(StrictModel):
    """A whole sweep: the grid of points to measure and how."""

    name: str = Field(description="Config name; part of the run's provenance (at most 128 characters: it names the "
                                  "checkout's pointer file)", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=128)
    hardware: str = Field(description="Hardware profile name in data/hardware/")
    backend: Literal["transformers", "vllm", "llamacpp", "openai", "simulated"] = Field(
        default="transformers", description="How batchmark gets the tokens: transformers (in process), vllm (starts a "
                                            "vLLM server), llamacpp (starts llama-server on a GGUF), openai (an "
                                            "endpoint already running), simulated (virtual time)")
    models: list[ModelSpec] = Field(min_length=1)
    input_len: int = Field(default=64, gt=0, le=10_000_000, description="Prompt tokens per request (nominal)")
    output_len: int = Field(default=32, gt=1, le=10_000_000, description="Generated tokens per request (nominal)")
    workloads: list[Shape] | None = Field(default=None, min_length=1,
                                          description="Workload shapes {input_len, output_len}, each measured over the "
                                                      "whole grid (the top-level input_len/output_len: one shape)")
    lengths: Lengths | None = Field(default=None, description="How each request's lengths are drawn (absent: fixed)")
    variants: list[Variant] | None = Field(default=None, min_length=1,
                                           description="Named server settings, each its own server; the first is the "
                                                       "baseline (pipeline.config.variants)")
    concurrency: list[Annotated[int, Field(le=1_000_000)]] = Field(default=[1, 2, 4, 8, 16, 32, 64],
                                   description="Concurrency grid (static batch size B for transformers); may be "
                                               "empty only beside an open_loop with explicit rates")
    open_loop: OpenLoop | None = Field(default=None, description="Rate sweep after the concurrency grid (served backends)")
    adaptive: Adaptive | None = Field(default=None, description="Measure only the grid points that settle the knee "
                                                                "(and, over variants or shapes, the frontier); predict "
                                                                "the rest (pipeline.predict.adaptive)")
    slo: SLO | None = Field(default=None, description="SLO checked at every point (share meeting it, goodput, "
                                                      "highest rate/concurrency where it holds)")
    repeats: int = Field(default=5, ge=1, le=10_000, description="Measured repeats per point, the unit a diff tests "
                         "(Welch's t on per-repeat values, 2 or more a side); at 2 % drift between repeats a diff calls "
                         "a 20 % change 9 times in 10 with 3, 15 % with 5, 10 % with 10 (benchmarks/diff_power.py)")
    warmup: bool = Field(default=True, description="One unmeasured pass at full lengths before each point")
    knee_threshold: float = Field(default=KNEE_THRESHOLD, gt=0, lt=1,
                                  description="A doubling that gains less than this is weak (knee)")
    max_failure_rate: float = Field(default=EXCLUSION_FAILURE_RATE, ge=0, le=1,
                                    description="A point whose share of failed measured requests is above this "
                                                "is left out of the knee, peak and scaling figures (it is still shown, marked excluded)")
    stop_after_weak_doublings: int = Field(default=2, ge=0,
                                           description="Stop escalating after this many weak doublings in a row (0 = never)")
    seed: int = Field(default=0, ge=0, le=MAX_SEED, description="Seed for weights and prompts (0 … 2**32 − 1)")
    transformers: TransformersOptions = TransformersOptions()
    openai: OpenAIOptions = OpenAIOptions()
    vllm: VLLMOptions = VLLMOptions()
    llamacpp: LlamaCppOptions = LlamaCppOptions()
    simulated: SimulatedOptions = SimulatedOptions()
    cluster: ClusterOptions = ClusterOptions()
    budget: str | float | None = Field(default=None, description="Time the sweep may take on the hardware (8h, 90m, 1h30m, "
                                                         "or a number of seconds): the plan (batchmark plan) chooses "
                                                         "repeats, requests per point and grid points to fit it")

    @field_validator("budget", mode="before")
    @classmethod
    def _duration(cls, budget: Any) -> str | float | None:
        if budget is not None:  # a duration text, or a bare number of seconds (``budget: 3600``, as documented)
            if isinstance(budget, bool) or not isinstance(budget, (str, int, float)):
                raise ValueError(f"{budget!r} is not a duration (e.g. 8h, 90m, 1h30m, or seconds)")
            try:
                parse_duration(budget)
            except BatchmarkError as exc:
                raise ValueError(str(exc).removeprefix("budget: ")) from None
        return budget

    @field_validator("concurrency")
    @classmethod
    def _positive_sorted(cls, grid: list[int]) -> list[int]:
        for i, c in enumerate(grid):
            if c <= 0:
                raise ValueError(f"concurrency[{i}] = {c}: must be a positive integer")
        if len(set(grid)) != len(grid):
            raise ValueError("concurrency values must be distinct")
        return sorted(grid)

    @model_validator(mode="after")
    def _grid_or_rates(self) -> "SweepConfig":
        refuse_unsendable_workload(self)
        refuse_beyond_context(self)
        if not self.concurrency:
            if self.open_loop is None:
                raise ValueError("concurrency: give at least one concurrency (or an open_loop with rates)")
            if self.open_loop.rates == "auto":
                raise ValueError("open_loop.rates: auto measures the concurrency grid first; concurrency is empty")
        if self.adaptive is not None and len(self.concurrency) < 3:
            raise ValueError(f"adaptive: the concurrency grid is the candidate points and needs at least 3 (the fit "
                             f"has three terms); concurrency has {len(self.concurrency)}")
        return self

    @model_validator(mode="after")
    def _tuning_space(self) -> "SweepConfig":
        if self.workloads is not None:
            both = [k for k in ("input_len", "output_len") if k in self.model_fields_set]
            if both:
                raise ValueError(f"{both[0]}: give the shapes in workloads or one as input_len/output_len, not both")
            shapes = [(w.input_len, w.output_len) for w in self.workloads]
            if len(set(shapes)) != len(shapes):
                raise ValueError("workloads: shapes must be distinct")
            # the first shape stands for the sweep where one is read (the one-shape shorthand's fields)
            object.__setattr__(self, "input_len", self.workloads[0].input_len)
            object.__setattr__(self, "output_len", self.workloads[0].output_len)
        check_variants(self)  # names, and each variant's grid and shapes checked as the config's
        return self

    def stated_engine(self) -> str:
        """The serving engine the config states, the point keys' ``engine`` where no server is asked (a plan): the
        backend's own, and for ``openai`` its ``openai.engine`` (``openai``: not stated; the sweep asks the server,
        :mod:`pipeline.backends.endpointkind`)."""
        return (self.openai.engine or "openai") if self.backend == "openai" else {"llamacpp": "llama.cpp"}.get(
            self.backend, self.backend)

    def shapes(self) -> list[Shape]:
        """The workload shapes in the config's order (``workloads``, else the one of ``input_len``/``output_len``)."""
        return list(self.workloads) if self.workloads else [Shape(input_len=self.input_len, output_len=self.output_len)]

    def variant_list(self) -> list[Variant]:
        """The server settings in the config's order, the baseline first (``variants``, else one named ``default``)."""
        return list(self.variants) if self.variants else baseline_variants()

    def max_in_flight(self) -> int:
        """The most requests this sweep keeps in flight: the largest concurrency or the open-loop cap (0 when uncapped and no grid)."""
        return max([*self.concurrency, (self.open_loop.max_concurrency or 0) if self.open_loop else 0])

    @model_validator(mode="after")
    def _unique_models(self) -> "SweepConfig":
        names = [m.name for m in self.models]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"models: duplicate name(s) {sorted(dup)}")
        if self.backend == "transformers":
            for i, m in enumerate(self.models):
                if m.architecture is None and m.path is None:
                    raise ValueError(f"models[{i}] ({m.name}): the transformers backend needs architecture or path")
        elif self.backend == "openai":
            for i, m in enumerate(self.models):
                if m.served_name is None:
                    raise ValueError(f"models[{i}] ({m.name}): the openai backend needs served_name (the model name the server knows)")
        elif self.backend == "vllm":
            for i, m in enumerate(self.models):
                if m.path is None and m.served_name is None and m.architecture is None:
                    raise ValueError(f"models[{i}] ({m.name}): the vllm backend needs path (local folder or hub id), "
                                     "served_name, or architecture (a local folder with random weights is made)")
            if (self.vllm.max_num_seqs is not None and self.vllm.max_num_seqs < max(self.concurrency, default=0)
                    and self.variants is None):  # a tuning run compares a cap below the grid with one above it
                raise ValueError(f"vllm.max_num_seqs = {self.vllm.max_num_seqs} is below the largest concurrency "
                                 f"{max(self.concurrency)}; the server would queue requests")
        elif self.backend == "llamacpp":
            refuse_models(self)
            refuse_vllm_settings(self.variants)
        if self.backend in ("openai", "vllm", "llamacpp"):
            opts = getattr(self, self.backend)
            if opts.requests_per_point is not None and opts.requests_per_point < self.max_in_flight():
                # c = 32 with 4 requests measured 312 tok/s where the server does 1685.8
                raise ValueError(f"{self.backend}.requests_per_point = {opts.requests_per_point} is below the largest "
                                 f"concurrency {self.max_in_flight()}; a point never reaches its concurrency with "
                                 "fewer requests than it (the importers refuse completed < concurrency too)")
        return self

    def digest(self) -> str:
        """Short stable hash of the config content (hex, 12 chars); two runs with the same digest measured the same grid.
        Credentials are redacted before hashing (:func:`pipeline.core.scrub.redact_tree`): the digest holds no key.

        ``cluster`` (where the jobs run, not what they measure) is left out, so configs written before it existed keep
        their digest and their runs; so does an SLO whose goodput limits and p99 bounds agree (hashed under the one key
        each had before they were apart, ``ttft_p99_ms`` …).  ``backend`` is hashed under its old name ``engine``
        (``vllm.fallback_backend`` under ``vllm.fallback_engine``); an unset ``openai.engine``, a variant's unset
        ``prefix_caching``, a ``transport`` or ``event_loop`` of ``auto`` are left out: they changed no digest.
        """
        data = self.model_dump(mode="json", exclude={"cluster"})
        data["engine"] = data.pop("backend")  # the key it had when the digests of the runs stored were made
        data["vllm"]["fallback_engine"] = data["vllm"].pop("fallback_backend")  # likewise
        for client, key, unset in UNSET_CLIENT_KEYS:
            if data[client].get(key) == unset:  # unset (an endpoint's engine, a transport chosen by URL): as before
                data[client].pop(key, None)
        for backend in ("simulated", "llamacpp"):  # absent = as before it existed: other configs keep their digest
            if self.backend != backend:
                data.pop(backend, None)
        for m in data["models"]:
            if m.get("gguf_type") is None:
                m.pop("gguf_type", None)
        for k in ("open_loop", "slo", "budget", "workloads", "variants", "lengths"):  # absent = as before they existed
            if data.get(k) is None:
                data.pop(k, None)
        for v in data.get("variants") or []:  # a variant's unset prefix_caching: as before it existed
            for k in ("prefix_caching", "llamacpp"):
                if v.get(k) is None:
                    v.pop(k, None)
        if data.get("adaptive") and data["adaptive"].get("frontier_points") is None:
            data["adaptive"].pop("frontier_points", None)  # absent = as before it existed: an adaptive run resumes
        slo = data.get("slo")
        if slo and all(slo[f"goodput_{m}_ms"] == slo[f"{m}_p99_max_ms"] for m in SLO_METRICS):
            # both limits equal (every SLO written before they were apart): its keys as then, so its digest
            data["slo"] = {old: slo[new] for old, (new, _) in DEPRECATED_SLO_KEYS.items()}
        blob = json.dumps(scrub.redact_tree(data), sort_keys=True).encode()  # as published: the digest is no key oracle
        return hashlib.sha256(blob).hexdigest()[:12]


def _format_error(path: Path | str, err: ValidationError, renamed: dict[str, str] | None = None) -> str:
    """One line for the first error: ``path: field.path: message (got value) (and N more)``.

    ``renamed``: ``{new key: old key}`` of the SLO keys migrated from a deprecated spelling, so the line names the
    key the file has (``slo.ttft_p99_ms``), not the one it was read as."""
    first = err.errors()[0]
    parts = [str(p) for p in first["loc"]]
    if renamed and len(parts) >= 2 and parts[0] == "slo" and parts[1] in renamed:
        parts[1] = f"{renamed[parts[1]]} (read as {parts[1]})"
    loc = ".".join(parts) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    value = first.get("input")
    scalar = value is None or isinstance(value, (bool, int, float, str))
    got = f" (got {value!r:.80})" if scalar and first["type"] not in ("missing", "extra_forbidden") else ""
    return " ".join(f"{path}: {loc}: {msg}{got}{more}".split())


def parse_config(data: Any, source: str = "<config>") -> SweepConfig:
    """Validate a config mapping.

    The SLO's deprecated keys (``ttft_p99_ms`` …, :data:`pipeline.config.options.DEPRECATED_SLO_KEYS`) are read
    as the two limits each stood for, with one warning line on stderr naming the file and the new keys.

    Raises:
        BatchmarkError: one line naming ``source`` and the first bad field.
    """
    if not isinstance(data, dict):
        raise BatchmarkError(f"{source}: expected a mapping of config keys, got {type(data).__name__}")
    data = migrate_engine_key(data, source)
    renamed: dict[str, str] = {}
    if "slo" in data:
        try:
            slo, old = migrate_slo_keys(data["slo"])
        except ValueError as exc:
            raise BatchmarkError(f"{source}: slo: {exc}") from None
        renamed = {new: k for k in old for new in DEPRECATED_SLO_KEYS[k]}
        if old:
            data = {**data, "slo": slo}
            news = ", ".join(f"{k} → {' and '.join(DEPRECATED_SLO_KEYS[k])}" for k in old)
            print(f"batchmark: warning: {source}: slo: {news} (each old key set both the per-request goodput limit "
                  "and the p99 bound; read as both, write the new keys)", file=sys.stderr)
    try:
        cfg = SweepConfig.model_validate(data)
    except ValidationError as err:
        raise BatchmarkError(_format_error(source, err, renamed)) from None
    # Check the hardware profile and the architectures here, at the edge, before anything is measured.
    from pipeline.machine.hardware import load_profile

    load_profile(cfg.hardware, field=f"{source}: hardware")
    if cfg.backend in ("transformers", "vllm"):
        for i, m in enumerate(cfg.models):
            if m.architecture is not None:
                check_architecture(m.architecture, f"{source}: models.{i}.architecture")
    return cfg


def check_architecture(arch: dict[str, Any], field: str) -> None:
    """Build the Hugging Face config of an architecture (no weights) to catch a bad key or value early.

    Raises:
        BatchmarkError: unknown ``model_type`` or a value transformers rejects (one line, ``field`` named).
    """
    try:
        from transformers import AutoConfig
    except ImportError:  # a served-only installation: the backend reports it when it loads
        return
    kwargs = dict(arch)
    model_type = kwargs.pop("model_type")
    try:
        AutoConfig.for_model(model_type, **kwargs)
    except Exception as exc:  # transformers raises ValueError, KeyError or its own validation errors
        text = " ".join(str(exc).split())
        if isinstance(exc, (KeyError, ValueError)) and "Unrecognized model identifier" in text:
            text = f"unknown model_type {model_type!r}"
        raise BatchmarkError(f"{field}: {text[:200]}") from None


def load_config(path: str | Path) -> SweepConfig:
    """Read and validate a YAML sweep config.

    Raises:
        BatchmarkError: the file is missing, not YAML, or has a bad field (named in the message).
    """
    path = Path(path)
    data = load_yaml_text(path, read_text_file(path, "config"))
    return parse_config(data, str(path))
