"""A workload as a distribution (``lengths:``) and gamma arrivals (``open_loop.load: gamma``): vLLM's definitions,
the one draw, the digest of configs written before them, and the one-line refusals of bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.config.sweepconfig import load_config, parse_config
from pipeline.config.workload import LengthDist, Lengths, draw_lengths, longest
from pipeline.core.errors import BatchmarkError
from pipeline.config.arrivals import schedule_gaps
from tests.conftest import REPO

BASE = {"name": "w", "hardware": "cpu", "backend": "simulated", "models": [{"name": "m", "card": "gpt-oss-20b"}]}


def test_uniform_bounds_are_vllms_floor_and_ceil():
    """Fault kind: an off-by-one bound of the range (round or int() instead of vLLM's floor and ceil).

    vLLM's ``get_sampling_params``: low = floor(L(1 − r)), high = ceil(L(1 + r)), inclusive.  By hand, L = 1023,
    r = 0.5: 1023 × 0.5 = 511.5 → low 511 (round: 512), 1023 × 1.5 = 1534.5 → high 1535 (round: 1534); an output
    of L = 2 at r = 0.9: floor(0.2) = 0 → 1 (vLLM's floor of 1), ceil(3.8) = 4."""
    ins, outs = draw_lengths(Lengths(input=LengthDist(distribution="uniform", range_ratio=0.5),
                                     output=LengthDist(distribution="uniform", range_ratio=0.9)), 1023, 2, 20_000, 0)
    assert (int(ins.min()), int(ins.max())) == (511, 1535)
    assert (int(outs.min()), int(outs.max())) == (1, 4)


def test_draw_is_vllms_inputs_then_outputs_from_one_seeded_generator():
    """Fault kind: a draw the sweep, the plan and vLLM make differently (order, generator, seed).

    vLLM draws ``rng.integers(in_low, in_high + 1, n)`` then ``rng.integers(out_low, out_high + 1, n)`` from one
    ``numpy.random.default_rng(seed)``; random 4000/500 at range ratio 0.9 is [399, 7600] and [49, 950] in its
    floating point (1 − 0.9 = 0.09999999999999998, so floor(4000 × it) = 399 and floor(500 × it) = 49)."""
    lengths = Lengths(input=LengthDist(distribution="uniform", range_ratio=0.9),
                      output=LengthDist(distribution="uniform", range_ratio=0.9))
    ins, outs = draw_lengths(lengths, 4000, 500, 64, seed=7)
    rng = np.random.default_rng(7)
    assert ins.tolist() == rng.integers(399, 7601, size=64).tolist()
    assert outs.tolist() == rng.integers(49, 951, size=64).tolist()
    again = draw_lengths(lengths, 4000, 500, 64, seed=7)
    assert again[0].tolist() == ins.tolist() and again[1].tolist() == outs.tolist()  # reproducible
    assert longest(lengths, 4000, 500) == 7600 + 950


def test_normal_and_lognormal_keep_their_mean_and_clip_to_one_and_the_tail():
    """Fault kind: a named distribution off its stated mean (lognormal's μ = ln L − σ²/2) or a draw below 1 token.

    By hand: a lognormal of σ = 1 around L = 200 has mean exp(μ + σ²/2) = 200; its tail is clipped at
    exp(ln 200 − 0.5 + 4) = 200·e^3.5 = 6623.1 → 6624.  A normal of std 300 around 100 puts 37 % below 1 (clipped)."""
    logn = LengthDist(distribution="lognormal", sigma=1.0)
    x = logn.draw(np.random.default_rng(0), 200, 200_000)
    assert logn.high(200) == math.ceil(200 * math.exp(3.5)) == 6624
    assert x.min() >= 1 and x.max() <= 6624
    assert x.mean() == pytest.approx(200, rel=0.02)
    y = LengthDist(distribution="normal", std=300.0).draw(np.random.default_rng(0), 100, 100_000)
    assert y.min() == 1 and (y == 1).mean() == pytest.approx(0.37, abs=0.01)  # Φ((1 − 100) / 300) = 0.371


def test_lengths_fit_the_server():
    """Fault kind: a drawn request longer than the server's max_model_len (vLLM refuses it: a failed request).

    max_model_len 1000, prefix 100: inputs at most 899, each output at most 900 − its input."""
    lengths = Lengths(input=LengthDist(distribution="uniform", range_ratio=0.9),
                      output=LengthDist(distribution="uniform", range_ratio=0.9), prefix_len=100)
    ins, outs = draw_lengths(lengths, 800, 400, 5000, 0, max_model_len=1000)
    assert ins.max() == 899 and (100 + ins + outs).max() <= 1000 and outs.min() >= 1


def test_gamma_gaps_are_vllms_shape_and_scale():
    """Fault kind: burstiness read as the scale or the rate (vLLM: shape k, scale 1 / (rate · k)).

    Mean gap 1 / rate = 0.5 s at 2 req/s; coefficient of variation 1 / √k = 1 / √0.7 = 1.195; the gaps are
    ``default_rng(seed).gamma(0.7, 1 / (2 × 0.7))`` value for value."""
    gen = schedule_gaps("gamma", 2.0, 3, burstiness=0.7)
    gaps = np.array([next(gen) for _ in range(100_000)])
    assert gaps[:256].tolist() == np.random.default_rng(3).gamma(0.7, 1 / 1.4, 256).tolist()
    assert gaps.mean() == pytest.approx(0.5, rel=0.01)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(0.7), rel=0.02)


def test_configs_without_the_new_keys_keep_their_digest():
    """Fault kind: a new config key whose default moves the digest of every config written before it (their runs
    would no longer resume).  The digests of config/spark-simulated.yaml (an open loop) and config/vllm-cpu.yaml as
    the code before ``lengths:`` and ``burstiness:`` computed them."""
    assert load_config(REPO / "config" / "spark-simulated.yaml").digest() == "464e22976449"
    assert load_config(REPO / "config" / "vllm-cpu.yaml").digest() == "af177273dc82"
    fixed = parse_config({**BASE, "input_len": 1024})
    assert fixed.lengths is None and fixed.input_len == 1024  # today's spelling: fixed lengths
    drawn = parse_config({**BASE, "input_len": 1024, "lengths": {"input": {"distribution": "uniform",
                                                                           "range_ratio": 0.5}}})
    assert drawn.digest() != fixed.digest()


@pytest.mark.parametrize("extra,line", [
    ({"lengths": {"input": {"distribution": "uniform", "range_ratio": 1.0}}}, "lengths.input.range_ratio: Input should be less than 1"),
    ({"lengths": {"input": {"distribution": "uniform", "range_ratio": -0.1}}}, "lengths.input.range_ratio: Input should be greater than or equal to 0"),
    ({"lengths": {"output": {"distribution": "uniform"}}}, "lengths.output: range_ratio: the uniform distribution needs it"),
    ({"lengths": {"output": {"distribution": "normal", "std": 0}}}, "lengths.output.std: Input should be greater than 0"),
    ({"lengths": {"input": {"distribution": "lognormal", "sigma": -1}}}, "lengths.input.sigma: Input should be greater than 0"),
    ({"lengths": {"input": {"range_ratio": 0.5}}}, "range_ratio: not a parameter of the fixed distribution"),
    ({"lengths": {"prefix_len": -1}}, "lengths.prefix_len: Input should be greater than or equal to 0"),
    ({"concurrency": [], "open_loop": {"load": "gamma", "burstiness": 0, "rates": [1]}}, "open_loop.burstiness: Input should be greater than 0"),
    ({"concurrency": [], "open_loop": {"load": "gamma", "rates": [1]}}, "open_loop: burstiness: load gamma needs it"),
    ({"concurrency": [], "open_loop": {"load": "poisson", "burstiness": 0.7, "rates": [1]}}, "burstiness: only with load gamma"),
    ({"backend": "transformers", "models": [{"name": "m", "architecture": {"model_type": "llama"}}],
      "lengths": {"ignore_eos": False}}, "lengths: the transformers backend runs static batches; drawn lengths needs"),
])
def test_bad_workload_is_one_line_naming_the_field(extra, line):
    """Fault kind: bad workload input reaching the sweep (or a traceback) instead of one line naming the field."""
    with pytest.raises(BatchmarkError) as err:
        parse_config({**BASE, **extra})
    text = str(err.value)
    assert line in text and "\n" not in text


@pytest.mark.parametrize("extra,line", [
    # by hand: 448 + 64 = 512 fits 512; 449 + 64 = 513 does not
    ({"input_len": 449, "output_len": 64, "simulated": {"max_model_len": 512}},
     "simulated.max_model_len = 512: the shape's input_len 449 + output_len 64 = 513 tokens do not fit it"),
    ({"input_len": 400, "output_len": 64, "lengths": {"prefix_len": 100}, "simulated": {"max_model_len": 512}},
     "input_len 400 + output_len 64 + lengths.prefix_len 100 = 564 tokens do not fit it"),
    # gpt-oss-20b's card: max_position_embeddings 131072; the simulated server's default length 131000 + 10 + 64
    ({"input_len": 131_000, "output_len": 10},
     "models[0] (m): card gpt-oss-20b: max_position_embeddings = 131072 is below the longest request of shape "
     "131000/10 the lengths draw + 64, the server's default max_model_len (131074 tokens)"),
    # a uniform tail: ceil(256 × 1.9) = 487 + 32 + 64 = 583 > 512
    ({"backend": "vllm", "models": [{"name": "r", "architecture": {"model_type": "llama",
                                                                    "max_position_embeddings": 512}}],
      "input_len": 256, "output_len": 32, "lengths": {"input": {"distribution": "uniform", "range_ratio": 0.9}}},
     "models[0] (r): architecture.max_position_embeddings = 512 is below the longest request of shape 256/32"),
    ({"backend": "vllm", "models": [{"name": "r", "architecture": {"model_type": "llama",
                                                                    "max_position_embeddings": 512}}],
      "vllm": {"max_model_len": 1024}}, "is below vllm.max_model_len (1024 tokens)"),
])
def test_lengths_beyond_the_context_are_one_line_naming_the_field(extra, line):
    """Fault kind: a shape longer than the context stated (every request refused by the server, or vLLM refusing to
    start with a max_model_len past the model's positions) found only after the server started."""
    with pytest.raises(BatchmarkError) as err:
        parse_config({**BASE, **extra}, "c.yaml")
    text = str(err.value)
    assert text.startswith("c.yaml: ") and line in text and "\n" not in text, text


def test_lengths_within_the_context_pass():
    """The boundary cases of the test above that fit: 448 + 64 = 512 in 512; the uniform tail stated down to
    vllm.max_model_len 512 (its draws are clipped to it), 512 ≤ the architecture's 512."""
    parse_config({**BASE, "input_len": 448, "output_len": 64, "simulated": {"max_model_len": 512}})
    parse_config({**BASE, "backend": "vllm", "input_len": 256, "output_len": 32,
                  "models": [{"name": "r", "architecture": {"model_type": "llama", "max_position_embeddings": 512}}],
                  "lengths": {"input": {"distribution": "uniform", "range_ratio": 0.9}}, "vllm": {"max_model_len": 512}})
