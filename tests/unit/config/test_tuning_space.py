"""The tuning space of a config (``workloads:`` shapes and ``variants:`` server settings): validation with one-line
errors naming the field, the variants' mapping onto the vLLM command line, the digest, and the tuning configs."""

from __future__ import annotations

import pytest

from pipeline.config.sweepconfig import load_config, parse_config
from pipeline.config.variants import run_variants, shape_config, simulated_statement, variant_config, vllm_flags
from pipeline.core.errors import BatchmarkError
from tests.conftest import REPO

BASE = {"name": "t", "hardware": "cpu", "backend": "vllm", "concurrency": [1, 2, 4],
        "models": [{"name": "m", "path": "org/m"}]}


def _cfg(**extra):
    return parse_config({**BASE, **extra}, "c.yaml")


def test_shapes_and_variants_default_to_the_one_shape_and_default():
    cfg = _cfg(input_len=64, output_len=32)
    assert [(s.input_len, s.output_len) for s in cfg.shapes()] == [(64, 32)]
    assert [v.name for v in cfg.variant_list()] == ["default"]
    assert run_variants(cfg) == [{"name": "default", "baseline": True, "settings": {}}]


@pytest.mark.parametrize("extra, field", [
    ({"input_len": 64, "workloads": [{"input_len": 64, "output_len": 32}]}, "input_len"),
    ({"output_len": 8, "workloads": [{"input_len": 64, "output_len": 32}]}, "output_len"),
    ({"workloads": [{"input_len": 64, "output_len": 32}, {"input_len": 64, "output_len": 32}]}, "workloads"),
    ({"workloads": [{"input_len": 64, "output_len": 1}]}, "workloads.0.output_len"),
    ({"variants": [{"name": "a"}, {"name": "a"}]}, "variants"),
    ({"variants": [{"name": "no spaces"}]}, "variants.0.name"),
    ({"variants": [{"name": "a", "kv_cache_dtype": "fp4"}]}, "variants.0.kv_cache_dtype"),
    ({"variants": [{"name": "a", "max_num_seqs": 0}]}, "variants.0.max_num_seqs"),
    ({"variants": [{"name": "a", "gpu_memory_utilization": 1.5}]}, "variants.0.gpu_memory_utilization"),
    ({"variants": [{"name": "a", "turbo": True}]}, "variants.0.turbo"),
    ({"variants": [{"name": "a"}, {"name": "b"}], "adaptive": {"frontier_points": -1}, "concurrency": [1, 2, 4]},
     "adaptive.frontier_points"),
])
def test_a_bad_tuning_space_is_one_line_naming_the_field(extra, field):
    with pytest.raises(BatchmarkError) as exc:
        _cfg(**extra)
    msg = str(exc.value)
    assert "\n" not in msg and field in msg, msg


def test_a_variant_overrides_the_engine_options_on_the_command_line():
    """Each setting becomes vLLM's flag of the same name (docs.vllm.ai, engine arguments); --max-num-seqs and
    --gpu-memory-utilization through the command template's placeholders, the rest appended after extra_args."""
    from pipeline.backends.vllm import VLLMBackend

    cfg = _cfg(input_len=64, output_len=32, vllm={"extra_args": ["--foo"], "env": {"A": "1"}},
               variants=[{"name": "base"}, {"name": "tuned", "max_num_seqs": 8, "gpu_memory_utilization": 0.5,
                                            "kv_cache_dtype": "fp8", "max_num_batched_tokens": 2048,
                                            "block_size": 32, "enforce_eager": True, "args": ["--bar"],
                                            "env": {"B": "2"}}])
    base, tuned = cfg.variant_list()
    spec = cfg.models[0]
    words = VLLMBackend(variant_config(cfg, tuned)).command_for(spec, 8000)
    assert words[words.index("--max-num-seqs") + 1] == "8"
    assert words[words.index("--gpu-memory-utilization") + 1] == "0.5"
    assert words[-9:] == ["--foo", "--kv-cache-dtype", "fp8", "--max-num-batched-tokens", "2048", "--block-size", "32",
                          "--enforce-eager", "--bar"]
    assert variant_config(cfg, tuned).vllm.env == {"A": "1", "B": "2"}
    plain = VLLMBackend(variant_config(cfg, base)).command_for(spec, 8000)
    assert plain == VLLMBackend(cfg).command_for(spec, 8000)  # the baseline setting nothing: the config's own command
    assert vllm_flags(base) == [] and tuned.settings()["max_num_seqs"] == 8 and "name" not in tuned.settings()
    # the simulated server states what it models of a variant and predicts the rest at the baseline
    said = simulated_statement(tuned)
    assert set(said["modelled"]) == {"max_num_seqs", "gpu_memory_utilization", "kv_cache_dtype",
                                     "max_num_batched_tokens", "block_size"}
    assert said["not_modelled"] == ["args", "enforce_eager", "env"]


