"""The explainers' worked example is a setting (``data/explainers.yaml``), not a name in the code.

Regression (fault kind: a hard-coded model name): ``explain.py`` and four templates named "Llama-3.1-8B"; a lab
without that card, or one that wants its own model worked through, had to edit code.  These tests change the
setting in a scratch root and read what the explainers then compute.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.core.errors import BatchmarkError
from pipeline.machine.hardware import load_profile
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


def test_bandwidth_worked_example_names_the_model_its_numbers_come_from(scratch_root: Path, tmp_path: Path):
    """Regression (fault kind: a hard-coded model name): the bandwidth explainer's worked example from a published
    llama.cpp run picked and named "Qwen2.5-Coder-7B"; any other run's numbers were never worked.  Now it works the
    run's first dense model at its shortest prompt and names it as the run does.  An MoE model comes first here, and
    the dense one's 4096-token prompt before its 512-token one: neither is taken."""
    from pipeline.importers import import_run
    from pipeline.pages.render import render_site

    def rows(pp: int, t_tg: float) -> str:  # B = 1: 32 tokens in t_tg s
        return f"| {pp} | 32 | 1 | {pp + 32} | 0.100 | {pp / 0.1:.2f} | {t_tg:.3f} | {32 / t_tg:.2f} | 1.000 | 1.00 |\n"

    table = "| PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |\n|---|---|---|---|---|---|---|---|---|---|\n"
    src = tmp_path / "bench.md"
    src.write_text("## ggml-org/gpt-oss-20b-GGUF\n\ngpt-oss 20B MXFP4 MoE, 11.27 GiB, 20.91 B params\n\n" + table
                   + rows(512, 0.400) + "\n## acme/Meta-Llama-3.1-8B-Instruct-Q4_K_M-GGUF\n\n"
                   "llama 8B Q4_K_M (dense), 4.58 GiB, 8.03 B params\n\n" + table + rows(4096, 1.000) + rows(512, 0.800),
                   encoding="utf-8")
    runs_dir = scratch_root / "data" / "runs"
    import_run("llama-batched-bench", [src], "dgx-spark", run_id="bench")
    render_site(scratch_root / "data" / "pages", runs_dir=runs_dir)
    page = (scratch_root / "data" / "pages" / "explain" / "bandwidth.md").read_text(encoding="utf-8")
    # the DGX Spark's 273 GB/s over 4.58 GiB = 273e9 / (4.58 × 2^30) = 55.5 tokens/s; 32 tokens in 0.8 s = 40.00
    assert ("Worked from the published llama.cpp run: the file of acme/Meta-Llama-3.1-8B-Instruct-Q4&#95;K&#95;M-GGUF is\n"
            "4.58 GiB, taken as read per token:\n273 × 10⁹ ÷ (4.58 × 2³⁰) =\n55.5 tokens/s") in page
    assert "The measured 40.00 tokens/s" in page and page.count("Worked from the published") == 1
    assert "Qwen" not in page.split("Worked from the published")[1]
