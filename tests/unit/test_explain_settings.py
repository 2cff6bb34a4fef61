"""The explainers' worked example is a setting (``data/explainers.yaml``), not a name in the code (issue 25).

Regression (fault kind: a hard-coded model name): ``explain.py`` and four templates named "Llama-3.1-8B"; a lab
without that card, or one that wants its own model worked through, had to edit code.  These tests change the
setting in a scratch root and read what the explainers then compute.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import BatchmarkError
from pipeline.hardware import load_profile
from pipeline.pages import explain


def test_the_worked_example_follows_the_setting(scratch_root: Path):
    (scratch_root / "data" / "explainers.yaml").write_text("worked_example_model: Qwen2.5-7B\n", encoding="utf-8")
    name = explain.worked_example_model()
    assert name == "Qwen2.5-7B"
    ctx = explain.explain_context([], load_profile("dgx-spark").model_dump(mode="json"), name)
    assert ctx["worked_model"] == "Qwen2.5-7B" and ctx["worked"]["model"] == "Qwen2.5-7B"
    # the bytes-growth chart's one dense line is the worked model's, beside the four MoE cards of data/models/
    drawn = {r["model"] for r in ctx["charts"]["bytes_growth"]["data"]["values"]}
    assert drawn == {"Qwen2.5-7B", "Mixtral-8x7B", "Qwen3-30B-A3B", "gpt-oss-20b", "gpt-oss-120b"}


def test_a_card_that_does_not_exist_leaves_the_worked_example_out(scratch_root: Path):
    ctx = explain.explain_context([], load_profile("dgx-spark").model_dump(mode="json"), "No-Such-Model")
    assert ctx["worked"] is None


@pytest.mark.parametrize("text", ["", "worked_example_model: 3\n", "worked_example_model: ''\n", "- a\n"])
def test_a_bad_settings_file_is_one_line_naming_it(scratch_root: Path, text: str):
    path = scratch_root / "data" / "explainers.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BatchmarkError, match="explainers.yaml"):
        explain.worked_example_model()


def test_a_missing_settings_file_is_named(scratch_root: Path):
    (scratch_root / "data" / "explainers.yaml").unlink()
    with pytest.raises(BatchmarkError, match="explainers.yaml"):
        explain.worked_example_model()