def test_shapes_share_one_server_sized_for_the_longest():
    """--max-model-len of a variant's server covers every shape it serves: the longest prompt + output + 64."""
    cfg = _cfg(workloads=[{"input_len": 64, "output_len": 32}, {"input_len": 1000, "output_len": 40}])
    v = variant_config(cfg, cfg.variant_list()[0])
    assert v.vllm.max_model_len == v.simulated.max_model_len == 1000 + 40 + 64
    at = shape_config(v, cfg.shapes()[1])
    assert (at.input_len, at.output_len) == (1000, 40) and (cfg.input_len, cfg.output_len) == (64, 32)


@pytest.mark.parametrize("extra, field", [
    ({"variants": [{"name": "a", "workloads": [{"input_len": 64, "output_len": 16}] * 2}]}, "variants[0].workloads"),
    ({"backend": "openai", "models": [{"name": "m", "served_name": "m"}], "openai": {"requests_per_point": 4},
      "variants": [{"name": "a"}, {"name": "b", "concurrency": [16]}]}, "variants[1].concurrency"),
    ({"vllm": {"requests_per_point": 4}, "variants": [{"name": "a", "concurrency": [2, 8]}]},
     "variants[0].concurrency"),
    ({"variants": [{"name": "base"}, {"name": "default", "kv_cache_dtype": "fp8"}]}, "variants[1].name"),
    ({"adaptive": {}, "variants": [{"name": "a"}, {"name": "b", "concurrency": [2, 8]}]}, "variants[1].concurrency"),
])
def test_a_variants_own_grid_and_shapes_get_the_configs_checks(extra, field):
    """Fault kind: a check the config's grid and shapes pass through skipped for a variant's own (the same shape
    twice accepted; c = 16 "measured" from 4 requests, as the config's grid reaching 16 is refused), and a name
    that stores a variant's card as the baseline's (``default`` after the first: its FP8 KV card lost)."""
    with pytest.raises(BatchmarkError) as exc:
        _cfg(**extra)
    msg = str(exc.value)
    assert "\n" not in msg and field in msg, msg


def test_a_variants_own_shapes_size_its_server():
    """Fault kind: a server sized for the config's shapes serving a variant's own (4096/16 beside 64/16: every point
    failed "4112 tokens per request exceed max_model_len 144"); worked: 4096 + 16 + 64 = 4176, the config's
    variant 64 + 16 + 64 = 144."""
    cfg = _cfg(workloads=[{"input_len": 64, "output_len": 16}],
               variants=[{"name": "a"}, {"name": "long", "workloads": [{"input_len": 4096, "output_len": 16}]}])
    base, long = (variant_config(cfg, v) for v in cfg.variant_list())
    assert base.vllm.max_model_len == base.simulated.max_model_len == 144
    assert long.vllm.max_model_len == long.simulated.max_model_len == 4176
    one = _cfg(input_len=64, output_len=16,
               variants=[{"name": "a"}, {"name": "long", "workloads": [{"input_len": 4096, "output_len": 16}]}])
    assert variant_config(one, one.variant_list()[1]).vllm.max_model_len == 4176


def test_the_digest_holds_the_tuning_space_and_leaves_other_configs_alone():
    one = _cfg(input_len=64, output_len=32)
    assert _cfg(input_len=64, output_len=32, variants=[{"name": "default"}]).digest() != one.digest()
    assert _cfg(workloads=[{"input_len": 64, "output_len": 32}]).digest() != one.digest()
    assert _cfg(variants=[{"name": "a"}, {"name": "b", "max_num_seqs": 2}]).digest() != \
        _cfg(variants=[{"name": "a"}, {"name": "b", "max_num_seqs": 4}]).digest()
    # a config without them hashes as it did before they existed (its runs resume): the value main computed
    assert load_config(REPO / "config" / "spark.yaml").digest() == "35d4acd622a5"


def test_the_tuning_configs_load_and_the_cpu_one_plans():
    spark = load_config(REPO / "config" / "spark-tuning.yaml")
    assert [v.name for v in spark.variant_list()] == ["defaults", "max-num-seqs-256", "fp8-kv"]
    assert [(s.input_len, s.output_len) for s in spark.shapes()] == [(1024, 256), (8192, 256), (32768, 256)]
    twin = load_config(REPO / "config" / "spark-tuning-simulated.yaml")
    assert twin.backend == "simulated" and len(twin.shapes()) == 3 and len(twin.variant_list()) == 3
    from pipeline.plan.estimate import make_plan

    cpu = load_config(REPO / "config" / "vllm-cpu-tuning.yaml")
    assert [v.max_num_seqs for v in cpu.variant_list()] == [64, 8] and len(cpu.shapes()) == 2
    plan = make_plan(cpu)
    assert [(m.variant, m.input_len) for m in plan.models] == [
        ("max-num-seqs-64", 64), ("max-num-seqs-64", 256), ("max-num-seqs-8", 64), ("max-num-seqs-8", 256)]
    assert all(len(m.points) == 6 for m in plan.models)  # stop_after_weak_doublings 0: every point of the grid
    # one server start per variant; the second shape shares it
    assert [bool(m.server_start_s) for m in plan.models] == [True, False, True, False]
    # the cap queues requests above it: c = 32 under --max-num-seqs 8 waits longer for its first token
    ttft = {(m.variant, m.input_len): m.points[-1].ttft_s for m in plan.models}
    assert ttft[("max-num-seqs-8", 64)] > ttft[("max-num-seqs-64", 64)]
