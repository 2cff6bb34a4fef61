"""The backend interface: load a model, measure one point, yield its request records.

Every backend (``transformers``, ``openai``, ``vllm``, ``simulated``) implements :class:`Backend`; the sweep
(:mod:`pipeline.sweep.gridwalk`) uses nothing else of it.  The sweep alone writes the run folder: a
backend is told the folder (:meth:`Backend.attach_run`) only to keep its own side files there
(a server's log), and hands everything for ``run.json`` back through :meth:`Backend.provenance`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pipeline.config.sweepconfig import ModelSpec
from pipeline.core.records import PointKey, PointRecords


class PointDoesNotFit(Exception):
    """Raised by ``Backend.measure`` when a point ran out of device memory; the sweep stops escalating that model."""


class Backend(Protocol):
    """What the sweep driver needs from a backend.

    Attributes:
        name: the backend's name in configs (``transformers``, ``openai``, ``vllm``, ``simulated``).
        serving_engine: the serving engine that produces the tokens, the point keys' ``engine`` (``transformers``,
            ``vllm``, ``simulated``; for ``openai`` what the endpoint is: :mod:`pipeline.backends.endpointkind`).
        device: the device the hardware probe measures for this backend (``cpu``, ``cuda``, or
            ``auto`` where the backend cannot see the device, as for a server).

    Life cycle, as the sweep calls it: ``attach_run`` once; then per model ``load``, per point
    ``fits`` and ``measure``, and ``unload``; ``provenance`` after the probe and after every
    ``load`` (a served backend's provenance gains each model's server).

    Raises:
        BatchmarkError: from ``__init__`` (a bad option, a missing device or API key) and from
            ``load`` (no model, no tokenizer, a server that does not come up) — a user-caused
            error, reported on one line.
        PointDoesNotFit: from ``measure``, when the point ran out of device memory.
        Failed requests are never raised: ``measure`` stores them in the records (``error``).
    """

    name: str
    device: str

    @property
    def serving_engine(self) -> str:
        """The serving engine that produces the tokens (a class attribute, or asked of the endpoint once)."""
        ...

    def attach_run(self, run_dir: Path) -> None:
        """The run folder being measured into, for the engine's side files (server logs); never written by the engine otherwise."""
        ...

    def load(self, spec: ModelSpec) -> dict[str, Any] | None:
        """Prepare a model; its card as a dict, or None when the engine cannot count it (a remote server)."""
        ...

    def fits(self, key: PointKey) -> tuple[bool, str]:
        """Whether a point can run; ``(False, reason)`` stops escalating the model."""
        ...

    def measure(self, key: PointKey, repeats: int, warmup: bool, seed: int) -> PointRecords:
        """One point: its warm-up and ``repeats`` repeats, as request records."""
        ...

    def unload(self) -> None:
        """Free the model (stop its server)."""
        ...

    def provenance(self) -> dict[str, Any]:
        """The engine for ``run.json``: versions, flags, device, servers; never a secret."""
        ...
