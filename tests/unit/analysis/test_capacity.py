"""KV capacity and the "which models fit" table, checked by hand."""

from __future__ import annotations

import json

import pytest

from pipeline.analysis.capacity import DEFAULT_CONTEXTS, capacity_table, fit_table, kv_capacity
from pipeline.cli import main
from pipeline.core.errors import BatchmarkError
from pipeline.machine.hardware import load_profile
from pipeline.cards.registry import load_card


@pytest.fixture
def spark():
    return load_profile("dgx-spark").model_dump(mode="json")


def test_llama_3_1_8b_bf16_at_8k_on_dgx_spark(spark):
    card = load_card("Llama-3.1-8B")
    table = capacity_table(card, spark)
    row = next(r for r in table["contexts"] if r["context"] == 8192)
    # KV per token = 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 131072 B = 128 KiB
    assert table["kv_bytes_per_token"] == 32 * 8 * 128 * 2 * 2 == 128 * 1024
    # one 8k sequence: 128 KiB x 8192 = 1 GiB
    assert row["kv_bytes_per_sequence"] == 2**30
    # usable: min(128 GB x gpu_memory_utilization 0.85, 128 GB - reserve 8 GB) = min(108.8, 120) = 108.8 GB
    # (data/hardware/dgx-spark.yaml; the reserve alone gave 120 GB and 96 sequences, vLLM gets ~86);
    # 108.8e9 - weights 8,030,261,248 x 2 B = 92,739,477,504 B free
    free = 128e9 * 0.85 - 8_030_261_248 * 2
    assert row["free_bytes"] == pytest.approx(free) == pytest.approx(92_739_477_504)
    # 92,739,477,504 / 1,073,741,824 = 86.37 -> 86 sequences, 0.40 GB left
    assert row["max_sequences"] == 86
    assert row["memory_left_bytes"] == pytest.approx(free - 86 * 2**30)
    assert [r["context"] for r in table["contexts"]] == list(DEFAULT_CONTEXTS)
    # 92,739,477,504 / (131,072 B x 4096, x 32768, x 131072) = 172.7, 21.6, 5.4
    assert [r["max_sequences"] for r in table["contexts"]] == [172, 86, 21, 5]


def test_sliding_window_layers_raise_capacity(spark):
    card = load_card("gpt-oss-120b")
    r = kv_capacity(card, 128, 8, 131072)
    per_layer = 2 * 8 * 64 * 2
    assert r["kv_bytes_per_sequence"] == per_layer * (18 * 131072 + 18 * 128)
    assert r["within_max_context"] is True
    no_window = card.kv_bytes_per_token * 131072
    assert r["kv_bytes_per_sequence"] < 0.51 * no_window


def test_context_beyond_the_model_is_flagged(spark):
    table = capacity_table(load_card("Qwen2.5-7B"), spark)
    assert table["contexts"][-1]["within_max_context"] is False  # 131072 > 32768


def test_fit_table_covers_every_card(spark):
    rows = fit_table(spark)
    models = {r["model"] for r in rows}
    assert {"gpt-oss-120b", "Llama-3.1-70B", "Qwen3-30B-A3B", "Mixtral-8x7B"} <= models
    bf16_70b = next(r for r in rows if r["model"] == "Llama-3.1-70B" and r["quantization"] == "bf16")
    assert not bf16_70b["fits"]  # 141 GB of weights > 128 GB
    fp8_70b = next(r for r in rows if r["model"] == "Llama-3.1-70B" and r["quantization"] == "fp8")
    assert fp8_70b["fits"] and fp8_70b["max_sequences"]["8192"] > 0


