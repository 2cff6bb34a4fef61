"""Which token count a request trusts (``pipeline/loadgen/tokencount.py``), divisions that must not raise, and the vocab cache.

Expected values are worked by hand from the chunk layouts written in each test (the
fault kinds of docs/definitions.md, "Which token count"); the word-level tokenizer of the served tests makes every `` tNNN`` one token.
"""

from __future__ import annotations

import gc
import random

import pytest

from pipeline.loadgen import loadgen, tokencount
from pipeline.loadgen.chunkcounts import per_chunk_layouts
from pipeline.loadgen.tokencount import Evidence, decide
from pipeline.metrics.summarize import summarize_point
from pipeline.metrics.definitions import tpot_s, tpot_streamed_s
from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord


def words(n: int, start: int = 1) -> list[str]:
    return [f" t{i:03d}" for i in range(start, start + n)]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from tests.integration.served_helpers import build_tokenizer

    return build_tokenizer(tmp_path_factory.mktemp("tok"))


def test_layouts_of_a_running_sum_of_running_totals():
    # true running totals 1..4 (one token per chunk) → running sums 1, 3, 6, 10
    lay = per_chunk_layouts([1, 3, 6, 10], words(4))
    assert lay["cumulative"] == [1, 2, 3, 4]  # 10 tokens: wrong
    assert lay["running_sum"] == [1, 1, 1, 1]  # 4 tokens: right
    assert lay["per_chunk"] == [1, 3, 6, 10]


