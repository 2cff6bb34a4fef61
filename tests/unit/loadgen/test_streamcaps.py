"""The bounds on what the client keeps of one stream, relative to ``max_tokens`` (:mod:`pipeline.loadgen.streamcaps`).

Fault kind: a client that keeps every byte a server sends and hands all of it to the JSON reader and the tokenizer
(a 256 MiB event against a 16-token request: a 4 GiB tokenizer allocation that ended the sweep).  The bounds are
worked by hand from the module's margins: 16 tokens → stream 2^20 + 16 × 2^14 = 1,310,720 bytes, event
2^16 + 16 × 2^12 = 131,072 bytes, text 16 × 1,024 = 16,384 characters.
"""

from __future__ import annotations

from pipeline.loadgen import streamcaps, streamrecord, tokencount


def test_bounds_worked_by_hand():
    assert streamcaps.stream_bytes_max(16) == 1_310_720
    assert streamcaps.event_bytes_max(16) == 131_072
    assert streamcaps.text_chars_max(16) == 16_384
    assert streamcaps.stream_bytes_max(None) == 64 * 2**20


def _raw(reads: list[bytes]) -> streamrecord.RawStream:
    raw = streamrecord.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0)
    raw.reads, raw.read_s = reads, [0.1 * (i + 1) for i in range(len(reads))]
    return raw


def test_an_event_past_its_bound_is_never_parsed_and_fails_by_name():
    """One event of 131,073 bytes of data (one past the bound) after a correct one: the request fails naming both
    sizes, and the event's text never reaches the record (was: parsed, its text kept)."""
    big = b'{"choices": [{"index": 0, "text": "' + b"x" * (131_073 - 39) + b'"}]}'
    assert len(big) == 131_073
    raw = _raw([b'data: {"choices": [{"index": 0, "text": " t001"}]}\n\n', b"data: " + big + b"\n\ndata: [DONE]\n\n"])
    streamrecord.fold_reads(raw, (), 16)
    assert raw.error == ("stream event of 131073 bytes exceeded 131072 bytes for a 16-token request (more than any "
                         "event of that request holds)")
    assert raw.texts == [" t001"]


def test_an_event_at_its_bound_is_parsed():
    """The bound itself is allowed: 131,072 bytes parse (one byte less than the failing case above)."""
    big = b'{"choices": [{"index": 0, "text": "' + b"x" * (131_072 - 39) + b'"}]}'
    raw = _raw([b"data: " + big + b"\n\ndata: [DONE]\n\n"])
    streamrecord.fold_reads(raw, (), 16)
    assert raw.error is None and raw.done_seen and len(raw.texts[0]) == 131_072 - 39


class NeverCalled:
    """A tokenizer that fails the test if it is asked to count anything."""

    def encode(self, *a, **k):
        raise AssertionError("the tokenizer was handed the text")

    __call__ = encode


def test_more_text_than_max_tokens_can_carry_is_never_tokenized():
    """16,385 characters over two chunks for max_tokens 16 (one past 16 × 1,024): an impossible count, the tokenizer
    never called (was: the whole text encoded)."""
    ev = tokencount.Evidence(texts=["a" * 16_000, "b" * 385], per_chunk=[None, None], usage=16, max_tokens=16)
    dec = tokencount.decide(ev, NeverCalled())
    assert dec.error == ("streamed text of 16385 characters exceeded 16384 for a 16-token request (at most 1024 a "
                         "token; not tokenized)")
    assert dec.output_tokens == 0 and dec.flags == ["count_impossible"]


class _Transport:
    def __init__(self) -> None:
        self.closed = False

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def test_the_reader_stops_at_the_read_past_the_bound_and_closes_the_connection():
    """Fault kind: every byte kept.  Reads of 928 bytes (a 921-byte event in its chunk framing), each counted
    928 + 96 = 1,024: the header section is not the body's, so the body may count 1,310,720 − 96 (the header read's
    own cost) = 1,310,624, and the read that passes it is the 1,280th (1,279 × 1,024 = 1,309,696 ≤ 1,310,624 <
    1,310,720): 1,279 reads are kept, then the request fails by name and its connection is closed."""
    import asyncio

    from pipeline.loadgen import rawhttp

    async def main() -> None:
        conn = rawhttp.Conn(("h", 1))
        conn.transport = _Transport()
        raw = streamrecord.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0)
        ex = rawhttp.Exchange(raw, 0.0, 64, streamcaps.stream_bytes_max(16), 16)
        conn.send(b"POST / HTTP/1.1\r\n\r\n", ex)
        conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        event = b'data: {"choices": [{"index": 0, "text": "' + b"x" * (921 - 47) + b'"}]}\n\n'
        read = b"%x\r\n" % len(event) + event + b"\r\n"
        assert len(event) == 921 and len(read) == 928
        for _ in range(1279):
            conn.data_received(read)
        assert not ex.done.done() and len(raw.reads) == 1279 and not conn.transport.closed
        conn.data_received(read)
        assert ex.done.done() and conn.transport.closed and len(raw.reads) == 1279
        assert isinstance(ex.done.exception(), streamcaps.StreamTooLong)
        assert str(ex.done.exception()).startswith("stream exceeded 1310720 bytes for a 16-token request")

    asyncio.run(main())
