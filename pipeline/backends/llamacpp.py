"""The ``llamacpp`` backend: llama.cpp's ``llama-server`` started per model on a GGUF, measured, stopped.

The life cycle is the ``vllm`` backend's (:class:`pipeline.backends.vllm.VLLMBackend`: its own process group, the
log under ``<run>/servers/``, ``/health`` polled until 200, ``/metrics`` scraped around and during each repeat — here
llama-server's ``llamacpp:*`` counters, with ``--metrics`` — SIGINT then SIGKILL), the load generator the same;
what differs:

- the binary and the GGUF: the server of the llama.cpp environment (``llamacpp.build``, made once by
  ``batchmark llamacpp-env``: :mod:`pipeline.machine.llamacppenv`); a model given by ``architecture:`` becomes a
  random-weight folder (:func:`pipeline.machine.modelfolders.build_model_folder`) and then a GGUF of its
  ``gguf_type`` (:func:`pipeline.machine.ggufmodels.gguf_file`; F16 by default), whose word vocabulary the
  client's prompts are built from, so both sides count the same tokens;
- the command: ``llamacpp.command`` with ``--parallel`` (slots; default the largest concurrency) and
  ``--ctx-size`` = slots × the context per slot, then the settings (:func:`pipeline.config.llamacppoptions.setting_flags`,
  a variant's under ``variants[].llamacpp``) and ``extra_args``;
- the card: counted from the folder's config, then pinned to the GGUF's size (``cards/filesize.py``: every byte of
  the file read per step), its tensor bytes and types in ``extra``, the KV dtype of ``--cache-type-k``;
- the point keys' engine is ``llama.cpp``; ``run.json``'s server block names the build (version, flags, compiler).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pipeline.backends.served import ServedBackend, served_card
from pipeline.backends.serverproc import format_command
from pipeline.backends.vllm import VLLMBackend
from pipeline.config.llamacppoptions import KV_NAMES, LlamaCppOptions, setting_flags
from pipeline.config.sweepconfig import ModelSpec, SweepConfig
from pipeline.config.workload import server_len
from pipeline.core.errors import BatchmarkError
from pipeline.core.records import server_key
from pipeline.machine import llamacppenv
from pipeline.machine.serverenv import read_status, resolve


def flag_value(cmd: list[str], *flags: str) -> str | None:
    """The value of a command's last ``FLAG X`` or ``FLAG=X`` among ``flags`` (the last given wins, as llama.cpp reads)."""
    found = None
    for i, w in enumerate(cmd):
        name, eq, val = w.partition("=")
        if name in flags:
            found = val if eq else (cmd[i + 1] if i + 1 < len(cmd) else None)
    return found


