"""Options of the ``llamacpp`` backend (llama.cpp's ``llama-server``, started by batchmark) and the settings a tuning
variant may change (``variants[].llamacpp``).

Flags from llama.cpp's server README (https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md):
``--parallel`` (server slots: requests decoded together; more wait), ``--ctx-size`` (the KV cache's tokens, split
between the slots), ``--batch-size`` / ``--ubatch-size`` (logical and physical batch: tokens per prompt-processing
step), ``--flash-attn on|off|auto``, ``--cache-type-k`` / ``--cache-type-v`` (the KV cache's dtype: f32, f16, bf16,
q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1; a quantized V cache needs flash attention), ``--threads``,
``--metrics`` (Prometheus ``/metrics``), ``--no-cache-prompt`` and ``--cache-ram 0`` (no prompt reuse between
requests, as vLLM runs with prefix caching off), ``--no-repack`` (no extra weight layouts: the AMX one crashed on
Q8_0 on this project's Intel Xeon machines with AMX-INT8, a segmentation fault in ``ggml_backend_amx_mul_mat``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pipeline.config.options import ClientOptions, StrictModel

KV_TYPES = Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]
#: llama.cpp's KV types as the served formats name them (:data:`pipeline.cards.servedformat.KV_BYTES`).
KV_NAMES = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "q8_0": "q8_0", "q4_0": "q4_0", "iq4_nl": "iq4_nl"}
GGUF_TYPE = Literal["F16", "BF16", "Q8_0", "Q4_K_M"]


class LlamaCppSettings(StrictModel):
    """The server settings of llama-server a tuning variant may change (None: the server's own default)."""

    parallel: int | None = Field(default=None, gt=0, le=4096,
                                 description="--parallel: server slots; default the largest concurrency of the grid")
    batch_size: int | None = Field(default=None, gt=0, le=1_000_000, description="--batch-size (logical batch, tokens)")
    ubatch_size: int | None = Field(default=None, gt=0, le=1_000_000, description="--ubatch-size (physical batch, tokens)")
    flash_attn: Literal["on", "off", "auto"] | None = Field(default=None, description="--flash-attn")
    cache_type_k: KV_TYPES | None = Field(default=None, description="--cache-type-k (KV cache dtype of K; f16 by default)")
    cache_type_v: KV_TYPES | None = Field(default=None, description="--cache-type-v (of V; quantized needs flash attention)")
    threads: int | None = Field(default=None, gt=0, le=4096, description="--threads (default: llama.cpp's, the cores)")


class LlamaCppOptions(ClientOptions, LlamaCppSettings):
    """Options of the ``llamacpp`` backend: batchmark converts each model to GGUF and starts llama-server for it."""

    command: str = Field(
        default=("{server} --model {model} --alias {served_name} --host {host} --port {port} --seed {seed} --metrics"
                 " --parallel {parallel} --ctx-size {ctx_size} --no-cache-prompt --cache-ram 0 --no-webui --no-repack"),
        description="Server command template; placeholders {server} {model} {served_name} {host} {port} {seed} "
                    "{parallel} {ctx_size}; the settings (batch sizes, flash attention, KV types, threads) are appended. "
                    "--no-repack: ggml's AMX kernels, which a native build enables on an AMX CPU, crashed llama-server "
                    "(SIGSEGV in ggml_backend_amx_mul_mat) on Q8_0 here; a variant's args: [--repack] turns it back on")
    build: str = Field(default=".venv-llamacpp", description="The llama.cpp environment (made by `batchmark llamacpp-env`)")
    requirements: str = Field(default="config/llamacpp-cpu-requirements.txt",
                              description="File pinning the llama-cpp-python source llama.cpp is built from")
    extra_args: list[str] = Field(default_factory=list, description="Extra flags appended to the command")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables for the server")
    host: str = Field(default="127.0.0.1", description="Address the server listens on")
    port: int | None = Field(default=None, ge=1, le=65535, description="Server port; default a free port")
    health_path: str = Field(default="/health", description="Readiness URL path")
    metrics_path: str = Field(default="/metrics", description="Prometheus metrics URL path (--metrics)")
    health_timeout_s: float = Field(default=300.0, gt=0, description="Seconds to wait for the server to become healthy")
    stop_grace_s: float = Field(default=10.0, ge=0, description="Seconds between SIGINT and SIGKILL when stopping")
    max_model_len: int | None = Field(default=None, gt=0,
                                      description="Context per slot; default input_len + output_len + 64 "
                                                  "(--ctx-size is parallel × this)")
    model_dtype: Literal["bfloat16", "float16", "float32"] = Field(
        default="bfloat16", description="dtype of the random weights of the model folder the GGUF is written from")


def setting_flags(s: LlamaCppSettings) -> list[str]:
    """The settings' llama-server flags beyond the template's placeholders (``--parallel`` is one of those)."""
    flags: list[str] = []
    for field, flag in (("batch_size", "--batch-size"), ("ubatch_size", "--ubatch-size"), ("flash_attn", "--flash-attn"),
                        ("cache_type_k", "--cache-type-k"), ("cache_type_v", "--cache-type-v"), ("threads", "--threads")):
        value = getattr(s, field)
        if value is not None:
            flags += [flag, str(value)]
    return flags


def with_settings(opts: LlamaCppOptions, s: LlamaCppSettings | None) -> LlamaCppOptions:
    """``opts`` with the settings ``s`` states (a variant's) in place of its own."""
    if s is None:
        return opts
    return opts.model_copy(update=s.model_dump(exclude_unset=True))


def refuse_vllm_settings(variants: list[Any] | None) -> None:
    """Refuse a variant of a llamacpp sweep that sets a vLLM flag (:class:`ValueError` naming ``variants[i].field``)."""
    for i, v in enumerate(variants or []):
        vllm_only = sorted(k for k in v.settings() if k not in ("args", "env", "llamacpp"))
        if vllm_only:
            raise ValueError(f"variants[{i}].{vllm_only[0]} ({v.name}): a vLLM setting, not supported by the llamacpp "
                             "backend; set llama-server's under variants[].llamacpp (parallel, batch_size, ubatch_size, "
                             "flash_attn, cache_type_k, cache_type_v, threads) or as args")


def refuse_models(cfg: Any) -> None:
    """Refuse a model the llamacpp backend cannot serve (:class:`ValueError` naming ``models[i].field``)."""
    for i, m in enumerate(cfg.models):
        if m.path is not None and not m.path.endswith(".gguf"):
            raise ValueError(f"models[{i}].path ({m.name}): the llamacpp backend serves a .gguf file (or give "
                             "architecture: batchmark writes the GGUF)")
        if m.path is None and m.architecture is None:
            raise ValueError(f"models[{i}] ({m.name}): the llamacpp backend needs architecture or a .gguf path")
        if m.architecture is not None and m.path is None and m.architecture.get("model_type") != "llama":
            raise ValueError(f"models[{i}].architecture.model_type ({m.name}): "
                             f"{m.architecture.get('model_type')!r} is not supported by the llamacpp backend "
                             "(batchmark writes GGUFs of llama models only)")
        if m.path is not None and cfg.llamacpp.tokenizer is None:
            raise ValueError(f"models[{i}].path ({m.name}): a GGUF file needs llamacpp.tokenizer (a Hugging Face "
                             "tokenizer folder with its vocabulary) for the prompts")
