"""A server-sent-events parser to the WHATWG HTML specification, fed the bytes of each socket read (pure).

Source: the HTML Living Standard, "Server-sent events", section "Parsing an event stream" and "Interpreting an
event stream" (https://html.spec.whatwg.org/multipage/server-sent-events.html):

- lines end in CRLF, LF or CR (a CR at the end of one read and an LF at the start of the next are one ending);
  one byte-order mark at the very start of the stream is dropped;
- a line starting with ``:`` is a comment and is ignored;
- a line with a colon is a field (name before the first colon, value after it with one leading space removed);
  a line without one is a field whose value is empty;
- ``data``: the value and a line feed are appended to the data buffer, so a multi-line ``data:`` event is
  its lines joined by "\\n"; ``event``: the event's type; ``id``: the last event id (ignored when it holds a NUL);
  ``retry``: the reconnection time in ms, when the value is ASCII digits only; any other field is ignored;
- an empty line dispatches the event: nothing when the data buffer is empty, else its data with the last line
  feed removed, its type (``message`` when none was given) and the last event id; the type buffer is reset;
- at the end of the stream an event not yet closed by an empty line is discarded, never dispatched.

Bytes in, bytes out (the data is JSON for the client, which orjson reads from bytes; invalid UTF-8 is the JSON
reader's to refuse).  :meth:`SSEParser.feed` takes one read at a time; a read's text is cut into events at
their empty lines first, and an event of one ``data:`` line (what every inference server sends) is dispatched
without walking its fields (the same event the field walk gives: between events the type and data buffers are
empty).  The fields of an event not yet closed take effect when it is (``id``, ``retry`` included).

A whole stream kept as its reads (the client's hot loop keeps each read's bytes and time, nothing parsed) is
split after the request by :func:`split_reads`: each event with the index of the read that completed it, which is
the read :meth:`SSEParser.feed` would have dispatched it from.  Its fast path (LF line ends, every event one
``data:`` line: what inference servers send) is one ``bytes.split`` of the joined reads; anything else (a CR, a
comment, a BOM, several lines or fields in an event, blank lines beyond the one closing each event) is handed to
:class:`SSEParser`, read by read.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from itertools import accumulate
from typing import NamedTuple

BOM = b"\xef\xbb\xbf"


class SSEEvent(NamedTuple):
    """One dispatched event: its ``data`` (bytes, lines joined by "\\n"), ``event`` type and ``last_event_id``."""

    data: bytes
    event: str = "message"
    last_event_id: str = ""


class SSEParser:
    """Incremental parser: :meth:`feed` the bytes of each read, get the events that read completed."""

    __slots__ = ("_buf", "_data", "_type", "_started", "_skip_lf", "last_event_id", "retry_ms")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._type = b""
        self._started = False
        self._skip_lf = False  # the last read ended in CR: an LF starting the next one ends no second line
        self.last_event_id = ""
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events completed by ``chunk`` (in order), each a ``(data, event, last_event_id)`` tuple (equal to its
        :class:`SSEEvent`; plain tuples, cheaper to build); a partial line or event is kept for the next call."""
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buf = self._buf + chunk if self._buf else chunk
        if not self._started:
            if len(buf) < len(BOM) and BOM.startswith(buf):
                self._buf = buf
                return []
            self._started = True
            if buf.startswith(BOM):
                buf = buf[len(BOM):]
        if b"\r" in buf:
            self._skip_lf = buf.endswith(b"\r")
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        blocks = buf.split(b"\n\n")  # one event's lines each, closed by its empty line
        self._buf = blocks.pop()  # not closed yet: kept whole (nothing of it is dispatched before its empty line)
        out: list = []
        for block in blocks:
            if block[:5] == b"data:" and b"\n" not in block:  # the common event: one data line
                value = block[5:]
                out.append((value[1:] if value[:1] == b" " else value, "message", self.last_event_id))
                continue
            for line in block.split(b"\n"):
                ev = self._line(line)
                if ev is not None:
                    out.append(ev)
            ev = self._dispatch()
            if ev is not None:
                out.append(ev)
        return out

    def close(self) -> list[SSEEvent]:
        """The end of the stream: a line or event not closed by an empty line is discarded (the spec); returns []."""
        self._buf, self._data, self._type, self._skip_lf = b"", [], b"", False
        return []

    def _line(self, line: bytes) -> tuple[bytes, str, str] | None:
        if not line:
            return self._dispatch()
        if line[:1] == b":":
            return None
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._type = value
        elif name == b"id":
            if b"\x00" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value and value.isdigit() and value.isascii():
                self.retry_ms = int(value)
        return None

    def _dispatch(self) -> tuple[bytes, str, str] | None:
        data, kind = self._data, self._type
        self._data, self._type = [], b""
        if not data:
            return None
        return (b"\n".join(data), kind.decode("utf-8", "replace") if kind else "message", self.last_event_id)


