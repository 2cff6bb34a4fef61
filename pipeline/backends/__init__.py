"""Backends: where tokens come from.  One module per backend behind :class:`pipeline.backends.base.Backend`.

``transformers`` (in-process static batches) and ``simulated`` (the simulation model of
:mod:`pipeline.simulation` in virtual time) live here; the served backends (``vllm``, ``openai``)
share one streaming load generator (:mod:`pipeline.loadgen`).  :func:`get_backend` picks one by name without importing
the others, so the CPU path never imports a serving stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.core.errors import BatchmarkError

if TYPE_CHECKING:
    from pipeline.config.sweepconfig import SweepConfig
    from pipeline.backends.base import Backend


def get_backend(cfg: "SweepConfig") -> "Backend":
    """Instantiate the backend named by ``cfg.backend``.

    Raises:
        BatchmarkError: a backend this installation does not have.
    """
    if cfg.backend == "transformers":
        from pipeline.backends.transformers import TransformersBackend

        return TransformersBackend(cfg)
    if cfg.backend == "openai":
        from pipeline.backends.openai import OpenAIBackend

        return OpenAIBackend(cfg)
    if cfg.backend == "vllm":
        from pipeline.backends.vllm import VLLMBackend

        return VLLMBackend(cfg)
    if cfg.backend == "llamacpp":
        from pipeline.backends.llamacpp import LlamaCppBackend

        return LlamaCppBackend(cfg)
    if cfg.backend == "simulated":
        from pipeline.backends.simulated import SimulatedBackend

        return SimulatedBackend(cfg)
    raise BatchmarkError(f"backend: {cfg.backend!r} is not available in this build")
