"""The read loop keeps raw reads; the events are split and parsed after the stream (``sse.split_reads``,
``streamrecord.fold_reads``).  Each case asserts the same record as the specification's parser run read by read
inside the loop, which is what the client did before (``SSEParser.feed`` per read, ``orjson.loads`` and
``parse_event`` per event, stamped with that read's arrival), plus the times worked by hand from the cuts.

Fault kind pinned: a splitter faster than the specification's parser that drops or re-times what the spec keeps —
CR-only and CRLF line ends, comments, multi-line ``data`` (WHATWG HTML, "Server-sent events", "Parsing an event
stream", https://html.spec.whatwg.org/multipage/server-sent-events.html) — or an event stamped with a read other
than the one that completed it.
"""

from __future__ import annotations

import asyncio
import json
import time

import orjson
import pytest

from pipeline.loadgen import client, streamrecord
from pipeline.loadgen.sse import SSEParser, split_reads
from tests.localapp import serve_app


def _ev(obj: dict, eol: bytes = b"\n") -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + eol + eol


def _chat(text: str) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text},
                                                                       "finish_reason": None}]}


USAGE = {"id": "c", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}}
TOOL = {"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
    {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":"}}]}}]}


def _cut(stream: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *cuts, len(stream)]
    return [stream[a:b] for a, b in zip(bounds, bounds[1:])]


def _in_loop(reads: list[bytes], times: list[float]) -> streamrecord.RawStream:
    """The record as the loop built it before: the spec's parser fed each read, each event parsed at its read's time."""
    raw = streamrecord.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0)
    parser = SSEParser()
    for data, now in zip(reads, times):
        for ev in parser.feed(data):
            payload = ev[0].strip()
            if payload == b"[DONE]":
                raw.done_seen = True
                return raw
            streamrecord.parse_event(raw, orjson.loads(payload), now)
            if raw.error is not None:
                return raw
    return raw


def _folded(reads: list[bytes], times: list[float]) -> streamrecord.RawStream:
    raw = streamrecord.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0,
                                 read_s=list(times), reads=list(reads))
    streamrecord.fold_reads(raw)
    assert raw.reads == [] and raw.read_s == []  # the bytes are dropped once parsed
    return raw


def _same(reads: list[bytes]) -> streamrecord.RawStream:
    """Fold ``reads`` (read i arriving at i + 1 s) and assert the record equals the in-loop parser's; return it."""
    times = [float(i + 1) for i in range(len(reads))]
    got, want = _folded(reads, times), _in_loop(reads, times)
    assert got == want
    parser = SSEParser()
    assert split_reads(reads) == [(ev[0], i) for i, d in enumerate(reads) for ev in parser.feed(d)]
    return got


def test_an_event_split_across_reads_is_stamped_with_the_read_that_closed_it():
    """Cut inside the first event's JSON and between the two LFs of the second's blank line: the first event is
    whole at read 2 (t = 2 s), the second at read 3 (t = 3 s), the third arrives whole in read 3 too."""
    a, b, c = _ev(_chat(" a")), _ev(_chat(" b")), _ev(_chat(" c"))
    stream = a + b + c + b"data: [DONE]\n\n"
    reads = _cut(stream, [10, len(a) + len(b) - 1])
    raw = _same(reads)
    assert raw.times == [2.0, 3.0, 3.0] and raw.texts == [" a", " b", " c"] and raw.done_seen


def test_several_events_per_read_share_its_time():
    events = [_ev(_chat(f" w{i}")) for i in range(6)]
    reads = [b"".join(events[:4]), b"".join(events[4:]) + b"data: [DONE]\n\n"]
    raw = _same(reads)
    assert raw.times == [1.0] * 4 + [2.0] * 2


@pytest.mark.parametrize("eol", [b"\r\n", b"\r"])
def test_crlf_and_cr_line_ends_go_to_the_spec_parser(eol):
    """CRLF cut between its CR and LF, and CR-only ends: the same events as with LF."""
    stream = _ev(_chat(" x"), eol) + _ev(_chat(" y"), eol) + b"data: [DONE]" + eol + eol
    cut = stream.index(eol) + 1  # inside the first CRLF (after its CR) / just after the first CR
    raw = _same(_cut(stream, [cut, len(stream) - 3]))
    assert raw.texts == [" x", " y"] and raw.done_seen


def test_a_comment_line_and_a_multiline_data_event():
    """A keep-alive comment dispatches nothing; a ``data`` event over two lines is its lines joined by LF
    (here a JSON object whose two halves are two ``data:`` lines)."""
    stream = (b": keep-alive\n\n" + _ev(_chat(" p")) + b'data: {"choices":[{"index":0,\ndata: "text":" q"}]}\n\n'
              + b"data: [DONE]\n\n")
    first_end = len(b": keep-alive\n\n" + _ev(_chat(" p")))
    raw = _same(_cut(stream, [5, first_end]))  # " p" closes with read 2's last byte, " q" in read 3
    assert raw.texts == [" p", " q"] and raw.times == [2.0, 3.0]


