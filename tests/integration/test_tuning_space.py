"""The tuning space in one run: config/spark-tuning-simulated.yaml (gpt-oss-120b × 3 variants × 3 shapes × 3
concurrencies on the simulated DGX Spark) through sweep → write-summaries → analyze → show → plan.

The simulated server is a prediction; what is checked here is that the sweep walks every cell, stores each variant's
points apart, applies each variant's settings to its server (the cap of max_num_seqs, the KV bytes of an FP8 cache,
worked by hand below) and that the plan prices the same cells the sweep ran.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, make_scratch_root

pytestmark = pytest.mark.slow

CONFIG = "config/spark-tuning-simulated.yaml"
VARIANTS = ("defaults", "max-num-seqs-8", "fp8-kv")
SHAPES = ((1024, 16), (8192, 16), (32768, 16))
GRID = (1, 4, 16)


def _run(root, *args, timeout=600):
    res = subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=root, capture_output=True, text=True,
                         timeout=timeout, env={**os.environ, "BATCHMARK_ROOT": str(root), "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    return res.stdout


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = make_scratch_root(tmp_path_factory.mktemp("tuning"))
    _run(root, "sweep", "--config", CONFIG, "--run-id", "tune", "--no-progress")
    _run(root, "write-summaries", "tune")
    _run(root, "analyze", "tune")
    doc = json.loads(_run(root, "show", "tune", "--json"))
    return root, root / "data" / "runs" / "tune", doc


def test_every_cell_is_measured_and_each_variant_apart(run):
    root, run_dir, doc = run
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete" and meta["source"] == "simulated"
    assert [v["name"] for v in meta["variants"]] == list(VARIANTS) and meta["variants"][0]["baseline"]
    # what the simulated server models of each variant is stated in the run (the pages can show it)
    assert "max_num_seqs" in meta["variants"][1]["simulated"]["modelled"]
    assert "kv_cache_dtype" in meta["variants"][2]["simulated"]["modelled"]
    keys = {(p["variant"], p["input_len"], p["output_len"], p["concurrency"]) for p in doc["points"]}
    assert keys == {(v, i, o, c) for v in VARIANTS for i, o in SHAPES for c in GRID}  # 27 cells, none twice
    assert len(doc["points"]) == 27 and len(doc["models"]) == 9  # one analysed workload per variant × shape
    assert len(list((run_dir / "points" / "gpt-oss-120b").glob("*.json"))) == 27
    text = _run(root, "show", "tune")
    assert "variant" in text.splitlines()[3] and "max-num-seqs-8" in text


def _point(doc, variant, input_len, c):
    return next(p for p in doc["points"] if (p["variant"], p["input_len"], p["concurrency"]) == (variant, input_len, c))


def test_the_max_num_seqs_variant_caps_the_batch(run):
    """vLLM's scheduler runs at most --max-num-seqs requests (vllm/v1/core/sched/scheduler.py): at c = 16 under a cap
    of 8 the server runs 8 and queues the rest, so its decode steps are smaller (TPOT lower) than the baseline's 16."""
    _, _, doc = run
    for input_len, _ in SHAPES:
        for c in GRID:
            assert _point(doc, "max-num-seqs-8", input_len, c)["server"]["requests_running_max"] <= 8
    capped, base = _point(doc, "max-num-seqs-8", 1024, 16), _point(doc, "defaults", 1024, 16)
    assert base["server"]["requests_running_max"] == 16 and capped["server"]["requests_waiting_max"] >= 8
    assert capped["tpot_s"]["p50"] < base["tpot_s"]["p50"]
    # below the cap nothing changes: the same server, the same seeds, the same figures
    assert _point(doc, "max-num-seqs-8", 1024, 4)["output_throughput_tok_s"] == \
        _point(doc, "defaults", 1024, 4)["output_throughput_tok_s"]


def test_the_fp8_variant_holds_twice_the_kv_cache(run):
    """KV bytes per token = 2 (K, V) × layers × KV heads × head_dim × element bytes (docs/definitions.md): gpt-oss-120b
    (config.json: 36 layers, 8 KV heads, head_dim 64) in bf16 = 2 × 36 × 8 × 64 × 2 = 73,728 B; in fp8 (1 byte) 36,864 B.
    The cache is what --gpu-memory-utilization leaves after the weights: ⌊(128 GB × 0.85 − weights) / (KV bytes × 16)⌋
    blocks of 16 tokens (data/hardware/dgx-spark.yaml), so the fp8 cache holds twice the tokens (to one block)."""
    _, run_dir, doc = run
    base_card = json.loads((run_dir / "models" / "gpt-oss-120b.json").read_text())
    fp8_card = json.loads((run_dir / "models" / "gpt-oss-120b%2Ffp8-kv.json").read_text())
    assert base_card["kv_bytes_per_token"] == 2 * 36 * 8 * 64 * 2 == 73_728
    assert fp8_card["kv_bytes_per_token"] == 2 * 36 * 8 * 64 * 1 == 36_864
    assert fp8_card["weight_bytes"] == base_card["weight_bytes"]  # the KV dtype changes no weight
    servers = json.loads((run_dir / "run.json").read_text())["server"]["servers"]
    blocks = {v: servers[f"gpt-oss-120b/{v}"]["limits"]["num_gpu_blocks"] for v in VARIANTS}
    free = 128e9 * 0.85 - base_card["weight_bytes"]
    assert blocks["defaults"] == math.floor(free / (73_728 * 16))
    assert blocks["fp8-kv"] == math.floor(free / (36_864 * 16))
    assert abs(blocks["fp8-kv"] - 2 * blocks["defaults"]) <= 1
    # the same load fills half as much of it; each step reads half the KV bytes, so TPOT is lower
    for input_len, _ in SHAPES:
        fp8, base = _point(doc, "fp8-kv", input_len, 16), _point(doc, "defaults", input_len, 16)
        assert fp8["server"]["kv_cache_usage_max"] == pytest.approx(base["server"]["kv_cache_usage_max"] / 2, rel=0.01)
        assert fp8["tpot_s"]["p50"] < base["tpot_s"]["p50"]


