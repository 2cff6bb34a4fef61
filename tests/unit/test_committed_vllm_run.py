"""The committed real-vLLM CPU run: what it must show, read from its own files.

Run 20261130T010035Z-vm was measured by the main job (`snakemake --cores all`, config/vllm-cpu.yaml)
on a fresh clone.  Expected, from the issue: every successful request has output_tokens equal to
max_tokens (32) and to the server's own usage; at the largest concurrency the output throughput is
more than 2x the c = 1 figure and the KV cache is in use (> 0); the server's distribution and
version are recorded.
"""

from __future__ import annotations

import pytest

from pipeline.store import pointfiles, runs
from pipeline.metrics.summarize import summarize_point
from tests.conftest import REPO

RUN = REPO / "data" / "runs" / "20261130T010035Z-vm"


@pytest.fixture(scope="module")
def points():
    if not RUN.is_dir():
        pytest.skip(f"{RUN} is not in this checkout")
    return pointfiles.load_points(RUN)


def test_token_counts_equal_max_tokens_and_usage(points):
    n = 0
    for p in points:
        for rep in p.repeats:
            for r in rep.requests:
                if r.ok and not r.warmup:
                    assert r.usage_reported and r.output_tokens == p.point.output_len == 32
                    n += 1
    assert n > 500  # every point of both models


def test_largest_concurrency_beats_single_stream_and_uses_the_kv_cache(points):
    for model in ("dense-llama-190m", "moe-qwen3-290m"):
        mine = {p.point.concurrency: summarize_point(p) for p in points if p.point.model == model}
        top = max(mine)
        assert mine[top].output_throughput_tok_s > 2 * mine[1].output_throughput_tok_s
        assert mine[top].server["kv_cache_usage_max"] > 0


def test_server_provenance():
    meta = runs.read_run_json(RUN)
    assert meta["server"]["server_env"]["distribution"] == "vllm-cpu" and meta["server"]["server_env"]["version"] == "0.32.0"
    for srv in meta["server"]["servers"].values():
        assert srv["command"].startswith(".venv-vllm/bin/python -m vllm.entrypoints.openai.api_server")
