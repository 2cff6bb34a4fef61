"""Imported runs take the weight format the file (or ``--quant``) states, never bf16 by default.

Regression (fault kind: wrong weight format): importing a llama-batched-bench JSONL of a ``q4_0`` Llama-3.1-8B
took bf16 weights for it and reported MBU 1.53 (single stream 27.6 tok/s against a bf16 ceiling of 18.0)
without a word.  The JSONL states no format; its file name does (``llama-3.1-8b-q4_0.jsonl``).

Hand arithmetic, Llama-3.1-8B (hidden 4096, 32 layers, FFN 14336, 8 KV heads of 128, vocab 128256, untied):
- matrices per layer: q, o 4096² each, k, v 4096 × 1024 each, MLP 3 × 4096 × 14336 = 218,103,808; × 32 layers =
  6,979,321,856; the output head 128256 × 4096 = 525,336,576 → 7,504,658,432 matrix weights read per step
  (the embedding is a row lookup, not read whole); small tensors (2 norms of 4096 per layer + the final
  one) 266,240 at 16 bits = 532,480 bytes;
- q4_0 at 4.5 bits: 7,504,658,432 × 4.5 / 8 + 532,480 = 4,221,902,848 bytes; bf16: × 2 + 532,480 =
  15,009,849,344 bytes;
- KV cache: 2 × 32 layers × 8 heads × 128 × 2 bytes = 131,072 bytes per token at the mean decode context
  1024 + 64 / 2 = 1056 tokens: 138,412,032 bytes;
- step time at c = 1: t_tg / tg = 2.318 / 64 s (the file's first row), on the DGX Spark's 273 GB/s.
"""

from __future__ import annotations

import pytest

from pipeline.cli import main
from pipeline.importers import ImportOptions, import_run
from pipeline.importers.cardmatch import quant_from_text
from pipeline.views.show import show_run
from tests.conftest import DATA

JSONL = DATA / "llama-batched-bench" / "llama-3.1-8b-q4_0.jsonl"
KV = 131_072 * 1056
STEP_S = 2.318 / 64


def test_jsonl_of_a_q4_0_model_takes_q4_0_bytes(scratch_root):
    doc = show_run(import_run("llama-batched-bench", [JSONL], "dgx-spark", run_id="q4",
                              options=ImportOptions(model="Llama-3.1-8B")))
    m = doc["models"][0]
    assert m["weight_bytes"] == 4_221_902_848 + 525_336_576 * 4.5 / 8  # + the embedding, stored but not read per step
    assert m["ceiling_tok_s"] == pytest.approx(273e9 / (4_221_902_848 + KV))  # 62.6 tok/s
    # MBU = bytes per step / step time / bandwidth = 4,360,314,880 / (2.318 / 64) / 273e9 = 0.4410
    assert doc["points"][0]["mbu"] == pytest.approx((4_221_902_848 + KV) / STEP_S / 273e9, rel=1e-9)
    assert doc["points"][0]["mbu"] == pytest.approx(0.4410, abs=1e-4)
    assert m["implausible"] is None


def test_quant_flag_overrides_and_bf16_reproduces_the_impossible_mbu(scratch_root):
    doc = show_run(import_run("llama-batched-bench", [JSONL], "dgx-spark", run_id="bf16",
                              options=ImportOptions(model="Llama-3.1-8B", quant="BF16")))
    # the numbers: ceiling 273e9 / (15,009,849,344 + KV) = 18.0 tok/s, MBU 1.53 at c = 1
    assert doc["models"][0]["ceiling_tok_s"] == pytest.approx(273e9 / (15_009_849_344 + KV))
    assert round(doc["models"][0]["ceiling_tok_s"], 1) == 18.0
    assert doc["points"][0]["mbu"] == pytest.approx((15_009_849_344 + KV) / STEP_S / 273e9, rel=1e-9)
    assert round(doc["points"][0]["mbu"], 2) == 1.53
    assert "above its bandwidth ceiling" in doc["models"][0]["implausible"]  # flagged, never shown as a result


def test_quant_flag_q4_k_m_on_the_command_line(scratch_root, capsys):
    assert main(["import", "llama-batched-bench", str(JSONL), "--hardware", "dgx-spark", "--run-id", "qk",
                 "--model", "Llama-3.1-8B", "--quant", "Q4_K_M"]) == 0
    doc = show_run("qk")
    # 4.9 bits per weight (llama.cpp's stated file average, pipeline.cards.weightformats.QUANT_BITS)
    dense = 7_504_658_432 * 4.9 / 8 + 532_480
    assert doc["models"][0]["ceiling_tok_s"] == pytest.approx(273e9 / (dense + KV))


def test_unknown_quant_is_a_one_line_error(scratch_root, capsys):
    assert main(["import", "llama-batched-bench", str(JSONL), "--hardware", "dgx-spark", "--run-id", "bad",
                 "--model", "Llama-3.1-8B", "--quant", "q3_zz"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("batchmark: error: --quant: unknown weight format 'q3_zz' (known: ") and "\n" not in err
    assert not (scratch_root / "data" / "runs" / "bad").exists()


def test_quant_named_in_llama_cpp_logs():
    assert quant_from_text("print_info: file type   = Q4_K - Medium") == "q4_k_m"
    assert quant_from_text("llama 8B Q8_0 | 7.95 GiB") == "q8_0"
    assert quant_from_text("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf") == "q4_k_m"
