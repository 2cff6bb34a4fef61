"""AIPerf's and GenAI-Perf's settings (an export's ``input_config``): reading them, the ones that make a run no
closed-loop point at its concurrency (refused, naming the setting), and GenAI-Perf's streaming over-count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.importers.parsing import fail, is_number


def setting(cfg: dict[str, Any], *paths: tuple[str, ...]) -> Any:
    """The first of ``paths`` (tuples of keys) set in ``cfg``, else None."""
    for p in paths:
        v: Any = cfg
        for k in p:
            v = v.get(k) if isinstance(v, dict) else None
        if v is not None:
            return v
    return None


#: A client that over-counts streamed output tokens reports more than the max_tokens it asked for, which no server
#: generates: GenAI-Perf 24.11–24.12's streaming output length (5× the requested in the reports), inference-perf's
#: per-chunk re-tokenization (kubernetes-sigs/inference-perf #564, PR #565: ~1.75×, above its max_tokens cap).
OVERCOUNT = ("GenAI-Perf's streaming output-length bug (24.11-24.12): output_sequence_length above the requested "
             "max_tokens, which no server generates, so the output count and the output token throughput are not "
             "measured")


def is_aiperf(cfg: dict[str, Any]) -> bool:
    """AIPerf's settings nest under ``endpoint``/``loadgen``; GenAI-Perf's are flat (or ``perf_analyzer``)."""
    return isinstance(cfg.get("endpoint"), dict) or isinstance(cfg.get("loadgen"), dict)


def refuse_sessions_and_gates(path: Path, cfg: dict[str, Any]) -> None:
    """Refuse a run whose settings keep fewer requests in flight than its ``--concurrency``, naming the setting.

    - multi-turn sessions (AIPerf ``input.conversation.turn.mean`` > 1, ``--conversation-turn-mean``; GenAI-Perf
      ``session_turns_mean``): a session's next turn waits for its answer and its think time
      (``--conversation-turn-delay-mean``), so by Little's law (requests in flight = rate × latency) far fewer than
      ``--concurrency`` requests are in flight, with prompts growing turn by turn;
    - ``--prefill-concurrency`` (``loadgen.prefill_concurrency``, below the concurrency): at most that many requests
      wait for their first token, the rest are held by the client, which AIPerf's own tutorial
      (``docs/tutorials/prefill-concurrency.md``) warns is coordinated omission.

    Raises:
        BatchmarkError: naming the setting and its value.
    """
    turns = setting(cfg, ("input", "conversation", "turn", "mean"), ("session_turns_mean",),
                     ("conversation_turn_mean",))
    if is_number(turns) and turns > 1:
        delay = setting(cfg, ("input", "conversation", "turn", "delay", "mean"), ("session_turn_delay_mean",))
        think = f", {delay:g} ms think time between turns" if is_number(delay) and delay > 0 else ""
        raise fail(path, "field input_config.input.conversation.turn.mean",
                   f"is {turns:g}: multi-turn sessions ({turns:g} turns each{think}) keep fewer requests in flight "
                   "than the concurrency (each turn waits for the last answer) with prompts growing turn by turn; "
                   "batchmark imports single-turn closed-loop runs")
    gate = setting(cfg, ("loadgen", "prefill_concurrency"))
    conc = setting(cfg, ("loadgen", "concurrency"))
    if is_number(gate) and gate > 0 and not (is_number(conc) and gate >= conc):
        raise fail(path, "field input_config.loadgen.prefill_concurrency",
                   f"is {gate:g}: the client let at most {gate:g} requests wait for their first token and held the "
                   "others back (coordinated omission, AIPerf's prefill-concurrency tutorial), so TTFT and the load "
                   "are not those of its concurrency; batchmark imports runs without --prefill-concurrency")
