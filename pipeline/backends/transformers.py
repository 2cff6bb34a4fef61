"""The ``transformers`` engine: an in-process Hugging Face model decoding static batches.

B sequences of exactly ``input_len`` random prompt tokens are prefilled together in one
forward pass, then decoded together for ``output_len − 1`` more steps (greedy; EOS is never
checked, so every sequence has exactly ``output_len`` tokens) — the shape of llama.cpp's
``llama-batched-bench``.  Every forward pass is timestamped (after a device sync on CUDA).
Weights are random from an architecture config (``AutoModelForCausalLM.from_config``) or a
local checkpoint; random weights cost exactly what trained weights cost at fixed lengths.
"""

from __future__ import annotations

import inspect
import time
from pathlib import Path
from typing import Any

from pipeline.config.sweepconfig import ModelSpec, SweepConfig
from pipeline.backends.base import PointDoesNotFit
from pipeline.core.errors import BatchmarkError
from pipeline.backends.torchcard import card_from_torch_model
from pipeline.cards.modelcards import ModelCard
from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord

_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


class TransformersBackend:
    """Static-batch decode timing of a Hugging Face causal LM (CPU or CUDA)."""

    name = "transformers"
    serving_engine = "transformers"

    def __init__(self, cfg: SweepConfig):
        import torch

        self.torch = torch
        opts = cfg.transformers
        self.device: str = ("cuda" if torch.cuda.is_available() else "cpu") if opts.device == "auto" else opts.device
        if self.device == "cuda" and not torch.cuda.is_available():
            raise BatchmarkError("transformers.device: cuda requested but torch sees no CUDA device")
        dtype = opts.dtype if opts.dtype != "auto" else ("bfloat16" if self.device == "cuda" else "float32")
        self.dtype = getattr(torch, _DTYPES[dtype])
        self.memory_fraction = opts.memory_fraction
        self.model: Any = None
        self.card: ModelCard | None = None
        self._cache_kw = "past_key_values"

    # -- model lifecycle -------------------------------------------------------------------
    def attach_run(self, run_dir: Path) -> None:
        """Nothing to keep in the run folder: an in-process backend has no side files."""

    def load(self, spec: ModelSpec) -> dict[str, Any]:
        """Build (random weights) or load (local path) the model; return its counted card.

        Raises:
            BatchmarkError: unknown ``model_type``, a bad architecture key, or a missing path.
        """
        from transformers import AutoConfig, AutoModelForCausalLM

        torch = self.torch
        self.unload()
        try:
            if spec.path:
                model = AutoModelForCausalLM.from_pretrained(spec.path, dtype=self.dtype, local_files_only=True)
            else:
                arch = dict(spec.architecture or {})
                model_type = arch.pop("model_type")
                config = AutoConfig.for_model(model_type, **arch)
                torch.manual_seed(0)
                with torch.device(self.device):  # initialise on the device: a 30 B model never lands in host RAM
                    model = AutoModelForCausalLM.from_config(config, dtype=self.dtype)
            self.model = model.to(self.device).eval()
        except (ValueError, KeyError, OSError, TypeError) as exc:
            raise BatchmarkError(f"models.{spec.name}: cannot build the model ({str(exc).splitlines()[0][:200]})") from None
        except (torch.OutOfMemoryError, MemoryError):
            self.unload_cache()
            raise BatchmarkError(f"models.{spec.name}: the weights do not fit in {self.device} memory "
                                 f"(dtype {str(self.dtype).removeprefix('torch.')})") from None
        params = inspect.signature(self.model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self.card = card_from_torch_model(self.model, spec.name)
        self.vocab = self.model.config.get_text_config().vocab_size
        return self.card.as_dict()

    def unload_cache(self) -> None:
        """Free cached device memory after a failed point (the model stays loaded)."""
        import gc

        gc.collect()
        if self.device == "cuda":
            self.torch.cuda.empty_cache()

    def unload(self) -> None:
        """Drop the model and free its memory."""
        self.model = None
        self.card = None
        import gc

        gc.collect()
        if self.device == "cuda":
            self.torch.cuda.empty_cache()

    def provenance(self) -> dict[str, Any]:
        """Engine description for ``run.json``."""
        import transformers

        torch = self.torch
        return {"engine": "transformers", "transformers_version": transformers.__version__,
                "torch_version": torch.__version__, "device": self.device,
                "dtype": str(self.dtype).removeprefix("torch."), "torch_threads": torch.get_num_threads(),
                "cuda_device": torch.cuda.get_device_name(0) if self.device == "cuda" else None,
                "mode": "static batch, greedy, no EOS stop, logits for the last position only"}

    # -- memory guard ----------------------------------------------------------------------
    def _free_bytes(self) -> int:
        if self.device == "cuda":
            return int(self.torch.cuda.mem_get_info()[0])
        import psutil

        return int(psutil.virtual_memory().available)

    def point_bytes(self, key: PointKey) -> int:
        """Estimated extra memory of a point (bytes): KV cache plus prefill activations.

        Derived: KV = B × (input + output) × KV bytes per token; prefill activations ≈
        B × input × (4 × hidden + 3 × intermediate) × element size (hidden states, attention
        and MLP intermediates alive at once), doubled for allocator slack.
        """
        cfg = self.model.config.get_text_config()
        elem = self.torch.finfo(self.dtype).bits // 8
        inter = max(getattr(cfg, "intermediate_size", 0) or 0, getattr(cfg, "moe_intermediate_size", 0) or 0)
        kv = key.concurrency * (key.input_len + key.output_len) * self.card.kv_bytes_per_token
        act = key.concurrency * key.input_len * (4 * cfg.hidden_size + 3 * inter) * elem * 2
        return int(kv + act)

    def fits(self, key: PointKey) -> tuple[bool, str]:
        """Whether the point's estimated memory fits in ``memory_fraction`` of free memory."""
        need, free = self.point_bytes(key), self._free_bytes()
        if need > self.memory_fraction * free:
            return False, f"needs ~{need / 1e9:.1f} GB, {free / 1e9:.1f} GB free"
        return True, ""

    # -- measurement -----------------------------------------------------------------------
    def _sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def _one_batch(self, key: PointKey, seed: int) -> tuple[float, list[float]]:
        """Prefill + decode one static batch; returns (prefill start, end time of every forward pass), perf_counter s."""
        torch = self.torch
        gen = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, self.vocab, (key.concurrency, key.input_len), generator=gen).to(self.device)
        steps: list[float] = []
        with torch.inference_mode():
            self._sync()
            t0 = time.perf_counter()
            out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            self._sync()
            steps.append(time.perf_counter())
            cache = getattr(out, self._cache_kw)
            for _ in range(key.output_len - 1):
                out = self.model(input_ids=nxt, use_cache=True, logits_to_keep=1, **{self._cache_kw: cache})
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                cache = getattr(out, self._cache_kw)
                self._sync()
                steps.append(time.perf_counter())
        return t0, steps

    def measure(self, key: PointKey, repeats: int, warmup: bool, seed: int) -> PointRecords:
        """Measure one point: an unmeasured warm-up batch at full lengths, then ``repeats`` batches.

        Returns records whose times are relative to each repeat's prefill start; every one of
        the B requests gets one chunk per forward pass (1 token each).
        """
        if self.model is None:
            raise RuntimeError("load() a model before measure()")
        base = seed * 1_000_003 + key.concurrency * 7919 + key.input_len
        try:
            if warmup:
                self._one_batch(key, base - 1)
            batches = [self._one_batch(key, base + r) for r in range(repeats)]
        except (self.torch.OutOfMemoryError, MemoryError) as exc:
            self.unload_cache()
            raise PointDoesNotFit(f"out of memory at c={key.concurrency}: {str(exc).splitlines()[0][:120]}") from None
        reps = []
        for r, (t0, steps) in enumerate(batches):
            rel = [s - t0 for s in steps]
            reqs = [RequestRecord(request_id=i, queued_s=0.0, sent_s=0.0, first_token_s=rel[0], done_s=rel[-1],
                                  chunks=[[t, 1] for t in rel], input_tokens=key.input_len,
                                  output_tokens=len(rel), usage_reported=True)
                    for i in range(key.concurrency)]
            reps.append(RepeatRecord(repeat=r, batching="static_batch", window_start_s=rel[0], window_end_s=rel[-1],
                                     requests=reqs, prefill_start_s=0.0, step_end_s=rel))
        return PointRecords(point=key, repeats=reps, meta={"seed": base})
