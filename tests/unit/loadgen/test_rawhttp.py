"""The load generator's own HTTP/1.1 reader (``pipeline.loadgen.rawhttp``) against a scripted socket server.

Each server below writes exact bytes, so the framing the reader must take apart is the one RFC 9112 specifies
(https://www.rfc-editor.org/rfc/rfc9112#section-7.1: ``<hex size>[;ext]CRLF <data> CRLF``, a last chunk of size
0, trailer fields, an empty line) and the faults are the ones a client meets: a refused connection, a connection
reset mid-answer, a non-200 status with its body, a malformed chunk.  Every fault gives the request a one-line
error, as the aiohttp transport does; a whole stream gives the same record through both transports.
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from pipeline.loadgen import client, eventloop, rawhttp, streamrecord


def _ev(text: str) -> bytes:
    return b"data: " + json.dumps({"id": "c", "choices": [{"index": 0, "text": text}]}).encode() + b"\n\n"


STREAM = [_ev(" a"), _ev(" b"), _ev(" c"), b"data: [DONE]\n\n"]


def _chunked(pieces: list[bytes]) -> list[bytes]:
    return [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces] + [b"0\r\n\r\n"]


def _head(status: str = "200 OK", extra: str = "Transfer-Encoding: chunked\r\n") -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Type: text/event-stream\r\n{extra}\r\n".encode()


async def _server(answers: list[list[bytes]], then: str = "keep", seen: list | None = None):
    """A socket server answering its n-th request with ``answers[n]`` (each item one write, 5 ms apart), on
    whatever connection it came; ``then``: ``keep`` the connection open, ``close`` it, ``reset`` it (RST)."""
    count = {"n": 0}

    async def handle(reader, writer):
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length"))
            await reader.readexactly(length)
            if seen is not None:
                seen.append((writer.get_extra_info("peername"), head))
            for piece in answers[min(count["n"], len(answers) - 1)]:
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0.005)
            count["n"] += 1
            if then == "reset":
                writer.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                                     b"\x01\x00\x00\x00\x00\x00\x00\x00")
                writer.transport.abort()
                return
            if then == "close":
                writer.close()
                return

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"


def _run(answers: list[list[bytes]], n: int = 1, then: str = "keep", transport: str = "auto", timeout_s: float = 5.0,
         seen: list | None = None, defer: bool = False, loop: str = "asyncio") -> list[streamrecord.RawStream]:
    async def go():
        server, url = await _server(answers, then, seen)
        target = client.Target(base_url=url, model="m", timeout_s=timeout_s)
        out = []
        try:
            async with client.make_session(1, transport=transport) as session:
                for i in range(n):
                    raw = streamrecord.RawStream(request_id=i, warmup=False, queued_s=0.0, sent_s=0.0)
                    await client.stream_one(session, target, b"{}", raw, 0.0, target.headers(), defer=defer)
                    out.append(raw)
        finally:
            server.close()
        return out

    return eventloop.run(go(), loop)


#: The event loops a test runs on: asyncio's own always, uvloop where it is installed (a dependency off Windows).
LOOPS = ["asyncio", pytest.param("uvloop", marks=pytest.mark.skipif(eventloop._uvloop() is None,
                                                                     reason="uvloop is not installed here"))]


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("transport", ["raw", "aiohttp"])
def test_a_chunked_stream_gives_the_same_record_through_both_transports(transport, loop):
    raw, = _run([[_head(), *_chunked(STREAM)]], transport=transport, loop=loop)
    assert raw.error is None and raw.texts == [" a", " b", " c"] and raw.done_seen
    assert len(raw.times) == 3 and raw.times == sorted(raw.times)


@pytest.mark.parametrize("loop", LOOPS)
def test_every_cut_of_the_chunked_framing_gives_the_same_events(loop):
    """The answer's bytes written in two pieces at every offset (a header, a size line, a chunk's CRLF cut
    anywhere): the events are those of the whole stream each time, on either event loop."""
    whole = _head() + b"".join(_chunked([b": hi\n\n", *STREAM]))
    for k in range(1, len(whole), 5):
        raw, = _run([[whole[:k], whole[k:]]], loop=loop)
        assert raw.error is None and raw.texts == [" a", " b", " c"], k


def test_chunk_extensions_and_trailers_are_skipped_and_a_content_length_body_is_read():
    ext = [b"%x;name=value\r\n%s\r\n" % (len(p), p) for p in STREAM] + [b"0\r\nX-Trailer: 1\r\n\r\n"]
    raw, = _run([[_head(), *ext]])
    assert raw.error is None and raw.texts == [" a", " b", " c"] and raw.done_seen
    body = b"".join(STREAM)
    raw, = _run([[_head(extra=f"Content-Length: {len(body)}\r\n"), body]])
    assert raw.error is None and raw.texts == [" a", " b", " c"] and raw.done_seen


def test_keep_alive_reuses_one_connection_and_an_http10_answer_is_read_to_its_close():
    seen: list = []
    raws = _run([[_head(), *_chunked(STREAM)]], n=3, seen=seen)
    assert all(r.error is None and r.done_seen for r in raws)
    assert len({peer for peer, _ in seen}) == 1  # three requests, one client port: one connection
    assert seen[0][1].startswith(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:")
    last = b'data: {"choices":[{"index":0,"text":" c","finish_reason":"length"}]}\n\n'
    old = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + b"".join(STREAM[:2]) + last
    raws = _run([[old]], n=2, then="close")  # no [DONE], no length: the body ends when the server closes
    assert all(r.error is None and r.texts == [" a", " b", " c"] and r.finish_reason == "length" for r in raws)
    raws = _run([[old[:-1]]], then="close")  # the last event never closed by its blank line: discarded
    assert raws[0].error == "stream ended early (no [DONE], finish_reason or usage)" and raws[0].texts == [" a", " b"]


@pytest.mark.parametrize("transport", ["raw", "aiohttp"])
def test_a_refusal_is_its_status_and_body_on_one_line(transport):
    said = b'{"error": {"message": "bad\\nrequest"}}\n'
    raw, = _run([[_head("400 Bad Request", f"Content-Length: {len(said)}\r\n"), said]], transport=transport)
    assert raw.error.startswith('HTTP 400: {"error": {"message": "bad') and "\n" not in raw.error


@pytest.mark.parametrize("transport", ["raw", "aiohttp"])
def test_a_reset_mid_stream_fails_the_request_with_its_events_kept(transport):
    raw, = _run([[_head(), *_chunked(STREAM[:2])[:2]]], then="reset", transport=transport)
    assert raw.error is not None and "\n" not in raw.error and raw.texts == [" a", " b"]
    assert not raw.error.startswith(("HTTP", "stream ended"))  # the connection's fault, named as such


def test_a_malformed_chunk_fails_the_request_at_once():
    """A chunk size that is no hex number, and a chunk's data not followed by CRLF (through aiohttp 3.14 the
    first one ran to the request's timeout).  Each is named at once, the events before it kept."""
    raw, = _run([[_head(), b"zz\r\n" + STREAM[0] + b"\r\n"]], timeout_s=2.0)
    assert raw.error == "MalformedResponse: malformed chunk size: b'zz'"
    raw, = _run([[_head(), b"%x\r\n%sXY" % (len(STREAM[0]), STREAM[0])]], timeout_s=2.0)
    assert raw.error == "MalformedResponse: malformed chunk: its data is not followed by CRLF"
    assert raw.texts == [" a"]  # the event before the fault is kept


