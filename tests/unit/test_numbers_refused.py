"""Numbers that are not numbers are refused at the edge with one line (fault kinds: gate switched off, traceback,
negative sizes, silent replacement)."""

from __future__ import annotations

import json

import pytest

from pipeline.cli import main


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1"])
def test_diff_fail_above_not_a_finite_percentage_is_refused(value, capsys):
    """Regression (fault kind: CI gate silently off): ``--fail-above nan`` exited 0 on a regression."""
    assert main(["diff", "run-a", "run-b", f"--fail-above={value}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"batchmark: error: --fail-above {float(value):g}: must be a finite")


def _config(tmp_path, **over):
    cfg = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072}
    cfg.update(over)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("field, value, message", [
    ("num_attention_heads", 0, "num_attention_heads: Input should be greater than or equal to 1 (got 0)"),
    ("num_hidden_layers", -32, "num_hidden_layers: Input should be greater than or equal to 1 (got -32)"),
    ("num_key_value_heads", 0, "num_key_value_heads: Input should be greater than or equal to 1 (got 0)"),
    ("hidden_size", "4096", "hidden_size: Input should be a valid integer (got '4096')"),
    ("num_hidden_layers", True, "num_hidden_layers: Input should be a valid integer (got True)"),
])
def test_capacity_refuses_impossible_card_numbers(tmp_path, scratch_root, capsys, field, value, message):
    """Regression (fault kinds: ZeroDivisionError traceback for 0 heads; negative KV sizes for negative layers;
    num_key_value_heads 0 silently replaced by the head count)."""
    path = _config(tmp_path, **{field: value})
    assert main(["capacity", "--hardware", "dgx-spark", "--model", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"batchmark: error: {path}: {message}"]


def test_card_file_fields_are_validated(scratch_root, capsys):
    """A card file in data/models/ with a zero head count names the card file and the field."""
    card = scratch_root / "data" / "models" / "broken.yaml"
    card.write_text("name: Broken-1B\nsource: test\nconfig:\n  model_type: llama\n  hidden_size: 64\n"
                    "  intermediate_size: 128\n  num_hidden_layers: 2\n  num_attention_heads: 0\n  vocab_size: 100\n")
    assert main(["capacity", "--hardware", "dgx-spark", "--model", "Broken-1B"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"batchmark: error: {card}: config: num_attention_heads: Input should be greater than or equal to 1 (got 0)"]


def test_valid_card_still_gives_the_hand_computed_kv(tmp_path, scratch_root, capsys):
    """Llama-3.1-8B numbers: KV per token = 2 × 32 layers × 8 KV heads × 128 head dim × 2 bytes = 131072."""
    path = _config(tmp_path)
    assert main(["capacity", "--hardware", "dgx-spark", "--model", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_bytes_per_token"] == 131072
