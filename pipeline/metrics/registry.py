"""The metric registry: one record per metric a point summary or a point's analysis carries, the one place its name,
unit, better direction, formula, computing function, reference form, peer names and display are stated (pure data).

Learned from AIPerf's ``metrics/types/*`` (one class per metric: tag, unit, flags such as ``LARGER_IS_BETTER``, a
``Formula:`` in the docstring, the registry ordered by dependency): here one :class:`Metric` record per figure, in
:data:`METRICS`, in the order ``show --json`` lays a point's fields out, each naming the metrics it is computed from
(``needs``), from which :func:`dependency_order` orders them as AIPerf orders its registry.  What reads the registry:

- the diff's compared metrics (:data:`pipeline.diff.metrics.METRICS`, from each metric's ``diff``);
- ``show --json``'s point fields (:data:`pipeline.views.show.POINT_FIELDS`, from each metric's ``show``) and the
  cells of ``show``'s tables (:mod:`pipeline.views.showtable`, from each metric's :class:`Display`);
- the model pages' point rows (:mod:`pipeline.pages.pointrows`, from each :class:`Display`);
- the metrics table of docs/definitions.md (:func:`pipeline.pages.reference.metrics_table`, drift-checked by
  ``tests/unit/pages/test_reference.py``).

A record, not a class per metric: the formula AIPerf writes in a class's docstring is the record's ``formula``,
which the docs table prints.  ``computed_by`` and ``reference`` name functions by dotted path, never by import.  The
array forms live in :mod:`pipeline.metrics.arrayforms` (one function per metric), :mod:`pipeline.metrics.reads` (the
per-read figures) and :mod:`pipeline.metrics.clientside` (the client's), which :mod:`pipeline.metrics.summarize` calls;
none of them imports this module, so there is no import loop, and an analysis figure's function is in
:mod:`pipeline.analysis.analyze` (a later folder, never imported from here).  ``tests/unit/metrics/test_registry.py``
resolves every path.  The reference forms (per request and repeat record, the
oracle the array forms are checked against value for value) are :mod:`pipeline.metrics.definitions`.

Why here and not in ``core/`` beside :class:`~pipeline.core.pointsummary.PointSummary`: the registry points at the
functions that compute each metric, which are the metrics stage's; ``PointSummary`` stays the stored type the store
reads without importing a stage, and the registry's test checks that each summary metric is one of its fields
(docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

#: The registry's peer tools, in the order the docs table names them.
PEERS = ("vllm", "guidellm", "aiperf", "llama.cpp")
PEER_NAMES = {"vllm": "vLLM", "guidellm": "GuideLLM", "aiperf": "AIPerf", "llama.cpp": "llama.cpp"}
#: A far-tail statistic as tables name it → its key in a point's ``tails_s`` block.
TAIL_KEYS = {"p95": "p95", "p99.9": "p99_9"}


@dataclass(frozen=True)
class Display:
    """How a reader sees a metric in tables: ``short`` (the column's word, ``TTFT``, ``out``), ``unit`` (the unit
    shown, ``ms``), ``scale`` (stored unit → shown: 1e3 for s → ms, 100 for a share → %), ``text`` (``show``'s
    format, ``{:.1f}``) and ``digits`` (the pages' decimals, thousands separated)."""

    short: str
    unit: str = ""
    scale: float = 1.0
    text: str = "{:.1f}"
    digits: int = 1

    def header(self, stat: str | None = None) -> str:
        """A column header: ``TTFT p50 ms`` (a distribution's ``stat``), ``out tok/s`` (a scalar)."""
        return " ".join(x for x in (self.short, stat, self.unit) if x)


@dataclass(frozen=True)
class Metric:
    """One metric.

    Attributes:
        name: the stored field (``summaries.json``, ``analysis.json``) and ``show --json`` key, unit in the name.
        label: its name for a reader (``TTFT``, ``output throughput``).
        unit: stored unit (``s``, ``tok/s``, ``req/s``, ``fraction``, ``tokens``, ``requests``).
        higher_is_better: the better direction; None where neither is (a duration, a count, a rate offered).
        kind: ``scalar`` (one value, a median over repeats where per repeat), ``distribution``
            (``{p50, p90, p99, mean}`` over requests, :class:`~pipeline.core.pointsummary.Distribution`), ``count``.
        source: ``summary`` (a :class:`~pipeline.core.pointsummary.PointSummary` field) or ``analysis`` (a figure of
            the analysis' point).
        formula: the formula, in the terms of docs/definitions.md (sent, first, last, n, h, B …).
        notes: what a reader must know beside it (a peer's differing definition, a source).
        peers: ``{tool: its name}`` of the peer definition it matches (``vllm``, ``guidellm``, ``aiperf``,
            ``llama.cpp``); a tool whose figure differs in definition is named in ``notes``, not here.
        computed_by: dotted path of the function that computes it over a point's arrays (or the analysis').
        reference: dotted path of its per-record reference form (:mod:`pipeline.metrics.definitions`), None if none.
        repeat_sample: the ``samples`` key of its per-repeat values (what the diff tests, ``ci95`` is of).
        diff: what the diff compares: ``("value",)`` for a scalar, percentiles (``("p50", "p99")``) of a
            distribution; ``()`` not compared.
        gated: a throughput gated by a bare ``diff --fail-above PCT``.
        show: where ``show --json`` carries it: ``point`` (the point's fields), ``open_loop`` (the open-loop
            fields), None (not there: stored only, or carried by another of show's blocks).
        display: its table format (:class:`Display`).
    """

    name: str
    label: str
    unit: str
    higher_is_better: bool | None
    kind: Literal["scalar", "distribution", "count"]
    formula: str
    computed_by: str
    display: Display
    source: Literal["summary", "analysis"] = "summary"
    notes: str = ""
    peers: dict[str, str] = field(default_factory=dict, hash=False)
    reference: str | None = None
    repeat_sample: str | None = None
    diff: tuple[str, ...] = ()
    gated: bool = False
    show: Literal["point", "open_loop"] | None = "point"
    #: names of the metrics it is computed from (the registry's dependency order)
    needs: tuple[str, ...] = ()
    #: what a distribution is over, where not the point's requests (the docs table's "over")
    over: str | None = None

    def value_in(self, point: Mapping[str, Any], stat: str | None = None) -> float | None:
        """This metric's value in a point's mapping (a stored summary, a ``show --json`` point): the figure itself for
        ``stat`` None; a distribution's ``p50``, ``p90``, ``p99`` or ``mean``; its ``p95`` or ``p99.9`` from the
        point's ``tails_s`` (keyed by the name without ``_s``); None where unknown."""
        if stat is None:
            return point.get(self.name)
        if stat in TAIL_KEYS:
            tails = (point.get("tails_s") or {}).get(self.name.removesuffix("_s")) or {}
            return tails.get(TAIL_KEYS[stat])
        return (point.get(self.name) or {}).get(stat)

    def repeat_sample_of(self, stat: str) -> str | None:
        """The ``samples`` key of the per-repeat values of ``stat`` (``p99``: each repeat's own p99,
        ``<name>_p99_s_per_repeat``; ``p50`` or ``value``: :attr:`repeat_sample`)."""
        if stat == "p99" and self.repeat_sample:
            return self.repeat_sample.replace("_s_per_repeat", "_p99_s_per_repeat")
        return self.repeat_sample


_SUMMARIZE = "pipeline.metrics.summarize"
_ARRAYS = "pipeline.metrics.arrayforms"
_READS = "pipeline.metrics.reads"
_CLIENT = "pipeline.metrics.clientside.client_figures"
_DEF = "pipeline.metrics.definitions"
_MS: dict[str, Any] = {"unit": "ms", "scale": 1e3}

METRICS: tuple[Metric, ...] = (
    Metric("repeats", "repeats", "repeats", None, "count", "repeats measured", f"{_SUMMARIZE}.summarize_point",
           Display("repeats", text="{:.0f}", digits=0)),
    Metric("completed", "completed requests", "requests", None, "count",
           "finished measured requests (warm-up and cool-down left out)", f"{_SUMMARIZE}.summarize_point",
           Display("completed", text="{:.0f}", digits=0),
           peers={"vllm": "completed", "aiperf": "request_count"}),
    Metric("failed", "failed requests", "requests", False, "count", "failed measured requests",
           f"{_SUMMARIZE}.summarize_point", Display("failed", text="{:.0f}", digits=0),
           peers={"vllm": "failed", "aiperf": "error_request_count"}),
    Metric("output_throughput_tok_s", "output throughput", "tok/s", True, "scalar",
           "served: Σ n of finished requests / `duration_s`; static batch: B × (output_len − 1) / decode phase; "
           "median over repeats",
           f"{_ARRAYS}.output_throughput_of", Display("out", "tok/s"),
           notes="vLLM's `serve.py`: `sum(actual_output_lens) / dur_s`; static batch: llama.cpp `S_TG` "
                 "(`tools/batched-bench/batched-bench.cpp`); `output_throughput_window` says which; GuideLLM's importer "
                 "takes its tokens / `duration`",
           peers={"vllm": "output_throughput", "aiperf": "output_token_throughput", "llama.cpp": "S_TG"},
           reference=f"{_DEF}.repeat_output_throughput", repeat_sample="output_throughput_tok_s", diff=("value",),
           gated=True, needs=("duration_s",)),
    Metric("per_user_tok_s", "per-user throughput", "tok/s", True, "scalar",
           "1 / median `tpot_streamed_s` over the point's requests", f"{_ARRAYS}.per_user_of",
           Display("user", "tok/s"),
           notes="AIPerf's is 1 / ITL per request (its median 1 / the median TPOT); each repeat's own in `samples`",
           peers={"aiperf": "output_token_throughput_per_user"}, reference=f"{_DEF}.tpot_streamed_s",
           repeat_sample="per_user_tok_s", diff=("value",), gated=True, needs=("tpot_streamed_s",)),
    Metric("ttft_s", "TTFT", "s", False, "distribution", "first − sent", f"{_ARRAYS}.ttft_array",
           Display("TTFT", **_MS, digits=2),
           notes="vLLM's chat client takes the first chunk even when it carries only the role (no text); batchmark "
                 "takes the first chunk with a token",
           peers={"vllm": "ttft", "guidellm": "time_to_first_token_ms", "aiperf": "time_to_first_token"},
           reference=f"{_DEF}.ttft_s", repeat_sample="ttft_s_per_repeat", diff=("p50", "p99")),
    Metric("tpot_s", "TPOT", "s", False, "distribution",
           "(last − first) / (n − 1) for n > 1; 0 when all tokens arrived at once", f"{_ARRAYS}.tpot_array",
           Display("TPOT", **_MS, digits=2),
           notes="vLLM's `serve.py` `calculate_metrics`: `(latency − ttft) / (output_len − 1)`, output_len from usage; "
                 "GuideLLM's `time_per_output_token_ms` includes TTFT and is another figure",
           peers={"vllm": "tpot", "guidellm": "inter_token_latency_ms", "aiperf": "inter_token_latency"},
           reference=f"{_DEF}.tpot_s", repeat_sample="tpot_s_per_repeat", diff=("p50", "p99"), needs=("ttft_s",)),
    Metric("itl_s", "ITL", "s", False, "distribution",
           "per socket read of k tokens (chunks of one read joined), k gaps of (read gap / k); extra first-read "
           "tokens gaps of 0", f"{_READS}.itl_array", Display("ITL", **_MS, digits=2),
           notes="batchmark's per-token ITL; equals vLLM's `itl` only when every chunk carries one token and comes in "
                 "a read of its own",
           reference=f"{_DEF}.itl_values", repeat_sample="itl_s_per_repeat"),
    Metric("e2el_s", "E2EL", "s", False, "distribution", "last − sent", f"{_ARRAYS}.e2el_array",
           Display("E2EL", **_MS, digits=2), notes="vLLM's `latency` = last chunk − start",
           peers={"vllm": "e2el", "guidellm": "request_latency", "aiperf": "request_latency"},
           reference=f"{_DEF}.e2el_s", repeat_sample="e2el_s_per_repeat"),
    Metric("prefill_throughput_tok_s", "prefill throughput", "tok/s", True, "scalar",
           "B × input_len / prefill time (static batch), median over repeats", f"{_ARRAYS}.prefill_throughput_of",
           Display("prefill", "tok/s"), peers={"llama.cpp": "S_PP"},
           reference=f"{_DEF}.repeat_prefill_throughput"),
    Metric("itl_chunk_s", "chunk ITL", "s", False, "distribution",
           "one gap per chunk after the first, a gap inside one socket read left out (not timed)",
           f"{_READS}.itl_chunk_array", Display("chunk ITL", **_MS, digits=2),
           notes="vLLM's `endpoint_request_func.py`: `output.itl.append(timestamp − most_recent_timestamp)`, whose "
                 "client records the gaps inside one read as 0",
           peers={"vllm": "itl", "aiperf": "inter_chunk_latency"}, reference=f"{_DEF}.itl_chunk_values"),
    Metric("tpot_streamed_s", "streamed TPOT", "s", False, "distribution",
           "(last − first) / (n − h − 1) for n − h > 1 and last > first, else none",
           f"{_ARRAYS}.tpot_streamed_array", Display("streamed TPOT", **_MS, digits=2),
           notes="batchmark's own decode rate (hidden reasoning tokens left out); `step_time_s` of served points and "
                 "`per_user_tok_s` = 1 / its median",
           reference=f"{_DEF}.tpot_streamed_s"),
    Metric("steady_output_throughput_tok_s", "steady output throughput", "tok/s", True, "scalar",
           "Σ n of finished requests / (first measured send → last measured completion), median over repeats",
           f"{_ARRAYS}.steady_throughput_of", Display("steady", "tok/s"),
           notes="batchmark's own steady-state window (with cool-down requests keeping N in flight)",
           reference=f"{_DEF}.repeat_steady_throughput"),
    Metric("duration_s", "duration", "s", None, "scalar",
           "first measured send → end of the last measured request, failed ones included, median over repeats",
           f"{_ARRAYS}.duration_of", Display("duration", "s", text="{:.2f}", digits=2),
           notes="vLLM's `benchmark_duration`: until every request returned",
           peers={"vllm": "duration", "aiperf": "benchmark_duration", "guidellm": "duration"},
           reference=f"{_DEF}.repeat_duration_s"),
    Metric("input_tokens_served", "input tokens served", "tokens", None, "scalar",
           "mean prompt tokens per finished request as the server counted them", f"{_ARRAYS}.mean_tokens",
           Display("in tok"), notes="vLLM's `total_input_tokens` / `completed` (its client takes `prompt_tokens` "
                                    "from usage)"),
    Metric("output_tokens_served", "output tokens served", "tokens", None, "scalar",
           "mean output tokens per finished request as the server counted them", f"{_ARRAYS}.mean_tokens",
           Display("out tok"), notes="vLLM's `total_output_tokens` / `completed`"),
    Metric("achieved_concurrency", "achieved concurrency", "requests", None, "scalar",
           "requests in flight as the client saw them (send → end of its read), time-weighted over the steady "
           "window, median over repeats", _CLIENT, Display("in flight"),
           notes="AIPerf's effective concurrency", repeat_sample="achieved_concurrency"),
    Metric("client_lag_s", "client event-loop lag", "s", False, "distribution",
           "how late the client's event-loop timer woke, over every sample of every repeat", _CLIENT,
           Display("client lag", **_MS, digits=2), notes="batchmark's own (the client's measure of itself)",
           over="lag samples"),
    Metric("client_read_wait_s", "client read wait", "s", False, "scalar",
           "Σ L² / 2 / wall over a repeat's lag samples L, median over repeats", _CLIENT,
           Display("read wait", **_MS), notes="the mean time a read ready at a random moment waited for the loop"),
    Metric("client_cpu_share", "client CPU share", "fraction", False, "scalar",
           "client process CPU time / wall time, median over repeats", _CLIENT,
           Display("client CPU", "%", 100, "{:.0f}", 0), repeat_sample="client_cpu_share"),
    Metric("connect_s", "connect", "s", False, "distribution",
           "opening a connection, over the requests that opened one", _CLIENT,
           Display("connect", **_MS, text="{:.2f}", digits=2), notes="timed as AIPerf and GuideLLM time it"),
    Metric("first_byte_s", "first byte", "s", False, "distribution",
           "a request's start → its response headers", _CLIENT, Display("first byte", **_MS, digits=2),
           notes="timed as AIPerf and GuideLLM time it"),
    Metric("delivered_output_throughput_tok_s", "delivered output throughput", "tok/s", True, "scalar",
           "every token received inside the steady window, by any stream (warm-up, measured, cool-down) / that "
           "window, median over repeats", _CLIENT, Display("delivered", "tok/s"),
           notes="what the server delivered there; `steady_output_throughput_tok_s` counts only the measured "
                 "requests' tokens over the same window",
           repeat_sample="delivered_output_throughput_tok_s"),
    Metric("itl_unresolved_share", "ITL unresolved share", "fraction", False, "scalar",
           "chunks with tokens that came in one socket read with the chunk before them / chunks with tokens",
           f"{_READS}.read_figures", Display("unresolved", "%", 100, "{:.0f}", 0),
           notes="gaps the client could not time", reference=f"{_DEF}.unresolved_chunks"),
    Metric("ttst_s", "TTST", "s", False, "distribution",
           "second token's arrival − first's, per request whose second token came in a read after the first's",
           f"{_READS}.ttst_array", Display("TTST", **_MS, digits=2),
           notes="AIPerf's is between the first two chunks", peers={"aiperf": "time_to_second_token"},
           reference=f"{_DEF}.ttst_s", repeat_sample="ttst_s_per_repeat"),
    Metric("tokens_per_chunk", "tokens per chunk", "tokens", None, "scalar",
           "streamed tokens / chunks with tokens", f"{_READS}.read_figures", Display("tok/chunk", text="{:.2f}",
                                                                                     digits=2),
           notes="AIPerf's tokens per chunk"),
    Metric("chunks_per_request", "chunks per request", "chunks", None, "scalar",
           "chunks with tokens / finished requests", f"{_READS}.read_figures", Display("chunks/req"),
           notes="AIPerf's chunk count"),
    Metric("send_rate_rps", "send rate", "req/s", None, "scalar",
           "(measured requests sent − 1) / (last send − first send), median over repeats",
           f"{_ARRAYS}.send_rate_of", Display("sent", "req/s", text="{:.2f}", digits=2),
           notes="batchmark's own: the rate the client really offered", reference=f"{_DEF}.send_rate",
           show="open_loop"),
    Metric("schedule_rate_rps", "schedule rate", "req/s", None, "scalar",
           "(measured requests sent − 1) / (last scheduled time − first), median over repeats",
           f"{_ARRAYS}.schedule_rate_of", Display("scheduled", "req/s", text="{:.2f}", digits=2),
           notes="batchmark's own: saturation under a concurrency cap holds the achieved rate against it",
           reference=f"{_DEF}.schedule_rate", show="open_loop"),
    Metric("achieved_rate_rps", "achieved rate", "req/s", None, "scalar",
           "finished measured requests / steady window, median over repeats", f"{_ARRAYS}.achieved_rate_of",
           Display("achieved", "req/s", text="{:.2f}", digits=2),
           notes="GuideLLM's importer takes successful requests / `duration` (its `requests_per_second` is a rate over "
                 "time, another figure)",
           peers={"vllm": "request_throughput", "aiperf": "request_throughput"},
           reference=f"{_DEF}.achieved_rate", show="open_loop"),
    Metric("schedule_lag_s", "schedule lag", "s", False, "distribution",
           "send − scheduled time, per measured request", f"{_SUMMARIZE}.summarize_point",
           Display("lag", **_MS, digits=2),
           notes="the schedule was kept when its p99 ≤ max(10 ms, 0.1 / rate) (`schedule_kept`)",
           show="open_loop"),
    Metric("ttft_with_queue_s", "TTFT with queueing", "s", False, "distribution", "first − queued",
           f"{_ARRAYS}.ttft_with_queue_array", Display("TTFT+queue", **_MS, digits=2),
           notes="batchmark's own (client queueing included)", show=None),
    Metric("time_to_first_content_s", "time to first content", "s", False, "distribution",
           "first visible (content, not reasoning) token − sent", f"{_ARRAYS}.first_content_array",
           Display("first content", **_MS, digits=2), show=None),
    Metric("step_time_s", "step time", "s", False, "scalar",
           "static batch: decode window / decode steps, median over repeats; served: median `tpot_streamed_s`",
           f"{_SUMMARIZE}.summarize_point", Display("step", **_MS, digits=2),
           notes="the step MBU and MFU are taken at", reference=f"{_DEF}.repeat_step_time",
           repeat_sample="step_time_s", show=None, needs=("tpot_streamed_s",)),
    Metric("failure_rate", "failure rate", "fraction", False, "scalar",
           "failed measured requests / measured requests", f"{_ARRAYS}.failure_rate_of",
           Display("failed", "%", 100, "{:.0f}", 0), reference=f"{_DEF}.point_caveats", show=None),
    Metric("mbu", "MBU", "fraction", True, "scalar",
           "bytes per step at the batch that ran / `step_time_s` / bandwidth", "pipeline.analysis.analyze._point_row",
           Display("MBU", text="{:.2f}", digits=2), source="analysis",
           notes="MBU as Databricks define it (\"LLM Inference Performance Engineering: Best Practices\", 2023, "
                 "<https://www.databricks.com/blog/llm-inference-performance-engineering-best-practices>: achieved "
                 "bandwidth = bytes read per step / TPOT, over the peak); the batch is the concurrency, except at a "
                 "`queueing` point: the server's highest running count from `/metrics`, else its `--max-num-seqs` "
                 "(analysis `batch`)",
           diff=("value",), show=None, needs=("step_time_s",)),
    Metric("mfu", "MFU", "fraction", True, "scalar", "FLOPs per step / `step_time_s` / peak FLOP/s",
           "pipeline.analysis.analyze._point_row", Display("MFU", text="{:.3f}", digits=3), source="analysis",
           diff=("value",), show=None, needs=("step_time_s",)),
)

BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}


def metric(name: str) -> Metric:
    """The registry's :class:`Metric` named ``name`` (a KeyError names an unknown one)."""
    return BY_NAME[name]


def shown(where: Literal["point", "open_loop"]) -> tuple[str, ...]:
    """The names of the metrics ``show --json`` carries in its ``where`` block, in registry order."""
    return tuple(m.name for m in METRICS if m.show == where)


def dependency_order(metrics: tuple[Metric, ...] = METRICS) -> list[str]:
    """The names of ``metrics`` in an order where each comes after every metric it ``needs`` (a topological sort, as
    AIPerf's metric registry orders its metrics before computing them), ties in registry order.

    Raises:
        ValueError: a metric needs one the registry lacks, or the needs form a loop (both name the metric).
    """
    names = {m.name for m in metrics}
    for m in metrics:
        missing = set(m.needs) - names
        if missing:
            raise ValueError(f"metric {m.name}: needs {sorted(missing)}, not in the registry")
    done: list[str] = []
    left = list(metrics)
    while left:
        ready = [m for m in left if set(m.needs) <= set(done)]
        if not ready:
            raise ValueError(f"metric {left[0].name}: its needs form a loop")
        done.extend(m.name for m in ready)
        left = [m for m in left if m not in ready]
    return done
