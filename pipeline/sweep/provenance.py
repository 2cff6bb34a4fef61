"""Provenance of a run: the versions, commit, GPU driver and machine that measured it, the probe's spread warning,
and the server that produced the tokens (``server``: its engine, flags, each model's server and version) recorded
in ``run.json``.

Split out of :mod:`pipeline.sweep.gridwalk`; the sweep writes these into the run it creates.
"""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from pipeline import __version__
from pipeline.core import paths
from pipeline.machine.hardware import probe_warning  # noqa: F401  (the sweep's name for it; the judgement is the machine's)
from pipeline.store import runs


def versions() -> dict[str, str | None]:
    """Versions for ``run.json``: Python, batchmark and the installed packages that shape a measurement (None when absent)."""
    out: dict[str, str | None] = {"python": platform.python_version(), "batchmark": __version__}
    for pkg in ("torch", "transformers", "vllm", "numpy"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def git_commit() -> str | None:
    """The repository's HEAD commit (40 hex digits), None outside a git checkout or without git."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=paths.root(), capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def gpu_driver() -> str | None:
    """The NVIDIA driver version (``nvidia-smi``), None where there is none."""
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return res.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_model() -> str | None:
    """The CPU's model name (``/proc/cpuinfo``; ``platform.processor()`` elsewhere), None when unknown."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


def _gpu_names() -> list[str]:
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return [n.strip() for n in res.stdout.splitlines() if n.strip()] if res.returncode == 0 else []
    except (OSError, subprocess.SubprocessError):
        return []


def machine_identity(profile: str) -> dict:
    """What kind of machine measured a part: ``{"profile", "gpus", "cpu"}``.

    ``profile`` is the hardware profile of the config; ``gpus`` the GPU names ``nvidia-smi``
    lists (empty without one), ``cpu`` the CPU model.  Parts of one run must agree on the profile
    and on the device that measures (the GPUs, or the CPU where there is no GPU):
    :func:`pipeline.sweep.parts.check_same_hardware`.
    """
    return {"profile": profile, "gpus": _gpu_names(), "cpu": _cpu_model()}


def record_server(run_dir: Path, provenance: dict) -> None:
    """Write a backend's provenance into ``run.json`` (``server``) when it differs from what is there; the servers
    of earlier variants' engines (one engine per variant, :mod:`pipeline.sweep.gridwalk`) are kept beside its own."""
    old = runs.read_run_json(run_dir).get("server")
    if isinstance(old, dict) and isinstance(old.get("servers"), dict) and isinstance(provenance.get("servers"), dict):
        provenance = {**provenance, "servers": {**old["servers"], **provenance["servers"]}}
    if old != provenance:
        runs.update_run_json(run_dir, server=provenance)


def record_server_version(run_dir: Path) -> None:
    """``versions.<engine>`` in ``run.json`` from what the started servers reported, where the package's own was not
    found (a vLLM run's ``versions.vllm`` was null while ``server.servers`` held 0.32.0)."""
    from pipeline.backends.served import server_version

    meta = runs.read_run_json(run_dir)
    eng: dict[str, Any] = meta.get("server") if isinstance(meta.get("server"), dict) else {}
    name, versions = eng.get("engine"), dict(meta.get("versions") or {})
    found = server_version(eng)
    if name and found and not versions.get(name):
        runs.update_run_json(run_dir, versions={**versions, name: found})
