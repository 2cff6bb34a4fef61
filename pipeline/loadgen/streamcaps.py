"""How much of one streamed answer the client keeps: bounds relative to the ``max_tokens`` the request asked for (pure).

Why: the hot loop keeps every read of a stream until the repeat ends (:mod:`pipeline.loadgen.rawhttp`), so a server
that never ends its stream (one event that keeps growing), sends a million one-token events, or one 256 MiB event
against a 16-token request would hold every byte in the client (1.8 GB of it seen), then hand the whole text to the
tokenizer (a 4 GiB allocation that ended the sweep).  Each bound here fails such a request by name instead, with
bytes to spare for what an honest server sends.

The margins (derived: what the largest honest streams carry per token, times about eight):

- a stream: :data:`STREAM_BYTES_FIXED` + :data:`STREAM_BYTES_PER_TOKEN` × ``max_tokens`` bytes kept, each socket
  read counted with :data:`READ_COST` bytes more (the Python objects that keep it: a ``bytes`` header of 33 bytes,
  a ``float`` of 24, two list slots of 8).  A vLLM chat event with per-chunk usage is about 350 bytes a token, one
  with ``logprobs`` and 20 ``top_logprobs`` about 2 KiB; the 1 MiB covers the header section's bound's share,
  the role and usage events, keep-alive comments and an error's text.  16 tokens: 1 MiB + 256 KiB = 1,310,720 bytes.
- an event: :data:`EVENT_BYTES_FIXED` + :data:`EVENT_BYTES_PER_TOKEN` × ``max_tokens`` bytes of one event's data
  (an event carries at most the tokens asked for; one of 2 KiB a token, with 64 KiB to spare).  16 tokens: 128 KiB.
- the streamed text: :data:`TEXT_CHARS_PER_TOKEN` characters a token at most before it is handed to a tokenizer
  (the longest tokens of common vocabularies are under 128 bytes of text); more text than ``max_tokens`` tokens can
  carry is an impossible count, never tokenized.
"""

from __future__ import annotations

#: Bytes of a stream kept whatever it asked for (headers' share, role and usage events, comments, an error's text).
STREAM_BYTES_FIXED = 2**20
#: Bytes of a stream kept per token asked for (``max_tokens``): 8× an event with 20 ``top_logprobs``.
STREAM_BYTES_PER_TOKEN = 16 * 2**10
#: Bytes each kept socket read is counted with beyond its own (the objects that keep it and its arrival time).
READ_COST = 96
#: The bound of a request whose ``max_tokens`` is not known (a direct use of the client): 64 MiB.
STREAM_BYTES_UNKNOWN = 64 * 2**20
#: Bytes of one event's data kept whatever it asked for.
EVENT_BYTES_FIXED = 64 * 2**10
#: Bytes of one event's data per token asked for.
EVENT_BYTES_PER_TOKEN = 4 * 2**10
#: Characters of streamed text a token can carry at most (before a tokenizer is asked to count them).
TEXT_CHARS_PER_TOKEN = 1024


class StreamTooLong(ValueError):
    """A stream held more bytes than its request could need (:func:`stream_bytes_max`); its message names both."""


def stream_bytes_max(max_tokens: int | None) -> int:
    """Bytes of one stream the client keeps (reads counted with :data:`READ_COST` each):
    ``STREAM_BYTES_FIXED + STREAM_BYTES_PER_TOKEN × max_tokens``, :data:`STREAM_BYTES_UNKNOWN` when ``max_tokens`` is
    None.  Example (worked by hand): 16 tokens → 1,048,576 + 16 × 16,384 = 1,310,720 bytes."""
    if max_tokens is None:
        return STREAM_BYTES_UNKNOWN
    return STREAM_BYTES_FIXED + STREAM_BYTES_PER_TOKEN * max(int(max_tokens), 1)


def event_bytes_max(max_tokens: int | None) -> int:
    """Bytes of one event's data the client parses: ``EVENT_BYTES_FIXED + EVENT_BYTES_PER_TOKEN × max_tokens``, the
    stream's bound when ``max_tokens`` is None.  Example: 16 tokens → 65,536 + 16 × 4,096 = 131,072 bytes."""
    if max_tokens is None:
        return STREAM_BYTES_UNKNOWN
    return EVENT_BYTES_FIXED + EVENT_BYTES_PER_TOKEN * max(int(max_tokens), 1)


def text_chars_max(max_tokens: int | None) -> int | None:
    """Characters of streamed text ``max_tokens`` tokens can carry (:data:`TEXT_CHARS_PER_TOKEN` each); None when
    ``max_tokens`` is not known.  Example: 16 tokens → 16,384 characters."""
    return None if max_tokens is None else TEXT_CHARS_PER_TOKEN * max(int(max_tokens), 1)


def _asked(max_tokens: int | None) -> str:
    return f"a {max_tokens}-token request" if max_tokens is not None else "a request of unknown length"


def stream_too_long(max_tokens: int | None) -> StreamTooLong:
    """The error of a stream past :func:`stream_bytes_max`, e.g. "stream exceeded 1310720 bytes for a 16-token
    request (the server sent more than any answer of that length holds; its bytes were dropped)"."""
    return StreamTooLong(f"stream exceeded {stream_bytes_max(max_tokens)} bytes for {_asked(max_tokens)} (the server "
                         "sent more than any answer of that length holds; its bytes were dropped)")


def event_too_long(size: int, max_tokens: int | None) -> str:
    """The error of one event past :func:`event_bytes_max`, naming its size and the bound."""
    return (f"stream event of {size} bytes exceeded {event_bytes_max(max_tokens)} bytes for {_asked(max_tokens)} "
            "(more than any event of that request holds)")


def text_too_long(chars: int, max_tokens: int | None) -> str:
    """The error of streamed text past :func:`text_chars_max`, naming its length and the bound."""
    return (f"streamed text of {chars} characters exceeded {text_chars_max(max_tokens)} for {_asked(max_tokens)} "
            f"(at most {TEXT_CHARS_PER_TOKEN} a token; not tokenized)")
