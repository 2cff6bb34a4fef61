"""The SSE parser against the WHATWG HTML specification's own examples and rules ("Server-sent events",
https://html.spec.whatwg.org/multipage/server-sent-events.html, "Interpreting an event stream" and its examples).

Before :mod:`pipeline.loadgen.sse`, the client split events on "\\n\\n" (or "\\r\\n\\r\\n") and took one ``data:``
line: a multi-line ``data`` event lost its later lines, CR-only endings gave no event at all, and an event whose
first line was a comment or an ``id`` was read from its first ``data:`` line only by luck.
"""

from __future__ import annotations

import pytest

from pipeline.loadgen.sse import SSEEvent, SSEParser


def parse(stream: bytes, cuts: list[int] | None = None) -> list[SSEEvent]:
    """Every event of ``stream``, fed whole or cut at ``cuts`` (byte offsets: reads of a socket)."""
    p = SSEParser()
    bounds = [0, *(cuts or []), len(stream)]
    out: list[SSEEvent] = []
    for a, b in zip(bounds, bounds[1:]):
        out += [SSEEvent(*e) for e in p.feed(stream[a:b])]
    return out + p.close()


def test_spec_example_multiline_data_joined_by_newline():
    """The spec's stock-ticker example: three data lines are one event "YHOO\\n+2\\n10"."""
    assert [e.data for e in parse(b"data: YHOO\ndata: +2\ndata: 10\n\n")] == [b"YHOO\n+2\n10"]


def test_spec_example_comment_id_and_an_unterminated_last_block():
    """The spec's "four blocks" example: the comment fires nothing; "first event" with last id "1"; "second event"
    with the id reset to ""; the last block (" third event", one leading space kept) has no closing blank line
    and, the spec says, is not dispatched at the end of the stream."""
    stream = b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n"
    events = parse(stream)
    assert [(e.data, e.last_event_id) for e in events] == [(b"first event", "1"), (b"second event", "")]
    closed = parse(stream + b"\n")
    assert closed[-1].data == b" third event"


def test_spec_example_empty_data_and_a_lone_newline():
    """The spec's "data / data data / data:" example: two events, "" and "\\n"; the last block is discarded."""
    assert [e.data for e in parse(b"data\n\ndata\ndata\n\ndata:")] == [b"", b"\n"]


def test_spec_example_space_after_the_colon_is_optional():
    """The spec's "data:test / data: test" example: two identical events."""
    assert [e.data for e in parse(b"data:test\n\ndata: test\n\n")] == [b"test", b"test"]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending_the_spec_allows(eol):
    """Lines end in CRLF, LF or CR; cut anywhere (here inside the CRLF too) the events are the same."""
    stream = eol.join([b"event: delta", b"id: 7", b"retry: 1500", b"data: {\"a\":", b"data: 1}", b"", b""])
    for cuts in ([], [stream.index(b"\n") if b"\n" in stream else 3], list(range(1, len(stream)))):
        p = SSEParser()
        bounds = [0, *cuts, len(stream)]
        events = [e for a, b in zip(bounds, bounds[1:]) for e in p.feed(stream[a:b])]
        assert events == [SSEEvent(b"{\"a\":\n1}", "delta", "7")]
        assert p.retry_ms == 1500


def test_retry_only_digits_id_without_nul_unknown_fields_ignored_and_bom_dropped():
    """``retry`` with a non-digit is ignored; an ``id`` holding NUL is ignored; an unknown field is ignored; one
    leading byte-order mark (split over two reads) is dropped; the type resets after each event."""
    p = SSEParser()
    stream = b"\xef\xbb\xbfretry: 12x\nid: a\x00b\nfoo: bar\nevent: x\ndata: 1\n\ndata: 2\n\n"
    events = p.feed(stream[:2]) + p.feed(stream[2:])
    assert events == [SSEEvent(b"1", "x", ""), SSEEvent(b"2", "message", "")]
    assert p.retry_ms is None


def test_event_without_data_is_not_dispatched():
    """An event of only ``event``/``id`` fields has an empty data buffer: nothing is dispatched, the id is kept."""
    p = SSEParser()
    assert p.feed(b"event: ping\nid: 3\n\n") == [] and p.last_event_id == "3"
