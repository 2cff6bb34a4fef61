"""Point summaries: what the metrics stage makes of a point (:mod:`pipeline.metrics.summarize`), an importer makes of
another tool's output, and ``summaries.json`` stores (:class:`PointSummary`), with the one shape of a latency's
distribution (:class:`Distribution`, :func:`distribution`).  Beside the records (:mod:`pipeline.core.records`, the same
layer), so storage reads a summary typed without importing a stage.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypedDict

import numpy as np

from pipeline.core.records import DEFAULT_VARIANT, PointKey, plain_copy


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


class Tails(TypedDict):
    """The far tail of one latency's distribution, in seconds: numpy's linear-interpolation 95th and 99.9th
    percentiles (``np.percentile``'s default, as :func:`distribution` computes p99)."""

    p95: float | None
    p99_9: float | None


class LengthHist(TypedDict):
    """One length's histogram over a point's measured requests (tokens): bins of one whole number of tokens or more,
    ``edges`` the n + 1 bin edges (bin i holds lengths in [edges[i], edges[i + 1])), ``counts`` the n requests each,
    with the ``min``, ``max`` and ``mean`` lengths (:func:`pipeline.metrics.lengthhist.length_hist`)."""

    edges: list[int]
    counts: list[int]
    min: int
    max: int
    mean: float


def tails(values: "list[float] | np.ndarray | None") -> Tails | None:
    """:class:`Tails` of raw ``values`` (s); None when there are none."""
    if values is None or len(values) == 0:
        return None
    q95, q999 = np.percentile(np.asarray(values, dtype=float), [95, 99.9])
    return {"p95": float(q95), "p99_9": float(q999)}


@dataclass
class PointSummary:
    """Summary of one point over its repeats.

    Each figure (every field that is a metric: throughputs, latency distributions, rates, the client's and the
    stream's figures) is described once, in the metric registry (:mod:`pipeline.metrics.registry`: its unit, better
    direction, formula, the function that computes it, the peers' names for it), whose table is docs/definitions.md's
    "Every metric, its formula, and the peer definition it matches"; a field added here without an entry there fails
    ``tests/unit/metrics/test_registry.py``.  Throughput fields are medians over repeats (tokens/s); latency fields
    are :class:`Distribution` (``{"p50","p90","p99","mean"}``) over every successful measured request of every repeat
    (s).  The fields that are no metric:

    ``samples`` keeps what diffs and spreads need: one value per repeat for throughputs, one per request for TTFT/TPOT,
    and the per-repeat medians of TTFT/TPOT (``ttft_s_per_repeat``, ``tpot_s_per_repeat``): in a static batch every
    request of a repeat shares one prefill and one decode loop, so the repeat, not the request, is the independent
    sample there.  Also per repeat (each where some repeat has it; absent from points summarized before it was kept):
    ``itl_s_per_repeat`` / ``itl_mean_s_per_repeat`` (the repeat's median / mean per-token ITL, s),
    ``e2el_s_per_repeat`` and ``ttst_s_per_repeat`` (its median E2EL and time to second token, s), and of a served
    point's client (:func:`pipeline.metrics.clientside.client_repeat_samples`) ``achieved_concurrency``,
    ``client_cpu_share`` and ``delivered_output_throughput_tok_s`` (tok/s), the values whose medians are those
    fields.  ``ci95``: ``{samples key: [low, high]}``, the 95 % confidence interval of the mean of each per-repeat
    figure of ``samples`` (Student's t; two repeats or more; every key but the per-request ``ttft_s`` and ``tpot_s``).
    ``caveats``: ``{name: requests}`` of what a reader must know of the point's requests (``failed_requests`` and the
    token-count flags of :mod:`pipeline.loadgen.tokencount`; ``definitions.point_caveats``), not the quality verdict
    *flagged* (:mod:`pipeline.analysis.quality`); ``token_count_sources``: requests per source of their count.
    ``interference`` is the outside load while the point ran (:func:`pipeline.machine.interference.outside_load`,
    kept by the sweep in the point file's ``meta``; None for imported points and points measured before it was kept).
    ``server``: the server's own view from ``/metrics`` (:func:`pipeline.metrics.summarize.server_state`).

    Open loop (``load`` ``poisson`` / ``constant`` / ``gamma``; ``concurrency`` is then None and ``max_concurrency``
    the cap on requests in flight, None when uncapped; both as :class:`~pipeline.core.records.PointKey`): ``rate_rps``
    is the offered rate (requests/s); ``schedule_kept`` whether the client kept the schedule
    (``definitions.schedule_kept``): when False, requests went out late and the latencies miss the waiting the
    schedule would have caused (coordinated omission).  ``slo`` is the SLO check when the run has an SLO:
    ``{"goodput_ttft_ms", "goodput_tpot_ms", "goodput_e2el_ms" (per-request goodput limits), "ttft_p99_max_ms",
    "tpot_p99_max_ms", "e2el_p99_max_ms" (p99 bounds), "good", "measured", "share_ok", "goodput_rps", "goodput_tok_s",
    "p99_ok", "met"}`` (``goodput.slo_goodput``).  ``burstiness``: a gamma point's shape (``open_loop.burstiness``, or
    an imported vLLM run's ``--burstiness``; 1 = Poisson).  All None for closed points.

    ``output_throughput_window`` says which window ``output_throughput_tok_s`` (the name the ``show --json`` contract
    fixes) was measured over (docs/definitions.md): ``"decode_phase"`` for a static batch (the transformers backend,
    llama-batched-bench: llama.cpp's S_TG; prefill is apart in ``prefill_throughput_tok_s``) and
    ``"send_to_completion"`` for a served point (vLLM's: first measured send to the end of the last measured request).

    ``tails_s`` (what ``vllm bench serve --metric-percentiles 95,99.9`` prints): ``{"ttft", "tpot", "itl",
    "itl_chunk", "e2el"}`` → :class:`Tails` of the same values as ``ttft_s``, ``tpot_s``, ``itl_s``, ``itl_chunk_s``,
    ``e2el_s`` (:func:`tails`); None for points summarized before it was kept and for imports.

    ``client_bound`` with ``client_bound_reason``: the client, not the server, was the limit (the point is left out
    of the knee, the peak and the diff's findings; :mod:`pipeline.metrics.clientside`).  The client's figures are
    None for points summarized before they were kept, the in-process backend and imports.

    ``length_hist``: a point of drawn lengths (``lengths:``), ``{"input", "output"[, "got"]}`` → :class:`LengthHist` of
    its measured requests' drawn prompt tokens (shared prefix included), drawn output tokens (the most each may get)
    and, where outputs stop at EOS (``ignore_eos: false``), the output tokens each finished request really got
    (:mod:`pipeline.metrics.lengthhist`); None for a point of fixed lengths, an import and a point summarized before.

    ``lengths``: the point's length distribution, ``{"input", "output"}`` (mean, p50, min, max tokens over its
    requests) and ``stated`` (the distribution its source says it drew them from, ``lengths:``'s JSON form;
    :mod:`pipeline.core.lengthstats`); None where nothing is known (a point at fixed lengths, one summarized before
    it was kept).
    """

    model: str
    engine: str
    #: the named server setting (:attr:`~pipeline.core.records.PointKey.variant`); keyword-only, stored after ``engine``.
    variant: str = field(default=DEFAULT_VARIANT, kw_only=True)
    input_len: int
    output_len: int
    concurrency: int | None
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
    caveats: dict[str, int] = field(default_factory=dict)
    token_count_sources: dict[str, int] = field(default_factory=dict)
    time_to_first_content_s: Distribution | None = None
    output_throughput_window: Literal["decode_phase", "send_to_completion"] | None = None
    server: dict[str, float | None] | None = None
    interference: dict[str, Any] | None = None
    load: str = "closed"
    rate_rps: float | None = None
    send_rate_rps: float | None = None
    achieved_rate_rps: float | None = None
    schedule_rate_rps: float | None = None
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
    max_concurrency: int | None = None
    tails_s: dict[str, Tails | None] | None = None
    achieved_concurrency: float | None = None
    client_lag_s: Distribution | None = None
    client_read_wait_s: float | None = None
    client_cpu_share: float | None = None
    connect_s: Distribution | None = None
    first_byte_s: Distribution | None = None
    client_bound: bool | None = None
    client_bound_reason: str | None = None
    delivered_output_throughput_tok_s: float | None = None
    itl_unresolved_share: float | None = None
    ttst_s: Distribution | None = None
    tokens_per_chunk: float | None = None
    chunks_per_request: float | None = None
    ci95: dict[str, list[float]] | None = None
    length_hist: dict[str, LengthHist] | None = None
    lengths: dict[str, Any] | None = None

    @property
    def key(self) -> PointKey:
        """This point's :class:`PointKey` (the identity diff, show and pages match points by)."""
        return PointKey.of(self)

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form (what ``dataclasses.asdict`` gives, copied without its per-value ``deepcopy``)."""
        return {name: plain_copy(getattr(self, name)) for name in _SUMMARY_FIELDS}

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


def throughput_window(summary: dict[str, Any]) -> Literal["decode_phase", "send_to_completion"] | None:
    """The window of a stored summary's output throughput when the file does not say it (written before
    ``output_throughput_window`` was kept): ``"decode_phase"`` where the point has a prefill throughput
    (only static batches measure prefill apart, docs/definitions.md), else ``"send_to_completion"``;
    None without a throughput."""
    if summary.get("output_throughput_tok_s") is None:
        return None
    return "decode_phase" if summary.get("prefill_throughput_tok_s") is not None else "send_to_completion"


_SUMMARY_FIELDS = tuple(f.name for f in fields(PointSummary))
_SUMMARY_FIELD_SET = frozenset(_SUMMARY_FIELDS)


def _type_name(hint: Any) -> str:
    """A short readable name of a type hint (``float | None``, ``Distribution``)."""
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("pipeline.core.pointsummary.", "")


def _mismatch(value: Any, hint: Any, where: str) -> str | None:
    """Where ``value`` first fails ``hint`` (``where`` extended by keys and indexes) and how, or None when it conforms.

    ``float`` accepts an int (JSON writes 2.0 as 2 in other tools), never a bool; ``int`` accepts no float or bool; a
    :class:`TypedDict` checks the keys it has (a missing one is read as None)."""
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        errs = [_mismatch(value, h, where) for h in typing.get_args(hint)]
        if all(errs):
            nested = [e for e in errs if e and not e.startswith(f"{where}: expected")]
            return nested[0] if len(nested) == 1 else f"{where}: expected {_type_name(hint)}, got {value!r:.40}"
        return None
    if origin is Literal:
        return None if value in typing.get_args(hint) else f"{where}: expected one of {typing.get_args(hint)}, got {value!r:.40}"
    ok: bool
    if hint is type(None):
        ok = value is None
    elif hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint in (str, bool):
        ok = isinstance(value, hint)
    elif origin is list:
        if not isinstance(value, list):
            return f"{where}: expected a list, got {value!r:.40}"
        (item,) = typing.get_args(hint)
        return next((e for i, v in enumerate(value) if (e := _mismatch(v, item, f"{where}[{i}]"))), None)
    elif origin is dict:
        if not isinstance(value, dict):
            return f"{where}: expected a mapping, got {value!r:.40}"
        kh, vh = typing.get_args(hint)
        return next((e for k, v in value.items()
                     if (e := _mismatch(k, kh, f"{where} key") or _mismatch(v, vh, f"{where}.{k}"))), None)
    elif typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return f"{where}: expected a mapping ({hint.__name__}), got {value!r:.40}"
        hints = typing.get_type_hints(hint)
        return next((e for k, h in hints.items() if k in value and (e := _mismatch(value[k], h, f"{where}.{k}"))), None)
    else:  # a hint this check does not know: not checked
        return None
    return None if ok else f"{where}: expected {_type_name(hint)}, got {value!r:.40}"


def summary_mismatch(data: Any) -> str | None:
    """The first field of a stored point summary (a mapping, as ``summaries.json`` holds it) whose value is not of
    its :class:`PointSummary` type, with its key and what it holds (``concurrency: expected int | None, got 'x'``), or
    an inconsistent point key (:class:`~pipeline.core.records.PointKey`); None when the summary can be read.

    A derived file is read as stored, never recomputed, so a hand-edited or damaged value must be named
    here, not met as a Python error by whatever formats it.  Fields this version does not know are not checked
    (:meth:`PointSummary.from_dict` ignores them); a missing field is :meth:`PointSummary.from_dict`'s error.
    """
    if not isinstance(data, dict):
        return f"expected a mapping, got {data!r:.40}"
    hints = _summary_hints()
    err = next((e for k, v in data.items() if k in hints and (e := _mismatch(v, hints[k], k))), None)
    if err is None and all(k in data for k in ("model", "engine", "input_len", "output_len")):
        try:
            PointKey.of(data)
        except ValueError as exc:
            err = str(exc)
    return err


_HINTS: dict[str, Any] = {}


def _summary_hints() -> dict[str, Any]:
    """:class:`PointSummary`'s field types, resolved once."""
    if not _HINTS:
        _HINTS.update(typing.get_type_hints(PointSummary))
        # as tolerant as the readers: a sample list may hold a null (``show.serve_figures`` skips it); the server's
        # block is what the engine reported, read key by key with .get
        _HINTS.update(samples=dict[str, list[float | None]], server=dict[str, Any] | None)
    return _HINTS
