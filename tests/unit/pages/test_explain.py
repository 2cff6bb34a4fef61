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


def _pages_of_the_cards() -> dict[str, str]:
    """The explainer and capacity pages rendered from the model cards and the dgx-spark profile alone (no run), each
    page's text with its line breaks folded to spaces."""
    from pipeline.pages.render import make_env

    ctx = explain.explain_context([], load_profile("dgx-spark").model_dump(mode="json"), "Llama-3.1-8B")
    env = make_env(Path(__file__).resolve().parents[3] / "templates")
    names = [f"explain/{n}.md.j2" for n in explain.EXPLAINERS] + ["capacity.md.j2"]
    return {n.removesuffix(".md.j2"): " ".join(env.get_template(n).render(chart=lambda spec: "", **ctx).split())
            for n in names}


def test_sizing_and_capacity_count_what_vllm_serves_on_a_spark():
    """gpt-oss-120b as vLLM's DGX Spark recipe serves it (MXFP4 throughout, fp8 KV: pipeline/cards/servedformat.py
    DEFAULTS), worked by hand in tests/unit/analysis/test_capacity.py: 62,144,198,784 B of weights (the checkpoint
    65,248,815,744), 36,864 B of KV a token, 153,354,240 B a sequence at 8k, (108.8e9 − 62,144,198,784) / 153,354,240
    = 304.2 -> 304 sequences (141 in the checkpoint's format with a bf16 KV cache)."""
    pages = _pages_of_the_cards()
    sizing, capacity = pages["explain/sizing"], pages["capacity"]
    assert ("weights 62.14 GB (the checkpoint, bf16+experts:mxfp4, holds 65.25 GB: its attention, embeddings and LM "
            "head in bf16), KV 36.9 kB per token in fp8 (bf16 would be 73.7)") in sizing
    assert "108.8 GB − 62.14 GB = 46.66 GB free, ÷ 153,354,240 bytes = **304 sequences**, against 141 in the" in sizing
    assert "| gpt-oss-120b | moe | mxfp4,kv:fp8 | fp8 | served by vLLM here¹ | 62.14 GB | yes | 304 |" in sizing
    assert "| gpt-oss-120b | moe | bf16+experts:mxfp4 | bf16 | checkpoint | 65.25 GB | yes | 141 |" in sizing
    assert "¹ vLLM's DGX Spark recipe for gpt-oss" in sizing and "kubis.ai" in sizing
    # the worked example (Llama-3.1-8B, served as its checkpoint) says so; its 86 sequences do not move
    assert "Llama-3.1-8B in bf16 (the checkpoint's format, as the card file states it) at 8k context, KV cache in bf16" in sizing
    assert "**86 sequences**" in sizing
    # the capacity page: the served format with its source and the checkpoint's weights beside it;
    # 8k: 153,354,240 B = 0.15 GB a sequence, 304 sequences
    assert ("MoE, mxfp4,kv:fp8 (vLLM's DGX Spark recipe for gpt-oss" in capacity
            and "weights 62.14 GB (the checkpoint, bf16+experts:mxfp4: 65.25 GB), KV 36.9 kB per token in fp8" in capacity)
    assert "| 8192 | 0.15 GB | 304 |" in capacity
    # the KV cache page: gpt-oss's KV in fp8, 36.9 kB a token, 0.15 GB a sequence at 8k
    assert "| gpt-oss-120b | fp8 | 36 (18 over 128 tokens) | 8 × 64 | 36.9 kB | 0.15 GB |" in pages["explain/kv-cache"]


def test_knee_and_batching_cost_the_step_as_plan_does():
    """The crossovers of tests/unit/pages/test_explaincharts.py (vLLM's fitted terms at the measured 92.3 TFLOP/s:
    Llama-3.1-8B 424, served gpt-oss-120b 117; the roofline at 92.3: 339; the checkpoint at the spec 125: 458, 2,859),
    each column saying where it comes from."""
    pages = _pages_of_the_cards()
    knee, batching = pages["explain/knee"], pages["explain/batching"]
    assert ("| model | served weights | B where compute binds: plan (vLLM's fitted terms) | roofline at 92.3 TFLOP/s "
            "(measured) | roofline of the checkpoint at the spec sheet's 125 TFLOP/s |") in knee
    assert "| Llama-3.1-8B | bf16 | 424 | 339 | 458 (bf16) |" in knee
    assert "| gpt-oss-120b | mxfp4,kv:fp8 | 117 | 2,037 | 2,859 (bf16+experts:mxfp4) |" in knee
    assert "huggingface/kernels pull request 283" in knee and "kubis.ai" in knee  # the measured peak, the fitted terms
    assert "(fitted to a dense model's curves" in knee  # dense_compute_fraction: Granite-4.1-8B's TPOTs
    assert "a prior where no dense" not in knee
    assert "were measured at 92.3 TFLOP/s in BF16" in batching and "the spec sheet's figure is 125" in batching
    assert "for gpt-oss-120b from B = 117 as the plan costs it, B = 2,859 by the spec roofline" in batching
    assert "plus 3.84 ms per step" in batching  # engines.vllm.step_overhead_s


def test_moe_says_which_routing_each_number_is():
    """Coverage per routing (gpt-oss-120b, k/E = 4/128, B = 32): uniform 1 − (124/128)^32 = 63.8 %; the fitted prior
    s = 7.84, B_eff = 1 + 31 / (1 + 31/7.84) = 7.26, 1 − (124/128)^7.26 = 20.6 %; identical prompts 4/128 = 3.1 %.  gpt-oss-20b
    served (MXFP4 throughout): 651,170,688 + 10,165,616,640 × 4/32 = 1,921,872,768 B at B = 1 (1.92 GB), and
    651,170,688 + 10,165,616,640 × (1 − (28/32)^32) = 10.68 GB at B = 32 under uniform routing."""
    moe = _pages_of_the_cards()["explain/moe"]
    assert "| gpt-oss-120b | 4 of 128 | uniform (upper bound) | 3.1 % | 6.2 % | 22.4 % | 63.8 % |" in moe
    assert "| gpt-oss-120b | 4 of 128 | fitted prior (vLLM), s = 7.84 | 3.1 % | 5.8 % | 13.9 % | 20.6 % |" in moe
    assert "| gpt-oss-120b | 4 of 128 | identical prompts (k/E) | 3.1 % | 3.1 % | 3.1 % | 3.1 % |" in moe
    assert "as vLLM serves it on dgx-spark (mxfp4,kv:fp8: vLLM's DGX Spark recipe" in moe
    assert "reads 1.92 GB of weights per step at B = 1 and, under uniform routing, 10.68 GB at B = 32" in moe


def test_bandwidth_predicts_gpt_oss_120b_single_stream_as_plan_does():
    """gpt-oss-120b served on a Spark (MXFP4 throughout) at B = 1, context 0, under vLLM's terms: reads
    (842,834,304 + 60,993,699,840 × 4/128) / (0.799 × 273e9) = 12.602 ms, + 3.84 ms per step, + matmuls
    7.169e9 / (0.139 × 92.3e12) + 3.097e9 / (1.0 × 92.3e12) = 0.592 ms: 17.035 ms, 58.7 tokens/s (the published
    single stream: 57.5, kubis.ai)."""
    bandwidth = _pages_of_the_cards()["explain/bandwidth"]
    assert "one stream of it reaches a predicted **58.7 tokens/s** at context 0" in bandwidth
    assert "Worked example, dgx-spark at 273 GB/s (the spec sheet)" in bandwidth
