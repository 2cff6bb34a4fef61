"""The load generator's event loop (``pipeline.loadgen.eventloop``) and how a served point is run on it.

Two things pinned here: ``event_loop`` chooses the loop the point measures on and the point's meta names it (uvloop
where installed, asyncio's own otherwise or when asked), and a point's records never pass through the runner's main
task.  Fault kind of the second: Python 3.11's runner formats the repr of its main task — its result included — in
``signal.getsignal`` when it restores the SIGINT handler (https://github.com/python/cpython/issues/112559); returned from the main coroutine, a
point of 800,000 tokens cost 2 s of CPU in that repr, after every point.
"""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.config.options import OpenAIOptions
from pipeline.config.sweepconfig import load_config
from pipeline.core.errors import BatchmarkError
from pipeline.core.records import PointKey, RepeatRecord, RequestRecord
from pipeline.loadgen import client, eventloop, streamrecord
from pipeline.backends import served
from tests.integration.served_helpers import build_tokenizer
from tests.unit.loadgen.test_rawhttp import LOOPS

REPO = Path(__file__).resolve().parents[3]


async def _loop_type() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_asyncio_is_asyncio_own_loop_and_auto_takes_uvloop_where_installed(monkeypatch):
    assert eventloop.loop_name("asyncio") == "asyncio"
    assert eventloop.run(_loop_type(), "asyncio").startswith("asyncio.")  # asyncio.unix_events' selector loop
    monkeypatch.setattr(eventloop, "_uvloop", lambda: None)  # a machine without uvloop (Windows has no build)
    assert eventloop.loop_name("auto") == "asyncio"
    assert eventloop.run(_loop_type(), "auto").startswith("asyncio.")
    main = _loop_type()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the refused coroutine is closed: no "never awaited" warning
        with pytest.raises(BatchmarkError, match=r"^event_loop: uvloop is not installed here"):
            eventloop.run(main, "uvloop")
    assert main.cr_frame is None  # closed


def test_auto_runs_on_uvloop_and_names_its_version():
    uvloop = pytest.importorskip("uvloop")
    assert eventloop.loop_name("auto") == eventloop.loop_name("uvloop") == f"uvloop {uvloop.__version__}"
    assert eventloop.run(_loop_type(), "auto") == "uvloop"  # uvloop.Loop's module
    assert eventloop.run(_loop_type(), "asyncio").startswith("asyncio.")


def test_event_loop_is_checked_and_auto_keeps_every_committed_digest():
    with pytest.raises(ValueError, match="event_loop"):
        OpenAIOptions(event_loop="trio")
    cfg = load_config(REPO / "config" / "vllm-cpu.yaml")
    assert cfg.vllm.event_loop == "auto"
    pinned = cfg.digest()
    data = cfg.model_dump(mode="json")
    data["vllm"]["event_loop"] = "auto"
    assert type(cfg).model_validate(data).digest() == pinned  # auto written out: the same digest
    data["vllm"]["event_loop"] = "asyncio"
    assert type(cfg).model_validate(data).digest() != pinned  # another loop chosen: another config


class _Engine(served.ServedBackend):
    """A served engine whose repeats are made up (no server): what ``measure`` does around them is under test."""

    records: list = []

    def _target(self) -> client.Target:
        return client.Target(base_url="http://127.0.0.1:9/v1", model="m")

    async def _measure_async(self, key, repeats, n_warm, n_meas, bodies, target, meta):
        return self.records


class _Counted(RepeatRecord):
    """A repeat that counts how often its repr is made (the symptom of https://github.com/python/cpython/issues/112559)."""

    reprs = 0

    def __repr__(self) -> str:
        type(self).reprs += 1
        return "<repeat>"


@pytest.mark.parametrize("loop", LOOPS)
def test_a_points_records_never_pass_through_the_runners_main_task(loop, tmp_path, monkeypatch):
    engine = _Engine(SimpleNamespace(open_loop=None), OpenAIOptions(requests_per_point=2, event_loop=loop))
    engine.spec, engine.features = SimpleNamespace(name="m"), streamrecord.Features()
    engine.tokenizer = build_tokenizer(tmp_path / "tok")
    req = RequestRecord(request_id=0, queued_s=0.0, sent_s=0.0, first_token_s=0.1, done_s=0.2,
                        chunks=[[0.1, 1], [0.2, 1]], input_tokens=4, output_tokens=2)
    engine.records = [_Counted(repeat=0, batching="served", window_start_s=0.0, window_end_s=0.2, requests=[req])]
    received: list = []
    real = eventloop.run

    def watched(main, choice="auto"):  # what the runner's main task returns, seen on its way out
        async def spy():
            got = await main
            received.append(got)
            return got
        return real(spy(), choice)

    monkeypatch.setattr(served.eventloop, "run", watched)
    _Counted.reprs = 0
    rec = engine.measure(PointKey("m", "openai", 4, 2, 1), 1, False, 0)
    assert rec.repeats is engine.records  # the records came back to the caller …
    assert received == [None]  # … but not as the main task's result
    assert _Counted.reprs == 0  # and no repr of them was made on the way
    assert rec.meta["event_loop"] == eventloop.loop_name(loop)  # the loop it measured on, in the point's meta
