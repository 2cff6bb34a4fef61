"""The tuning space of a sweep config: workload shapes (``workloads:``) and named server settings (``variants:``).

A sweep measures every model × variant × shape × concurrency (and open-loop rate).  A *shape* is one
(input_len, output_len) pair; the config's top-level ``input_len``/``output_len`` are the one-shape shorthand.  A
*variant* is a named set of server settings that overrides the engine's options (:func:`variant_config`): the
``vllm`` engine's command line gains the variant's flags (``--max-num-seqs``, ``--gpu-memory-utilization`` through
the command template's placeholders, as :class:`pipeline.config.options.VLLMOptions` maps them; the others as
vLLM's own flags, appended like ``vllm.extra_args``), the ``simulated`` engine's server the limits it models
(:data:`SIMULATED_MODELS`).  The first variant is the baseline; a config without ``variants:`` has one, named
``default`` (:data:`pipeline.core.records.DEFAULT_VARIANT`).

Flags from vLLM's engine arguments (https://docs.vllm.ai/en/latest/configuration/engine_args.html):
``--max-num-seqs``, ``--gpu-memory-utilization``, ``--kv-cache-dtype {auto,fp8,fp8_e4m3,fp8_e5m2}``,
``--max-num-batched-tokens``, ``--block-size``, ``--enforce-eager``, ``--enable-prefix-caching`` /
``--no-enable-prefix-caching`` (``prefix_caching``: appended after the command template, whose default turns prefix
caching off; vLLM's boolean flags are argparse's ``BooleanOptionalAction``, the last one given wins).  A shared-prefix
workload (``lengths.prefix_len``) swept with ``prefix_caching: true`` and ``false`` is a tuning variant like any other:
the model page's "what each setting bought" says what caching the prefix bought in TTFT and throughput.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from pipeline.config.llamacppoptions import LlamaCppSettings, with_settings
from pipeline.config.options import StrictModel
from pipeline.config.workload import server_len
from pipeline.core.records import DEFAULT_VARIANT

#: A variant's or a model's name: letters, digits, ``. _ -``, starting with a letter or digit (it names files).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"

#: What the simulated server models of a variant's settings (:mod:`pipeline.simulation.simserver`): the rest it
#: predicts at the baseline, and says so per variant (:func:`simulated_statement`).
SIMULATED_MODELS = {
    "max_num_seqs": "caps the running batch (vLLM's scheduler admits at most max_num_seqs requests)",
    "max_num_batched_tokens": "the step's token budget (chunked prefill)",
    "gpu_memory_utilization": "the memory share the KV cache is sized from (after the weights)",
    "kv_cache_dtype": "KV bytes per token (fp8: 1 byte per element, half of bf16's 2)",
    "block_size": "tokens per KV block (the cache's block count and each request's blocks)",
    "prefix_caching": "a shared prefix's full KV blocks, once a request of the repeat computed them, found cached by "
                      "each request admitted after (its prefill starts past them; their memory still counted per request)",
}


class Shape(StrictModel):
    """One workload shape: prompt and generated tokens per request."""

    input_len: int = Field(gt=0, le=10_000_000, description="Prompt tokens per request")
    output_len: int = Field(gt=1, le=10_000_000, description="Generated tokens per request (no early stop)")


class Variant(StrictModel):
    """A named server setting: overrides of the engine's options (None / empty = the engine's own)."""

    name: str = Field(description="Short name used in file names and pages (at most 64 characters)",
                      pattern=NAME_PATTERN, max_length=64)
    max_num_seqs: int | None = Field(default=None, gt=0, le=1_000_000, description="vLLM --max-num-seqs")
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1,
                                                 description="vLLM --gpu-memory-utilization (memory share)")
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] | None = Field(
        default=None, description="vLLM --kv-cache-dtype (auto: the model's dtype)")
    max_num_batched_tokens: int | None = Field(default=None, gt=0, le=10_000_000,
                                               description="vLLM --max-num-batched-tokens (the step's token budget)")
    block_size: int | None = Field(default=None, gt=0, le=1024, description="vLLM --block-size (tokens per KV block)")
    enforce_eager: bool = Field(default=False, description="vLLM --enforce-eager (no CUDA graphs)")
    prefix_caching: bool | None = Field(default=None, description="vLLM --enable-prefix-caching (true) or "
                                        "--no-enable-prefix-caching (false); unset: the command's own (off by default)")
    llamacpp: LlamaCppSettings | None = Field(default=None, description="llama-server's settings (the llamacpp "
                                              "backend): parallel, batch sizes, flash attention, KV types, threads")
    args: list[str] = Field(default_factory=list, description="Further server flags, appended to the command")
    env: dict[str, str] = Field(default_factory=dict, description="Further environment variables of the server")
    concurrency: list[int] | None = Field(default=None, min_length=1,
                                          description="This variant's concurrency grid (default the config's; the "
                                                      "budget cuts a non-baseline variant's top here)")
    workloads: list[Shape] | None = Field(default=None, min_length=1,
                                          description="This variant's shapes (default the config's)")

    @field_validator("concurrency")
    @classmethod
    def _grid(cls, grid: list[int] | None) -> list[int] | None:
        if grid is None:
            return grid
        for i, c in enumerate(grid):
            if isinstance(c, bool) or c <= 0 or c > 1_000_000:
                raise ValueError(f"concurrency[{i}] = {c}: must be a positive integer")
        if len(set(grid)) != len(grid):
            raise ValueError("concurrency values must be distinct")
        return sorted(grid)

    @field_validator("args")
    @classmethod
    def _flags(cls, args: list[str]) -> list[str]:
        for i, a in enumerate(args):
            if not a.strip():
                raise ValueError(f"args[{i}]: an empty flag")
        return args

    def settings(self) -> dict[str, Any]:
        """The server settings it sets (no name, none left at the engine's own, not its grid or shapes): ``run.json``
        ``variants[].settings``."""
        return self.model_dump(mode="json", exclude={"name", "concurrency", "workloads"}, exclude_defaults=True)


def baseline_variants() -> list[Variant]:
    """The variants of a config without ``variants:``: one, ``default``, setting nothing."""
    return [Variant(name=DEFAULT_VARIANT)]


def vllm_flags(v: Variant) -> list[str]:
    """The variant's vLLM flags beyond the command template's placeholders (appended after ``vllm.extra_args``)."""
    flags: list[str] = []
    if v.kv_cache_dtype is not None:
        flags += ["--kv-cache-dtype", v.kv_cache_dtype]
    if v.max_num_batched_tokens is not None:
        flags += ["--max-num-batched-tokens", str(v.max_num_batched_tokens)]
    if v.block_size is not None:
        flags += ["--block-size", str(v.block_size)]
    if v.enforce_eager:
        flags.append("--enforce-eager")
    if v.prefix_caching is not None:
        flags.append("--enable-prefix-caching" if v.prefix_caching else "--no-enable-prefix-caching")
    return flags + list(v.args)


def kv_cache_name(v: Variant) -> str | None:
    """The KV dtype as the served formats name it (:data:`pipeline.cards.servedformat.KV_BYTES`): ``fp8`` for vLLM's
    ``fp8``, ``fp8_e4m3`` and ``fp8_e5m2`` (one byte per element each); None for ``auto`` or unset (the model's)."""
    return "fp8" if v.kv_cache_dtype and v.kv_cache_dtype.startswith("fp8") else None


def simulated_statement(v: Variant) -> dict[str, Any]:
    """What the simulated server models of ``v`` and what it predicts at the baseline instead (``run.json``
    ``variants[].simulated``): ``{"modelled": {setting: how}, "not_modelled": [setting, ...]}``."""
    s = v.settings()
    modelled = {k: SIMULATED_MODELS[k] for k in s if k in SIMULATED_MODELS}
    if "kv_cache_dtype" in modelled and kv_cache_name(v) is None:
        modelled["kv_cache_dtype"] = "auto: the model's KV dtype, as the baseline"
    return {"modelled": modelled, "not_modelled": sorted(k for k in s if k not in SIMULATED_MODELS)}


def variant_options(cfg, v: Variant) -> dict[str, Any]:
    """The engine options of ``cfg`` (a :class:`pipeline.config.sweepconfig.SweepConfig`) under ``v``: the updates
    of ``vllm`` and ``simulated`` (the ``openai`` and ``transformers`` engines start no server of theirs; their
    variants carry a name and the settings stated, which change nothing they run)."""
    shapes = variant_shapes(cfg, v)  # its own shapes where it states them: its server is sized for them
    longest = max(server_len(cfg, s.input_len, s.output_len) for s in shapes)  # shapes share one server: the longest
    sized = cfg.workloads is not None or v.workloads is not None or cfg.lengths is not None
    vl = cfg.vllm
    vllm = vl.model_copy(update={
        "max_num_seqs": v.max_num_seqs or vl.max_num_seqs,
        "gpu_memory_utilization": v.gpu_memory_utilization or vl.gpu_memory_utilization,
        "max_model_len": vl.max_model_len or (longest if sized else None),
        "extra_args": list(vl.extra_args) + vllm_flags(v), "env": {**vl.env, **v.env}})
    sm = cfg.simulated
    sim = sm.model_copy(update={
        "max_num_seqs": v.max_num_seqs or sm.max_num_seqs,
        "gpu_memory_utilization": v.gpu_memory_utilization or sm.gpu_memory_utilization,
        "max_num_batched_tokens": v.max_num_batched_tokens or sm.max_num_batched_tokens,
        "block_size": v.block_size or sm.block_size,
        "max_model_len": sm.max_model_len or (longest if sized else None)})
    lc = with_settings(cfg.llamacpp, v.llamacpp)
    lc = lc.model_copy(update={"max_model_len": lc.max_model_len or (longest if sized else None),
                               "extra_args": list(lc.extra_args) + list(v.args), "env": {**lc.env, **v.env}})
    return {"vllm": vllm, "simulated": sim, "llamacpp": lc, "concurrency": list(v.concurrency or cfg.concurrency)}


def check_variants(cfg) -> None:
    """Refuse a tuning space a sweep cannot measure (:class:`ValueError` naming ``variants[i].field``, which the
    config's loader prints in one line): duplicate names, ``default`` after the first (the name the baseline's server
    and card are stored by, :func:`pipeline.core.records.server_key`: the two would share one card), and each variant's own grid and shapes held to every check
    the config's get: distinct shapes, ``requests_per_point`` reaching the largest concurrency (a point never reaches
    its concurrency with fewer requests than it), three grid points for an adaptive walk."""
    if cfg.variants is None:
        return
    names = [v.name for v in cfg.variants]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"variants: duplicate name(s) {dup}")
    opts = {"openai": cfg.openai, "vllm": cfg.vllm, "llamacpp": cfg.llamacpp}.get(cfg.backend)
    rpp = opts.requests_per_point if opts is not None else None
    for i, v in enumerate(cfg.variants):
        if i and v.name == DEFAULT_VARIANT:  # its server and card go by the model's own name, the baseline's
            raise ValueError(f"variants[{i}].name: {DEFAULT_VARIANT!r} names the baseline's server and model card; "
                             "name this variant otherwise, or list it first (as the baseline)")
        if v.llamacpp is not None and cfg.backend != "llamacpp":
            raise ValueError(f"variants[{i}].llamacpp ({v.name}): llama-server's settings, read by the llamacpp backend only")
        if v.workloads is not None:
            shapes = [(w.input_len, w.output_len) for w in v.workloads]
            if len(set(shapes)) != len(shapes):
                raise ValueError(f"variants[{i}].workloads ({v.name}): shapes must be distinct")
        if v.concurrency is None:
            continue
        if rpp is not None and rpp < max(v.concurrency):
            raise ValueError(f"variants[{i}].concurrency ({v.name}): {cfg.backend}.requests_per_point = {rpp} is "
                             f"below its largest concurrency {max(v.concurrency)}; a point never reaches its "
                             "concurrency with fewer requests than it")
        if cfg.adaptive is not None and len(v.concurrency) < 3:
            raise ValueError(f"variants[{i}].concurrency ({v.name}): the adaptive walk needs at least 3 grid points "
                             f"(the fit has three terms); it has {len(v.concurrency)}")


def variant_shapes(cfg, v: Variant) -> list[Shape]:
    """The shapes variant ``v`` walks: its own ``workloads``, else the config's."""
    return list(v.workloads) if v.workloads else cfg.shapes()


def variant_config(cfg, v: Variant):
    """``cfg`` as the engine of variant ``v`` runs it (:func:`variant_options`); unvalidated copy (its parts were)."""
    return cfg.model_copy(update=variant_options(cfg, v))


def shape_config(cfg, shape: Shape):
    """``cfg`` at one shape: ``input_len`` and ``output_len`` set to it (what a walk over its points reads)."""
    return cfg.model_copy(update={"input_len": shape.input_len, "output_len": shape.output_len})


def run_variants(cfg) -> list[dict[str, Any]]:
    """``run.json`` ``variants``: ``[{name, baseline, settings[, simulated]}]`` in the config's order (the first is the
    baseline); the simulated backend's statement of what it models of each (:func:`simulated_statement`)."""
    out = []
    for i, v in enumerate(cfg.variant_list()):
        entry: dict[str, Any] = {"name": v.name, "baseline": i == 0, "settings": v.settings()}
        if cfg.backend == "simulated":
            entry["simulated"] = simulated_statement(v)
        out.append(entry)
    return out


def baseline_name(meta: dict[str, Any]) -> str:
    """The baseline variant of a run (``run.json``): the first of ``variants``, else ``default``."""
    vs = meta.get("variants") if isinstance(meta, dict) else None
    if isinstance(vs, list) and vs and isinstance(vs[0], dict) and isinstance(vs[0].get("name"), str):
        return vs[0]["name"]
    return DEFAULT_VARIANT


def part_names(cfg) -> list[str]:
    """The parts a workflow measures a sweep in, config order (:mod:`pipeline.sweep.parts`): one per model (its
    name), or with more than one variant one per model × variant (``model/variant``, as
    :func:`pipeline.core.records.server_key` names its server: each variant is a server of its own).  An adaptive
    sweep's part is a model with all its variants: its frontier walk chooses points across them
    (:mod:`pipeline.sweep.frontierwalk`)."""
    variants = cfg.variant_list()
    if len(variants) == 1 or cfg.adaptive is not None:
        return [m.name for m in cfg.models]
    return [f"{m.name}/{v.name}" for m in cfg.models for v in variants]


def split_part(name: str) -> tuple[str, str | None]:
    """(model, variant) of a part's name (variant None: the part measures every variant of the model)."""
    model, _, variant = name.partition("/")
    return model, variant or None
