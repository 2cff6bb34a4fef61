"""A plan's hardware where the profile states no spec (a generic CPU): this machine's probe, stored or run now.

``batchmark plan config/vllm-cpu.yaml`` refused ("profile 'cpu' states no bandwidth"): the default sweep, the only
one a user without a GPU can run, could not be planned.  Where a profile states no bandwidth, peak or memory, the
plan takes them from this machine: the probe of the newest complete run measured on this host with that profile
(``run.json`` ``probe``; a probe without a warning first), else a probe run now (:func:`pipeline.machine.hardware.probe`,
about 10 s on a CPU), and the machine's memory (psutil).  The compute roof is the probe's rate in the dtype the
config serves where the probe measured it (``peak_tflops_by_dtype``), else its float32 one.  The plan says which.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from pipeline.config.sweepconfig import SweepConfig

from pipeline.core import paths
from pipeline.core.errors import BatchmarkError
from pipeline.machine.hardware import HardwareProfile, load_profile

#: Probes run now by :func:`probe_now`, by profile name: one per process, so a budget's many plans probe once.
_PROBED: dict[str, dict[str, Any]] = {}


def this_host() -> str:
    """This machine's host name, as ``run.json`` ``host`` records it."""
    return socket.gethostname()


def stored_probe(profile: str, runs_dir: Path | None = None, host: str | None = None) -> tuple[str, dict[str, Any]] | None:
    """``(run id, probe)`` of the newest complete measured run of ``profile`` on ``host`` (this one), a clean probe
    before a warned one; None when there is none."""
    host = host or this_host()
    found = []
    for meta_path in sorted((runs_dir or paths.runs_dir()).glob("*/run.json")):
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            continue
        probe = meta.get("probe") or {}
        if (meta.get("status") == "complete" and meta.get("source", "measured") == "measured"
                and (meta.get("hardware") or {}).get("name") == profile and meta.get("host") == host
                and isinstance(probe.get("bandwidth_gb_s"), (int, float)) and probe["bandwidth_gb_s"] > 0):
            found.append((not probe.get("warning"), meta_path.parent.name, probe))
    if not found:
        return None
    _, run_id, probe = max(found, key=lambda x: (x[0], x[1]))
    return run_id, probe


def _memory_gb() -> float | None:
    try:
        import psutil

        return psutil.virtual_memory().total / 1e9
    except (ImportError, OSError):
        return None


def probe_now(profile: str, runs_dir: Path | None = None, run_probe: Callable[[], Any] | None = None) -> None:
    """Probe this machine for ``profile``'s plans when no stored run of it has a probe (``batchmark plan`` calls it;
    a sweep does not, so it never probes twice: its plan then uses a stored probe or none)."""
    if profile not in _PROBED and stored_probe(profile, runs_dir) is None:
        from pipeline.machine.hardware import probe

        res = (run_probe or probe)()
        _PROBED[profile] = res.as_dict() if hasattr(res, "as_dict") else dict(res)


def probed_profile(hw: HardwareProfile, served_dtype: str | None = None,
                   runs_dir: Path | None = None) -> tuple[HardwareProfile, str | None]:
    """``(profile, note)``: ``hw`` itself (note None) when it states bandwidth and memory, else ``hw`` with this
    machine's figures filled in and a note saying where they come from.

    Args:
        served_dtype: the dtype the config serves (its compute roof is the probe's rate in it where probed).

    Raises:
        BatchmarkError: the profile states no spec, no stored run of it has a probe and none was run now
            (:func:`probe_now`).
    """
    if hw.bandwidth_gb_s_spec and hw.memory_gb:
        return hw, None
    stored = stored_probe(hw.name, runs_dir)
    if stored is not None:
        run_id, probe = stored
        where = f"the probe stored with run {run_id}" + (" (it warned: a noisy probe)" if probe.get("warning") else "")
    elif hw.name in _PROBED:
        probe = _PROBED[hw.name]
        where = "this machine probed now (no stored run of it)" + (" (it warned: a noisy probe)" if probe.get("warning") else "")
    else:
        raise BatchmarkError(f"hardware profile {hw.name!r} states no bandwidth_gb_s_spec or memory_gb and no run of "
                             "this machine stores a probe (`batchmark plan CONFIG` probes it)")
    by = probe.get("peak_tflops_by_dtype") or {}
    dtype = served_dtype if served_dtype in by else probe.get("dtype")
    peak = by.get(served_dtype) or probe.get("peak_tflops")
    mem = hw.memory_gb or _memory_gb()
    upd = {"bandwidth_gb_s_spec": hw.bandwidth_gb_s_spec or probe["bandwidth_gb_s"],
           "peak_tflops_spec": hw.peak_tflops_spec or peak, "memory_gb": mem}
    note = (f"profile {hw.name!r} states no spec: {where}, {upd['bandwidth_gb_s_spec']:.1f} GB/s read, "
            f"{upd['peak_tflops_spec']:.3g} TFLOP/s ({dtype}), memory {mem:.1f} GB (this machine's)")
    return hw.model_copy(update=upd), note


def plan_hardware(cfg: SweepConfig) -> tuple[HardwareProfile, str | None]:
    """The profile a plan computes with and, where the profile states no spec, where its figures come from: this
    machine's probe, stored with its newest run or run now (:func:`pipeline.plan.probed.probed_profile`)."""
    hw = load_profile(cfg.hardware)
    if hw.bandwidth_gb_s_spec and hw.memory_gb:
        return hw, None
    if cfg.backend == "simulated":
        raise BatchmarkError(f"{cfg.name}: hardware profile {hw.name!r} states no bandwidth_gb_s_spec or memory_gb; "
                             "a simulated run needs both")
    dtype = None
    if cfg.backend == "vllm":
        from pipeline.machine.cpuisa import served_dtype

        dtype = served_dtype(cfg.vllm.dtype, hardware=cfg.hardware)[0]
    return probed_profile(hw, dtype)


def probe_for_plan(cfg: "SweepConfig") -> None:
    """Probe this machine before ``batchmark plan`` where the config's profile states no spec and no stored run of
    this host has a probe (:func:`probe_now`); nothing for a profile with its spec or a simulated config."""
    hw = load_profile(cfg.hardware)
    if (not hw.bandwidth_gb_s_spec or not hw.memory_gb) and cfg.backend != "simulated":
        probe_now(hw.name)