def test_gpt_oss_120b_as_vllm_serves_it_on_a_spark(spark):
    """The Sizing page's served row: gpt-oss-120b as vLLM's DGX Spark recipe loads it (pipeline/cards/servedformat.py
    DEFAULTS: --mxfp4-layers moe,qkv,o,lm_head --kv-cache-dtype fp8) beside its checkpoint (bf16 + MXFP4 experts)."""
    rows = {r["basis"]: r for r in fit_table(spark, contexts=(8192,), engine="vllm") if r["model"] == "gpt-oss-120b"}
    served, ck = rows["served"], rows["checkpoint"]
    assert (served["quantization"], served["kv_cache"], ck["kv_cache"]) == ("mxfp4,kv:fp8", "fp8", "bf16")
    assert "kubis.ai" in served["source"]
    # weights in MXFP4 (4.25 bits): embedding and head 2 × 579,133,440 × 4.25 / 8 = 615,329,280; the layers'
    # 955,514,880 matrix params × 4.25 / 8 + 13,776,192 small × 2 = 535,169,664; experts 114,661,785,600 × 4.25 / 8
    # + 39,813,120 × 2 = 60,993,699,840: 62,144,198,784 B in all (the checkpoint's bf16 non-experts: 65,248,815,744)
    assert served["weight_bytes"] == 615_329_280 + 535_169_664 + 60_993_699_840 == 62_144_198_784
    assert ck["weight_bytes"] == 65_248_815_744
    # KV per token in fp8: 2 (K, V) × 36 layers × 8 heads × 64 × 1 byte = 36,864 B (bf16: 73,728); at 8k,
    # 18 full layers × 8192 + 18 sliding × 128 tokens: 1024 × 18 × 8320 = 153,354,240 B a sequence (bf16: 306,708,480)
    assert (served["kv_bytes_per_token"], ck["kv_bytes_per_token"]) == (36_864, 73_728)
    # (108.8e9 − 62,144,198,784) / 153,354,240 = 304.2 -> 304; (108.8e9 − 65,248,815,744) / 306,708,480 = 142.0 -> 141
    # (141.99: 142 × 306,708,480 = 43,552,604,160 > the 43,551,184,256 free)
    assert (served["max_sequences"]["8192"], ck["max_sequences"]["8192"]) == (304, 141)
    # without an engine the table is the checkpoint and the quantisations only, as before
    assert {r["basis"] for r in fit_table(spark, contexts=(8192,)) if r["model"] == "gpt-oss-120b"} == {"checkpoint"}


def test_no_memory_figure_is_an_error():
    with pytest.raises(BatchmarkError, match="no memory_gb"):
        capacity_table(load_card("Llama-3.1-8B"), {"name": "cpu", "memory_gb": None})
    with pytest.raises(BatchmarkError, match="context"):
        kv_capacity(load_card("Llama-3.1-8B"), 128, 8, 0)