def test_the_plan_prices_the_cells_the_sweep_ran(run):
    """`batchmark plan` of the same config: its wall time within 15 % of the simulated run's own.  The run's wall
    time is its virtual seconds (each point's ``meta.virtual_s``, every repeat one after another) plus what the plan
    adds beside the requests and the run has no clock for (pipeline/plan/estimate.py's docstring): a second of
    scrapes per repeat, each variant's server start and weight load, the probes before and after."""
    from pipeline.plan.estimate import PROBE_S, REPEAT_OVERHEAD_S

    root, run_dir, _ = run
    plan = json.loads(_run(root, "plan", CONFIG, "--json"))
    cells = {(m["variant"], m["input_len"], m["output_len"]) for m in plan["models"]}
    assert cells == {(v, i, o) for v in VARIANTS for i, o in SHAPES}
    assert sum(len(m["points"]) for m in plan["models"]) == 27
    points = [json.loads(p.read_text()) for p in (run_dir / "points" / "gpt-oss-120b").glob("*.json")]
    starts = sum(m["server_start_s"] for m in plan["models"])
    assert sum(1 for m in plan["models"] if m["server_start_s"]) == 3  # one server per variant, the shapes share it
    measured = (sum(p["meta"]["virtual_s"] + len(p["repeats"]) * REPEAT_OVERHEAD_S for p in points)
                + starts + 2 * PROBE_S)
    assert plan["wall_s"] == pytest.approx(measured, rel=0.15)


def test_parts_of_model_x_variant_merge_into_the_same_run(run, tmp_path):
    """The workflow measures a tuning config in one part per model × variant (each its own server); merged, the run
    holds the cells the one-job sweep measured, with the same figures (the same seeds, the same servers: --max-num-seqs
    defaults to the grid's top, 16 in both)."""
    import yaml

    _, _, whole = run
    root = make_scratch_root(tmp_path)
    cfg = yaml.safe_load((REPO / CONFIG).read_text())
    cfg.update(name="tuning-parts", workloads=cfg["workloads"][:1], concurrency=[1, 16])
    (root / "config" / "parts.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    for v in VARIANTS:
        _run(root, "sweep", "--config", "config/parts.yaml", "--run-id", "p", "--model", f"gpt-oss-120b/{v}",
             "--no-progress")
    _run(root, "merge", "--config", "config/parts.yaml", "--run-id", "p")
    merged = json.loads(_run(root, "show", "p", "--json"))
    got = {(p["variant"], p["concurrency"]): p["output_throughput_tok_s"] for p in merged["points"]}
    assert got == {(p["variant"], p["concurrency"]): p["output_throughput_tok_s"] for p in whole["points"]
                   if p["input_len"] == 1024 and p["concurrency"] in (1, 16)}
    meta = json.loads((root / "data" / "runs" / "p" / "run.json").read_text())
    assert [p["model"] for p in meta["parts"]] == [f"gpt-oss-120b/{v}" for v in VARIANTS]
    assert [v["name"] for v in meta["variants"]] == list(VARIANTS)


def test_diff_pairs_two_variants_of_one_run_by_shape_and_concurrency(run):
    """`batchmark diff RUN --variants A B`: variant A's point against B's of the same shape and concurrency.  Below the
    cap the two servers are the same (same seeds: no change); at c = 16 under --max-num-seqs 8 half the requests
    wait, so the output throughput drops (the figures the show test above reads)."""
    root, _, doc = run
    d = json.loads(_run(root, "diff", "tune", "--variants", "defaults", "max-num-seqs-8", "--json"))
    tput = {(c["input_len"], c["concurrency"]): c for c in d["changes"] if c["metric"] == "output_throughput_tok_s"}
    assert set(tput) == {(i, c) for i, _ in SHAPES for c in GRID} and d["only_in_a"] == d["only_in_b"] == []
    assert tput[(1024, 4)]["change"] == 0.0
    base, capped = _point(doc, "defaults", 1024, 16), _point(doc, "max-num-seqs-8", 1024, 16)
    assert tput[(1024, 16)]["a"] == base["output_throughput_tok_s"] and tput[(1024, 16)]["b"] == capped["output_throughput_tok_s"]
    assert tput[(1024, 16)]["change"] < 0
    for bad in (["--variants", "defaults", "nope"], ["--variants", "fp8-kv", "fp8-kv"]):
        res = subprocess.run([sys.executable, "-m", "pipeline", "diff", "tune", *bad], cwd=root, capture_output=True,
                             text=True, env={**os.environ, "BATCHMARK_ROOT": str(root), "PYTHONPATH": str(REPO)})
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--variants" in res.stderr, res.stderr
