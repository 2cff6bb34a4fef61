"""Request records and point summaries: the data every engine yields and every later stage reads.

Times are seconds relative to the start of the point (``time.perf_counter`` based, so
monotonic).  One :class:`RequestRecord` per request; one :class:`RepeatRecord` per repeat of
a point (its measured window and, for static batches, every decode step's timestamp); one
:class:`PointRecords` per point.  docs/definitions.md, "request record", fixes the field names.
:class:`PointSummary` is what the metrics stage makes of a point (:mod:`pipeline.metrics`) and
``summaries.json`` stores; it lives here, beside the records, so storage reads it typed without
importing a stage.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, TypedDict

import numpy as np


#: How requests arrive at a point: ``closed`` keeps N in flight (the next is sent when one
#: finishes); ``poisson`` and ``constant`` send at a rate, exponential or equal gaps, whatever
#: the responses do (open loop), optionally capped at a maximum number in flight; ``gamma`` is
#: vLLM's ``--burstiness`` ≠ 1 (gamma-distributed gaps of mean 1 / rate; imported only, the
#: burstiness kept in the summary).
LOAD_PATTERNS = ("closed", "poisson", "constant", "gamma")
LoadPattern = Literal["closed", "poisson", "constant", "gamma"]


@dataclass(frozen=True)
class PointKey:
    """One cell of a sweep, the one identity of a point everywhere (records, summaries, analysis, diff, pages).

    Attributes:
        model, engine: names as the run states them.
        input_len / output_len: prompt and generated tokens per request.
        concurrency: closed loop: the N requests kept in flight; open loop: the optional cap on
            requests in flight (None = uncapped).
        load: ``closed``, ``poisson`` or ``constant`` (:data:`LOAD_PATTERNS`).
        rate_rps: open loop: the offered rate in requests/s; None for a closed-loop point.

    Raises:
        ValueError: an inconsistent key (a closed point without a concurrency or with a rate, an
            open point without a finite positive rate): a bug of its maker, never user input,
            which config and importers check before they build keys.
    """

    model: str
    engine: str
    input_len: int
    output_len: int
    concurrency: int | None
    load: str = "closed"
    rate_rps: float | None = None

    def __post_init__(self) -> None:
        if self.load not in LOAD_PATTERNS:
            raise ValueError(f"PointKey.load {self.load!r} is not one of {LOAD_PATTERNS}")
        if self.load == "closed":
            if self.concurrency is None or self.rate_rps is not None:
                raise ValueError("a closed-loop PointKey needs a concurrency and no rate")
        elif self.rate_rps is None or not math.isfinite(self.rate_rps) or self.rate_rps <= 0:
            raise ValueError(f"an open-loop PointKey needs a finite positive rate, got {self.rate_rps!r}")

    @property
    def open_loop(self) -> bool:
        """True for ``poisson`` and ``constant`` points (sent at a rate, not as answers come back)."""
        return self.load != "closed"

    @property
    def workload(self) -> tuple[str, str, int, int]:
        """(model, engine, input_len, output_len): the knee and ceiling are per workload."""
        return (self.model, self.engine, self.input_len, self.output_len)

    def sort_key(self) -> tuple[Any, ...]:
        """Sweep order: per workload, closed points by concurrency first, then open points by load, rate, cap."""
        return (*self.workload, self.open_loop, self.load, self.rate_rps or 0.0,
                -1 if self.concurrency is None else self.concurrency)

    def __lt__(self, other: "PointKey") -> bool:
        return self.sort_key() < other.sort_key()

    def slug(self) -> str:
        """File-name stem: ``transformers-in64-out32-c8`` (closed, as ever), ``vllm-in64-out32-poisson-r2.5-c16`` (open, capped)."""
        stem = f"{self.engine}-in{self.input_len}-out{self.output_len}"
        if not self.open_loop:
            return f"{stem}-c{self.concurrency}"
        cap = f"-c{self.concurrency}" if self.concurrency is not None else ""
        return f"{stem}-{self.load}-r{self.rate_rps:g}{cap}"

    def label(self) -> str:
        """Short human form: ``c = 8`` (closed) or ``poisson 2.5 req/s`` (open, ``, cap 16`` when capped)."""
        if not self.open_loop:
            return f"c = {self.concurrency}"
        cap = f", cap {self.concurrency}" if self.concurrency is not None else ""
        return f"{self.load} {self.rate_rps:g} req/s{cap}"

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form; a closed-loop key has exactly the five fields it always had (stored files unchanged)."""
        d = asdict(self)
        if not self.open_loop:
            del d["load"], d["rate_rps"]
        return d

    @classmethod
    def of(cls, data: Any) -> "PointKey":
        """The key of a point given as a mapping (a stored summary, an analysis point, a ``show`` row) or an
        object with the same attributes (:class:`PointSummary`); ``load`` absent = closed.

        Raises:
            KeyError / AttributeError: a field is missing; ValueError: inconsistent (see the class).
        """
        get = data.__getitem__ if isinstance(data, dict) else (lambda k: getattr(data, k))
        opt = (lambda k, d: data.get(k, d)) if isinstance(data, dict) else (lambda k, d: getattr(data, k, d))
        return cls(get("model"), get("engine"), get("input_len"), get("output_len"), get("concurrency"),
                   opt("load", "closed") or "closed", opt("rate_rps", None))