def test_a_usage_only_final_event_and_a_tool_call_delta():
    """The tool call's name and argument fragment are its visible text; the usage-only event (no choices) is the
    final usage, timed at its read (t = 2 s)."""
    stream = _ev(TOOL) + _ev(_chat(" ok")) + _ev(USAGE) + b"data: [DONE]\n\n"
    raw = _same(_cut(stream, [len(_ev(TOOL)) + len(_ev(_chat(" ok")))]))
    assert raw.texts == ['get_weather{"city":', " ok"] and raw.visible == [True, True]
    assert raw.completion_tokens == 3 and raw.final_usage_seen and raw.final_usage_s == 2.0


def test_every_cut_of_a_mixed_stream_gives_the_spec_parsers_record():
    """Every single cut, and every read of one byte, of a stream that mixes the fast path's events with a comment:
    the deferred split equals the in-loop parser each time."""
    stream = _ev(_chat(" a")) + b":c\n\n" + _ev(_chat(" b")) + _ev(USAGE) + b"data: [DONE]\n\n" + _ev(_chat(" z"))
    for k in range(1, len(stream)):
        _same(_cut(stream, [k]))
    raw = _same([stream[i:i + 1] for i in range(len(stream))])
    assert raw.texts == [" a", " b"] and raw.done_seen  # nothing after [DONE] is read


def test_a_malformed_event_is_an_error_scrubbed_before_it_is_cut():
    key = "sk-" + "q" * 40
    raw = _folded([_ev(_chat(" a")) + b"data: {oops " + key.encode() + b"\n\n"], [1.0])
    assert raw.error.startswith("malformed stream event: not JSON") and key not in raw.error
    assert raw.texts == [" a"]


def test_a_stream_cut_off_keeps_its_events_and_its_error():
    """Two events, then the request timed out (the error the client set): both events are kept, as the loop parsing
    each read kept them, and the timeout stays the error; an error event before the cut came first and wins."""
    raw = streamrecord.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0, error="timeout after 0.5 s",
                                 read_s=[1.0, 2.0], reads=[_ev(_chat(" a")), _ev(_chat(" b"))])
    streamrecord.fold_reads(raw)
    assert raw.texts == [" a", " b"] and raw.times == [1.0, 2.0] and raw.error == "timeout after 0.5 s"
    raw = streamrecord.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0, error="timeout after 0.5 s",
                                 read_s=[1.0], reads=[_ev({"error": {"message": "overloaded"}})])
    streamrecord.fold_reads(raw)
    assert raw.error == "server error event: overloaded"


def _serve(chunks: list[bytes], release: asyncio.Event):
    """A local aiohttp server streaming ``chunks`` then holding the body open until ``release`` is set (a server that
    does not end the response after ``[DONE]``); returns (the app runner, its base URL) inside a running loop."""
    from aiohttp import web

    async def handler(request):
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for c in chunks:
            await resp.write(c)
            await asyncio.sleep(0.01)
        await release.wait()
        return resp

    return serve_app("/v1/chat/completions", handler)


@pytest.mark.parametrize("split_done", [False, True])
def test_the_client_stops_at_done_and_a_deferred_stream_folds_to_the_same_record(split_done):
    """A server holding its body open after ``[DONE]`` (past the 10 s timeout): the read loop still ends at
    ``[DONE]``, also when ``[DONE]``'s bytes and its closing blank line come in separate writes.  Deferred, the stream
    keeps its reads unparsed until :func:`client.fold`, which gives the record parsed at once."""
    done = [b"data: [DO", b"NE]\n", b"\n"] if split_done else [b"data: [DONE]\n\n"]
    chunks = [_ev(_chat(" a")), _ev(_chat(" b")), _ev(USAGE), *done]

    async def go():
        release = asyncio.Event()
        runner, url = await _serve(chunks, release)
        target = client.Target(base_url=url, model="m", endpoint="chat", timeout_s=10.0)
        try:
            out = []
            async with client.make_session(1) as session:
                for defer in (False, True):
                    raw = streamrecord.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0)
                    t = time.perf_counter()
                    await client.stream_one(session, target, b"{}", raw, 0.0, target.headers(), defer=defer)
                    out.append((raw, time.perf_counter() - t))
            return out
        finally:
            release.set()
            await runner.cleanup()

    (now, t_now), (later, t_later) = asyncio.run(go())
    assert t_now < 5 and t_later < 5  # ended at [DONE], not at the timeout
    assert now.error is None and now.texts == [" a", " b"] and now.done_seen and now.reads == []
    assert later.reads and later.times == [] and later.done_seen  # unparsed until the fold
    client.fold(later, client.Target(base_url="http://x/v1", model="m"))
    assert later.texts == now.texts and later.completion_tokens == now.completion_tokens == 3 and later.error is None
