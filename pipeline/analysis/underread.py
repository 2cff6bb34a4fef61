"""A compute roof the engine beat is a probe fault, not physics: the roof is marked under-read (pure).

No step does more arithmetic per second than the machine's matmul roof, and no engine outruns the roofline it is
drawn against.  A point that does (an MFU above 1 in the dtype it was served in, a measured throughput above a
compute-bound roofline) says the probe read less than the machine does: a matmul timed shorter than a scheduler
slice on a loaded machine reads the load (a 2-core CPU's bfloat16 roof read 0.0336 TFLOP/s while vLLM on it reached
0.15 TFLOP/s at c = 32).  So is a roofline that binds on compute at c = 1: a single stream's decode step reads every
weight for one token, 2 FLOPs per parameter against the parameter's bytes (1 FLOP/byte in bfloat16, 0.5 in float32,
4 at 4 bits), below the ridge (peak FLOP/s / bandwidth) of every probed machine (a 2-core CPU's idle probe:
0.8 TFLOP/s / 12 GB/s = 67 FLOP/byte; a GB10's 92 TFLOP/s / 273 GB/s = 337) in a dtype it runs natively.  (A CPU
that emulates the dtype is another matter: its roof is that slow, and only a point above it says it is under-read.)

Against an under-read roof the analysis draws the roofline on the bandwidth alone, withholds MFU (``mfu`` null,
``mfu_withheld`` saying why) and calls no point compute-bound; ``compute_roof_under_read`` says it on the workload.
"""

from __future__ import annotations

from typing import Any

from pipeline.analysis.quality import same_format

#: A point is above its roof by more than float rounding: FLOP counts and roofs are products of many figures.
ABOVE = 1.0 + 1e-9


def point_beats_roof(row: dict[str, Any], throughput_tok_s: float | None, native: bool = True) -> str | None:
    """Why an analysed closed-loop point says its compute roof is under-read, or None.

    Args:
        row: the point's analysis row (``mfu``, ``roofline_tok_s``, ``roofline_bound``, ``batch``, ``concurrency``),
            computed against the roof of its served dtype.
        throughput_tok_s: the point's measured output throughput, tok/s.
        native: whether the machine runs the roof's dtype natively; a CPU that emulates it (bfloat16 without
            AVX512-BF16, AMX or Arm BF16: 0.2 GFLOP/s against 65 in float32) can be compute-bound at c = 1.
    """
    c, mfu = row.get("concurrency"), row.get("mfu")
    if native and row.get("roofline_bound") == "compute" and row.get("batch") == 1:
        return (f"the roofline binds on compute at c = {c}, where a decode step reads every weight for one token "
                "(about 1 FLOP per byte), below any machine's ridge")
    if isinstance(mfu, (int, float)) and mfu > ABOVE:
        return f"MFU {mfu:.2f} at c = {c}: the point ran {mfu:.1f}× the FLOP/s the roof allows"
    roof = row.get("roofline_tok_s")
    if row.get("roofline_bound") == "compute" and roof and throughput_tok_s and throughput_tok_s > roof * ABOVE:
        return f"measured {throughput_tok_s:,.1f} tok/s at c = {c}, above its compute-bound roofline {roof:,.1f}"
    return None


def under_read_roofs(pairs: list[tuple[dict[str, Any], float | None, str | None]],
                     native_dtype: str | None = None) -> dict[str | None, str]:
    """The probed compute roofs a run's points beat, by the dtype each was probed in, with the first point's reason
    (:func:`point_beats_roof`).  A spec sheet's roof (dtype None) is never called under-read: no probe read it, and
    a point above it says the FLOP count is wrong (:func:`pipeline.analysis.quality.implausible_mfu`).

    Args:
        pairs: ``(row, measured output throughput in tok/s, the roof's dtype)`` of every closed-loop point.
        native_dtype: the dtype a CPU runs natively (``run.json`` ``probe.cpu.native_dtype``); None on a GPU or where
            unknown (every dtype then counts as native).
    """
    out: dict[str | None, str] = {}
    for row, throughput, dtype in pairs:
        native = native_dtype is None or (dtype is not None and same_format(dtype) == same_format(native_dtype))
        why = point_beats_roof(row, throughput, native) if dtype else None
        if why and dtype not in out:
            out[dtype] = why
    return out


def under_read_text(dtype: str | None, tflops: float | None, why: str, served: str | None = None) -> str:
    """The reason an under-read roof gives on a workload and in the run's verdict; ``served``: the dtype the model was
    served in, named when the roof is another dtype's (an older probe measured only float32)."""
    rate = "" if not tflops else f" ({tflops * 1e3:,.1f} GFLOP/s)" if tflops < 1 else f" ({tflops:,.1f} TFLOP/s)"
    other = (f" (a roof probed in {dtype} for a model served in {served})"
             if served and dtype and same_format(served) != same_format(dtype) else "")
    return (f"the probe under-read the {dtype + ' ' if dtype else ''}compute roof{rate}{other}: {why}; the roofline "
            "is drawn on the bandwidth alone and MFU is withheld (probe again on an idle machine)")
