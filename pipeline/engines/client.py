"""The served engines' HTTP client: one streaming request, its events, its token accounting, feature detection.

Knows nothing of timing policy: which requests are sent when, warm-up and cool-down, and the
measured window belong to :mod:`pipeline.engines.scheduler`.

Fixed output length: ``max_tokens`` plus ``ignore_eos`` and ``min_tokens`` where the server
accepts them.  :func:`detect_features` sends a 4-token probe with every optional field and
drops the optional fields one by one (per-chunk usage, ``min_tokens``, ``ignore_eos``,
``stream_options``) until the server accepts the request; a server that rejects unknown
fields (``transformers serve`` answers 422) therefore still works, and what was dropped is
kept in the point's meta.

How many tokens a chunk carries (k).  ITL is per token (docs/definitions.md), so k matters.  The
hot loop never tokenizes: it keeps each chunk's arrival, text, kind (visible content or
reasoning) and whatever ``completion_tokens`` it carried, plus the last usage of the stream.
After the repeat, :func:`finalize` hands that evidence to
:func:`pipeline.engines.tokencount.decide`, which chooses per request which count to trust
(server usage, per-chunk usage in one of its layouts, tokenized text, chunk count), spreads
the tokens over the chunks, and records the source, the reason and any flags; a request
whose every count is impossible (more chunks with text than ``max_tokens``) fails.

TTFT runs to the first streamed token of either kind (reasoning or visible content); the
first visible token's arrival is kept apart (``first_content_s``).  Reasoning tokens that
the server generated but never streamed are ``hidden_tokens``: counted in the output, kept
out of the decode rate.

A stream that ends without ``[DONE]``, a ``finish_reason`` or a final usage chunk (usage
outside any choice) was cut short
and is a failed request; so is a malformed event (bad JSON, an object of the wrong shape).
Failed requests (HTTP status, error event, connection loss, timeout) are recorded with
``error`` set; metrics count them and keep them out of latency percentiles.

The client never throttles: the connector has no connection limit, keep-alive reuses the N
connections, the read buffer is 4 MiB (long lines and long contexts), SSE events are split
from whole socket reads (``iter_any``, one await per read, not per line) and parsed with
orjson; request bodies are serialised before the loop starts.

"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from pipeline import scrub
from pipeline.engines import tokencount
from pipeline.errors import BatchmarkError
from pipeline.records import RequestRecord

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
            (:func:`pipeline.scrub.redact`) before it becomes a record's ``error``.
        timeout_s: total time allowed for one request (s).
    """

    base_url: str
    model: str
    endpoint: Endpoint = "completions"
    api_key: str | None = None
    timeout_s: float = 600.0

    @property
    def url(self) -> str:
        """Full URL of the endpoint."""
        path = "/chat/completions" if self.endpoint == "chat" else "/completions"
        return self.base_url.rstrip("/") + path

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values that must never be stored (the API key), for :func:`pipeline.scrub.redact`."""
        return (self.api_key,) if self.api_key else ()

    def headers(self) -> dict[str, str]:
        """Request headers (content type, and the bearer token when there is a key)."""
        h = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h


@dataclass
class Features:
    """Optional request fields the server accepts (see :func:`detect_features`)."""

    ignore_eos: bool = True
    min_tokens: bool = True
    stream_options: bool = True
    continuous_usage_stats: bool = True
    dropped: list[str] = field(default_factory=list)
    usage_seen: bool | None = None
    per_chunk_usage_seen: bool | None = None
    prompt_overhead: int | None = None  # tokens the server's chat template adds to a prompt (set by the engine)

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form for the point's meta."""
        return {"ignore_eos": self.ignore_eos, "min_tokens": self.min_tokens,
                "stream_options": self.stream_options, "continuous_usage_stats": self.continuous_usage_stats,
                "dropped": list(self.dropped), "usage_seen": self.usage_seen,
                "per_chunk_usage_seen": self.per_chunk_usage_seen, "prompt_overhead": self.prompt_overhead}


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


# --------------------------------------------------------------------------------------------
# one streaming request

@dataclass
class RawStream:
    """What the hot loop keeps of one request; :func:`finalize` turns it into a record.

    ``times``, ``texts``, ``visible`` and ``cum_usage`` have one entry per chunk that carried
    text or usage inside a choice: arrival (s since the point start), the text (content and
    reasoning together), whether it carried visible content, and the ``completion_tokens``
    the chunk reported (None when it reported none).  ``completion_tokens`` is the last
    usage of the stream; ``reasoning_tokens`` its ``completion_tokens_details.reasoning_tokens``.
    ``scheduled_s`` / ``lag_s``: open loop only, set by the scheduler (see ``RequestRecord``).
    """

    request_id: int
    warmup: bool
    queued_s: float
    sent_s: float
    times: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    cum_usage: list[int | None] = field(default_factory=list)
    visible: list[bool] = field(default_factory=list)
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    reasoning_tokens: int | None = None
    reasoning_seen: bool = False
    finish_reason: str | None = None
    done_seen: bool = False
    final_usage_seen: bool = False
    error: str | None = None
    scheduled_s: float | None = None
    lag_s: float | None = None