def split_reads(reads: list[bytes]) -> list[tuple[bytes, int]]:
    """Every event of a stream read as ``reads`` (the bytes of each socket read, in order): ``(data, i)`` with ``i``
    the index of the read that completed the event (closed its empty line), the read whose :meth:`SSEParser.feed`
    returns it; an event not closed at the end is discarded (:meth:`SSEParser.close`).  Equal to feeding every
    read to one :class:`SSEParser` (the slow path does exactly that), keeping only each event's ``data``."""
    body = b"".join(reads)
    if b"\r" not in body and body[:5] == b"data:":
        blocks = body.split(b"\n\n")
        blocks.pop()  # not closed by an empty line: never dispatched
        if all(b[:5] == b"data:" and b"\n" not in b for b in blocks):
            ends = list(accumulate(map(len, reads)))  # read i holds bytes [ends[i - 1], ends[i])
            out, pos = [], 0
            for b in blocks:
                pos += len(b) + 2  # the event's closing LF is byte pos - 1
                value = b[5:]
                out.append((value[1:] if value[:1] == b" " else value, bisect_left(ends, pos)))
            return out
    parser = SSEParser()
    return [(ev[0], i) for i, data in enumerate(reads) for ev in parser.feed(data)]


#: How every server ends a stream: its last event ``[DONE]``, after an event's blank line.
DONE_END = b"\n\ndata: [DONE]\n\n"


def done_in(reads: list[bytes]) -> bool:
    """Whether the reads so far hold a dispatched ``[DONE]`` event: at once when they end with :data:`DONE_END`
    (LF-only, so the closed events before it cannot hide it), else the spec's parser over them (:func:`split_reads`)."""
    last = reads[-1]
    end = last if len(last) >= len(DONE_END) or len(reads) == 1 else reads[-2][-len(DONE_END):] + last
    if end.endswith(DONE_END) and b"\r" not in end:
        return True
    return any(data.strip() == b"[DONE]" for data, _ in split_reads(reads))


_ERROR_LINE = re.compile(rb"(?:^|[\r\n])error:[ ]?([^\r\n]*)")
_ERROR_TYPE = re.compile(rb"(?:^|[\r\n])event:[ ]?error(?:[\r\n]|$)")


def error_field(reads: list[bytes]) -> bytes | None:
    """A server error sent outside an event's ``data``, or None: the value of the first ``error:`` field line (a field
    the specification ignores; llama.cpp's server streams its errors so, then ``data: [DONE]``), else the data of the
    first event of type ``error`` (``event: error``).  A line that starts with ``error:`` cannot be inside an event's
    JSON, which holds no raw line ending.  A byte search first: a stream without ``error`` costs one scan."""
    body = b"".join(reads)
    if body.find(b"error") < 0:
        return None
    line = _ERROR_LINE.search(body)
    if line is not None:
        return line.group(1)
    if _ERROR_TYPE.search(body) is None:
        return None
    parser = SSEParser()
    for data in reads:
        for ev in parser.feed(data):
            if ev[1] == "error":
                return ev[0]
    return None
