"""The served backends' HTTP client: one streaming request sent and read, sessions, feature detection.

Knows nothing of timing policy: which requests are sent when, warm-up and cool-down, and the
measured window belong to :mod:`pipeline.loadgen.scheduler`.

Fixed output length: ``max_tokens`` plus ``ignore_eos`` and ``min_tokens`` where the server
accepts them.  :func:`detect_features` sends a 4-token probe with every optional field and
drops the optional fields one by one (per-chunk usage, ``min_tokens``, ``ignore_eos``,
``stream_options``) until the server accepts the request; a server that rejects unknown
fields (``transformers serve`` answers 422) therefore still works, and what was dropped is
kept in the point's meta.

A stream's events, its token accounting and the fields a server accepts are
:mod:`pipeline.loadgen.streamrecord` (pure); this module sends the requests that fill them.

The client never throttles: no connection limit, keep-alive reuses the N connections, 4 MiB of header section
(long lines and long contexts).  Two transports (:func:`transport_for`): for a plain ``http://`` server the load
generator's own HTTP/1.1 reader (:mod:`pipeline.loadgen.rawhttp`: each socket read handled in asyncio's
``data_received`` callback, stamped once, its chunked framing removed, kept, and the request's coroutine woken once
at the stream's end), for ``https://`` (or ``transport: aiohttp``) aiohttp, its body read whole socket read by whole
socket read (``iter_any``, one await per read).  Either way each read is kept with one timestamp and nothing else
done to it; after the stream ends its SSE events are split by the specification's rules
(:func:`pipeline.loadgen.sse.split_reads`: multi-line ``data``, comments, ``event``/``id``/``retry``, CR/LF/CRLF),
parsed with orjson and stamped with the arrival of the read that completed them, the same times a parser run inside
the loop gives; request bodies are serialised before the loop starts.  A point's meta names its transport
(``transport``).

"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson

from pipeline.core import scrub
from pipeline.loadgen import rawpool
from pipeline.loadgen.sse import done_in
from pipeline.loadgen.streamcaps import READ_COST, StreamTooLong, stream_bytes_max, stream_too_long
from pipeline.loadgen.streamrecord import Features, RawStream, fold_reads, per_chunk_usage
from pipeline.core.errors import BatchmarkError

Endpoint = Literal["completions", "chat"]
READ_BUFSIZE = 4 * 2**20
OPTIONAL_FIELDS = ("continuous_usage_stats", "min_tokens", "ignore_eos", "stream_options")


@dataclass
class Target:
    """Where requests go.

    Attributes:
        base_url: server root including ``/v1`` (e.g. ``http://127.0.0.1:8000/v1``).
        model: model name the server knows.
        endpoint: ``completions`` (raw prompt) or ``chat`` (prompt as one user message).
        api_key: sent as ``Authorization: Bearer``; never stored: every text the server sends back is redacted
            (:func:`pipeline.core.scrub.redact`) before it becomes a record's ``error``.
        timeout_s: total time allowed for one request (s).
        max_tokens: the tokens each request asks for (None: not known), which bounds the bytes kept of its stream and
            of each event (:mod:`pipeline.loadgen.streamcaps`); a stream past it fails by name.
        body_secrets: credentials the request bodies carry (``extra_body``'s ``api_key``, :func:`body_secrets`),
            redacted as the key is: a server that refuses an unknown field echoes its value.
    """

    base_url: str
    model: str
    endpoint: Endpoint = "completions"
    api_key: str | None = None
    timeout_s: float = 600.0
    max_tokens: int | None = None
    body_secrets: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        """Full URL of the endpoint."""
        path = "/chat/completions" if self.endpoint == "chat" else "/completions"
        return self.base_url.rstrip("/") + path

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values that must never be stored (the API key, the bodies' credentials), for :func:`pipeline.core.scrub.redact`."""
        return ((self.api_key,) if self.api_key else ()) + self.body_secrets

    def headers(self) -> dict[str, str]:
        """Request headers (content type, and the bearer token when there is a key)."""
        h = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h


def body_secrets(extra_body: dict[str, Any]) -> tuple[str, ...]:
    """The credentials ``extra_body`` sends (the values of its credential-named fields,
    :func:`pipeline.core.scrub.tree_secrets`), of :data:`pipeline.core.scrub.TREE_SECRET_CHARS` or more characters (a
    shorter one is redacted where it is named)."""
    return tuple(dict.fromkeys(s for s in scrub.tree_secrets(extra_body) if len(s) >= scrub.TREE_SECRET_CHARS))


def build_body(target: Target, features: Features, prompt: str, max_tokens: int,
               extra: dict[str, Any] | None = None) -> bytes:
    """Serialised JSON body of one streaming request for ``max_tokens`` generated tokens."""
    body: dict[str, Any] = {"model": target.model, "stream": True, "max_tokens": max_tokens, "temperature": 0}
    if target.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if features.stream_options:
        opts: dict[str, Any] = {"include_usage": True}
        if features.continuous_usage_stats:
            opts["continuous_usage_stats"] = True
        body["stream_options"] = opts
    if features.ignore_eos:
        body["ignore_eos"] = True
    if features.min_tokens:
        body["min_tokens"] = max_tokens
    if extra:
        body.update(extra)
    return orjson.dumps(body)


#: Longest ``error`` text kept of what a server sent (characters; after redaction).
ERROR_CHARS = 300
#: Most bytes read of a refusal's body (an error page is short; a huge one is not held in memory).
ERROR_READ_BYTES = 64 * 1024


async def stream_one(session: Any, target: Target, body: bytes, raw: RawStream, t0: float,
                     headers: dict[str, str], defer: bool = False) -> RawStream:
    """Send one streaming request and fill ``raw`` with chunk arrival times (s since ``t0``).

    The read loop keeps each read's arrival and bytes (``raw.read_s``, ``raw.reads``) and parses nothing; the events
    are parsed when the stream has ended (:func:`pipeline.loadgen.streamrecord.fold_reads`).  ``defer``: a stream
    that ended with ``[DONE]`` and holds no ``"error"`` key is left unparsed for the caller's :func:`fold` after the
    repeat (the scheduler's), so that parsing never delays a read or a send; any other stream (an error event, one
    cut short, one without ``[DONE]``) is parsed at once, so that its error is known when it ends.  A stream that
    holds more bytes than ``target.max_tokens`` tokens can need (:func:`pipeline.loadgen.streamcaps.stream_bytes_max`)
    fails at that byte with "stream exceeded N bytes for a 16-token request", its connection closed and its bytes
    dropped, so one hostile stream never holds more than that bound of the client's memory.

    Never raises for a server-side problem: HTTP errors, error events, malformed events,
    broken or truncated streams and timeouts end up in ``raw.error``, which holds no secret: the
    API key, any ``Bearer …`` or key-shaped token and the machine's paths are removed
    (:func:`pipeline.core.scrub.scrub`) before the text is cut to :data:`ERROR_CHARS`, so no part of a key
    survives the cut either.
    """
    await _stream_one(session, target, body, raw, t0, headers, defer)
    if not defer:  # a stream cut off by a timeout or a lost connection: its events up to there
        fold_reads(raw, target.secrets, target.max_tokens)
    if raw.error is not None:
        raw.error = (scrub.scrub(raw.error, target.secrets) or "")[:ERROR_CHARS + 40]
    return raw


#: How much of a body that is no event stream the error quotes (bytes).
BODY_HEAD_BYTES = 120


def _no_stream(content_type: str | None, head: bytes, secrets: Any) -> str:
    """The error of a 200 answer that carried no stream event: its Content-Type and the start of its body (an HTML
    page of a proxy, a non-streamed JSON completion), scrubbed, on one line."""
    said = (scrub.scrub(head.decode("utf-8", "replace"), secrets) or "").replace("\n", " ").replace("\r", " ")
    return (f"stream ended without data: the server answered 200 with Content-Type {content_type or 'none'!s}, "
            f"not text/event-stream; body starts {said[:80]!r}")


async def _stream_one(session: Any, target: Target, body: bytes, raw: RawStream, t0: float,
                      headers: dict[str, str], defer: bool) -> None:
    raw_pool = session.pool if isinstance(session, Session) and session.transport_for(target.url) == "raw" else None
    try:
        if raw_pool is not None:
            async with asyncio.timeout(target.timeout_s):
                ex = await rawpool.exchange(raw_pool, target.url, headers, body, raw, t0, ERROR_READ_BYTES,
                                            target.max_tokens)
            if ex.status != 200:
                _refused(raw, target, ex.status, ex.said)
            else:
                _ended(raw, target, defer, ex.finished, ex.errors, ex.content_type)
        else:
            await _stream_aiohttp(session.aio if isinstance(session, Session) else session, target, body, raw, t0,
                                  headers, defer)
    except asyncio.TimeoutError:
        raw.error = f"timeout after {target.timeout_s:g} s"
    except StreamTooLong as exc:  # its bytes are no evidence and would hold the client's memory: dropped
        raw.error, raw.reads, raw.read_s = str(exc), [], []
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # connection refused/reset, payload errors: a failed request
        raw.error = f"{type(exc).__name__}: {scrub.scrub(str(exc), target.secrets)}".replace("\n", " ")


def _refused(raw: RawStream, target: Target, status: int, said: bytes) -> None:
    """A non-200 answer: the request's error is its status and the start of its body, scrubbed, on one line."""
    detail = scrub.scrub(said.decode("utf-8", "replace"), target.secrets) or ""
    raw.error = f"HTTP {status}: {detail[:ERROR_CHARS]}".replace("\n", " ")


def _ended(raw: RawStream, target: Target, defer: bool, finished: bool, errors: bool,
           content_type: str | None) -> None:
    """A 200 stream is over: left unparsed when deferred and whole, else parsed and judged (ended early, no stream)."""
    if defer and finished and not errors:
        raw.done_seen = True
        return  # a whole stream: parsed after the repeat, off the loop (the scheduler's fold)
    head = b"".join(raw.reads)[:BODY_HEAD_BYTES]  # named when no event came (an HTML page, a non-streamed JSON)
    fold_reads(raw, target.secrets, target.max_tokens)
    if not raw.done_seen and raw.error is None and raw.finish_reason is None and not raw.final_usage_seen:
        raw.error = (_no_stream(content_type, head, target.secrets) if not raw.times else
                     "stream ended early (no [DONE], finish_reason or usage)")


async def _stream_aiohttp(session: Any, target: Target, body: bytes, raw: RawStream, t0: float,
                          headers: dict[str, str], defer: bool) -> None:
    import aiohttp

    perf = time.perf_counter
    async with session.post(target.url, data=body, headers=headers,
                            timeout=aiohttp.ClientTimeout(total=target.timeout_s)) as resp:
        if resp.status != 200:
            _refused(raw, target, resp.status, await resp.content.read(ERROR_READ_BYTES))
            return
        stamp, keep = raw.read_s.append, raw.reads.append
        reads = raw.reads
        finished = errors = False
        tail = b""
        kept, cap = 0, stream_bytes_max(target.max_tokens)
        # the hot loop: one timestamp and the bytes of each read, nothing parsed (fold_reads does that)
        async for data in resp.content.iter_any():
            stamp(perf() - t0)
            keep(data)
            kept += len(data) + READ_COST
            if kept > cap:  # more than any answer of its length holds (rawhttp's bound, the same)
                raise stream_too_long(target.max_tokens)
            edge = tail + data[:7]  # a marker cut between two reads
            if b"[DONE]" in data or b"[DONE]" in edge:  # a server may hold the body open after it
                finished = done_in(reads)
                if finished:
                    break
            if not errors and (b'"error"' in data or b'"error"' in edge):
                errors = True
            tail = data[-7:] if len(data) >= 7 else (tail + data)[-7:]  # the stream's last bytes
        _ended(raw, target, defer, finished, errors, resp.headers.get("Content-Type"))


def fold(raw: RawStream, target: Target) -> None:
    """Parse a stream whose reads the hot loop kept (:func:`pipeline.loadgen.streamrecord.fold_reads`), its error
    cut to :data:`ERROR_CHARS` as :func:`stream_one` cuts it; nothing for a stream already parsed."""
    if raw.reads:
        fold_reads(raw, target.secrets, target.max_tokens)
        if raw.error is not None:
            raw.error = raw.error[:ERROR_CHARS + 40]


# --------------------------------------------------------------------------------------------
# sessions, feature detection

Transport = Literal["auto", "raw", "aiohttp"]


def transport_for(url: str, choice: Transport = "auto") -> str:
    """The transport that streams from ``url``: ``raw`` (:mod:`pipeline.loadgen.rawhttp`) for a plain ``http://``
    URL under ``auto``, ``aiohttp`` for anything else (``https://``: TLS is aiohttp's) or when asked for.

    Neither reads a proxy from the environment (the aiohttp session is made without ``trust_env``), so ``auto``
    sends to the same address either way.
    """
    if choice == "aiohttp" or not url.lower().startswith("http://"):
        return "aiohttp"
    return "raw"


class Session:
    """The load generator's connections: the raw reader's keep-alive pool for plain ``http://`` and an aiohttp
    session for the rest and for ``get`` (the metrics scrape); ``async with`` opens and closes both.

    ``phases``: a callable returning the client meter measuring now (or None), told each request's HTTP phases
    (``connect_s``, ``first_byte_s``) by either transport.
    """

    def __init__(self, concurrency: int, trace_configs: list[Any] | None = None,
                 phases: Any = None, transport: Transport = "auto") -> None:
        self.concurrency, self.transport, self.phases = concurrency, transport, phases
        self.trace_configs = list(trace_configs or [])
        self.pool = rawpool.Pool(phases)
        self._aio: Any = None

    def transport_for(self, url: str) -> str:
        """``raw`` or ``aiohttp``: which transport streams from ``url`` (:func:`transport_for`)."""
        return transport_for(url, self.transport)

    @property
    def aio(self) -> Any:
        """The aiohttp session, made at its first use (inside the loop): a plain-http run never imports aiohttp."""
        if self._aio is None:
            from pipeline.loadgen.clientmeter import phase_trace

            phased = [phase_trace(self.phases)] if self.phases is not None else []
            self._aio = _aiohttp_session(self.trace_configs + phased)
        return self._aio

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.pool.close()
        if self._aio is not None:
            await self._aio.close()

    def get(self, *args: Any, **kwargs: Any) -> Any:
        """aiohttp's ``get`` (a scrape of the server's metrics)."""
        return self.aio.get(*args, **kwargs)


def make_session(concurrency: int, trace_configs: list[Any] | None = None, phases: Any = None,
                 transport: Transport = "auto") -> Session:
    """The connections of ``concurrency`` long streams, never throttled (``async with`` inside a loop): a
    :class:`Session`.  ``trace_configs``: aiohttp request tracing for the aiohttp transport; ``phases``: the
    meter now measuring, for either transport (:class:`Session`); ``transport``: :func:`transport_for`."""
    return Session(concurrency, trace_configs, phases, transport)


def _aiohttp_session(trace_configs: list[Any]) -> Any:
    """An aiohttp session that never throttles: no connection limit, keep-alive, 4 MiB lines and buffer."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=300,
                                     enable_cleanup_closed=False, ttl_dns_cache=None)
    return aiohttp.ClientSession(connector=connector, read_bufsize=READ_BUFSIZE, auto_decompress=False,
                                 max_line_size=READ_BUFSIZE, max_field_size=READ_BUFSIZE,
                                 timeout=aiohttp.ClientTimeout(total=None, sock_connect=60),
                                 trace_configs=trace_configs or None)


async def detect_features(session: Any, target: Target, prompt: str, max_tokens: int = 4) -> Features:
    """Find which optional fields the server accepts with a short probe request.

    Tries every optional field, then drops them one at a time (in :data:`OPTIONAL_FIELDS`
    order) after each 4xx answer.

    Raises:
        BatchmarkError: the server rejects even the plain request (message carries its answer).
    """
    feats = Features()
    target = replace(target, max_tokens=max_tokens)  # the probe's own length bounds its stream
    headers = target.headers()
    last = ""
    for drop in (None, *OPTIONAL_FIELDS):
        if drop:
            setattr(feats, drop, False)
            if drop == "stream_options":
                feats.continuous_usage_stats = False
            feats.dropped.append(drop)
        raw = RawStream(request_id=-1, warmup=True, queued_s=0.0, sent_s=0.0)
        await stream_one(session, target, build_body(target, feats, prompt, max_tokens), raw, time.perf_counter(), headers)
        if raw.error is None:
            feats.usage_seen = raw.completion_tokens is not None
            feats.per_chunk_usage_seen = per_chunk_usage(raw)
            return feats
        last = raw.error
        if not raw.error.startswith("HTTP 4"):
            break
    raise BatchmarkError(f"{target.url}: the server rejected a plain streaming request ({last})")