def _delta_text(choice: dict[str, Any]) -> tuple[str, str]:
    """(visible text, reasoning text) of one streamed choice (completions ``text`` or chat ``delta``)."""
    text = choice.get("text")
    if text is not None:
        return (text if isinstance(text, str) else "", "")
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return "", ""
    content = delta.get("content")
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    return (content if isinstance(content, str) else "", reasoning if isinstance(reasoning, str) else "")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def parse_event(raw: RawStream, obj: Any, now: float) -> None:
    """Fold one parsed SSE ``data:`` object into ``raw`` (sets ``raw.error`` for an error event or a malformed one)."""
    if not isinstance(obj, dict):
        raw.error = f"malformed stream event: expected a JSON object, got {type(obj).__name__}"
        return
    if "error" in obj and not obj.get("choices"):
        err = obj["error"]
        raw.error = "server error event: " + str(err.get("message", err) if isinstance(err, dict) else err)  # cut in stream_one
        return
    usage = obj.get("usage")
    choices = obj.get("choices")
    if choices is not None and not isinstance(choices, list):
        raw.error = "malformed stream event: choices is not a list"
        return
    choice = choices[0] if choices else None
    if choice is not None and not isinstance(choice, dict):
        raw.error = "malformed stream event: a choice is not an object"
        return
    visible, reasoning = _delta_text(choice) if choice else ("", "")
    if choice and choice.get("finish_reason"):
        raw.finish_reason = str(choice.get("finish_reason"))
    ct = None
    if isinstance(usage, dict):
        ct = _count(usage.get("completion_tokens"))
        if ct is not None:
            raw.completion_tokens = ct
            if not choices:
                raw.final_usage_seen = True
        pt = _count(usage.get("prompt_tokens"))
        if pt is not None:
            raw.prompt_tokens = pt
        details = usage.get("completion_tokens_details")
        if isinstance(details, dict) and _count(details.get("reasoning_tokens")) is not None:
            raw.reasoning_tokens = details["reasoning_tokens"]
    if reasoning:
        raw.reasoning_seen = True
    text = visible + reasoning
    if text or (choice and ct is not None):
        raw.times.append(now)
        raw.texts.append(text)
        raw.visible.append(bool(visible))
        raw.cum_usage.append(ct)


#: Longest ``error`` text kept of what a server sent (characters; after redaction).
ERROR_CHARS = 300
#: Most bytes read of a refusal's body (an error page is short; a huge one is not held in memory).
ERROR_READ_BYTES = 64 * 1024


async def stream_one(session: Any, target: Target, body: bytes, raw: RawStream, t0: float,
                     headers: dict[str, str]) -> RawStream:
    """Send one streaming request and fill ``raw`` with chunk arrival times (s since ``t0``).

    Never raises for a server-side problem: HTTP errors, error events, malformed events,
    broken or truncated streams and timeouts end up in ``raw.error``, which holds no secret: the
    API key, any ``Bearer …`` or key-shaped token and the machine's paths are removed
    (:func:`pipeline.scrub.scrub`) before the text is cut to :data:`ERROR_CHARS`, so no part of a key
    survives the cut either.
    """
    await _stream_one(session, target, body, raw, t0, headers)
    if raw.error is not None:
        raw.error = (scrub.scrub(raw.error, target.secrets) or "")[:ERROR_CHARS + 40]
    return raw


async def _stream_one(session: Any, target: Target, body: bytes, raw: RawStream, t0: float,
                      headers: dict[str, str]) -> None:
    import aiohttp

    perf = time.perf_counter
    loads = orjson.loads
    try:
        async with session.post(target.url, data=body, headers=headers,
                                timeout=aiohttp.ClientTimeout(total=target.timeout_s)) as resp:
            if resp.status != 200:
                said = (await resp.content.read(ERROR_READ_BYTES)).decode("utf-8", "replace")
                detail = scrub.scrub(said, target.secrets) or ""
                raw.error = f"HTTP {resp.status}: {detail[:ERROR_CHARS]}".replace("\n", " ")
                return
            buf = b""
            sep = b"\n\n"
            finished = False
            async for data in resp.content.iter_any():
                now = perf() - t0
                buf = buf + data if buf else data
                if sep not in buf:
                    if b"\r\n\r\n" in buf:
                        sep = b"\r\n\r\n"
                    else:
                        continue
                events = buf.split(sep)
                buf = events.pop()
                for ev in events:
                    if ev[:5] != b"data:":
                        i = ev.find(b"\ndata:")
                        if i < 0:
                            continue
                        ev = ev[i + 1:]
                    payload = ev[5:].strip()
                    if payload == b"[DONE]":
                        finished = True
                        break
                    try:
                        obj = loads(payload)
                    except orjson.JSONDecodeError:
                        said = scrub.scrub(payload.decode("utf-8", "replace"), target.secrets) or ""
                        raw.error = f"malformed stream event: not JSON ({said[:80]!r})"
                        return
                    parse_event(raw, obj, now)
                    if raw.error is not None:
                        return
                if finished:
                    break
            raw.done_seen = finished
            if not finished and raw.finish_reason is None and not raw.final_usage_seen:
                raw.error = ("stream ended without data" if not raw.times else
                             "stream ended early (no [DONE], finish_reason or usage)")
    except asyncio.TimeoutError:
        raw.error = f"timeout after {target.timeout_s:g} s"
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # connection refused/reset, payload errors: a failed request
        raw.error = f"{type(exc).__name__}: {scrub.scrub(str(exc), target.secrets)}"


