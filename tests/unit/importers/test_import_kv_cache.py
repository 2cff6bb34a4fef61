"""``batchmark import --kv-cache``: a run served with an FP8 (or Q8_0, Q4_0) KV cache is counted in it, not in bf16.

Fault kind: a served format the import could not state.  ``--quant`` stated the weights only, so an FP8-KV run was
counted in bf16 KV and could be called impossible.  Hand arithmetic (tests/unit/importers/test_cardmatch_quant.py's
Llama-3.1-8B): bf16 weights read a step 15,009,849,344 bytes; KV 2 × 32 × 8 × 128 × element bytes a token at the
mean decode context 1024 + 64 / 2 = 1056 tokens: bf16 138,412,032 bytes, fp8 69,206,016.
"""

from __future__ import annotations

import pytest

from pipeline.cli import main
from pipeline.importers import ImportOptions, import_run
from pipeline.views.show import show_run
from tests.conftest import DATA

JSONL = DATA / "llama-batched-bench" / "llama-3.1-8b-q4_0.jsonl"
WEIGHTS = 15_009_849_344


def test_kv_cache_flag_counts_the_kv_in_its_dtype(scratch_root):
    doc = show_run(import_run("llama-batched-bench", [JSONL], "dgx-spark", run_id="kv8",
                              options=ImportOptions(model="Llama-3.1-8B", quant="bf16", kv_cache="fp8")))
    m = doc["models"][0]
    assert m["kv_bytes_per_token"] == 65_536
    assert m["ceiling_tok_s"] == pytest.approx(273e9 / (WEIGHTS + 69_206_016))
    bf = show_run(import_run("llama-batched-bench", [JSONL], "dgx-spark", run_id="kv16",
                             options=ImportOptions(model="Llama-3.1-8B", quant="bf16")))
    assert bf["models"][0]["ceiling_tok_s"] == pytest.approx(273e9 / (WEIGHTS + 138_412_032))


def test_kv_cache_flag_on_the_command_line_and_its_one_line_error(scratch_root, capsys):
    assert main(["import", "llama-batched-bench", str(JSONL), "--hardware", "dgx-spark", "--run-id", "kvq",
                 "--model", "Llama-3.1-8B", "--kv-cache", "Q4_0"]) == 0
    assert show_run("kvq")["models"][0]["kv_bytes_per_token"] == 36_864  # 65,536 elements × 18 / 32 bytes
    assert main(["import", "llama-batched-bench", str(JSONL), "--hardware", "dgx-spark", "--run-id", "kvbad",
                 "--model", "Llama-3.1-8B", "--kv-cache", "fp3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("batchmark: error: --kv-cache: unknown dtype 'fp3' (known: ") and "\n" not in err
    assert not (scratch_root / "data" / "runs" / "kvbad").exists()
