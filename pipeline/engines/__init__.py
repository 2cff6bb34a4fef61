"""Engines: where tokens come from.  One module per engine behind :class:`pipeline.engines.base.Engine`.

``transformers`` (in-process static batches) lives here; served engines (``vllm``, ``openai``)
share one streaming load generator.  :func:`get_engine` picks one by name without importing
the others, so the CPU path never imports a serving stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.core.errors import BatchmarkError

if TYPE_CHECKING:
    from pipeline.config.sweepconfig import SweepConfig
    from pipeline.engines.base import Engine


def get_engine(cfg: "SweepConfig") -> "Engine":
    """Instantiate the engine named by ``cfg.backend``.

    Raises:
        BatchmarkError: an engine this installation does not have.
    """
    if cfg.backend == "transformers":
        from pipeline.engines.transformers import TransformersEngine

        return TransformersEngine(cfg)
    if cfg.backend == "openai":
        from pipeline.engines.openai import OpenAIEngine

        return OpenAIEngine(cfg)
    if cfg.backend == "vllm":
        from pipeline.engines.vllm import VLLMEngine

        return VLLMEngine(cfg)
    if cfg.backend == "simulated":
        from pipeline.engines.simulated import SimulatedEngine

        return SimulatedEngine(cfg)
    raise BatchmarkError(f"backend: {cfg.backend!r} is not available in this build")
