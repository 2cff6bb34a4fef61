"""The load generator's own HTTP/1.1 streaming reader, on asyncio's protocol API (plain ``http://`` only).

Why: aiohttp's response reader costs 7–8 µs of the client's one core per streamed token (its parser, its
``StreamReader``, one coroutine resumption per read); at a thousand streams that core, not the server, sets the
figure.  Here each socket read is handled inside its ``data_received`` callback (:class:`Conn`): one
``time.perf_counter`` stamp, the chunked framing removed, the bytes kept (``raw.read_s``, ``raw.reads``, exactly
what the aiohttp path keeps), and the request's coroutine is woken once, when the response ends or ``[DONE]``
came.

What it reads (RFC 9112, "HTTP/1.1", https://www.rfc-editor.org/rfc/rfc9112): the status line and header fields
(§4, §5; 1xx interim responses skipped, §15.2 of RFC 9110); the body by ``Transfer-Encoding: chunked`` (§7.1:
hex chunk sizes, extensions after ``;`` ignored, trailer fields skipped), else ``Content-Length`` (§6.3), else
until the server closes (an HTTP/1.0 answer).  A connection may serve the next request (:class:`Conn`'s
``reusable``) unless the answer said ``Connection: close``, was HTTP/1.0, or was not read to its end; the
keep-alive pool, the request's sending and its HTTP phase timings are :mod:`pipeline.loadgen.rawpool`.

What a read costs the reader itself (``data_received``, counted with ``valgrind --tool=callgrind``, which counts
instructions whatever else the machine does): 13,055 instructions for a read of one vLLM-shaped event, 35,416 for a
read of five (7,083 an event); before three changes, 22,738 and 50,808.  The stream's bound (each read's bytes and
:data:`~pipeline.loadgen.streamcaps.READ_COST` added up and held to the exchange's ``cap``) adds 342: 13,367 against
13,025 for one event, counted the same way on another day.  The changes: a read of whole events (one
that ends at an event's blank line, after one that did too) looks for ``[DONE]`` only in its last
:data:`DONE_TAIL` bytes and needs no edge with the read before, since no marker can be cut between two such reads;
``bytes.find`` rather than ``in`` (``in`` first tries its needle as an integer, and formats and drops that
``TypeError`` each time); each chunk-size line is checked and converted once (:data:`_SIZES`).  Beside a minimal
socket client on two cores (``benchmarks/loadgen_overhead.py --repeats 5 --output-tokens 256``, docs/reliability.md)
the receiving loop's whole CPU per token (the kernel's ``recv`` included: 39 % of it at c = 64 in a ``py-spy
--native`` profile, ``data_received`` 38 %, taken before the chunk-size lines were kept) is 5.8–7.3 µs at
c = 1 … 1,024 against the minimal client's 5.6–8.2, and there the bench server's one core, not the client, sets the
tokens/s.

Failures raise one-line exceptions that the client turns into the request's ``error``: refused or unreachable
(``ConnectionRefusedError``/``OSError`` with the host), the connection closed mid-answer
(:class:`ServerDisconnected`), bytes that are no HTTP/1.1 answer or a malformed chunk (:class:`MalformedResponse`), a
body past its bound (:class:`~pipeline.loadgen.streamcaps.StreamTooLong`: the exchange's ``cap``, bytes kept with
each read counted :data:`~pipeline.loadgen.streamcaps.READ_COST` more; the connection is closed at once).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pipeline.loadgen.sse import done_in
from pipeline.loadgen.streamcaps import READ_COST, STREAM_BYTES_UNKNOWN, stream_too_long

#: Longest status line plus header section accepted (bytes): aiohttp's ``max_field_size`` as the client set it.
HEAD_MAX = 4 * 2**20
#: Longest chunk-size line accepted (bytes; RFC 9112 §7.1 sets none, a few hex digits and an extension are usual).
CHUNK_LINE_MAX = 4096
#: Bytes at a read's end searched for ``[DONE]`` when the read holds whole events: ``data: [DONE]\r\n\r\n`` is 16,
#: and ``[DONE]`` is a stream's last event.
DONE_TAIL = 24
HEX = b"0123456789abcdefABCDEF"
_HEAD, _CHUNKED, _LENGTH, _UNTIL_CLOSE, END = range(5)


class ServerDisconnected(ConnectionError):
    """The server closed the connection before its answer ended."""


class MalformedResponse(ValueError):
    """Bytes that are no HTTP/1.1 answer: a bad status line or header, a malformed chunk."""


class Stale(ServerDisconnected):
    """A reused connection closed before any byte of the answer: the request may be sent again."""


class Exchange:
    """One request's answer as it arrives: status, headers, the body kept as ``raw``'s reads (or, not 200, ``said``)."""

    __slots__ = ("raw", "t0", "status", "content_type", "said", "said_max", "done", "finished", "errors", "tail",
                 "head_s", "ended", "end_wait", "whole", "cap", "max_tokens")

    def __init__(self, raw: Any, t0: float, said_max: int, cap: int = STREAM_BYTES_UNKNOWN,
                 max_tokens: int | None = None) -> None:
        self.raw, self.t0, self.said_max = raw, t0, said_max
        # most bytes of the answer (reads counted READ_COST more each): its body's bound, its header section's until read
        self.cap, self.max_tokens = cap + HEAD_MAX, max_tokens
        self.status = 0
        self.content_type: str | None = None
        self.said = b""
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()  # the stream is over for its reader
        self.finished = self.errors = self.ended = False  # [DONE] seen / an "error" key seen / the answer read whole
        self.tail = b""  # the last 7 bytes of a read that ended inside an event, for a marker cut between two reads
        self.whole = True  # the reads so far ended at an event's end (a blank line): no marker is cut at their edge
        self.head_s: float | None = None
        self.end_wait: asyncio.Future | None = None  # set by a drain waiting for the body's end after [DONE]

    def end(self) -> None:
        """The answer was read to its end (or its connection lost after the stream was over)."""
        self.ended = True
        if not self.done.done():
            self.done.set_result(None)
        if self.end_wait is not None and not self.end_wait.done():
            self.end_wait.set_result(None)


#: Chunk-size lines seen and their values (a stream's chunks come in a few sizes), so the hottest path checks and
#: converts each line once; bounded by :data:`SIZES_MAX`.
_SIZES: dict[bytes, int] = {}
SIZES_MAX = 4096


def _chunk_size(line: bytes) -> int:
    """The size of a chunk-size line of hex digits only (RFC 9112 §7.1, no extension), kept in :data:`_SIZES`; 0 when
    it is anything else (an extension, blanks, no hex, the last chunk's ``0``), for the step-by-step reader."""
    if not line or line.translate(None, HEX) or len(line) > 8:
        return 0
    size = int(line, 16)
    if size and len(_SIZES) < SIZES_MAX:
        _SIZES[line] = size
    return size


def _whole_chunks(data: bytes) -> tuple[list[bytes], bool] | None:
    """``data`` read as whole chunks without a loop over them: (the chunks' data, whether the last chunk closed
    them); None when it is not that (a chunk cut between reads, an extension, trailers, a fault), for the
    step-by-step reader.

    ``data`` split at every CRLF is ``size, data, size, data, …``: exact when every size is hex and equals the
    length of the piece after it, since the first piece that matches its size ends at that chunk's true end (a
    CRLF inside a chunk's data cuts its piece short of its size), and so on chunk by chunk."""
    if data[-2:] != b"\r\n":
        return None
    parts = data.split(b"\r\n")
    parts.pop()  # the empty piece after the last CRLF
    end = len(parts) >= 2 and parts[-2] == b"0" and parts[-1] == b""  # the last chunk, no trailer field
    if end:
        del parts[-2:]
    sizes, pieces = parts[0::2], parts[1::2]
    if len(sizes) != len(pieces) or b"" in pieces:
        return None
    got = list(map(_SIZES.get, sizes))
    if None in got:  # a size line not seen before: checked (hex digits only) and converted once
        got = list(map(_chunk_size, sizes))
    if got != list(map(len, pieces)):
        return None
    return pieces, end


class Conn(asyncio.Protocol):
    """One keep-alive connection: parses each answer as its bytes arrive (``data_received``)."""

    def __init__(self, key: tuple[str, int]) -> None:
        self.key = key
        self.transport: Any = None
        self.ex: Exchange | None = None
        self.closed = False
        self.reusable = True  # False: the answer said close, was cut, or left bytes unread
        self.reused = False  # handed out again by the pool (a close before any byte then is :class:`Stale`)
        self.state = END
        self._buf = b""  # an incomplete header section, chunk-size line or CRLF
        self._left = 0  # bytes still to come of the current chunk's data (or of a Content-Length body)
        self._crlf = False  # a chunk's data was read, its CRLF not yet
        self._trailers = False  # the last chunk came: trailer lines until an empty one
        self._got = 0  # bytes of the current answer seen, each read counted READ_COST more (held to its exchange's cap)

    # asyncio callbacks -----------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex = self.ex
        if ex is None or ex.ended:
            return
        if ex.done.done():  # the stream was over ([DONE]) before its body's end: nothing is lost
            ex.end()
        elif self.state == _UNTIL_CLOSE:  # an answer without a length ends when the server closes
            ex.end()
        else:
            why = f" ({exc})" if exc else ""
            kind = Stale if self._got == 0 and self.reused else ServerDisconnected
            ex.done.set_exception(kind(f"the server closed the connection before the answer ended "
                                       f"({sum(map(len, ex.raw.reads))} bytes of its body read){why}"))

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()  # the read's arrival, before anything is done with it
        ex = self.ex
        if ex is None or self.state == END:  # bytes no request asked for: the connection cannot be trusted
            self.close()
            return
        got = self._got = self._got + len(data) + READ_COST
        if got > ex.cap:  # more than any answer of its length holds (a stream without end, a huge event)
            self._overflow(ex)
            return
        if self.state == _CHUNKED and not (self._buf or self._left or self._crlf or self._trailers):
            j = data.find(b"\r\n", 0, 18)  # the hottest path: a read of one chunk (one event, a quiet server's)
            if j > 0 and (size := _SIZES.get(data[:j]) or _chunk_size(data[:j])):
                end = j + 2 + size
                if len(data) == end + 2 and data[end:] == b"\r\n":
                    self._body(data[j + 2:end], now)
                    return
            whole = _whole_chunks(data)  # the hot path: a read of whole chunks (a streaming server's writes)
            if whole is not None:
                pieces, end = whole
                if pieces:
                    self._body(pieces[0] if len(pieces) == 1 else b"".join(pieces), now)
                if end:
                    self.state = END
                    ex.end()
                return
        try:
            self._feed(data, now)
        except MalformedResponse as exc:
            if not ex.done.done():
                ex.done.set_exception(exc)
            self.close()

    def _overflow(self, ex: Exchange) -> None:
        """The answer passed its exchange's bound: the request fails by name, the connection is closed."""
        if not ex.done.done():
            ex.done.set_exception(stream_too_long(ex.max_tokens))
        self.close()

    # parsing -----------------------------------------------------------------------------------
    def _feed(self, data: bytes, now: float) -> None:
        pieces: list[bytes] = []
        complete = False
        try:
            while data and not complete:
                state = self.state
                if state == _HEAD:
                    data = self._head(data)
                    complete = self.state == END
                elif state == _CHUNKED:
                    data, complete = self._chunk(data, pieces)
                elif state == _LENGTH:
                    take = data[:self._left]
                    self._left -= len(take)
                    data = data[len(take):]
                    pieces.append(take)
                    complete = not self._left
                elif state == _UNTIL_CLOSE:
                    pieces.append(data)
                    data = b""
                else:
                    break
        finally:  # one socket read: one entry (as aiohttp's iter_any hands over what one read brought), a fault's too
            if pieces:
                self._body(pieces[0] if len(pieces) == 1 else b"".join(pieces), now)
        if complete:
            self.state = END
            if self.ex is not None:
                self.ex.end()
        if data:  # bytes after the answer's end: the connection is not reused
            self.reusable = False

    def _head(self, data: bytes) -> bytes:
        buf = self._buf + data
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > HEAD_MAX:
                raise MalformedResponse(f"the answer's header section exceeds {HEAD_MAX} bytes")
            self._buf = buf
            return b""
        self._buf, rest = b"", buf[end + 4:]
        lines = buf[:end].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0") or not parts[1].isdigit() or len(parts[1]) != 3:
            raise MalformedResponse(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
        status = int(parts[1])
        if 100 <= status < 200:  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            return rest
        fields: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise MalformedResponse(f"malformed header field: {line[:80]!r}")
            name = name.lower()
            fields[name] = (fields[name] + b", " + value.strip()) if name in fields else value.strip()
        ex = self.ex
        ex.status, ex.head_s = status, time.perf_counter()
        ex.cap += end + 4 - HEAD_MAX  # the header section is not the body's: the body's bound from here
        ctype = fields.get(b"content-type")
        ex.content_type = ctype.decode("latin-1") if ctype is not None else None
        conn = fields.get(b"connection", b"").lower()
        if b"close" in conn or (parts[0] == b"HTTP/1.0" and b"keep-alive" not in conn):
            self.reusable = False
        te, length = fields.get(b"transfer-encoding"), fields.get(b"content-length")
        if te is not None:
            if te.lower().rsplit(b",", 1)[-1].strip() != b"chunked":
                raise MalformedResponse(f"unsupported Transfer-Encoding: {te[:40]!r}")
            self.state, self._left, self._crlf, self._trailers = _CHUNKED, 0, False, False
        elif length is not None:
            if not length.isdigit():
                raise MalformedResponse(f"malformed Content-Length: {length[:40]!r}")
            self.state, self._left = _LENGTH, int(length)
            if not self._left:
                self.state = END
        elif status in (204, 304):
            self.state = END
        else:
            self.state, self.reusable = _UNTIL_CLOSE, False
        return rest

    def _chunk(self, data: bytes, pieces: list[bytes]) -> tuple[bytes, bool]:
        """Chunked framing off ``data`` (the chunks' data into ``pieces``): (what follows the answer, its end seen).

        One pass with the state in locals (a read of a busy server holds dozens of chunks)."""
        buf = self._buf + data if self._buf else data
        if not (self._buf or self._left or self._crlf or self._trailers):
            whole = _whole_chunks(buf)
            if whole is not None:
                pieces += whole[0]
                return b"", whole[1]
        pos, n, left, crlf = 0, len(buf), self._left, self._crlf
        find, keep = buf.find, pieces.append
        try:
            while pos < n:
                if left:
                    end = pos + left
                    if end > n:
                        keep(buf[pos:])
                        left, pos = end - n, n
                        break
                    keep(buf[pos:end])
                    left, pos, crlf = 0, end, True
                if crlf:
                    if n - pos < 2:
                        break
                    if buf[pos] != 13 or buf[pos + 1] != 10:
                        raise MalformedResponse("malformed chunk: its data is not followed by CRLF")
                    pos, crlf = pos + 2, False
                    continue
                j = find(b"\r\n", pos)
                if j < 0:
                    if n - pos > CHUNK_LINE_MAX:
                        raise MalformedResponse("malformed chunk: no chunk-size line")
                    break
                if self._trailers:
                    if j == pos:  # the empty line after the last chunk and its trailers: the answer's end
                        return buf[j + 2:], True
                    pos = j + 2  # a trailer field, skipped
                    continue
                line = buf[pos:j]
                if line.strip(HEX):  # an extension (";name=value"), blanks, or no hex number: the strict reading
                    line = line.split(b";", 1)[0].strip(b" \t")
                    if not line or line.strip(HEX):
                        raise MalformedResponse(f"malformed chunk size: {buf[pos:j][:40]!r}")
                elif not line:
                    raise MalformedResponse("malformed chunk size: b''")
                left, pos = int(line, 16), j + 2
                if not left:
                    self._trailers = True
            return b"", False
        finally:
            self._buf = buf[pos:] if pos < n else b""
            self._left, self._crlf = left, crlf

    def _body(self, data: bytes, now: float) -> None:
        ex = self.ex
        if ex.done.done():  # after [DONE] (a server holding its body open): not the stream's, as aiohttp never reads it
            return
        if ex.status != 200:  # a refusal: its first bytes are the error's text
            ex.said += data[:ex.said_max - len(ex.said)]
            if len(ex.said) >= ex.said_max:
                self.reusable = False  # not read to its end
                ex.done.set_result(None)
            return
        raw = ex.raw
        raw.read_s.append(now - ex.t0)
        raw.reads.append(data)
        cut = not ex.whole  # the read before ended inside an event: a marker may be cut at this read's start
        ex.whole = data[-2:] == b"\n\n" or data[-4:] == b"\r\n\r\n"  # this one ends at an event's end
        # (``find`` rather than ``in``: ``in`` first tries the needle as an integer, and formats and drops that error)
        if cut:
            edge = ex.tail + data[:7]
            error = data.find(b'"error"') >= 0 or edge.find(b'"error"') >= 0
            done = data.find(b"[DONE]") >= 0 or edge.find(b"[DONE]") >= 0
        else:  # the usual read, whole events: [DONE], a stream's last event, is in the read's last bytes
            error = data.find(b'"error"') >= 0
            done = data.find(b"[DONE]", -DONE_TAIL if ex.whole else 0) >= 0
        if error:  # before [DONE]: a read may hold both
            ex.errors = True
        if done and done_in(raw.reads):
            ex.finished = True
            ex.done.set_result(None)
        if not ex.whole:
            ex.tail = data[-7:] if len(data) >= 7 else (ex.tail + data)[-7:]

    # use -----------------------------------------------------------------------------------------
    def send(self, request: bytes, ex: Exchange) -> None:
        """Write one request; its answer fills ``ex``."""
        self.ex, self.state, self._buf, self._got = ex, _HEAD, b"", 0
        self.transport.write(request)

    def close(self) -> None:
        self.reusable = False
        self.closed = True
        if self.transport is not None:
            self.transport.close()
