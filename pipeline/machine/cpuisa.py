"""The CPU's instruction set, from ``/proc/cpuinfo``'s flags, and the dtype it runs natively (pure, with one reader).

A CPU serves bfloat16 at full speed only with instructions for it: AVX512-BF16 (``avx512_bf16``, Cooper Lake and
later, AMD Zen 4), AMX (``amx_bf16``, Sapphire Rapids) on x86-64, the BF16 extension (``bf16`` in ``Features``,
Armv8.6-A) on arm64.  Without them torch emulates bfloat16 through float32 conversions: on an AMD EPYC with AVX2
only its bfloat16 matmul ran at 0.2 GFLOP/s against 65 GFLOP/s in float32 (n = 2048), and vLLM's CPU build served a
190M-parameter model at 6.2 tok/s in bfloat16 against 10.0 tok/s in float32 on the same machine.  Flag names are
the Linux kernel's (arch/x86/include/asm/cpufeatures.h; arch/arm64/kernel/cpuinfo.c).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

#: (name shown, kernel flag) of the instruction sets a reader of a CPU run needs, in the order shown.
ISA_FLAGS = (("AVX2", "avx2"), ("AVX-512", "avx512f"), ("AVX512-BF16", "avx512_bf16"), ("AMX-BF16", "amx_bf16"),
             ("NEON", "asimd"), ("SVE", "sve"), ("ARM-BF16", "bf16"))

#: Flags under which a CPU runs bfloat16 matmuls natively.
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")


def cpu_flags(cpuinfo: str) -> set[str]:
    """The flags of the first CPU in ``/proc/cpuinfo`` text (``flags`` on x86-64, ``Features`` on arm64)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def instruction_sets(flags: Iterable[str]) -> list[str]:
    """The instruction sets of :data:`ISA_FLAGS` the flags name, in that order (e.g. ``["AVX2"]``)."""
    have = set(flags)
    return [name for name, flag in ISA_FLAGS if flag in have]


def native_dtype(flags: Iterable[str]) -> tuple[str, str]:
    """``(dtype, why)``: bfloat16 where the CPU has instructions for it (:data:`BF16_FLAGS`), else float32, and why."""
    have = set(flags)
    isa = instruction_sets(have) or ["no AVX2, AVX-512 or NEON"]
    bf16 = [name for name, flag in ISA_FLAGS if flag in BF16_FLAGS and flag in have]
    if bf16:
        return "bfloat16", f"this CPU runs bfloat16 natively ({', '.join(bf16)})"
    return "float32", (f"this CPU ({', '.join(isa)}) has no bfloat16 instructions (AVX512-BF16, AMX, Armv8.6 BF16): "
                       "torch emulates bfloat16 there, many times slower, so float32 is served")


def this_cpu(path: Path = Path("/proc/cpuinfo")) -> dict[str, Any] | None:
    """``{"isa": [...], "native_dtype", "why"}`` of this machine's CPU; None where ``/proc/cpuinfo`` cannot be read."""
    try:
        flags = cpu_flags(path.read_text(errors="replace"))
    except OSError:
        return None
    if not flags:
        return None
    dtype, why = native_dtype(flags)
    return {"isa": instruction_sets(flags), "native_dtype": dtype, "why": why}


#: The dtype a GPU profile runs natively: bfloat16, on the tensor cores of every NVIDIA GPU since Ampere (compute
#: capability 8.0; https://docs.nvidia.com/cuda/cuda-c-programming-guide/ "bfloat16"), which every GPU profile in
#: ``data/hardware/`` is (GB10, H100, H200, RTX 4090, RTX 5090).
GPU_NATIVE_DTYPE = "bfloat16"


def served_dtype(option: str, flags: Iterable[str] | None = None,
                 hardware: str | None = None) -> tuple[str, str | None]:
    """The dtype the ``{dtype}`` placeholder fills and why (None when the config named it): ``native`` is the dtype
    the sweep's hardware runs natively: on a GPU profile (any ``hardware`` but ``cpu``) :data:`GPU_NATIVE_DTYPE`, the
    host CPU's flags never asked; on ``cpu`` (or None) this machine's CPU's
    (:func:`pipeline.machine.cpuisa.native_dtype`; float32 where ``/proc/cpuinfo`` cannot be read, which every CPU
    runs).  Any other value is served as written.  ``flags``: a CPU's flags to decide by instead of this machine's
    (what another CPU would be served)."""
    if option != "native":
        return option, None
    if hardware is not None and hardware != "cpu":
        return GPU_NATIVE_DTYPE, (f"hardware profile {hardware!r} is a GPU: bfloat16, which NVIDIA tensor cores run "
                                  "natively since Ampere")
    if flags is not None:
        return native_dtype(flags)
    cpu = this_cpu()
    if cpu is None:
        return "float32", "the CPU's flags could not be read (no /proc/cpuinfo), so float32, which every CPU runs natively"
    return cpu["native_dtype"], cpu["why"]
