"""A workload said in words (pipeline.config.workloadwords): what the model pages and ``show`` print per shape
(fault kind: a drawn, EOS-terminated, prefixed or bursty workload shown as if every request were the shape)."""

from __future__ import annotations

from pipeline.config.workloadwords import workload_words


def test_the_held_spark_rows_in_words():
    """config/spark-open-loop-eos.yaml's workload with a 256-token prefix: uniform on [⌊4000 × 0.1⌋, ⌈4000 × 1.9⌉]
    = [399, 7600] (0.1 is 0.0999… in binary: 399.99… floors to 399, as the draw and vLLM's np.floor do); outputs
    [⌊500 × 0.1⌋, ⌈950⌉] = [49, 950], stopping at EOS."""
    stored = {"input": {"distribution": "uniform", "range_ratio": 0.9},
              "output": {"distribution": "uniform", "range_ratio": 0.9}, "prefix_len": 256, "ignore_eos": False}
    assert workload_words(stored, 4000, 500, ["gamma"], 0.7) == (
        "prompts uniform 399–7,600 tokens around 4,000 (range ratio 0.9), outputs stop at EOS, each at most a draw "
        "uniform 49–950 tokens around 500 (range ratio 0.9), a shared prefix of 256 tokens, gamma arrivals with "
        "burstiness 0.7")


def test_fixed_normal_lognormal_and_unreadable():
    """Normal std 50 around 1000: clipped at ±4 std, 800–1,200; lognormal sigma 0.5, mean 100: its top
    exp(ln 100 − 0.125 + 2) = 100 × e^1.875 = 652.1 → 653; fixed outputs stopping at EOS say "up to"."""
    assert workload_words(None, 1024, 128, ["closed"]) == (
        "fixed lengths, prompts 1,024 tokens, outputs 128 tokens, a closed loop (a fixed number in flight)")
    assert workload_words({"input": {"distribution": "normal", "std": 50},
                           "output": {"distribution": "lognormal", "sigma": 0.5}}, 1000, 100) == (
        "prompts normal around 1,000 tokens (std 50, 800–1,200), outputs lognormal with mean 100 tokens "
        "(sigma 0.5, up to 653)")
    assert workload_words({"ignore_eos": False}, 64, 16, ["poisson"]) == (
        "fixed lengths, prompts 64 tokens, outputs stop at EOS up to 16 tokens, Poisson arrivals")
    assert workload_words({"input": "x"}, 64, 16) == "lengths not readable (run.json config.lengths)"


def test_a_prompt_file_with_a_prefix_and_eos_in_words():
    """Fault kind: a prompt file's page saying its outputs were the shape's nominal length (the file states each
    line's), or dropping the shared prefix sent before every prompt."""
    stored = {"prompt_file": "data/prompts/cpu-words.jsonl", "prefix_len": 128, "ignore_eos": False}
    assert workload_words(stored, 36, 32, ["closed"]) == (
        "prompts from data/prompts/cpu-words.jsonl (their own lengths), outputs stop at EOS, each at most its line's "
        "output length (else 32 tokens), a shared prefix of 128 tokens before each prompt, a closed loop (a fixed "
        "number in flight)")
