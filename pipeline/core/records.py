"""Request records: the data every engine yields and every later stage reads.

Times are seconds relative to the start of the point (``time.perf_counter`` based, so
monotonic).  One :class:`RequestRecord` per request; one :class:`RepeatRecord` per repeat of
a point (its measured window and, for static batches, every decode step's timestamp); one
:class:`PointRecords` per point.  docs/definitions.md, "request record", fixes the field names.
What the metrics stage makes of a point, :class:`~pipeline.core.pointsummary.PointSummary`, lives beside
them in :mod:`pipeline.core.pointsummary`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, NamedTuple


#: How requests arrive at a point: ``closed`` keeps N in flight (the next is sent when one
#: finishes); ``poisson`` and ``constant`` send at a rate, exponential or equal gaps, whatever
#: the responses do (open loop), optionally capped at a maximum number in flight; ``gamma`` is
#: vLLM's ``--burstiness`` ≠ 1 (gamma-distributed gaps of mean 1 / rate; imported only, the
#: burstiness kept in the summary); ``trace`` replays a trace file's arrivals scaled to the rate.
LOAD_PATTERNS = ("closed", "poisson", "constant", "gamma", "trace")
LoadPattern = Literal["closed", "poisson", "constant", "gamma", "trace"]

#: The variant of a point measured without named server settings (config ``variants:`` absent), and of every point
#: stored before variants existed.
DEFAULT_VARIANT = "default"


@dataclass(frozen=True)
class PointKey:
    """One cell of a sweep, the one identity of a point everywhere (records, summaries, analysis, diff, pages).

    Attributes:
        model, engine: names as the run states them.
        variant: the named server setting this point was measured under (config ``variants:``; the first is the
            baseline); ``default`` for a run with no variants.  Keyword-only (every key built before it existed
            stays valid), but placed after ``engine`` in the stored form and the order.
        input_len / output_len: prompt and generated tokens per request.
        concurrency: closed loop: the N requests kept in flight; None for an open-loop point (its
            number in flight is whatever the schedule and the server make it).
        load: ``closed``, ``poisson`` or ``constant`` (:data:`LOAD_PATTERNS`).
        rate_rps: open loop: the offered rate in requests/s; None for a closed-loop point.
        max_concurrency: open loop: the cap on requests in flight (vLLM's ``--max-concurrency``),
            None when uncapped; always None for a closed-loop point.

    Raises:
        ValueError: an inconsistent key (a closed point without a concurrency, or with a rate or a
            cap; an open point with a concurrency or without a finite positive rate): a bug of its
            maker, never user input, which config and importers check before they build keys.
    """

    model: str
    engine: str
    variant: str = field(default=DEFAULT_VARIANT, kw_only=True)
    input_len: int
    output_len: int
    concurrency: int | None
    load: str = "closed"
    rate_rps: float | None = None
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        if self.load not in LOAD_PATTERNS:
            raise ValueError(f"PointKey.load {self.load!r} is not one of {LOAD_PATTERNS}")
        if self.load == "closed":
            if self.concurrency is None or self.rate_rps is not None or self.max_concurrency is not None:
                raise ValueError("a closed-loop PointKey needs a concurrency and no rate or max_concurrency")
        elif self.concurrency is not None:
            raise ValueError(f"an open-loop PointKey has no concurrency (its cap is max_concurrency), got {self.concurrency!r}")
        elif self.rate_rps is None or not math.isfinite(self.rate_rps) or self.rate_rps <= 0:
            raise ValueError(f"an open-loop PointKey needs a finite positive rate, got {self.rate_rps!r}")

    @property
    def open_loop(self) -> bool:
        """True for ``poisson`` and ``constant`` points (sent at a rate, not as answers come back)."""
        return self.load != "closed"

    @property
    def workload(self) -> "Workload":
        """(model, engine, variant, input_len, output_len): the knee and ceiling are per workload."""
        return Workload(self.model, self.engine, self.variant, self.input_len, self.output_len)

    def sort_key(self) -> tuple[Any, ...]:
        """Sweep order: per workload, closed points by concurrency first, then open points by load, rate, cap."""
        return (self.model, self.engine, self.variant, self.input_len, self.output_len, self.open_loop, self.load, self.rate_rps or 0.0,
                self.concurrency if not self.open_loop else -1 if self.max_concurrency is None else self.max_concurrency)

    def __lt__(self, other: "PointKey") -> bool:
        return self.sort_key() < other.sort_key()

    def slug(self) -> str:
        """File-name stem: ``transformers-in64-out32-c8`` (closed, as ever), ``vllm-in64-out32-poisson-r2.5-c16`` (open,
        capped); a variant other than ``default`` after the engine: ``vllm-fp8-kv-in64-out32-c8``."""
        engine = self.engine if self.variant == DEFAULT_VARIANT else f"{self.engine}-{self.variant}"
        stem = f"{engine}-in{self.input_len}-out{self.output_len}"
        if not self.open_loop:
            return f"{stem}-c{self.concurrency}"
        cap = f"-c{self.max_concurrency}" if self.max_concurrency is not None else ""  # file names as ever
        return f"{stem}-{self.load}-r{self.rate_rps:g}{cap}"

    def label(self) -> str:
        """Short human form: ``c = 8`` (closed) or ``poisson 2.5 req/s`` (open, ``, cap 16`` when capped)."""
        if not self.open_loop:
            return f"c = {self.concurrency}"
        cap = f", cap {self.max_concurrency}" if self.max_concurrency is not None else ""
        return f"{self.load} {self.rate_rps:g} req/s{cap}"

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form; a closed-loop key has the six fields (model, engine, variant, lengths, concurrency), an
        open-loop key all nine (``concurrency`` null); ``variant`` always written, after ``engine``."""
        d = asdict(self)
        if not self.open_loop:
            del d["load"], d["rate_rps"], d["max_concurrency"]
        return d

    @classmethod
    def of(cls, data: Any) -> "PointKey":
        """The key of a point given as a mapping (a stored summary, an analysis point, a ``show`` row) or an
        object with the same attributes (:class:`PointSummary`); ``load`` absent = closed, ``variant`` absent =
        ``default``.

        Raises:
            KeyError / AttributeError: a field is missing; ValueError: inconsistent (see the class).
        """
        get = data.__getitem__ if isinstance(data, dict) else (lambda k: getattr(data, k))
        opt = (lambda k, d: data.get(k, d)) if isinstance(data, dict) else (lambda k, d: getattr(data, k, d))
        return cls(get("model"), get("engine"), get("input_len"), get("output_len"), opt("concurrency", None),
                   opt("load", "closed") or "closed", opt("rate_rps", None), opt("max_concurrency", None),
                   variant=opt("variant", DEFAULT_VARIANT) or DEFAULT_VARIANT)


class Workload(NamedTuple):
    """The one workload key: (model, engine, variant, input_len, output_len), what a knee, a ceiling and a rate sweep
    belong to (a shape of one model under one server setting).  A tuple, so it sorts and hashes as one."""

    model: str
    engine: str
    variant: str
    input_len: int
    output_len: int

    def label(self) -> str:
        """``model · in 64 / out 32`` (`` · variant`` after the model when it is not ``default``)."""
        v = "" if self.variant == DEFAULT_VARIANT else f" · {self.variant}"
        return f"{self.model}{v} · in {self.input_len} / out {self.output_len}"


def server_key(model: str, variant: str = DEFAULT_VARIANT) -> str:
    """The name a model's server goes by under a variant (``run.json`` ``server.servers``, server log files): the
    model's name for ``default`` (as every run before variants), else ``model/variant`` (neither name may hold a
    ``/``, so the pair is never ambiguous)."""
    return model if variant == DEFAULT_VARIANT else f"{model}/{variant}"


def workload_of(data: Any) -> Workload:
    """The :class:`Workload` of a point, a summary, an analysis point or model (mapping or object):
    the workload a knee, a ceiling and a rate sweep belong to (:attr:`PointKey.workload`); ``variant`` absent =
    ``default``.

    Raises:
        KeyError / AttributeError: a field is missing.
    """
    if isinstance(data, dict):
        return Workload(data["model"], data["engine"], data.get("variant") or DEFAULT_VARIANT, data["input_len"],
                        data["output_len"])
    return Workload(data.model, data.engine, getattr(data, "variant", None) or DEFAULT_VARIANT, data.input_len,
                    data.output_len)


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
        usage_reported: whether the server reported a usage for this request (served backends).
        error: None on success, else a short description; failed requests stay out of latency
            percentiles but are counted.
        first_content_s: arrival of the first visible (content, not reasoning) token; None when
            none arrived or the engine does not tell them apart.
        hidden_tokens: tokens generated but never streamed (reasoning reported only in usage);
            they count in ``output_tokens`` but not in ``chunks``, TPOT or ITL.
        token_count_source: where ``output_tokens`` came from (``usage``, ``per_chunk_usage``,
            ``tokenized_text``, ``chunk_count``; see :mod:`pipeline.loadgen.tokencount`); None for
            engines that count their own tokens and for records written before it existed.
        token_count_reason: one line: why that source.
        token_count_flags: evidence set aside (keys of ``tokencount.FLAG_TEXT``); each is one of
            its point's caveats (``PointSummary.caveats`` counts the requests with it).
        scheduled_s: open loop only: when the schedule said to send it (``queued_s`` is the same
            time, so client queueing behind a concurrency cap counts as queueing).
        lag_s: open loop only: the client's own lateness, send time − the time it could have gone
            out (the later of ``scheduled_s`` and a free slot under the cap), s.
        drawn_input_len / drawn_output_len: the prompt tokens (shared prefix included) and the output tokens
            (``max_tokens``) drawn for this request by the config's ``lengths:``
            (:func:`pipeline.config.workload.draw_lengths`); None where every request is the point's shape (and in
            every record written before they existed).  With outputs stopped at EOS ``output_tokens`` is at most
            ``drawn_output_len``.
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
    drawn_input_len: int | None = None
    drawn_output_len: int | None = None

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
            batching).  Stored as ``kind`` before point-record schema version 2 (``kind``
            is the model's dense/MoE).
        window_start_s / window_end_s: the measured window.  Static batch: the decode phase,
            from the first token (prefill end) to the last step; served: first measured send
            to last measured completion.
        prefill_start_s: static batch only, when prefill began.
        step_end_s: static batch only: end time of every forward pass, the prefill first
            (so ``len == output_len``) — step i's duration is ``step_end_s[i] - step_end_s[i-1]``.
        server_metrics: anything scraped from the server around the repeat (served backends).
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
    out = {name: plain_copy(getattr(rep, name)) for name in _REPEAT_FIELDS}
    reqs = []
    for q in rep.requests:
        d = {name: getattr(q, name) for name in _REQUEST_FIELDS}
        d["chunks"] = [list(c) for c in q.chunks]
        d["token_count_flags"] = list(q.token_count_flags)
        reqs.append(d)
    out["requests"] = reqs
    return {name: out[name] for name in (f.name for f in fields(RepeatRecord))}



def plain_copy(value: Any) -> Any:
    """A copy of a JSON-shaped value (dicts, lists, tuples of numbers and strings), as ``asdict`` copies it."""
    if isinstance(value, dict):
        return {k: plain_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_copy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain_copy(v) for v in value)
    return value
