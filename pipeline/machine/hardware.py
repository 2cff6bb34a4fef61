"""Hardware profiles (spec-sheet figures with their source) and the probe that measures this machine.

A profile lives in ``data/hardware/<name>.yaml``.  The probe measures memory read bandwidth
(GB/s) and peak matmul rate (FLOP/s) on the device in use; a run records both the spec and
the probed figures so that MBU can be stated against each.
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.core import paths
from pipeline.core.errors import BatchmarkError
from pipeline.machine.cpuisa import this_cpu
from pipeline.machine.engineterms import EngineTerms


#: Engines costed with another engine's terms where a profile states none of their own: llama.cpp's tools are one
#: engine; a served OpenAI-compatible endpoint, the simulated server and the other CUDA-graph servers (SGLang,
#: TensorRT-LLM) with vLLM's, their nearest published Spark curve (a prior, said in docs/spark-arithmetic.md).
ENGINE_ALIASES = {"llama-server": "llama.cpp", "llama-bench": "llama.cpp", "llama-batched-bench": "llama.cpp",
                  "ollama": "llama.cpp", "openai": "vllm", "simulated": "vllm", "sglang": "vllm", "trtllm": "vllm",
                  "tensorrt-llm": "vllm"}


class HardwareProfile(BaseModel):
    """Spec-sheet figures of one machine kind.  ``None`` where no spec applies (a generic CPU)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # a .inf bandwidth: one line

    name: str
    description: str
    bandwidth_gb_s_spec: float | None = Field(default=None, gt=0, description="Peak memory bandwidth, GB/s")
    peak_tflops_spec: float | None = Field(default=None, gt=0, description="Dense BF16 peak, TFLOP/s")
    memory_gb: float | None = Field(default=None, gt=0, description="Memory usable for weights and KV cache, GB")
    unified_memory: bool = False
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1, description="vLLM --gpu-memory-utilization")
    runtime_reserve_gb: float = Field(default=0.0, ge=0, description="Memory kept for runtime, activations, OS")
    step_overhead_s: float | None = Field(default=None, ge=0, le=10,
                                          description="A serving engine's fixed time per step (scheduling, sampling), s: "
                                                      "the simulated server's default (0 when absent)")
    source: str = Field(description="Where the spec figures come from")
    peak_tflops_measured: float | None = Field(default=None, gt=0,
                                               description="Dense BF16 matmul rate measured on this hardware kind, TFLOP/s")
    peak_tflops_measured_source: str | None = None
    engines: dict[str, EngineTerms] = Field(default_factory=dict,
                                            description="Each engine's step terms here (pipeline.machine.engineterms)")

    def engine_terms(self, engine: str | None) -> EngineTerms | None:
        """This profile's terms for ``engine`` (its own name or an alias, :data:`ENGINE_ALIASES`), None when none apply."""
        name = ENGINE_ALIASES.get(engine or "", engine or "")
        return self.engines.get(engine or "") or self.engines.get(name)

    def terms_owner(self, engine: str | None) -> str | None:
        """The engine whose terms :meth:`engine_terms` gives for ``engine`` (its own, or the alias's), None: none."""
        if (engine or "") in self.engines:
            return engine
        name = ENGINE_ALIASES.get(engine or "", engine or "")
        return name if name in self.engines else None

    def engine_terms_note(self, engine: str | None) -> str | None:
        """What a plan costed by :meth:`engine_terms` of ``engine`` must say: another engine's terms standing in for
        it (``sglang`` → vllm's, :data:`ENGINE_ALIASES`) and the terms that are priors, not fitted; None: neither."""
        terms = self.engine_terms(engine)
        if terms is None:
            return None
        notes = []
        if self.terms_owner(engine) != engine:
            notes.append(f"standing in for {engine}, which has no terms of its own")
        if terms.priors:
            notes.append(f"priors, not fitted: {', '.join(terms.priors)}")
        return "; ".join(notes) or None

    def compute_peak_tflops(self) -> float | None:
        """The compute roof a prediction uses: the measured peak where stated, else the spec sheet's."""
        return self.peak_tflops_measured or self.peak_tflops_spec