@pytest.mark.parametrize("transport", ["raw", "aiohttp"])
def test_a_refused_connection_is_one_line(transport):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def go():
        target = client.Target(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=5.0)
        async with client.make_session(1, transport=transport) as session:
            raw = streamrecord.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0)
            await client.stream_one(session, target, b"{}", raw, 0.0, target.headers())
            return raw.error

    err = asyncio.run(go())
    assert "\n" not in err and f"127.0.0.1:{port}" in err
    if transport == "raw":
        assert err.startswith(f"ConnectionRefusedError: [Errno 111] cannot connect to 127.0.0.1:{port}")


def test_a_timeout_mid_stream_is_the_timeout():
    raw, = _run([[_head(), *_chunked(STREAM[:2])[:2]]], timeout_s=0.3)
    assert raw.error == "timeout after 0.3 s" and raw.texts == [" a", " b"]


def test_the_transport_is_the_raw_reader_for_plain_http_only():
    """``auto`` (the default): the raw reader for plain http://, aiohttp for TLS; ``transport: aiohttp`` in the
    config, aiohttp always, and the provenance's client line says which."""
    from types import SimpleNamespace

    from pipeline.config.options import OpenAIOptions
    from pipeline.backends.served import ServedBackend

    assert client.transport_for("http://127.0.0.1:8000/v1/completions") == "raw"
    assert client.transport_for("https://api.example.com/v1/completions") == "aiohttp"
    assert client.transport_for("http://127.0.0.1:8000/v1/completions", "aiohttp") == "aiohttp"
    for opts, said in ((OpenAIOptions(), "its own HTTP/1.1 reader"), (OpenAIOptions(transport="aiohttp"), "aiohttp"),
                       (OpenAIOptions(base_url="https://api.example.com/v1"), "aiohttp")):
        line = ServedBackend.client_description(SimpleNamespace(cfg=SimpleNamespace(open_loop=None), opts=opts))
        assert line == f"batchmark loadgen ({said}, orjson), closed loop"
    with pytest.raises(ValueError, match="transport"):
        OpenAIOptions(transport="h2")