@pytest.mark.parametrize("n", [16, 197])
def test_running_sum_decides_the_true_count(n, tok):
    """Fault kind: running sum of running totals; 197 tokens were once reported as 197·198/2 = 19,503."""
    running = [i * (i + 1) // 2 for i in range(1, n + 1)]
    assert running[-1] == n * (n + 1) // 2
    d = decide(Evidence(words(n) if n < 256 else [], running, running[-1], max_tokens=n, fixed_length=True), tok)
    assert d.output_tokens == n and d.counts == [1] * n and d.source == "per_chunk_usage"
    assert d.flags == ["usage_above_max_tokens"]


def test_running_sum_of_two_token_chunks_without_a_tokenizer():
    # chunks of 2 tokens: running totals 2, 4, 6 → running sums 2, 6, 12; max_tokens 6
    d = decide(Evidence([" a b", " c d", " e f"], [2, 6, 12], 12, max_tokens=6, fixed_length=True))
    assert (d.output_tokens, d.counts, d.source) == (6, [2, 2, 2], "per_chunk_usage")


def test_per_chunk_count_of_one_with_right_final_usage():
    """Fault kind: every chunk says completion_tokens = 1; the final usage (16) is right."""
    d = decide(Evidence(words(16), [1] * 16, 16, max_tokens=16, fixed_length=True))
    assert (d.output_tokens, d.counts, d.source, d.flags) == (16, [1] * 16, "usage", [])


def test_per_chunk_count_of_one_without_final_usage():
    # the last usage seen is the last chunk's 1: below the 16 chunks with text, so impossible
    d = decide(Evidence(words(16), [1] * 16, 1, max_tokens=16))
    assert (d.output_tokens, d.source) == (16, "per_chunk_usage")
    assert d.flags == ["usage_below_text_chunks"]


def test_usage_above_max_tokens_falls_back_to_text(tok):
    d = decide(Evidence(words(16), [None] * 16, 48, max_tokens=16, fixed_length=True), tok)
    assert (d.output_tokens, d.source, d.flags) == (16, "tokenized_text", ["usage_above_max_tokens"])


def test_usage_that_stops_rising(tok):
    per = [min(i, 8) for i in range(1, 17)]
    d = decide(Evidence(words(16), per, 8, max_tokens=16, fixed_length=True), tok)
    assert (d.output_tokens, d.source) == (16, "tokenized_text")
    assert "usage_stopped_rising" in d.flags and "per_chunk_usage_impossible" in d.flags


def test_missing_usage_is_flagged_only_where_the_server_reports_usage(tok):
    d = decide(Evidence(words(4), [None] * 4, None, max_tokens=4, usage_expected=True), tok)
    assert (d.output_tokens, d.source, d.flags) == (4, "tokenized_text", ["usage_missing"])
    d = decide(Evidence(words(4), [None] * 4, None, max_tokens=4), tok)
    assert (d.output_tokens, d.source, d.flags) == (4, "tokenized_text", [])


def test_usage_disagreeing_with_text_and_max_tokens(tok):
    # 8 chunks of 2 tokens, usage 9: text (16) and max_tokens (16) agree against the server
    texts = [a + b for a, b in zip(words(16)[::2], words(16)[1::2])]
    d = decide(Evidence(texts, [None] * 8, 9, max_tokens=16, fixed_length=True), tok)
    assert (d.output_tokens, d.counts, d.source) == (16, [2] * 8, "tokenized_text")
    assert d.flags == ["usage_disagrees_with_text"]
    # without a fixed length, 9 is possible and within 2x of the text: usage is kept
    d = decide(Evidence(texts, [None] * 8, 9, max_tokens=16), tok)
    assert (d.output_tokens, d.source) == (9, "usage")


def test_impossible_count_fails_the_request():
    """More chunks with text than max_tokens: no count is possible; the request fails."""
    d = decide(Evidence(words(20), [None] * 20, 20, max_tokens=16))
    assert d.error and "20 chunks with text for max_tokens 16" in d.error and d.flags == ["usage_above_max_tokens", "count_impossible"]


def test_hidden_reasoning_tokens_stay_out_of_the_chunks(tok):
    # usage 16 of which 8 reasoning never streamed; 8 visible chunks
    d = decide(Evidence(words(8), [None] * 8, 16, reasoning_tokens=8, max_tokens=16, fixed_length=True), tok)
    assert (d.output_tokens, d.hidden_tokens, d.counts, d.source) == (16, 8, [1] * 8, "usage")
    # streamed reasoning is not hidden
    d = decide(Evidence(words(16), [None] * 16, 16, reasoning_tokens=8, reasoning_streamed=True, max_tokens=16), tok)
    assert (d.output_tokens, d.hidden_tokens) == (16, 0)


def test_tpot_uses_streamed_tokens_and_never_divides_by_zero():
    # 8 visible chunks 10 ms apart after hidden reasoning: streamed TPOT = 70 ms / 7 = 10 ms; vLLM's TPOT
    # divides by all 16 output tokens: 70 ms / 15 (the two under their own names)
    chunks = [[0.1 + 0.01 * i, 1] for i in range(8)]
    r = RequestRecord(0, 0.0, 0.0, 0.1, 0.17, chunks, 8, 16, hidden_tokens=8)
    assert tpot_streamed_s(r) == pytest.approx(0.01)
    assert tpot_s(r) == pytest.approx(0.07 / 15)
    # every token in one chunk (span 0), a single token: no streamed TPOT, no ZeroDivisionError; vLLM's TPOT is 0
    # for the first (output_len > 1) and undefined for the second
    one = RequestRecord(1, 0.0, 0.0, 0.1, 0.1, [[0.1, 16]], 8, 16)
    assert tpot_streamed_s(one) is None and tpot_s(one) == 0.0
    single = RequestRecord(2, 0.0, 0.0, 0.1, 0.1, [[0.1, 1]], 8, 1)
    assert tpot_streamed_s(single) is None and tpot_s(single) is None
    summ = summarize_point(PointRecords(PointKey("m", "openai", 8, 16, 1),
                                        [RepeatRecord(0, "served", 0.0, 0.0, [one, single])]))
    assert summ.per_user_tok_s is None and summ.tpot_streamed_s is None and summ.tpot_s["p50"] == 0.0
    # vLLM's duration: sends at 0.0, last token at 0.1: 17 tokens / 0.1 s; the steady window (0 → 0) has none
    assert summ.output_throughput_tok_s == pytest.approx(170.0) and summ.steady_output_throughput_tok_s is None


def test_old_records_without_the_new_fields_still_load():
    old = {"point": {"model": "m", "engine": "openai", "input_len": 8, "output_len": 4, "concurrency": 1},
           "repeats": [{"repeat": 0, "batching": "served", "window_start_s": 0.0, "window_end_s": 1.0, "requests": [
               {"request_id": 0, "queued_s": 0.0, "sent_s": 0.0, "first_token_s": 0.1, "done_s": 0.4,
                "chunks": [[0.1, 1], [0.2, 1], [0.3, 1], [0.4, 1]], "input_tokens": 8, "output_tokens": 4,
                "usage_reported": True, "error": None, "warmup": False}]}]}
    rec = PointRecords.from_dict(old)
    r = rec.repeats[0].requests[0]
    assert r.token_count_source is None and r.token_count_flags == [] and r.hidden_tokens == 0
    summ = summarize_point(rec)
    assert summ.tpot_s["p50"] == pytest.approx(0.1) and summ.caveats == {} and summ.token_count_sources == {}


class _FakeTok:
    """Tokenizer-shaped object: ``len`` ids, each its own word."""

    all_special_ids: list[int] = []

    def __init__(self, n: int):
        self.n = n

    def __len__(self):
        return self.n

    def batch_decode(self, ids, **_kw):
        return [f"w{i[0]}" for i in ids]

    def convert_ids_to_tokens(self, ids):
        return [f"w{i}" for i in ids]

    def __call__(self, texts, **_kw):
        return {"input_ids": [[int(t[1:])] for t in texts]}


def test_prompt_vocab_is_cached_by_object_not_by_id():
    """Fault kind: ``id()`` reuse after a tokenizer is freed handed a new tokenizer the old vocabulary."""
    a = _FakeTok(10)
    assert loadgen.prompt_vocab(a) == list(range(10))
    old_id = id(a)
    del a
    gc.collect()
    keep = []
    for _ in range(200_000):  # CPython soon hands the freed object's address to a new object of that size
        b = _FakeTok(20)
        if id(b) == old_id:
            break
        keep.append(b)
    assert id(b) == old_id  # the id was reused: an id-keyed cache would now answer with 10 words
    assert loadgen.prompt_vocab(b) == list(range(20))


def test_fuzzed_events_give_an_error_or_a_possible_count(tok):
    """Seeded random corruptions of parsed SSE events through parse_event → finalize → metrics: never a traceback."""
    rng = random.Random(12)
    junk = [None, 5, "x", [], [1], {}, {"choices": "x"}, {"choices": [5]}, {"choices": [{"delta": 3}]},
            {"usage": "x"}, {"usage": {"completion_tokens": -1}}, {"usage": {"completion_tokens": 10 ** 12}},
            {"usage": {"completion_tokens": "9"}}, {"error": {"message": "boom"}}, {"choices": [{"text": None}]},
            {"choices": [{"delta": {"content": 7, "reasoning_content": ["x"]}}]},
            {"usage": {"completion_tokens": 3, "completion_tokens_details": {"reasoning_tokens": "x"}}}]
    for case in range(300):
        raw = loadgen.RawStream(case, False, 0.0, 0.0)
        n = rng.randrange(1, 12)
        events = [{"choices": [{"index": 0, "text": w}], "usage": {"completion_tokens": i + 1}}
                  for i, w in enumerate(words(n))]
        events.append({"choices": [], "usage": {"completion_tokens": n}})
        for _ in range(rng.randrange(1, 4)):
            op = rng.random()
            pos = rng.randrange(len(events) + 1)
            if op < 0.4:
                events.insert(pos, rng.choice(junk))
            elif op < 0.7 and events:
                del events[pos % len(events)]
            else:
                events = events[:pos]
        for i, ev in enumerate(events):
            loadgen.parse_event(raw, ev, 0.01 * (i + 1))
            if raw.error:
                break
        rec = loadgen.finalize(raw, 4, tok, max_tokens=n, features=loadgen.Features(usage_seen=True))
        assert rec.error is None or "\n" not in rec.error
        if rec.ok:
            assert 1 <= rec.output_tokens <= n
            assert sum(k for _, k in rec.chunks) == rec.streamed_tokens
        summarize_point(PointRecords(PointKey("m", "openai", 4, n, 1), [RepeatRecord(0, "served", 0.0, 1.0, [rec])]))
    assert set(tokencount.SOURCES) == {"usage", "per_chunk_usage", "tokenized_text", "chunk_count"}
