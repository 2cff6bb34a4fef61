"""Hardware profiles (spec-sheet figures with their source) and the probe that measures this machine.

A profile lives in ``data/hardware/<name>.yaml``.  The probe measures memory read bandwidth
(GB/s) and peak matmul rate (FLOP/s) on the device in use; a run records both the spec and
the probed figures so that MBU can be stated against each.
"""

from __future__ import annotations

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
        bandwidth_gb_s: median memory read bandwidth, GB/s (1e9 bytes/s).
        peak_tflops: median dense matmul rate in ``dtype``, TFLOP/s (1e12 FLOP/s).
        bandwidth_repeats_gb_s / tflops_repeats: every repeat, for the spread.
        buffer_bytes: size of the buffer streamed by the bandwidth probe.
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

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return asdict(self)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def probe(device: str = "auto", repeats: int = 7, buffer_bytes: int | None = None,
          matmul_n: int | None = None) -> ProbeResult:
    """Measure memory read bandwidth and peak matmul rate on ``device`` (median of ``repeats``).

    Bandwidth: a reduction (``sum``) over a buffer far larger than the last-level cache
    (1 GiB on a CPU, 4 GiB on a GPU), bytes read / seconds.  The reduction reads every byte
    once and writes nothing, which is the access pattern of a decode step's weight reads.
    Matmul: ``n x n @ n x n`` in float32 (CPU) or bfloat16 (CUDA), 2·n³ FLOPs / seconds.
    """
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    on_gpu = device.startswith("cuda")
    dtype = torch.bfloat16 if on_gpu else torch.float32
    buffer_bytes = buffer_bytes or (4 << 30 if on_gpu else 1 << 30)
    matmul_n = matmul_n or (8192 if on_gpu else 2048)

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

    a = torch.randn(matmul_n, matmul_n, device=device).to(dtype)
    b = torch.randn(matmul_n, matmul_n, device=device).to(dtype)
    a @ b
    _sync(device)
    tf = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        tf.append(2 * matmul_n**3 / (time.perf_counter() - t0) / 1e12)
    del a, b
    if on_gpu:  # hand the probe's buffers back before a server (vLLM) wants the memory
        torch.cuda.empty_cache()
    name = f"cuda:{torch.cuda.get_device_name(0)}" if on_gpu else f"cpu:{platform.processor() or platform.machine()}"
    return ProbeResult(
        device=name, dtype=str(dtype).removeprefix("torch."),
        bandwidth_gb_s=statistics.median(bw), peak_tflops=statistics.median(tf),
        bandwidth_repeats_gb_s=bw, tflops_repeats=tf, buffer_bytes=buffer_bytes,
        matmul_n=matmul_n, threads=torch.get_num_threads())