def test_the_meter_is_told_the_connect_and_first_byte_times():
    """One connection opened for three requests: one connect time; each request's first byte after its start."""
    class Meter:
        connect_s: list = []
        first_byte_s: list = []

    async def go():
        server, url = await _server([[_head(), *_chunked(STREAM)]])
        target = client.Target(base_url=url, model="m", timeout_s=5.0)
        try:
            async with client.make_session(1, phases=lambda: Meter) as session:
                for i in range(3):
                    raw = streamrecord.RawStream(request_id=i, warmup=False, queued_s=0.0, sent_s=0.0)
                    await client.stream_one(session, target, b"{}", raw, 0.0, target.headers())
        finally:
            server.close()

    asyncio.run(go())
    assert len(Meter.connect_s) == 1 and len(Meter.first_byte_s) == 3
    assert all(0 < t < 1 for t in Meter.connect_s + Meter.first_byte_s)


def test_a_malformed_status_line_and_header_are_refused():
    conn = rawhttp.Conn(("h", 1))
    with pytest.raises(rawhttp.MalformedResponse, match="not an HTTP/1.1 status line"):
        conn._head(b"ICY 200 OK\r\n\r\n")
    with pytest.raises(rawhttp.MalformedResponse, match="malformed header field"):
        conn._head(b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n")


def test_whole_chunks_in_one_read_are_split_exactly_or_left_to_the_step_by_step_reader():
    """The one-split reading of a read of whole chunks: a chunk whose data holds CRLFs (SSE with CRLF line ends)
    cuts its piece short of its size, so the read goes to the step-by-step reader, which gives the same data; a
    size Python's int() would take but RFC 9112's ``1*HEXDIG`` does not ("+5", "0x5", "5_0") is refused."""
    crlf = [b"data: {\"choices\":[{\"index\":0,\"text\":\" a\"}]}\r\n\r\n", b"data: [DONE]\r\n\r\n"]
    wire = b"".join(_chunked(crlf))
    assert rawhttp._whole_chunks(wire) is None
    plain = b"".join(_chunked(STREAM))
    assert rawhttp._whole_chunks(plain) == (STREAM, True)
    assert rawhttp._whole_chunks(plain[:-5]) == (STREAM, False)  # the last chunk not yet come
    raw, = _run([[_head(), wire]])
    assert raw.error is None and raw.texts == [" a"] and raw.done_seen
    for size in (b"+5", b"0x5", b"5_0"):
        raw, = _run([[_head(), size + b"\r\nhello\r\n"]], timeout_s=2.0)
        assert raw.error.startswith("MalformedResponse: malformed chunk size"), size


def _feed_in_two(body: bytes, k: int) -> rawhttp.Exchange:
    """``body`` (an answer's chunked body, its head already read) handed to a connection's ``data_received`` in two
    reads cut at ``k``, as a socket may deliver it; the exchange it filled."""
    async def go():
        conn = rawhttp.Conn(("127.0.0.1", 1))
        ex = rawhttp.Exchange(streamrecord.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0), 0.0, 64)
        conn.ex, conn.state, ex.status = ex, rawhttp._CHUNKED, 200
        for piece in (body[:k], body[k:]):
            if piece:
                conn.data_received(piece)
        return ex

    return asyncio.run(go())


def test_a_done_or_error_marker_is_seen_wherever_the_reads_cut_it():
    """The markers the read loop looks for — ``[DONE]`` (the stream is over, though the server holds its body open:
    no last chunk here) and an ``"error"`` key — are found with the body cut into two reads at every offset, the cut
    inside a marker, inside an event or between events, in one chunk or one chunk per event: the search of whole
    events' reads (a read ending at an event's blank line) and of a read's edge together miss none."""
    error = b'data: {"error": {"message": "boom"}}\n\n'
    for events in ([*STREAM], [STREAM[0], error, *STREAM[1:]]):
        for body in (b"".join(_chunked(events))[:-5], b"".join(_chunked([b"".join(events)]))[:-5]):
            for k in range(len(body) + 1):
                ex = _feed_in_two(body, k)
                assert ex.finished and ex.done.done(), (k, body)
                assert ex.errors is (error in events), (k, body)
