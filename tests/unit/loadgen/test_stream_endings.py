"""How a stream ends and what its events carry, the pure rules (each kind held in a public report).

- a finish ``abort`` (vLLM) or SGLang's ``{"type": "abort", "message": …}`` counted as a success: now a failure;
- a server error outside ``data:``: llama.cpp's ``error: {…}`` line, or an event of type ``error``, then
  ``[DONE]``, counted as a short success: now a failure quoting the message, scrubbed;
- reasoning as a list of content parts (Mistral's format, Magistral through LiteLLM) left out of the text, so out
  of the token times: now each part's text counts, thinking as reasoning.
"""

from __future__ import annotations

import pytest

from pipeline.loadgen import streamrecord
from pipeline.loadgen.deltatext import delta_text
from pipeline.loadgen.sse import error_field


def _folded(*reads: bytes) -> streamrecord.RawStream:
    raw = streamrecord.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0)
    raw.reads, raw.read_s = list(reads), [0.1 * (i + 1) for i in range(len(reads))]
    streamrecord.fold_reads(raw, ("sk-secret-key-0123456789",), 16)
    return raw


TOKEN = b'data: {"choices": [{"index": 0, "text": " t001", "finish_reason": null}]}\n\n'


@pytest.mark.parametrize("finish, said", [
    ('"abort"', 'server ended the request with finish_reason "abort"'),
    ('"error"', 'server ended the request with finish_reason "error"'),
    ('{"type": "abort", "message": "client disconnected"}',
     'server ended the request with finish_reason "abort": client disconnected'),
])
def test_a_failed_finish_is_a_failed_request(finish, said):
    """Fault kind: finish_reason "abort" (and vLLM's "error", SGLang's object) counted as a success."""
    raw = _folded(TOKEN, b'data: {"choices": [{"index": 0, "text": "", "finish_reason": ' + finish.encode()
                  + b'}]}\n\ndata: [DONE]\n\n')
    assert raw.error == said and raw.texts == [" t001"]
    assert raw.finish_reason == ("abort" if "abort" in finish else "error")


def test_finish_length_and_stop_stay_successes():
    raw = _folded(TOKEN, b'data: {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}\n\n'
                  b"data: [DONE]\n\n")
    assert raw.error is None and raw.finish_reason == "length"


def test_llama_cpp_error_line_outside_data_is_a_failure_scrubbed():
    """Fault kind: ``error: {…}`` (a field the SSE specification ignores) then ``[DONE]``: was 1 token, a success.
    The line is cut over two reads here, and its message names the client's key, which is redacted."""
    raw = _folded(TOKEN, b'error: {"code": 500, "message": "slot unavailable for sk-secret-',
                  b'key-0123456789", "type": "server_error"}\n\ndata: [DONE]\n\n')
    assert raw.error is not None and raw.error.startswith("server error event: slot unavailable for ")
    assert "sk-secret" not in raw.error and "[redacted]" in raw.error


def test_an_event_of_type_error_is_a_failure():
    """The same kind: ``event: error`` with its message in ``data``, then ``[DONE]``."""
    raw = _folded(TOKEN, b'event: error\ndata: {"error": {"message": "out of memory"}}\n\ndata: [DONE]\n\n')
    assert raw.error == "server error event: out of memory"


def test_error_inside_a_token_text_is_no_error_line():
    """A token whose text is "error: x" sits inside JSON (no raw line ending before it): not a server error."""
    reads = [b'data: {"choices": [{"index": 0, "text": "error: x"}]}\n\ndata: [DONE]\n\n']
    assert error_field(reads) is None
    assert _folded(*reads).error is None


def test_content_parts_thinking_then_text():
    """Mistral's content parts: a thinking part's text is reasoning, a text part's is visible (was: both "")."""
    thinking = {"delta": {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": " t001"}]}]}}
    text = {"delta": {"content": [{"type": "text", "text": " t002"}]}}
    both = {"delta": {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": " t003"}]},
                                  {"type": "text", "text": " t004"}]}}
    assert delta_text(thinking) == ("", " t001")
    assert delta_text(text) == (" t002", "")
    assert delta_text(both) == (" t004", " t003")


def test_content_parts_are_token_arrivals():
    """Two events of parts (thinking, then text): two chunks with text, the first one reasoning, so TTFT is at the
    first (0.1 s) and the first visible token at the second (0.2 s)."""
    raw = _folded(b'data: {"choices": [{"index": 0, "delta": {"content": [{"type": "thinking", "thinking": '
                  b'[{"type": "text", "text": " t001"}]}]}}]}\n\n',
                  b'data: {"choices": [{"index": 0, "delta": {"content": [{"type": "text", "text": " t002"}]}}]}\n\n'
                  b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}\n\ndata: [DONE]\n\n')
    assert raw.error is None
    assert raw.times == [0.1, 0.2] and raw.texts == [" t001", " t002"] and raw.visible == [False, True]
    assert raw.reasoning_seen