Workload = tuple[str, str, int, int]


def workload_of(data: Any) -> Workload:
    """(model, engine, input_len, output_len) of a point, a summary, an analysis point or model (mapping or object):
    the workload a knee, a ceiling and a rate sweep belong to (:attr:`PointKey.workload`).

    Raises:
        KeyError / AttributeError: a field is missing.
    """
    if isinstance(data, dict):
        return (data["model"], data["engine"], data["input_len"], data["output_len"])
    return (data.model, data.engine, data.input_len, data.output_len)


@dataclass
class RequestRecord:
    """One request.

    Attributes:
        queued_s: when the request was ready to go (client side); ``sent_s - queued_s`` is
            client queueing.
        sent_s: when the request was sent (static batch: prefill start).
        first_token_s: arrival of the first generated token (None if none arrived).
        done_s: arrival of the last generated token (None if the request failed early).
        chunks: ``[[arrival_s, n_tokens], ...]`` in arrival order, the first chunk included;
            a chunk carrying k tokens stands for k tokens.
        input_tokens / output_tokens: token counts; ``output_tokens`` counts every generated
            token, the hidden ones included.
        usage_reported: whether the server reported a usage for this request (served engines).
        error: None on success, else a short description; failed requests stay out of latency
            percentiles but are counted.
        first_content_s: arrival of the first visible (content, not reasoning) token; None when
            none arrived or the engine does not tell them apart.
        hidden_tokens: tokens generated but never streamed (reasoning reported only in usage);
            they count in ``output_tokens`` but not in ``chunks``, TPOT or ITL.
        token_count_source: where ``output_tokens`` came from (``usage``, ``per_chunk_usage``,
            ``tokenized_text``, ``chunk_count``; see :mod:`pipeline.engines.tokencount`); None for
            engines that count their own tokens and for records written before it existed.
        token_count_reason: one line: why that source.
        token_count_flags: evidence set aside (keys of ``tokencount.FLAG_TEXT``); a request with
            any is flagged.
        scheduled_s: open loop only: when the schedule said to send it (``queued_s`` is the same
            time, so client queueing behind a concurrency cap counts as queueing).
        lag_s: open loop only: the client's own lateness, send time − the time it could have gone
            out (the later of ``scheduled_s`` and a free slot under the cap), s.
    """

    request_id: int
    queued_s: float
    sent_s: float
    first_token_s: float | None
    done_s: float | None
    chunks: list[list[float]]
    input_tokens: int
    output_tokens: int
    usage_reported: bool = True
    error: str | None = None
    warmup: bool = False
    first_content_s: float | None = None
    hidden_tokens: int = 0
    token_count_source: str | None = None
    token_count_reason: str | None = None
    token_count_flags: list[str] = field(default_factory=list)
    scheduled_s: float | None = None
    lag_s: float | None = None

    @property
    def streamed_tokens(self) -> int:
        """Tokens that arrived in the stream: ``output_tokens − hidden_tokens``."""
        return self.output_tokens - self.hidden_tokens

    @property
    def ok(self) -> bool:
        """True when the request finished without error and produced at least one token."""
        return self.error is None and self.first_token_s is not None and self.done_s is not None


