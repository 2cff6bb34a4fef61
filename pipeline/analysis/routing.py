"""The expert routing an MoE point's bytes are counted at, and an MBU above 1 at those bytes (pure).

An MoE decode step of B tokens reads the experts they route to (docs/definitions.md, "effective batch"): uniform
routing, coverage 1 − (1 − k/E)^B, is the most it can read; identical routing, k/E, the least.  A static batch of
one prompt repeated (llama-batched-bench and llama-bench decode the same token ids in every sequence) routes every sequence to the same experts, so its bytes are counted at k/E and its analysis
says the coverage of distinct requests was not measured (``coverage_not_measured``, docs/spark-arithmetic.md,
"Routing locality").  Every other point is counted at uniform routing, the upper bound.
"""

from __future__ import annotations

from typing import Any

from pipeline.core.pointsummary import PointSummary

#: Engines whose static batches (``output_throughput_window`` ``"decode_phase"``) decode one prompt repeated:
#: llama.cpp's llama-batched-bench and llama-bench.  Not batchmark's transformers backend (its static batch draws a
#: random prompt per sequence, ``torch.randint`` of shape B × input_len in :mod:`pipeline.backends.transformers`), nor
#: a llama-benchy run (a served static batch of distinct prompts, its engine vLLM or ``openai``).
IDENTICAL_PROMPT_ENGINES = ("llama.cpp", "llama-batched-bench", "llama-bench")

#: Why a static batch of one prompt repeated says nothing of expert coverage (llama-batched-bench, llama-bench).
COVERAGE_NOT_MEASURED = ("static batch: every sequence decodes the same token ids (llama-batched-bench's and "
                         "llama-bench's batches are one prompt repeated), so all route to the same experts and coverage stays "
                         "k/E at every B; the MoE expert coverage of distinct requests was not measured (its curve shows "
                         "the batched kernel's cost instead)")

#: Words for each routing a point's expert bytes are counted at (the analysis's ``routing``).
ROUTING_TEXT = {"identical": "identical routing (k/E: one prompt repeated)",
                "uniform": "uniform routing (1 − (1 − k/E)^B)"}


def identical_prompts(s: PointSummary) -> bool:
    """Whether a point is a static batch of one prompt repeated (its tokens all route to the same experts)."""
    return s.output_throughput_window == "decode_phase" and s.engine in IDENTICAL_PROMPT_ENGINES


def routing_of(s: PointSummary, expert_bytes: float) -> str | None:
    """The routing an MoE point's expert bytes are counted at, ``"identical"`` or ``"uniform"``; None for a dense
    model (``expert_bytes`` 0: no experts to route)."""
    if not expert_bytes:
        return None
    return "identical" if identical_prompts(s) else "uniform"


def routing_scale_of(routing: str | None) -> float | None:
    """The routing scale of :func:`pipeline.cards.stepcost.effective_batch` a routing counts bytes at: 0 for
    identical (B_eff = 1, coverage k/E), None (uniform) otherwise."""
    return 0.0 if routing == "identical" else None


def implausible_mbu(point: dict[str, Any]) -> str | None:
    """Why an analysed point's MBU is no result (above 1 at the bytes it was counted at), or None.

    Derived: MBU = bytes per step / step time / bandwidth, above 1 only if the step read fewer bytes than counted:
    its tokens shared experts (a served MoE, counted at uniform routing) or it was served in a smaller format than
    the card's.  Where even the fewest plausible bytes (``mbu_min``) give above 1 the point is impossible
    (:func:`pipeline.analysis.quality.implausible_point`); otherwise the MBU is marked as an MFU above 1 is.
    """
    mbu = point.get("mbu")
    if mbu is None or mbu <= 1:
        return None
    routing = ROUTING_TEXT.get(point.get("routing") or "", "the card's bytes")
    low = point.get("mbu_min")
    fewest = f"; at the fewest plausible bytes (identical routing, smallest format) it is {low:.2f}" if low is not None else ""
    return (f"MBU {mbu:.2f} at c = {point.get('concurrency')} is above 1 at the bytes counted ({routing}): the step "
            f"read fewer bytes than counted{fewest}")
