"""The compute roof probed as an engine's GEMMs run: shapes of a decode step and of a prefill, each timed long enough
that a scheduler slice cannot dominate it, the roof the best repeat reached.

A matmul that takes 0.3 ms (bfloat16 at n = 512 on a 2-core CPU) is shorter than one scheduler slice: with another
process on one core, each product waits out the slice for its second thread, and the probe reads the machine's load,
not its roof (0.015–0.77 TFLOP/s under load for a roof read 0.77–0.88 idle).  Here each timed operation is a loop of
products that lasts at least :data:`TARGET_S`, and the roof is the best repeat: noise (another process, a frequency
step, a page fault) only ever slows a probe, so the maximum over repeats, not their median, is the machine's.
"""

from __future__ import annotations

import time
from typing import Any, Callable

#: Each timed operation lasts at least this long, s: many scheduler slices (Linux CFS: 0.75–6 ms), so one slice lost
#: to another process costs a few percent of one repeat, never most of it.
TARGET_S = 0.030

#: Loops are capped so that a clock that does not move (or a product of nanoseconds) cannot loop for minutes.
MAX_LOOPS = 4096


def gemm_shapes(on_gpu: bool) -> list[tuple[str, int, int, int]]:
    """``(name, M, K, N)`` of the GEMMs timed: a decode step's (M = 16 tokens against a K × N weight: small M, large
    K × N) and a prefill's (M = K = N, a square product that reaches a machine's matmul roof).

    Sizes: a CPU's 4096 × 4096 weight (32 MiB in bfloat16, a small model's MLP) and a 1024-wide prefill; a GPU's
    8192 (a 70B-class projection) and 8192-wide prefill, whose FLOPs are enough to fill the device.
    """
    k = 8192 if on_gpu else 4096
    p = 8192 if on_gpu else 1024
    return [("decode", 16, k, k), ("prefill", p, p, p)]


def calibrate_loops(product: Callable[[], None], clock: Callable[[], float], target_s: float = TARGET_S) -> int:
    """How many products one timed operation loops: as many as ran until ``target_s`` had passed (at least 1, at most
    :data:`MAX_LOOPS`).  Counted, not extrapolated from one product: a first product that waited out a scheduler
    slice would make the loop a few products long, as short as the fault it is there to remove."""
    t0, count = clock(), 0
    while count < MAX_LOOPS:
        product()
        count += 1
        if clock() - t0 >= target_s:
            break
    return count


def best_rate(flops: float, loops: int, seconds: list[float]) -> tuple[float, list[float]]:
    """The best repeat's rate and every repeat's, TFLOP/s: ``flops × loops / s / 1e12`` per repeat, the maximum as
    the roof (noise only slows a probe).  Repeats of 0 s or less are left out (a clock that did not move)."""
    reads = [flops * loops / s / 1e12 for s in seconds if s > 0]
    return (max(reads) if reads else 0.0), reads


def time_gemm(torch: Any, device: str, dtype: Any, shape: tuple[str, int, int, int], repeats: int,
              sync: Callable[[str], None], target_s: float = TARGET_S) -> dict[str, Any]:
    """Time one GEMM shape in ``dtype``: ``{"dtype", "shape", "m", "k", "n", "loops", "op_s", "tflops",
    "tflops_repeats"}`` (``op_s``: one timed operation's best time, s; ``tflops``: the best repeat, TFLOP/s).

    FLOPs of one product: 2·M·K·N (one multiply and one add per term of each of the M·N outputs).
    """
    name, m, k, n = shape
    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    a @ b  # warm the kernels
    sync(device)
    on_gpu = device.startswith("cuda")

    def product() -> None:
        a @ b
        if on_gpu:  # a GPU queues products: the calibration waits for each (a CPU's product returns when done)
            sync(device)

    loops = calibrate_loops(product, time.perf_counter, target_s)
    sync(device)
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(loops):
            a @ b
        sync(device)
        seconds.append(time.perf_counter() - t0)
    roof, reads = best_rate(2.0 * m * k * n, loops, seconds)
    return {"dtype": str(dtype).removeprefix("torch."), "shape": name, "m": m, "k": k, "n": n, "loops": loops,
            "op_s": min(seconds) if seconds else None, "tflops": roof, "tflops_repeats": reads}


def compute_roofs(torch: Any, device: str, dtypes: list[Any], repeats: int, sync: Callable[[str], None],
                  target_s: float = TARGET_S) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """The compute roof of each dtype, TFLOP/s (the best shape's best repeat), and every shape's record
    (:func:`time_gemm`), for the provenance."""
    shapes = gemm_shapes(device.startswith("cuda"))
    timed = [time_gemm(torch, device, d, s, repeats, sync, target_s) for d in dtypes for s in shapes]
    roofs: dict[str, float] = {}
    for t in timed:
        roofs[t["dtype"]] = max(roofs.get(t["dtype"], 0.0), t["tflops"])
    return roofs, timed


def probe_text(res: Any) -> str:
    """``batchmark probe``'s lines for a :class:`pipeline.machine.hardware.ProbeResult`: the device, the bandwidth's
    best repeat, and each GEMM shape's roof with how it was timed."""
    lines = [f"device        {res.device} ({res.threads} threads)",
             f"bandwidth     {res.bandwidth_gb_s:.1f} GB/s read (best of {len(res.bandwidth_repeats_gb_s)}, "
             f"{res.buffer_bytes / 2**30:.0f} GiB buffer)"]
    for s in res.compute_shapes or []:
        lines.append(f"matmul        {s['tflops']:.4f} TFLOP/s {s['dtype']} {s['shape']} {s['m']}×{s['k']}×{s['n']} "
                     f"(best of {len(s['tflops_repeats'])}, {s['loops']} products a repeat, "
                     f"{(s['op_s'] or 0) * 1e3:.0f} ms each)")
    return "\n".join(lines)
