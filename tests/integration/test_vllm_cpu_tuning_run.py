"""The committed real-vLLM tuning run (``config/vllm-cpu-tuning.yaml``: vLLM's CPU build, one model under
``--max-num-seqs 64`` and ``--max-num-seqs 8``, two prompt lengths): what the smaller cap does, read from what the
server itself reported while each point ran (its ``/metrics``, scraped per repeat), and what its page says of it.

Worked by hand: with ``--max-num-seqs 8`` vLLM's scheduler runs at most 8 sequences in a step and keeps the rest in
its waiting queue (vLLM V1 ``Scheduler.schedule``: ``len(self.running) == self.max_num_running_reqs`` stops
admission), so at c = 16 and 32 the server's highest running count is 8 and requests wait; a waiting request's TTFT
includes the generation of a request ahead of it (32 tokens here), so its TTFT p50 exceeds the uncapped server's at
the same concurrency, which runs every request of the point in its batch (running up to c, nothing waiting).
"""

from __future__ import annotations

import json

import pytest

from pipeline.analysis.regime import point_regime
from tests.conftest import REPO, committed_runs

CAP, BASELINE = "max-num-seqs-8", "max-num-seqs-64"


@pytest.fixture(scope="module")
def run_dir():
    found = [r for r in committed_runs()
             if json.loads((REPO / "data" / "runs" / r / "run.json").read_text()).get("config_name") == "vllm-cpu-tuning"]
    assert len(found) == 1, f"one committed run of config/vllm-cpu-tuning.yaml expected, found {found}"
    return REPO / "data" / "runs" / found[0]


@pytest.fixture(scope="module")
def points(run_dir):
    doc = json.loads((run_dir / "summaries.json").read_text())
    return {(p["variant"], p["input_len"], p["concurrency"]): p for p in doc["points"] if p["load"] == "closed"}


def test_it_is_a_measured_vllm_run_of_two_variants_and_two_shapes(run_dir, points):
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["source"] == "measured" and meta["status"] == "complete"
    assert [v["name"] for v in meta["variants"]] == [BASELINE, CAP] and meta["variants"][0]["baseline"]
    assert {(v, i) for v, i, _ in points} == {(v, i) for v in (BASELINE, CAP) for i in (64, 256)}


@pytest.mark.parametrize("input_len", [64, 256])
def test_the_capped_server_queues_past_its_cap_and_the_baseline_does_not(points, input_len):
    for c in (16, 32):
        capped, base = points[(CAP, input_len, c)]["server"], points[(BASELINE, input_len, c)]["server"]
        assert capped["requests_running_max"] <= 8 and capped["requests_waiting_max"] >= 1, (c, capped)
        assert point_regime(c, capped, None, "vllm") == "queueing"  # read from /metrics alone, not from the flag
        assert base["requests_running_max"] > 8, (c, base)  # the uncapped server batches past 8
    for c in (1, 2, 4, 8):  # at or below the cap neither server queues
        for v in (BASELINE, CAP):
            s = points[(v, input_len, c)]["server"]
            assert s["requests_running_max"] <= c and point_regime(c, s, None, "vllm") != "queueing", (v, c, s)


@pytest.mark.parametrize("input_len", [64, 256])
def test_a_queued_request_waits_for_its_first_token(points, input_len):
    for c in (16, 32):
        capped, base = points[(CAP, input_len, c)], points[(BASELINE, input_len, c)]
        assert capped["ttft_s"]["p50"] > base["ttft_s"]["p50"], c


def test_its_page_shows_the_frontier_and_what_the_cap_bought(run_dir):
    from pipeline.analysis.stages import load_run
    from pipeline.pages.tuning import tuning_section
    from pipeline.pages.views import view_of

    section = tuning_section(view_of(load_run(run_dir)), "dense-llama-190m")
    assert section is not None and section["variants"] == [BASELINE, CAP]
    assert {(f["input_len"], f["output_len"]) for f in section["frontiers"]} == {(64, 32), (256, 32)}
    assert all(f["chart"] for f in section["frontiers"])
    assert [b["variant"] for b in section["bought"]] == [CAP] and section["bought"][0]["lines"]
    ran_out = {(r["variant"], r["input_len"]): r for r in section["kv_rows"]}
    for i in (64, 256):  # where it ran out of room, measured: the capped server from c = 16 on, the other never
        assert (ran_out[(CAP, i)]["measured_concurrency"], ran_out[(CAP, i)]["measured_regime"]) == (16, "queueing")
        assert ran_out[(BASELINE, i)]["measured_concurrency"] is None, ran_out[(BASELINE, i)]