@dataclass
class RepeatRecord:
    """One repeat of a point.

    Attributes:
        batching: how the engine batched the requests: ``static_batch`` (all B requests prefilled
            and decoded together, one decode loop) or ``served`` (a server's own continuous
            batching).  Stored as ``kind`` before point-record schema version 2 (issue 14: ``kind``
            is the model's dense/MoE).
        window_start_s / window_end_s: the measured window.  Static batch: the decode phase,
            from the first token (prefill end) to the last step; served: first measured send
            to last measured completion.
        prefill_start_s: static batch only, when prefill began.
        step_end_s: static batch only: end time of every forward pass, the prefill first
            (so ``len == output_len``) — step i's duration is ``step_end_s[i] - step_end_s[i-1]``.
        server_metrics: anything scraped from the server around the repeat (served engines).
    """

    repeat: int
    batching: Literal["static_batch", "served"]
    window_start_s: float
    window_end_s: float
    requests: list[RequestRecord]
    prefill_start_s: float | None = None
    step_end_s: list[float] | None = None
    server_metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class PointRecords:
    """All repeats of one point, plus anything the engine wants kept (e.g. the server log tail)."""

    point: PointKey
    repeats: list[RepeatRecord]
    meta: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form (the on-disk format of a point record file): what ``dataclasses.asdict`` gives per repeat,
        built without its recursive per-value ``deepcopy`` (a Spark-size point holds millions of chunk pairs)."""
        return {"point": self.point.as_dict(), "meta": self.meta,
                "repeats": [_repeat_dict(r) for r in self.repeats]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PointRecords":
        """Inverse of :meth:`as_dict`; raises KeyError/TypeError on a malformed mapping."""
        reps = []
        for r in data["repeats"]:
            r = dict(r)
            r["requests"] = [RequestRecord(**q) for q in r["requests"]]
            reps.append(RepeatRecord(**r))
        return cls(point=PointKey(**data["point"]), repeats=reps, meta=data.get("meta", {}))


_REQUEST_FIELDS = tuple(f.name for f in fields(RequestRecord))
_REPEAT_FIELDS = tuple(f.name for f in fields(RepeatRecord) if f.name != "requests")


def _repeat_dict(rep: RepeatRecord) -> dict[str, Any]:
    """``asdict(rep)``: the same keys and values, lists and dicts copied one level per container."""
    out = {name: _plain(getattr(rep, name)) for name in _REPEAT_FIELDS}
    reqs = []
    for q in rep.requests:
        d = {name: getattr(q, name) for name in _REQUEST_FIELDS}
        d["chunks"] = [list(c) for c in q.chunks]
        d["token_count_flags"] = list(q.token_count_flags)
        reqs.append(d)
    out["requests"] = reqs
    return {name: out[name] for name in (f.name for f in fields(RepeatRecord))}


class Distribution(TypedDict):
    """One latency's distribution over the requests of a point, in seconds: the one shape of every
    ``*_s`` percentile field of a :class:`PointSummary`, measured or imported.

    A measured point has every figure; an imported one has those its tool stated (others None).
    """

    p50: float | None
    p90: float | None
    p99: float | None
    mean: float | None


def distribution(values: "list[float] | np.ndarray | None" = None, *, p50: float | None = None, p90: float | None = None,
                 p99: float | None = None, mean: float | None = None, scale: float = 1.0) -> Distribution | None:
    """The :class:`Distribution` of raw ``values`` × ``scale`` where given, else of the stated figures × ``scale``.

    Raw values give numpy's linear-interpolation percentiles (``np.percentile``'s default) and
    their mean; stated figures are taken as they are (a missing one stays None).  None when
    nothing is known: no values and no stated figure.
    """
    if values is not None and len(values) > 0:  # a list or a numpy array
        arr = np.asarray(values, dtype=float) * scale
        q50, q90, q99 = np.percentile(arr, [50, 90, 99])
        return {"p50": float(q50), "p90": float(q90), "p99": float(q99), "mean": float(arr.mean())}
    out: Distribution = {"p50": None, "p90": None, "p99": None, "mean": None}
    for k, v in (("p50", p50), ("p90", p90), ("p99", p99), ("mean", mean)):
        out[k] = float(v) * scale if v is not None else None  # type: ignore[literal-required]
    return out if any(v is not None for v in out.values()) else None


@dataclass
class PointSummary:
    """Summary of one point over its repeats.

    Throughput fields are medians over repeats (tokens/s); latency fields are
    ``{"p50","p90","p99","mean"}`` over every successful measured request of every repeat
    (s).  ``step_time_s`` is the median decode step (static batch) or median TPOT (served).
    ``samples`` keeps what diffs and spreads need: one value per repeat for throughputs, one
    per request for TTFT/TPOT, and the per-repeat medians of TTFT/TPOT
    (``ttft_s_per_repeat``, ``tpot_s_per_repeat``): in a static batch every request of a
    repeat shares one prefill and one decode loop, so the repeat, not the request, is the
    independent sample there.  ``interference`` is the outside load while the point ran
    (:func:`pipeline.interference.outside_load`, kept by the sweep in the point file's ``meta``; None
    for imported points and points measured before it was kept).

    Open loop (``load`` ``poisson`` / ``constant``; ``concurrency`` is then the cap or None):
    ``rate_rps`` is the offered rate (requests/s), ``send_rate_rps`` the rate the measured
    requests were really sent at and ``achieved_rate_rps`` the rate they completed at (medians
    over repeats; ``requestmetrics.send_rate``, ``requestmetrics.achieved_rate``),
    ``schedule_lag_s`` the client's lag behind the schedule (send time − scheduled time, s) and
    ``schedule_kept`` whether the client kept the schedule (``requestmetrics.schedule_kept``):
    when False, requests went out late and the latencies miss the waiting the schedule would
    have caused (coordinated omission).  ``slo`` is the SLO check when the run has an SLO:
    ``{"ttft_p99_ms", "tpot_p99_ms", "e2el_p99_ms", "met", "share_ok", "goodput_rps",
    "goodput_tok_s", "p99_ok"}`` (``goodput.slo_goodput``).  ``burstiness``: an imported vLLM
    run's ``--burstiness`` (1 = Poisson).  All None for closed points.

    ``output_throughput_window`` says which window ``output_throughput_tok_s`` (the name the
    ``show --json`` contract fixes) was measured over (docs/definitions.md, issue 14):
    ``"decode_phase"`` for a static batch (the transformers engine, llama-batched-bench: output
    tokens of the decode loop / its wall time, llama.cpp's S_TG; prefill is apart in
    ``prefill_throughput_tok_s``) and ``"send_to_completion"`` for a served point (first
    measured send to last measured completion, prefill and queueing included).

    Issue 23 (peer definitions, docs/definitions.md): ``itl_s`` is per token (batchmark's ITL)
    and ``itl_chunk_s`` per chunk (vLLM's ``itl``: one gap per streamed chunk); ``tpot_s`` is
    vLLM's TPOT ((E2EL − TTFT) / (output tokens − 1) over requests of more than one token) and
    ``tpot_streamed_s`` batchmark's decode rate (streamed tokens only, requests whose tokens did
    not all arrive at once), of which ``step_time_s`` and ``per_user_tok_s`` are taken.  For a
    served point ``output_throughput_tok_s`` is vLLM's (output tokens / ``duration_s``: first
    measured send → end of the last measured request, failed ones included) and
    ``steady_output_throughput_tok_s`` batchmark's own window (first measured send → last
    measured completion).  ``input_tokens_served`` / ``output_tokens_served``: mean prompt and
    output tokens per finished request as the server counted them (None where not measured).
    """

    model: str
    engine: str
    input_len: int
    output_len: int
    concurrency: int
    repeats: int
    completed: int
    failed: int
    output_throughput_tok_s: float | None
    per_user_tok_s: float | None
    ttft_s: Distribution | None
    ttft_with_queue_s: Distribution | None
    tpot_s: Distribution | None
    itl_s: Distribution | None
    e2el_s: Distribution | None
    prefill_throughput_tok_s: float | None
    step_time_s: float | None
    errors: list[str] = field(default_factory=list)
    samples: dict[str, list[float]] = field(default_factory=dict)
    failure_rate: float | None = None
    flags: dict[str, int] = field(default_factory=dict)
    token_count_sources: dict[str, int] = field(default_factory=dict)
    time_to_first_content_s: Distribution | None = None
    output_throughput_window: Literal["decode_phase", "send_to_completion"] | None = None
    server: dict[str, float | None] | None = None
    interference: dict[str, Any] | None = None
    load: str = "closed"
    rate_rps: float | None = None
    send_rate_rps: float | None = None
    achieved_rate_rps: float | None = None
    schedule_lag_s: Distribution | None = None
    schedule_kept: bool | None = None
    slo: dict[str, Any] | None = None
    burstiness: float | None = None
    itl_chunk_s: Distribution | None = None
    tpot_streamed_s: Distribution | None = None
    steady_output_throughput_tok_s: float | None = None
    duration_s: float | None = None
    input_tokens_served: float | None = None
    output_tokens_served: float | None = None

    @property
    def key(self) -> PointKey:
        """This point's :class:`PointKey` (the identity diff, show and pages match points by)."""
        return PointKey.of(self)

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form (what ``dataclasses.asdict`` gives, copied without its per-value ``deepcopy``)."""
        return {name: _plain(getattr(self, name)) for name in _SUMMARY_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PointSummary":
        """Inverse of :meth:`as_dict`; keys this version does not know are ignored.

        A summary is derived (recomputed from the records by the metrics stage), and a field a later
        batchmark adds without a new ``schema_version`` is one more figure beside the known ones:
        reading the known ones stays right, so an added field never makes a run unreadable.
        """
        out = cls(**{k: v for k, v in data.items() if k in _SUMMARY_FIELD_SET})
        if out.output_throughput_window is None:
            out.output_throughput_window = throughput_window(data)
        return out


def throughput_window(summary: dict[str, Any]) -> str | None:
    """The window of a stored summary's output throughput when the file does not say it (written before
    ``output_throughput_window`` was kept): ``"decode_phase"`` where the point has a prefill throughput
    (only static batches measure prefill apart, docs/definitions.md), else ``"send_to_completion"``;
    None without a throughput."""
    if summary.get("output_throughput_tok_s") is None:
        return None
    return "decode_phase" if summary.get("prefill_throughput_tok_s") is not None else "send_to_completion"


_SUMMARY_FIELDS = tuple(f.name for f in fields(PointSummary))
_SUMMARY_FIELD_SET = frozenset(_SUMMARY_FIELDS)


def _plain(value: Any) -> Any:
    """A copy of a JSON-shaped value (dicts, lists, tuples of numbers and strings), as ``asdict`` copies it."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value