def list_profiles(folder: Path | None = None) -> list[str]:
    """Names of all profiles in ``data/hardware/`` (sorted)."""
    folder = folder or paths.hardware_dir()
    return sorted(p.stem for p in folder.glob("*.yaml"))


def load_profile(name: str, field: str = "hardware", folder: Path | None = None) -> HardwareProfile:
    """Load ``data/hardware/<name>.yaml``.

    Raises:
        BatchmarkError: unknown profile (the message lists the known ones) or a bad profile file.
    """
    from pipeline.core.textfiles import load_yaml_text, read_text_file

    folder = folder or paths.hardware_dir()
    path = folder / f"{name}.yaml"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) or not path.is_file():  # a name, never a path
        known = ", ".join(list_profiles(folder)) or "none"
        raise BatchmarkError(f"{field}: unknown hardware profile {name!r} (known: {known})")
    data = load_yaml_text(path, read_text_file(path, "hardware profile"))
    try:
        return HardwareProfile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(top level)"
        got = f" (got {first['input']!r:.60})" if first["type"] not in ("missing", "extra_forbidden") else ""
        raise BatchmarkError(f"{path}: invalid hardware profile: {field}: {first['msg']}{got}") from None


@dataclass(frozen=True)
class ProbeResult:
    """Measured figures of the device in use.

    Attributes:
        device: ``cpu`` or ``cuda:<name>``.
        bandwidth_gb_s: the best repeat's memory read bandwidth, GB/s (1e9 bytes/s): noise only slows a probe.
        peak_tflops: the compute roof in ``dtype``, TFLOP/s (1e12 FLOP/s): the best repeat of the best GEMM shape
            (:func:`pipeline.machine.roofprobe.compute_roofs`).
        bandwidth_repeats_gb_s / tflops_repeats: every repeat (the matmul's of the shape that set the roof), for
            the spread: a drift between two probes is judged against it.
        buffer_bytes: size of the buffer streamed by the bandwidth probe.
        matmul_n: the prefill shape's width (M = K = N).
        load: the evidence of another load while the probe ran (:func:`probe_load`): other processes' CPU share,
            steal time, the load average; None where it could not be read (or for a simulated machine).
        peak_tflops_by_dtype: the compute roof in each dtype probed, TFLOP/s (a CPU: float32 and bfloat16, so MFU is
            taken against the roof of the dtype served).
        compute_shapes: each GEMM timed (dtype, shape name, M, K, N, loops per timed operation, the operation's
            best time in s, its best and every repeat's TFLOP/s): what the roofs rest on.
        cpu: the CPU's instruction set and native dtype (:func:`pipeline.machine.cpuisa.this_cpu`), None on a GPU.
    """

    device: str
    dtype: str
    bandwidth_gb_s: float
    peak_tflops: float
    bandwidth_repeats_gb_s: list[float]
    tflops_repeats: list[float]
    buffer_bytes: int
    matmul_n: int
    threads: int
    load: dict[str, Any] | None = None
    peak_tflops_by_dtype: dict[str, float] | None = None
    cpu: dict[str, Any] | None = None
    compute_shapes: list[dict[str, Any]] | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return asdict(self)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def probe(device: str = "auto", repeats: int = 7, buffer_bytes: int | None = None) -> ProbeResult:
    """Measure memory read bandwidth and the compute roof on ``device``: the best of ``repeats`` each.

    Bandwidth: a reduction (``sum``) over a buffer far larger than the last-level cache
    (1 GiB on a CPU, 4 GiB on a GPU), bytes read / seconds.  The reduction reads every byte
    once and writes nothing, which is the access pattern of a decode step's weight reads.
    Compute: a decode step's and a prefill's GEMM shapes, each timed as a loop of at least
    :data:`pipeline.machine.roofprobe.TARGET_S` (2·M·K·N FLOPs a product / seconds), in bfloat16 (CUDA) or in
    float32 and bfloat16 (a CPU: the dtypes a model may be served in), :func:`pipeline.machine.roofprobe.compute_roofs`.
    The best repeat, not the median: another process, a frequency step or a page fault only ever slows a probe.
    """
    import torch

    from pipeline.machine.roofprobe import compute_roofs, gemm_shapes

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    on_gpu = device.startswith("cuda")
    dtype = torch.bfloat16 if on_gpu else torch.float32
    buffer_bytes = buffer_bytes or (4 << 30 if on_gpu else 1 << 30)

    meter = _ProbeLoad().__enter__()
    buf = torch.ones(buffer_bytes // 4, dtype=torch.float32, device=device)
    buf.sum()  # fault the pages in, warm the kernels
    _sync(device)
    bw = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        buf.sum()
        _sync(device)
        bw.append(buf.numel() * 4 / (time.perf_counter() - t0) / 1e9)
    del buf

    by_dtype, shapes = compute_roofs(torch, device, [dtype] if on_gpu else [dtype, torch.bfloat16], repeats, _sync)
    name_dt = str(dtype).removeprefix("torch.")
    best = max((s for s in shapes if s["dtype"] == name_dt), key=lambda s: s["tflops"])
    if on_gpu:  # hand the probe's buffers back before a server (vLLM) wants the memory
        torch.cuda.empty_cache()
    meter.__exit__()
    name = f"cuda:{torch.cuda.get_device_name(0)}" if on_gpu else f"cpu:{platform.processor() or platform.machine()}"
    return ProbeResult(
        device=name, dtype=name_dt,
        bandwidth_gb_s=max(bw), peak_tflops=by_dtype[name_dt],
        bandwidth_repeats_gb_s=bw, tflops_repeats=best["tflops_repeats"], buffer_bytes=buffer_bytes,
        matmul_n=gemm_shapes(on_gpu)[-1][1], threads=torch.get_num_threads(), load=meter.result,
        peak_tflops_by_dtype=by_dtype, cpu=None if on_gpu else this_cpu(), compute_shapes=shapes)


#: A probe figure is noisy when the median absolute deviation of its repeats exceeds this share of their median.
#: Ten probes in a row on an idle 2-core machine (load average 0.0–0.5) gave 1–9 % on the matmul, while their
#: max / min reached 1.68×: one slow repeat moves max / min, never the median absolute deviation of seven.
PROBE_MAD_LIMIT = 0.15

#: Fewer repeats than this give no judgement of the spread (a median absolute deviation of two says nothing).
PROBE_MIN_REPEATS = 5

#: Steal time (a hypervisor running other guests on this machine's CPUs) above this share of the probe's CPU time
#: is evidence of another load, as other processes' CPU above ``interference.OUTSIDE_SHARE_LIMIT`` is.
STEAL_SHARE_LIMIT = 0.10


def relative_mad(xs: list[float]) -> float | None:
    """Median absolute deviation of ``xs`` over their median (a share; robust: one outlier of seven does not move it).

    MAD = median(|x − median(x)|) (Hampel 1974, "The influence curve and its role in robust estimation",
    JASA 69:383); None with fewer than :data:`PROBE_MIN_REPEATS` finite values or a median ≤ 0.
    """
    ok = [float(x) for x in xs if isinstance(x, (int, float)) and x == x and abs(x) != float("inf")]
    if len(ok) < PROBE_MIN_REPEATS:
        return None
    med = statistics.median(ok)
    return statistics.median(abs(x - med) for x in ok) / med if med > 0 else None


class _ProbeLoad:
    """Evidence of another load while the probe runs: other processes' CPU (the interference meter), steal time and
    the load average at the start (``result``: :func:`probe_load`'s dict, None where psutil cannot read the clocks)."""

    def __enter__(self) -> "_ProbeLoad":
        from pipeline.machine.interference import InterferenceMeter

        self.result: dict[str, Any] | None = None
        self._meter = InterferenceMeter().__enter__()
        self._steal0, self._t0 = _steal_s(), time.monotonic()
        self._loadavg = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        return self

    def __exit__(self, *exc: object) -> None:
        self._meter.__exit__()
        steal1, wall = _steal_s(), time.monotonic() - self._t0
        steal = steal1 - self._steal0 if steal1 is not None and self._steal0 is not None else None
        self.result = probe_load(self._meter.result, steal, wall, self._loadavg)


def _steal_s() -> float | None:
    """CPU seconds stolen by the hypervisor since boot, all CPUs (``/proc/stat`` via psutil); None elsewhere."""
    try:
        import psutil

        return getattr(psutil.cpu_times(), "steal", None)
    except (ImportError, OSError, RuntimeError):
        return None


def probe_load(outside: dict[str, Any] | None, steal_s: float | None, wall_s: float,
               loadavg_1m: float | None) -> dict[str, Any] | None:
    """The probe's load record (pure): ``{"outside_share", "outside_load_cpus", "cpu_count", "steal_share",
    "loadavg_1m"}``, None when nothing could be read.

    Args:
        outside: the interference meter's result over the probe (:func:`pipeline.machine.interference.outside_load`).
        steal_s: CPU seconds stolen over the probe, all CPUs; ``steal_share`` = steal_s / (wall_s × CPUs).
        wall_s: the probe's wall time, s.
        loadavg_1m: the 1-minute load average when the probe started (runnable processes, recorded for the reader).
    """
    if outside is None and steal_s is None and loadavg_1m is None:
        return None
    cpus = (outside or {}).get("cpu_count") or os.cpu_count() or 1
    steal = max(0.0, steal_s) / (wall_s * cpus) if steal_s is not None and wall_s > 0 else None
    return {"outside_share": (outside or {}).get("outside_share"), "outside_load_cpus": (outside or {}).get("outside_load_cpus"),
            "cpu_count": cpus, "steal_share": steal, "loadavg_1m": loadavg_1m}


def probe_busy(load: dict[str, Any] | None) -> str | None:
    """What says another load shared the machine while the probe ran, or None (no evidence, or none read).

    Busy on evidence only: other processes' CPU above :data:`pipeline.machine.interference.OUTSIDE_SHARE_LIMIT` of the
    machine (the interference check's limit), or steal time above :data:`STEAL_SHARE_LIMIT`.  The load average is
    quoted, never judged alone: the probe's own threads and the sweep's start count in it.
    """
    from pipeline.machine.interference import OUTSIDE_SHARE_LIMIT

    if not load:
        return None
    said = []
    share, steal = load.get("outside_share"), load.get("steal_share")
    if isinstance(share, (int, float)) and share > OUTSIDE_SHARE_LIMIT:
        said.append(f"other processes kept {load.get('outside_load_cpus') or 0:.1f} of {load.get('cpu_count')} CPUs "
                    f"busy ({share:.0%})")
    if isinstance(steal, (int, float)) and steal > STEAL_SHARE_LIMIT:
        said.append(f"the hypervisor stole {steal:.0%} of the CPU time")
    if not said:
        return None
    avg = load.get("loadavg_1m")
    return ", ".join(said) + (f", load average {avg:.1f}" if isinstance(avg, (int, float)) else "")


def probe_warning(bandwidth_gb_s: list[float], tflops: list[float], load: dict[str, Any] | None = None) -> str | None:
    """The probe's warning, or None: its repeats spread (median absolute deviation above :data:`PROBE_MAD_LIMIT` of
    the median, :func:`relative_mad`) or another load shared the machine while it ran (:func:`probe_busy`).

    The medians are still used; the warning is kept in ``run.json`` and shown wherever the run is, because
    ceilings, roofline, MBU and MFU all scale with the probed figures (and only they: a throughput or a latency
    is measured by its own repeats).  The machine is called busy only on evidence of another load; a spread
    without it is the probe's own noise.
    """
    mads = {"bandwidth": relative_mad(bandwidth_gb_s), "matmul": relative_mad(tflops)}
    noisy = {k: v for k, v in mads.items() if v is not None and v > PROBE_MAD_LIMIT}
    busy = probe_busy(load)
    if not noisy and not busy:
        return None
    spread = ", ".join(f"{k} repeats' median absolute deviation {v:.0%} of their median" for k, v in noisy.items())
    cause = (f"machine busy while probing: {busy}" if busy else
             "no other load seen while probing" if load else "no load record to say why")
    head = f"noisy probe ({spread}; {cause})" if noisy else f"probe under another load ({cause})"
    return f"{head}: ceilings, roofline, MBU and MFU of this run are less certain"
