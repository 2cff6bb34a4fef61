"""The engine interface: load a model, measure one point, yield its request records."""

from __future__ import annotations

from typing import Any, Protocol

from pipeline.config import ModelSpec
from pipeline.records import PointKey, PointRecords


class PointDoesNotFit(Exception):
    """Raised by ``Engine.measure`` when a point ran out of device memory; the sweep stops escalating that model."""


class Engine(Protocol):
    """What the sweep driver needs from an engine.

    ``load`` prepares a model and returns its card as a dict (or None when the engine cannot
    count it, e.g. a remote server); ``fits`` says whether a point can run without running
    out of memory (``(False, reason)`` stops escalation); ``measure`` runs one point's
    warm-up and repeats; ``unload`` frees the model; ``provenance`` describes the engine
    for ``run.json`` (versions, flags, device).
    """

    name: str

    def load(self, spec: ModelSpec) -> dict[str, Any] | None: ...

    def fits(self, key: PointKey) -> tuple[bool, str]: ...

    def measure(self, key: PointKey, repeats: int, warmup: bool, seed: int) -> PointRecords: ...

    def unload(self) -> None: ...

    def provenance(self) -> dict[str, Any]: ...
