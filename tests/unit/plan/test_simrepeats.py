"""The plan's simulated repeats: the same figures as a full simulation, asked twice simulated once."""

from __future__ import annotations

import dataclasses

import pytest

from pipeline.cards.registry import resolve_card
from pipeline.config.sweepconfig import SimulatedOptions
from pipeline.core.records import PointKey
from pipeline.config.arrivals import Load
from pipeline.simulation.simloop import SimPlan, simulate_repeat
from pipeline.backends.simulated import server_for
from pipeline.machine.hardware import load_profile
from pipeline.plan import simrepeats


@pytest.fixture
def server():
    return server_for(resolve_card("Llama-3.1-8B"), load_profile("dgx-spark"), SimulatedOptions(), 512, 64, 8, "vllm")


def test_first_and_last_token_give_the_full_simulations_times(server):
    key = PointKey("m", "simulated", 512, 64, 4)
    fast = simrepeats.simulated_repeat(server, key, 4, 8)
    full = simulate_repeat(dataclasses.replace(server), SimPlan(512, 64, 4, 8, Load(concurrency=4)))
    assert fast.end_s == full.end_s and fast.steps == full.steps
    for a, b in zip(fast.requests, full.requests):
        assert (a.sent_s, a.first_token_s, a.done_s, a.output_tokens) == (b.sent_s, b.first_token_s, b.done_s,
                                                                          b.output_tokens)
        assert len(a.chunks) == 2 and len(b.chunks) == 64  # first token, then the other 63 at the last one's time


def test_asked_twice_it_is_simulated_once_and_another_server_is_not_the_same(server, monkeypatch):
    calls = []
    real = simulate_repeat
    monkeypatch.setattr("pipeline.simulation.simloop.simulate_repeat", lambda *a, **k: calls.append(a) or real(*a, **k))
    monkeypatch.setattr(simrepeats, "_REPEATS", {})
    key = PointKey("m", "simulated", 512, 64, 2)
    first = simrepeats.simulated_repeat(server, key, 2, 4)
    server.preemptions_total += 3  # the counter a run keeps is no part of what the repeat is
    assert simrepeats.simulated_repeat(server, key, 2, 4) is first and len(calls) == 1
    other = dataclasses.replace(server, max_num_seqs=1)  # one sequence at a time: another repeat
    assert simrepeats.simulated_repeat(other, key, 2, 4).end_s > first.end_s and len(calls) == 2
