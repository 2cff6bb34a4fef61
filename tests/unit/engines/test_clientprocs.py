"""The closed loop over several client processes: how slots and bodies are dealt, and how their meters merge."""

from __future__ import annotations

import pytest

from pipeline.engines.clientprocs import assign, merged_meter, split


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
