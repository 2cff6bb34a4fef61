"""Words for readers: the analysis's enums and knee figures as the pages and ``show`` say them.

The analysis stores codes (``"queueing"``, ``"not_reached"``, a knee with its per-repeat knees); what a
reader sees of them is said here, once, for the site's pages (:mod:`pipeline.pages.views`) and for the
terminal views (:mod:`pipeline.views.show`, :mod:`pipeline.diff.report`).  It sits beside those views, outside
``pages/``, because the pages import :mod:`pipeline.diff.report` (the Changes page): words inside ``pages/``
would make the terminal views import the folder that imports them.
"""

from __future__ import annotations

#: A point's regime (:func:`pipeline.analysis.regime.point_regime`) and a workload's post-knee cause in a few words.
REGIME_TEXT = {"batching": "batching", "queueing": "queueing (more in flight than the server batches)",
               "kv_cache_full": "KV cache full / preemption", "limits_unknown": "server limits unknown",
               "interference": "busy machine: not attributed to batching",
               "compute": "compute-bound: the matmul roof, not memory reads"}
#: A workload's ``post_knee`` (:func:`pipeline.analysis.knee.post_knee`) in words.
POST_KNEE_TEXT = {"plateau": "plateaus", "decline": "declines", "not_reached": "knee not reached"}

#: What the model page says of a workload's ``post_knee_cause`` (:func:`pipeline.analysis.regime.post_knee_cause`).
POST_KNEE_CAUSE_TEXT = {
    "batching": "every point past the knee was decoded in the batch, so this is batching itself",
    "queueing": ("some points past the knee had more requests in flight than the server batches (its --max-num-seqs, "
                 "or requests waiting in its queue): those points measure queueing, not batching"),
    "kv_cache_full": "the server's KV cache filled or it preempted requests past the knee: those points measure KV-cache pressure",
    "limits_unknown": "the server's limits and metrics are unknown, so queueing cannot be told apart from batching",
    "interference": ("points of this run were measured on a busy machine (flagged), so nothing here is attributed to "
                     "batching: measure again on a quiet machine"),
    "compute": ("every point past the knee is bound by the compute roof (FLOPs per step / peak FLOP/s), not by "
                "the memory reads batching shares: each added sequence adds its arithmetic at the same rate, so "
                "throughput stops growing"),
}


def post_knee_words(value: str | None) -> str:
    """The post-knee behaviour in words (``"not_reached"`` → ``"knee not reached"``), never the raw enum."""
    return "-" if value is None else POST_KNEE_TEXT.get(value, str(value).replace("_", " "))


def knee_words(knee: int | None, per_repeat: list[int | None] | None, settled: bool | None) -> str:
    """The knee with its uncertainty in words: ``"c = 16, not settled: repeats give 16, 32, 16"``,
    ``"c = 16, settled: all 3 repeats give 16"``, ``"not reached"`` (one repeat: nothing more to say)."""
    return (f"c = {knee}" if knee is not None else "not reached") + knee_spread_words(knee, per_repeat, settled)


def knee_spread_words(knee: int | None, per_repeat: list[int | None] | None, settled: bool | None) -> str:
    """What follows the knee in :func:`knee_words` (``", not settled: repeats give 16, 32, 16"``; ``""`` for one repeat)."""
    if not per_repeat or settled is None:
        return ""
    if settled:
        return (f", settled: all {len(per_repeat)} repeats give {knee}" if knee is not None
                else f", settled: reached in none of the {len(per_repeat)} repeats")
    return ", not settled: repeats give " + ", ".join("not reached" if k is None else str(k) for k in per_repeat)