def test_cli_capacity_json(capsys):
    assert main(["capacity", "--hardware", "dgx-spark", "--model", "meta-llama/Llama-3.1-8B-Instruct",
                 "--context", "8192", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["contexts"][0]["max_sequences"] == 86  # test_llama_3_1_8b_bf16_at_8k_on_dgx_spark: 92.74e9 / 2**30
    assert main(["capacity", "--hardware", "dgx-spark", "--model", "no-such-model"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no-such-model" in err


def test_cli_capacity_served_counts_what_the_engine_loads(capsys):
    """``capacity --served vllm`` on a Spark sizes gpt-oss-120b as vLLM's recipe loads it (MXFP4 throughout, fp8 KV):
    the Sizing page's served row (test_gpt_oss_120b_as_vllm_serves_it_on_a_spark above): 62.14 GB of weights, 36.9 kB of KV per
    token, (108.8e9 − 62,144,198,784) / 153,354,240 = 304 sequences at 8k, and names the recipe; a model with no
    known default keeps the checkpoint's format and says so; --quant beside --served is one line."""
    assert main(["capacity", "--hardware", "dgx-spark", "--model", "gpt-oss-120b", "--served", "vllm",
                 "--context", "8192"]) == 0
    out = capsys.readouterr().out
    assert "weights 62.14 GB, KV 36.9 kB/token" in out and "format: as vllm serves it on dgx-spark" in out
    assert "--mxfp4-layers moe,qkv,o,lm_head" in out
    assert next(line for line in out.splitlines() if line.split()[:1] == ["8192"]).split()[2] == "304"
    assert main(["capacity", "--hardware", "dgx-spark", "--model", "gpt-oss-120b", "--context", "8192"]) == 0
    out = capsys.readouterr().out
    assert next(line for line in out.splitlines() if line.split()[:1] == ["8192"]).split()[2] == "141"
    assert "format:" not in out
    assert main(["capacity", "--hardware", "dgx-spark", "--model", "Llama-3.1-8B", "--served", "vllm", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format_source"].startswith("no default format is known for vllm on dgx-spark")
    assert doc["kv_bytes_per_token"] == 32 * 8 * 128 * 2 * 2  # unchanged: bf16, as the card
    assert main(["capacity", "--hardware", "dgx-spark", "--model", "gpt-oss-120b", "--served", "vllm",
                 "--quant", "fp8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--quant and --served" in err


def test_model_that_does_not_fit_says_so_without_negative_memory(spark, capsys):
    """Regression (fault kind: negative memory left): Llama-3.1-70B in BF16 on dgx-spark printed 0 sequences and
    -21.11 GB left. Expected values: data/models/ weights 70,553,706,496 x 2 B = 141.1 GB; data/hardware/dgx-spark.yaml
    min(128 GB x 0.85, 128 GB - 8 GB reserve) = 108.8 GB usable."""
    table = capacity_table(load_card("Llama-3.1-70B"), spark, [8192])
    row = table["contexts"][0]
    assert not table["weights_fit"] and not row["weights_fit"]
    assert row["max_sequences"] == 0 and row["memory_left_bytes"] is None
    assert main(["capacity", "--hardware", "dgx-spark", "--model", "llama-3.1-70b", "--context", "8192"]) == 0
    out = capsys.readouterr().out
    assert "does not fit: weights 141.1 GB > 108.8 GB usable" in out
    assert "-21.11" not in out and not any(tok.startswith("-") and tok[1:2].isdigit() for tok in out.split())
    row_line = next(line for line in out.splitlines() if line.split()[:1] == ["8192"])
    assert row_line.split()[2:] == ["0", "–"]


def test_context_beyond_the_model_shows_no_memory_left(capsys):
    """Regression: a context beyond the model's max (Qwen2.5-7B: 32768 in data/models/) printed a memory-left figure."""
    assert main(["capacity", "--hardware", "dgx-spark", "--model", "Qwen2.5-7B", "--context", "131072"]) == 0
    row_line = next(line for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["131072"])
    assert row_line.split()[2:4] == ["–", "–"] and "beyond the model's max context 32768" in row_line


def test_capacity_on_the_cpu_profile_uses_this_machines_memory(monkeypatch, capsys):
    """Regression (fault kind: refused where a figure is at hand): ``capacity --hardware cpu`` failed with
    "profile has no memory_gb". It now sizes by this machine's memory (psutil), and says so. With 32 GB (32e9 bytes)
    and no reserve: Llama-3.1-8B BF16 weights 16,060,522,496 B, 15,939,477,504 B free; an 8k sequence holds
    131,072 B x 8192 = 1,073,741,824 B, so 15,939,477,504 / 1,073,741,824 = 14.8 -> 14 sequences."""
    import collections

    import psutil

    monkeypatch.setattr(psutil, "virtual_memory", lambda: collections.namedtuple("vm", "total")(32_000_000_000))
    assert main(["capacity", "--hardware", "cpu", "--model", "Llama-3.1-8B", "--context", "8192"]) == 0
    out = capsys.readouterr().out
    assert "memory: this machine's total memory (32.0 GB, psutil); the profile states none" in out
    row_line = next(line for line in out.splitlines() if line.split()[:1] == ["8192"])
    assert row_line.split()[1:3] == ["1.07", "14"]
    assert main(["capacity", "--hardware", "cpu", "--model", "Llama-3.1-8B", "--context", "8192", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["hardware"]["memory_gb"] == 32.0 and doc["hardware"]["memory_source"].startswith("this machine's")
    assert doc["contexts"][0]["max_sequences"] == 14


def test_one_unit_system_in_cli_and_json(capsys):
    """Regression (fault kind: mixed units): the CLI said "128 GB usable, 8 GB reserve" while the JSON said
    120e9 usable bytes, and KV was in GiB beside weights in GB. Now GB = 10^9 bytes everywhere, stated:
    128 GB x 0.85 = 108.8 GB usable = JSON usable_bytes 108.8e9; KV per 8k sequence 1,073,741,824 B = 1.07 GB."""
    assert main(["capacity", "--hardware", "dgx-spark", "--model", "Llama-3.1-8B", "--context", "8192"]) == 0
    out = capsys.readouterr().out
    assert ("memory 128.0 GB × gpu_memory_utilization 0.85 = 108.8 GB usable (below memory − reserve 8.0 GB = 120.0 GB)"
            in out and "KV 131.1 kB/token" in out)
    assert "units: GB = 10^9 bytes, kB = 10^3 bytes" in out and "GiB" not in out and "KiB" not in out
    assert next(line for line in out.splitlines() if line.split()[:1] == ["8192"]).split()[1] == "1.07"
    assert main(["capacity", "--hardware", "dgx-spark", "--model", "Llama-3.1-8B", "--context", "8192", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["units"].startswith("GB = 10^9 bytes")
    assert doc["usable_bytes"] == doc["hardware"]["usable_gb"] * 1e9 == pytest.approx(108.8e9)


def test_capacity_knows_the_default_configs_own_models():
    """Regression (fault kind: a command that does not know the default sweep's models): `batchmark capacity --model
    dense-llama-190m` said "no card".  The card is counted from config/vllm-cpu.yaml's architecture: 8 layers of
    hidden 1024 / intermediate 4096, 32,000 × 1024 embeddings untied, about 0.19 G parameters; 2 bytes each in
    bfloat16 = 0.37 GB, 4 in float32 = 0.75 GB (the dtype the default config serves on this CPU)."""
    import contextlib
    import io
    import json as _json

    from pipeline import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["capacity", "--model", "dense-llama-190m", "--hardware", "h200", "--quant", "bf16", "--json"]) == 0
    table = _json.loads(out.getvalue())
    assert table["weight_bytes"] / 1e9 == pytest.approx(0.37, abs=0.01)
