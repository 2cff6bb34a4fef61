"""AIPerf's and GenAI-Perf's settings (an export's ``input_config``): reading them, the ones that make a run no
closed-loop point at its concurrency (refused, naming the setting), and GenAI-Perf's streaming over-count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core.lengthstats import normal_stated, point_lengths, stated_stats
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


def _fixed_schedule(cfg: dict[str, Any]) -> str | None:
    """The setting (dotted) that made a run replay a schedule of timestamps, or None.

    AIPerf: ``input.fixed_schedule`` true (``--fixed-schedule``; its ``FixedScheduleStrategy`` sends each request at its
    timestamp, a concurrency only caps it), or a ``mooncake_trace`` dataset (``input.custom_dataset_type``; AIPerf's load
    generator reference: "--fixed-schedule or mooncake_trace dataset → timestamp-based scheduling"); GenAI-Perf: ``prompt_source`` ``payload`` (``--input-file payload:…``, its fixed
    schedule, where ``--concurrency`` and ``--request-rate`` are refused), ``input.prompt_source`` with a config.
    """
    if setting(cfg, ("input", "fixed_schedule"), ("fixed_schedule",)) is True:
        return "input.fixed_schedule"
    if str(setting(cfg, ("input", "custom_dataset_type")) or "").lower() == "mooncake_trace":
        return "input.custom_dataset_type"  # AIPerf replays a mooncake trace's timestamps without --fixed-schedule
    for where in (("prompt_source",), ("input", "prompt_source")):
        if str(setting(cfg, where) or "").lower() == "payload":
            return ".".join(where)
    return None


def refuse_schedules(path: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """Refuse the settings that make a run no closed-loop point (a fixed schedule, cancellation by design, per-user
    turn gaps, sessions, prefill gates, a multi-turn stimulus); returns GenAI-Perf's ``perf_analyzer.stimulus`` (or {})."""
    schedule = _fixed_schedule(cfg)
    if schedule:
        raise fail(path, f"field input_config.{schedule}", "a fixed schedule (trace replay: each request sent at its "
                                                           "timestamp) is open loop, not a point at a fixed concurrency; "
                                                           "batchmark imports closed-loop runs")
    cancel_pct = setting(cfg, ("loadgen", "request_cancellation_rate"))
    if is_number(cancel_pct) and cancel_pct > 0:  # AIPerf --request-cancellation-rate: client aborts by design (499)
        raise fail(path, "field input_config.loadgen.request_cancellation_rate",
                   f"is {cancel_pct:g} %: the client cancelled that share of the requests on purpose, so the run "
                   "measured a workload of aborted requests, not whole requests at a fixed concurrency; batchmark "
                   "imports runs without cancellation")
    user_rate = setting(cfg, ("loadgen", "user_centric_rate"))
    if user_rate is not None:  # AIPerf --user-centric-rate: each user's turns a fixed gap apart, --concurrency a ceiling
        raise fail(path, "field input_config.loadgen.user_centric_rate",
                   f"is {user_rate!r}: per-user turn-gap scheduling (open loop, turn gap = num_users / rate), not a "
                   "point at a fixed concurrency; batchmark imports closed-loop runs")
    refuse_sessions_and_gates(path, cfg)
    stimulus = setting(cfg, ("perf_analyzer", "stimulus"))  # GenAI-Perf with a config (≥ 0.0.13)
    stimulus = stimulus if isinstance(stimulus, dict) else {}
    if stimulus and not {"concurrency", "request_rate"} & set(stimulus):
        raise fail(path, "field input_config.perf_analyzer.stimulus", f"is {stimulus!r}: multi-turn sessions, not a "
                                                                       "fixed number of requests in flight or a request "
                                                                       "rate; batchmark imports closed-loop runs")
    return stimulus


def length_distribution(isl: dict[str, Any] | None, osl: dict[str, Any] | None,
                        cfg: dict[str, Any]) -> dict[str, Any] | None:
    """A profile export's length distribution (``PointSummary.lengths``, :mod:`pipeline.core.lengthstats`): the
    ``input_sequence_length`` / ``output_sequence_length`` metrics' ``avg``, ``p50``, ``min``, ``max`` (tokens), and
    the settings' standard deviations where stated (AIPerf ``input.prompt.input_tokens.stddev`` /
    ``input.prompt.output_tokens.stddev``, its ``--isl-stddev`` / ``--osl-stddev``; GenAI-Perf
    ``synthetic_input_tokens_stddev`` / ``output_tokens_stddev``, ``input.synthetic_tokens.stddev`` /
    ``input.output_tokens.stddev``): 0 fixed, else normal with that std."""
    stats = [stated_stats(m.get("avg"), m.get("p50"), m.get("min"), m.get("max")) if m else None for m in (isl, osl)]
    std_in = setting(cfg, ("input", "prompt", "input_tokens", "stddev"), ("synthetic_input_tokens_stddev",),
                     ("input", "synthetic_tokens", "stddev"))
    std_out = setting(cfg, ("input", "prompt", "output_tokens", "stddev"), ("output_tokens_stddev",),
                      ("input", "output_tokens", "stddev"))
    return point_lengths(stats[0], stats[1], normal_stated(std_in, std_out))
