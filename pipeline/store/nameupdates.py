"""The stored files' migrations that give one thing one word (:mod:`pipeline.store.schemas`): ``run.json``'s
``engine`` meant three things (the config's way of driving a server, the serving engine, the provenance block).
Format only, never a number."""

from __future__ import annotations

from typing import Any

#: run.json's top-level keys renamed by version 5: the provenance of the server(s) that produced the tokens, the
#: NVIDIA driver's version, and the switch to another backend where the server environment could not run.
RUN_KEYS_5 = {"engine": "server", "driver": "gpu_driver", "engine_fallback": "backend_fallback"}


def _run_update_to_5(data: dict[str, Any]) -> dict[str, Any]:
    """Version 4 → 5: the provenance block ``engine: {...}`` is ``server: {...}`` (its own ``engine`` key, the serving
    engine's name, kept), ``driver`` is ``gpu_driver``, ``engine_fallback`` is ``backend_fallback``, and the stored
    config's ``engine`` (how batchmark got the tokens) is ``backend``.  Keys keep their order; a key the file already
    has under its new name is not overwritten."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        new = RUN_KEYS_5.get(k, k)
        out[new if new not in data else k] = v
    cfg = out.get("config")
    if isinstance(cfg, dict) and "engine" in cfg and "backend" not in cfg:
        out["config"] = {("backend" if k == "engine" else k): v for k, v in cfg.items()}
    return out