class LlamaCppBackend(VLLMBackend):
    """llama-server started and stopped for each model (module docstring)."""

    name = "llamacpp"
    serving_engine = "llama.cpp"
    options_field = "llamacpp"
    opts: LlamaCppOptions  # type: ignore[assignment]  # the config's ``llamacpp:`` block, in place of vLLM's

    def __init__(self, cfg: SweepConfig):
        ServedBackend.__init__(self, cfg, cfg.llamacpp)
        ok, why = llamacppenv.usable(cfg.llamacpp.build)
        if not ok:
            raise BatchmarkError(f"llamacpp.build: the llama.cpp environment cannot run here: {why}")
        self.env_status: dict[str, Any] = read_status(cfg.llamacpp.build) or {}
        self.served_dtype, self.dtype_why, self.gpu_memory_utilization = None, None, None  # type: ignore[assignment]
        self.proc = self.port = self.log_path = self._log_fh = self.crashed = self.api_key = None
        self.servers: dict[str, dict[str, Any]] = {}
        self.secrets: tuple[str, ...] = ()
        self.package_version = self.env_status.get("llama_cpp_build") or self.env_status.get("version")
        self.gguf: dict[str, Any] = {}  # the served file's bytes (ggufmodels.gguf_bytes)

    def parallel(self) -> int:
        """The server's slots: ``llamacpp.parallel``, else the most requests the sweep keeps in flight."""
        return self.opts.parallel or self.cfg.max_in_flight() or 1

    def command_for(self, spec: ModelSpec, port: int) -> list[str]:
        """The exact llama-server command line for ``spec`` (its ``path``: the GGUF file) on ``port``."""
        per_slot = self.opts.max_model_len or server_len(self.cfg, self.cfg.input_len, self.cfg.output_len)
        values = {"server": str(llamacppenv.binary(self.opts.build, "llama-server")), "model": spec.path,
                  "served_name": spec.served_name or spec.name, "host": self.opts.host, "port": port,
                  "seed": self.cfg.seed, "parallel": self.parallel(), "ctx_size": self.parallel() * per_slot}
        return format_command(self.opts.command, values, setting_flags(self.opts) + list(self.opts.extra_args),
                              field="llamacpp.command")

    def _gguf_spec(self, spec: ModelSpec) -> tuple[ModelSpec, str]:
        """``spec`` with ``path`` its GGUF file (written where it is given by architecture), and the tokenizer's folder."""
        if spec.path is not None:
            return spec.model_copy(update={"served_name": spec.served_name or spec.name}), str(self.opts.tokenizer)
        from pipeline.machine.ggufmodels import gguf_file
        from pipeline.machine.modelfolders import build_model_folder

        folder = build_model_folder(spec.name, spec.architecture or {}, self.opts.model_dtype, self.cfg.seed)
        path = gguf_file(folder, spec.name, spec.gguf_type or "F16", resolve(self.opts.build))
        return spec.model_copy(update={"path": str(path), "served_name": spec.served_name or spec.name}), str(folder)

    def load(self, spec: ModelSpec) -> dict[str, Any] | None:
        """Write the model's GGUF where needed, start its server, detect its request features; return its card.

        Raises:
            BatchmarkError: the GGUF cannot be written, the server does not come up, or no tokenizer.
        """
        from pipeline.machine.ggufmodels import gguf_bytes

        served, tokenizer = self._gguf_spec(spec)
        self.gguf = {**gguf_bytes(Path(str(served.path)), resolve(self.opts.build) / "gguf-py"),
                     "gguf_type": spec.gguf_type or ("F16" if spec.path is None else None)}
        self.start(served)
        self.servers[server_key(spec.name, self.variant_name)]["limits"] = self.limits(self.command_for(served, int(self.port or 0)))
        try:
            self._prepare(served.model_copy(update={"path": tokenizer}), "llamacpp")
        except BaseException:
            self.stop()
            raise
        card = served_card(spec.model_copy(update={"path": tokenizer}), tokenizer, self.card_reasons, "llama.cpp",
                           self.cfg.hardware)
        return None if card is None else self.file_card(card, self.command_for(served, int(self.port or 0)))

    def file_card(self, card: dict[str, Any], cmd: list[str]) -> dict[str, Any]:
        """``card`` pinned to the served GGUF's size, its tensor bytes and types in ``extra``, the KV dtype of ``cmd``."""
        from pipeline.cards.filesize import card_with_file_size
        from pipeline.cards.modelcards import ModelCard
        from pipeline.cards.servedformat import with_kv_cache
        from pipeline.cards.weightformats import normalize_quant

        out = card_with_file_size(ModelCard.from_dict(card), self.gguf["file_bytes"],
                                  source=f"{card.get('source', '')}; served as GGUF {self.gguf.get('gguf_type')}")
        gguf_type = self.gguf.get("gguf_type")
        quant = normalize_quant(gguf_type) if gguf_type else out.quantization  # F16 → fp16, Q8_0 → q8_0
        out = replace(out, quantization=quant, extra={
            **out.extra, "gguf_tensor_bytes": self.gguf["tensor_bytes"], "gguf_tensor_types": self.gguf["tensor_types"],
            "gguf_type": gguf_type, "file_gib": self.gguf["file_bytes"] / 2**30})
        kv = KV_NAMES.get(flag_value(cmd, "-ctk", "--cache-type-k") or "f16")
        return (with_kv_cache(out, kv) if kv else out).as_dict()

    def limits(self, cmd: list[str]) -> dict[str, float | None]:
        """The server's own limits from its command line: slots (``max_num_seqs``) and context per slot."""
        def number(*flags: str) -> int | None:
            v = flag_value(cmd, *flags)
            return int(v) if v is not None and v.isdigit() else None

        slots, ctx = number("-np", "--parallel"), number("-c", "--ctx-size")
        return {"max_num_seqs": slots, "kv_cache_size_tokens": ctx,
                "max_model_len": ctx // slots if ctx and slots else None, "max_num_batched_tokens": number("-b", "--batch-size")}

    def provenance(self) -> dict[str, Any]:
        """Engine description for ``run.json``: the build, the template, the settings, each model's exact command."""
        env = self.env_status
        return {"engine": "llama.cpp", "command_template": self.opts.command,
                "server_env": {k: env.get(k) for k in ("distribution", "version", "llama_cpp_build", "cmake_flags",
                                                       "compiler", "build_s", "requirements")},
                "settings": setting_flags(self.opts), "extra_args": list(self.opts.extra_args),
                "parallel": self.parallel(), "endpoint": self.opts.endpoint,
                "requests_per_point": self.opts.requests_per_point, "servers": dict(self.servers),
                "client": self.client_description(),
                **({"models_without_card": dict(self.card_reasons)} if self.card_reasons else {})}