# --------------------------------------------------------------------------------------------
# token counts

def evidence(raw: RawStream, max_tokens: int | None = None, fixed_length: bool = False,
             usage_expected: bool = False) -> tokencount.Evidence:
    """What ``raw`` says about its token count, for :func:`pipeline.engines.tokencount.decide`."""
    return tokencount.Evidence(texts=raw.texts, per_chunk=raw.cum_usage, usage=raw.completion_tokens,
                               reasoning_tokens=raw.reasoning_tokens, reasoning_streamed=raw.reasoning_seen,
                               max_tokens=max_tokens, fixed_length=fixed_length, usage_expected=usage_expected)


def per_chunk_usage(raw: RawStream) -> bool:
    """True when every text chunk of the stream carried a ``completion_tokens`` (at least two chunks)."""
    with_text = [c for c, t in zip(raw.cum_usage, raw.texts) if t]
    return bool(with_text) and all(c is not None for c in with_text) and len(raw.cum_usage) >= 2


def chunk_counts(raw: RawStream, tokenizer: Any | None = None, max_tokens: int | None = None) -> list[int]:
    """Tokens carried by each chunk of ``raw`` (same length as ``raw.times``), per :mod:`pipeline.engines.tokencount`."""
    return tokencount.decide(evidence(raw, max_tokens), tokenizer).counts


def finalize(raw: RawStream, input_len: int, tokenizer: Any | None = None, max_tokens: int | None = None,
             features: Features | None = None) -> RequestRecord:
    """Turn one :class:`RawStream` into a :class:`RequestRecord`.

    The output count, its source and flags come from :func:`pipeline.engines.tokencount.decide`
    (``max_tokens``: what was asked for; ``features``: whether the server accepted a fixed
    length and reports usage).  A request that already failed keeps its error.
    """
    fixed = bool(features and (features.ignore_eos or features.min_tokens))
    expected = bool(features and features.usage_seen)
    usage_reported = raw.completion_tokens is not None
    dec = tokencount.decide(evidence(raw, max_tokens, fixed, expected), tokenizer)
    chunks = [[t, k] for t, k in zip(raw.times, dec.counts) if k > 0]
    first_content = next((t for t, k, v in zip(raw.times, dec.counts, raw.visible) if v and k > 0), None)
    error = raw.error
    if error is not None:  # a failed request's partial count is no evidence about the server's accounting
        dec.flags, dec.source, dec.reason = [], None, ""
    elif dec.error is not None:
        error = dec.error
    if error is None and tokencount.input_mismatch(raw.prompt_tokens, input_len,
                                                   features.prompt_overhead if features else None):
        dec.flags.append("input_tokens_mismatch")
        dec.reason += f"; the server counted {raw.prompt_tokens} prompt tokens for {input_len} built"
    if error is None and not chunks:
        error = "no tokens received"
    return RequestRecord(
        request_id=raw.request_id, queued_s=raw.queued_s, sent_s=raw.sent_s,
        first_token_s=chunks[0][0] if chunks else None, done_s=chunks[-1][0] if chunks else None,
        chunks=chunks, input_tokens=raw.prompt_tokens if raw.prompt_tokens is not None else input_len,
        output_tokens=int(dec.output_tokens or 0), usage_reported=usage_reported, error=error, warmup=raw.warmup,
        first_content_s=first_content, hidden_tokens=dec.hidden_tokens, token_count_source=dec.source,
        token_count_reason=dec.reason or None, token_count_flags=list(dec.flags),
        scheduled_s=raw.scheduled_s, lag_s=raw.lag_s)


# --------------------------------------------------------------------------------------------
# sessions, feature detection

def make_session(concurrency: int) -> Any:
    """An aiohttp session that never throttles ``concurrency`` long streams (call inside a loop)."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=300,
                                     enable_cleanup_closed=False, ttl_dns_cache=None)
    return aiohttp.ClientSession(connector=connector, read_bufsize=READ_BUFSIZE, auto_decompress=False,
                                 max_line_size=READ_BUFSIZE, max_field_size=READ_BUFSIZE,
                                 timeout=aiohttp.ClientTimeout(total=None, sock_connect=60))


async def detect_features(session: Any, target: Target, prompt: str, max_tokens: int = 4) -> Features:
    """Find which optional fields the server accepts with a short probe request.

    Tries every optional field, then drops them one at a time (in :data:`OPTIONAL_FIELDS`
    order) after each 4xx answer.

    Raises:
        BatchmarkError: the server rejects even the plain request (message carries its answer).
    """
    feats = Features()
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
