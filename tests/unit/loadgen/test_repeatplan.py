"""A served repeat as values: the plan a client process is dealt, the load a point key sends, the strategy of each
load kind (fault kind: a loop's state in string-keyed dicts shared by closures, where a misspelt name reached CI as a
NameError)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools

import pytest

from pipeline.config.arrivals import OPEN_LOADS, Load
from pipeline.core.records import PointKey
from pipeline.loadgen.client import Target
from pipeline.loadgen.clientprocs import assign, split
from pipeline.loadgen.repeatplan import Limits, LoopState, RepeatPlan
from pipeline.loadgen.scheduler import ClosedLoop, OpenLoop, strategy_for
from pipeline.loadgen.streamrecord import RawStream

TARGET = Target("http://127.0.0.1:1/v1", "m")


def _plan(load: Load, n: int = 10, n_warmup: int = 3) -> RepeatPlan:
    return RepeatPlan(target=TARGET, bodies=[b"b%d" % i for i in range(n)], n_warmup=n_warmup, t0=0.0, load=load)


def test_a_client_process_is_dealt_its_bodies_warm_up_and_slots():
    """c = 3 over two processes (slots 2 and 1), bodies 0–2 warm-up and 3–9 measured: the second process's ids are
    its warm-up 2 and the measured dealt one a round of three, 5 and 8 (:func:`assign`, worked in
    test_clientprocs); its plan holds those three bodies, one of them warm-up, two measured, closed loop at 1."""
    plan = _plan(Load(concurrency=3))
    ids = assign(plan.n_warmup, plan.n_total, split(3, 2))
    assert ids == [[0, 1, 3, 4, 6, 7, 9], [2, 5, 8]]
    mine = plan.share(ids[1], 1)
    assert list(mine.bodies) == [b"b2", b"b5", b"b8"]
    assert (mine.n_warmup, mine.n_measured, mine.n_total) == (1, 2, 3)
    assert mine.load == Load(concurrency=1) and mine.target is TARGET and mine.t0 == plan.t0


def test_a_point_keys_load_carries_its_rate_cap_and_seed():
    key = PointKey("m", "vllm", 64, 16, None, "gamma", 2.5, 4)
    load = Load.of(key, seed=11, burstiness=0.5)
    assert (load.kind, load.concurrency, load.rate_rps, load.max_concurrency, load.seed, load.burstiness) == (
        "gamma", None, 2.5, 4, 11, 0.5)
    assert load.open_loop and not Load.of(PointKey("m", "vllm", 64, 16, 8)).open_loop
    # a constant schedule at 2.5 req/s: every gap 1 / 2.5 = 0.4 s
    assert list(itertools.islice(Load("constant", rate_rps=2.5).gaps(), 3)) == [0.4, 0.4, 0.4]


def test_a_load_without_a_rate_names_it():
    with pytest.raises(ValueError, match="rate_rps"):
        next(Load("poisson").gaps())


def test_each_load_kind_has_its_strategy_and_an_unknown_one_is_refused():
    """The closed loop its own class; the four open schedules one class, parameterised by the load's schedule."""
    assert type(strategy_for(None, _plan(Load(concurrency=2)))) is ClosedLoop
    for kind in OPEN_LOADS:
        loop = strategy_for(None, _plan(Load(kind, rate_rps=1.0, max_concurrency=2)))
        assert type(loop) is OpenLoop and loop.slots is not None
    assert strategy_for(None, _plan(Load("poisson", rate_rps=1.0))).slots is None  # no cap: no semaphore
    with pytest.raises(ValueError, match="'burst'"):
        strategy_for(None, _plan(Load("burst", rate_rps=1.0)))


def test_failures_in_a_row_abort_with_the_count_and_measured_ends_are_counted():
    """``max_consecutive_failures`` 2: a failed request, a success (the run starts again), then two failures abort
    with "2 requests failed in a row"; three measured requests settled of n_measured = 3 set the measured event."""
    plan = dataclasses.replace(_plan(Load(concurrency=1), n=4, n_warmup=1), limits=Limits(max_consecutive_failures=2))
    loop = strategy_for(None, plan)
    done = asyncio.Event()
    for i, error in enumerate(["boom", None, "boom", "boom again"]):
        loop.settle(RawStream(request_id=i, warmup=i == 0, queued_s=0.0, sent_s=0.0, error=error), done)
    assert loop.state == LoopState(measured_done=3, fails_in_row=2,
                                   aborted="2 requests failed in a row (last: boom again)")
    assert done.is_set() and loop.stop.is_set()
