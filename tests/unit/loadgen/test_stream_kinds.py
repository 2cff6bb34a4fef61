"""Streams and servers, the pure rules: a token split over two events, the served prompt count's tolerance.

Values worked by hand from the rules in :mod:`pipeline.loadgen.tokencount` (the module docstring).
"""

import pytest

from pipeline.loadgen.tokencount import Evidence, decide, input_mismatch, token_end_counts
from tests.integration.served_helpers import build_tokenizer


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return build_tokenizer(tmp_path_factory.mktemp("tok"))


def test_split_token_agreeing_usage_and_text_beat_the_chunk_count(tok):
    """4 tokens " t001 t002 t003 t004" sent as 8 events (" t0", "01", …): usage 4, the text 4 words, max_tokens 4.
    Before: "impossible token count: 8 chunks with text for max_tokens 4".  Each token counts where its text ends."""
    texts = [x for i in range(1, 5) for x in (" t0", f"{i:02d}")]
    d = decide(Evidence(texts=texts, per_chunk=[None] * 8, usage=4, max_tokens=4, fixed_length=True), tok)
    assert d.error is None and d.output_tokens == 4 and d.source == "usage" and d.flags == []
    assert d.counts == [0, 1, 0, 1, 0, 1, 0, 1]
    assert token_end_counts(texts, tok) == [0, 1, 0, 1, 0, 1, 0, 1]


def test_split_token_without_agreement_still_fails(tok):
    """Usage 3 against 4 tokenised words: the evidence disagrees, so 8 chunks with text for max_tokens 4 stays impossible."""
    texts = [x for i in range(1, 5) for x in (" t0", f"{i:02d}")]
    d = decide(Evidence(texts=texts, per_chunk=[None] * 8, usage=3, max_tokens=4), tok)
    assert d.error == "impossible token count: 8 chunks with text for max_tokens 4"


def test_input_mismatch_tolerance_by_hand():
    # expected 8: flagged above 1.5 × 8 + 4 = 16 or when 1.5 × served + 4 < 8 (served < 2.67)
    assert not input_mismatch(16, 8) and input_mismatch(17, 8) and input_mismatch(40, 8)
    assert not input_mismatch(3, 8) and input_mismatch(2, 8)
    # a chat template of 30 tokens: 8 built → 38 served is no mismatch; 5 × (8 + 30) is
    assert not input_mismatch(38, 8, 30) and input_mismatch(190, 8, 30)
    assert not input_mismatch(None, 8)
