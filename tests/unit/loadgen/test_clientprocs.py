"""The closed loop over several client processes: how slots and bodies are dealt, and how their meters merge."""

from __future__ import annotations

import pytest

from pipeline.loadgen.clientprocs import assign, merged_meter, split


def test_the_concurrency_is_split_as_evenly_as_it_goes():
    assert split(10, 4) == [3, 3, 2, 2]
    assert split(1024, 2) == [512, 512]
    assert split(3, 8) == [1, 1, 1]  # never more processes than requests in flight
    assert sum(split(1000, 7)) == 1000


def test_each_process_gets_its_slots_warm_up_and_measured_requests_in_turn():
    """c = 3 over two processes (slots 2 and 1), 3 warm-up bodies (0–2), 6 measured (3–8): warm-up 0, 1 | 2; the
    measured dealt two to the first process, one to the second, in turn: 3, 4, 6, 7 | 5, 8."""
    assert assign(3, 9, [2, 1]) == [[0, 1, 3, 4, 6, 7], [2, 5, 8]]
    assert assign(0, 4, [1, 1]) == [[0, 2], [1, 3]]  # no warm-up
    every = assign(64, 64 + 256, split(64, 3))
    assert sorted(i for ids in every for i in ids) == list(range(320))  # every body once


def test_merged_meter_pools_the_samples_and_keeps_the_busiest_core():
    """Two processes: in flight from both (a second process's request overlapping the first's: 2 in flight for
    half of a 2 s window, 1 for the rest → 1.5); CPU share the busier one's 0.97, not the mean 0.57 (one saturated
    core makes the point client-bound); lag and HTTP phase samples pooled."""
    a = ({"wall_s": 2.0, "cpu_s": 1.94, "cpu_share": 0.97, "lag_s": [0.001], "connect_s": [0.002],
          "first_byte_s": [0.01]}, [(0.0, 1), (2.0, -1)])
    b = ({"wall_s": 2.1, "cpu_s": 0.34, "cpu_share": 0.17, "lag_s": [0.003, 0.004], "connect_s": [],
          "first_byte_s": [0.02]}, [(1.0, 1), (2.0, -1)])
    m = merged_meter([a, b])
    assert m.achieved_concurrency(0.0, 2.0) == pytest.approx(1.5)
    assert m.result["cpu_share"] == 0.97 and m.result["wall_s"] == 2.1 and m.result["cpu_s"] == pytest.approx(2.28)
    assert m.result["lag_s"] == [0.001, 0.003, 0.004] and m.result["first_byte_s"] == [0.01, 0.02]
    assert m.result["processes"] == 2


def test_four_processes_each_waiting_4_ms_are_not_client_bound():
    """Regression (fault kind: a per-loop figure summed over loops).  Four client processes, each 1 s of wall time
    with lag samples 40 ms and 80 ms: each loop's read wait is (0.04² + 0.08²) / 2 / 1 s = 4 ms, under the 10 ms
    limit.  Pooled over the four loops against one wall time it read (4 × 0.008) / 2 / 1 = 16 ms: "client-bound"
    from four loops that each kept up.  The busiest process's wait is the point's: 4 ms, not client-bound."""
    from pipeline.metrics.clientside import block_read_wait_s, client_figures

    part = ({"wall_s": 1.0, "cpu_s": 0.3, "cpu_share": 0.3, "lag_s": [0.04, 0.08], "connect_s": [],
             "first_byte_s": []}, [(0.0, 1), (1.0, -1)])
    m = merged_meter([part] * 4)
    assert m.result["process_lag_counts"] == [2, 2, 2, 2] and m.result["process_wall_s"] == [1.0] * 4
    block = {**m.result, "achieved_concurrency": 4.0, "delivered_tokens": 100}
    assert block_read_wait_s(block) == pytest.approx(0.004)
    fig = client_figures([block], [(0.0, 1.0)])
    assert fig["client_read_wait_s"] == pytest.approx(0.004)
    assert fig["client_bound"] is False and fig["client_bound_reason"] is None
    # one loop that did wait 16 ms among three idle ones still makes the point client-bound: the busiest counts
    busy = ({"wall_s": 1.0, "cpu_s": 0.3, "cpu_share": 0.3, "lag_s": [0.08, 0.16], "connect_s": [],
             "first_byte_s": []}, [])
    idle = ({"wall_s": 1.0, "cpu_s": 0.1, "cpu_share": 0.1, "lag_s": [0.0, 0.0], "connect_s": [],
             "first_byte_s": []}, [])
    fig = client_figures([{**merged_meter([idle, busy, idle, idle]).result}], [(0.0, 1.0)])
    assert fig["client_read_wait_s"] == pytest.approx((0.08 ** 2 + 0.16 ** 2) / 2) and fig["client_bound"] is True


def test_a_point_states_the_processes_that_ran():
    """Regression (fault kind: a configured value stated as measured): ``client_processes: 8`` at c = 2 runs two
    processes (a process per slot at most), and the point's meta said 8."""
    from pipeline.loadgen.clientprocs import processes_used

    assert processes_used(2, 8) == 2 and processes_used(1, 8) == 1
    assert processes_used(64, 8) == 8 and processes_used(10, 4) == len(split(10, 4)) == 4
    assert processes_used(16, 1) == 1


def test_a_lost_process_fails_its_repeat_by_name():
    """Regression (fault kind: half a point stored as whole).  c = 3 over two processes (bodies as
    :func:`assign` deals them: 0, 1, 3, 4, 6, 7 | 2, 5, 8; warm-up 0–2); the second is killed: its records never
    come back.  Every measured request (3–8) is failed with the reason naming the process, the survivors' too (after
    the death they ran at c = 2, not 3), its lost ones (5, 8) added; the repeat is aborted with that reason."""
    from types import SimpleNamespace

    from pipeline.loadgen.clientprocs import _ended, lost_repeat
    from pipeline.loadgen.scheduler import LoopResult
    from pipeline.loadgen.streamrecord import RawStream

    why = _ended(SimpleNamespace(exitcode=-9, name="batchmark-client-1"))
    assert why == "client process batchmark-client-1 ended without its records (killed by signal SIGKILL)"
    assert _ended(SimpleNamespace(exitcode=1, name="batchmark-client-0")).endswith("(exit code 1)")
    alive = [RawStream(request_id=i, warmup=i < 3, queued_s=0.0, sent_s=0.0) for i in (0, 1, 3, 4, 6, 7)]
    res = lost_repeat(LoopResult(streams=alive, cooldown_sent=0, aborted=None), {1: why}, {1: [2, 5, 8]}, 3, 0.0)
    assert res.aborted == why
    assert [s.request_id for s in res.streams] == [0, 1, 3, 4, 5, 6, 7, 8]
    measured = [s for s in res.streams if not s.warmup]
    assert len(measured) == 6 and all(why in s.error for s in measured)
    assert [s.request_id for s in measured if s.error.startswith("lost: ")] == [5, 8]
    assert all(s.error is None for s in res.streams if s.warmup)
