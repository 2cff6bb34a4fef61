"""A drawn workload sent and read back: per body its own prompt length (a shared prefix first) and ``max_tokens``, no
``ignore_eos`` where outputs stop at EOS, and each record counted with the tokens its request really got.  The same
draw reaches the simulated server and the plan (:func:`pipeline.config.workload.repeat_lengths`)."""

from __future__ import annotations

import asyncio
import json
import threading

import numpy as np

from pipeline.config.promptfile import read_prompt_file
from pipeline.config.sweepconfig import load_config, parse_config
from pipeline.config.workload import draw_lengths, repeat_lengths
from pipeline.core.records import PointKey
from pipeline.loadgen import streamrecord
from pipeline.backends.simulated import SimulatedBackend, point_seed
from tests.conftest import REPO
from tests.integration.served_helpers import build_tokenizer
from tests.localapp import serve_app

#: Where the fake server's model "stops" (an EOS) when the request lets it: after this many tokens.
EOS_AFTER = 3


def _fake_server(seen: list[dict]):
    """A completions endpoint streaming ``max_tokens`` words (``EOS_AFTER`` without ``ignore_eos``), usage last."""
    from aiohttp import web

    async def handler(request):
        body = await request.json()
        seen.append(body)
        n = body["max_tokens"] if body.get("ignore_eos") else min(body["max_tokens"], EOS_AFTER)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for _ in range(n):
            await resp.write(b"data: " + json.dumps({"choices": [{"index": 0, "text": " t001"}]}).encode() + b"\n\n")
        usage = {"prompt_tokens": len(body["prompt"].split()), "completion_tokens": n}
        await resp.write(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n")
        return resp

    return handler


def test_drawn_lengths_reach_the_bodies_and_records_count_what_each_request_got(tmp_path):
    """Fault kinds: a drawn workload sent as the nominal shape (one length, ``ignore_eos`` on), a prefix not shared,
    and a per-token figure counting the asked-for tokens of an output that stopped at EOS.

    By hand: input 16 at range ratio 0.5 draws in [8, 24], + a 4-token prefix; output 8 at 0.5 in [4, 12]; the fake
    model stops after 3 tokens, so every record has 3 output tokens, whatever it asked."""
    from pipeline.backends.openai import OpenAIBackend

    seen: list[dict] = []
    loop = asyncio.new_event_loop()
    runner, url = loop.run_until_complete(serve_app("/v1/completions", _fake_server(seen)))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        cfg = parse_config({"name": "w", "hardware": "cpu", "backend": "openai", "concurrency": [2],
                            "input_len": 16, "output_len": 8, "models": [{"name": "m", "served_name": "m"}],
                            "openai": {"base_url": url, "requests_per_point": 4, "engine": "vllm"},
                            "lengths": {"input": {"distribution": "uniform", "range_ratio": 0.5},
                                        "output": {"distribution": "uniform", "range_ratio": 0.5},
                                        "prefix_len": 4, "ignore_eos": False}})
        engine = OpenAIBackend(cfg)
        engine.spec, engine.features = cfg.models[0], streamrecord.Features()
        engine.tokenizer, engine.tokenizer_source = build_tokenizer(tmp_path / "tok"), "tok"
        rec = engine.measure(PointKey("m", "vllm", 16, 8, 2), 1, True, 0)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(runner.cleanup())
        loop.close()
    ins, outs = draw_lengths(cfg.lengths, 16, 8, 6, rec.meta["seed"])  # 2 warm-up + 4 measured bodies
    requests = rec.repeats[0].requests
    assert [r.drawn_input_len for r in requests] == (ins + 4).tolist()  # recorded per request
    assert [r.drawn_output_len for r in requests] == outs.tolist() and rec.meta["lengths"]["prefix_len"] == 4
    assert len(set(outs.tolist())) > 1 and ins.min() >= 8 and ins.max() <= 24 and outs.min() >= 4
    sent = seen[:6]  # the bodies (the cool-downs, sent after the last, re-use them)
    by_prompt = {b["prompt"]: b for b in sent}
    assert all("ignore_eos" not in b and "min_tokens" not in b for b in seen)
    assert len({tuple(b["prompt"].split()[:4]) for b in sent}) == 1  # one shared prefix
    for r in requests:  # each record: its own prompt length, the 3 tokens its request got
        assert r.input_tokens == ins[r.request_id] + 4 and r.output_tokens == EOS_AFTER and r.ok
    assert sorted(len(p.split()) for p in by_prompt) == sorted((ins + 4).tolist())  # each prompt its drawn length
    assert sorted(b["max_tokens"] for b in sent) == sorted(outs.tolist())  # each body asks its drawn output


def test_the_simulated_server_sends_the_requests_the_sweep_draws():
    """Fault kinds: a simulated (or planned) point of a drawn workload run at the nominal lengths (every request
    4000/500, the published rows' 2–3x miss), or with another draw than the served sweep's; an open-loop-only
    server simulated with one sequence at a time where the vllm backend starts 256.

    config/spark-open-loop-eos.yaml (random 4000/500 at range ratio 0.9, gamma arrivals of burstiness 0.7): each
    simulated record's prompt and output are repeat r's slice of the point's draw."""
    cfg = load_config(REPO / "config" / "spark-open-loop-eos.yaml")
    engine = SimulatedBackend(cfg.model_copy(update={"simulated": cfg.simulated.model_copy(
        update={"requests_per_point": 8})}))
    engine.load(cfg.models[0])
    key = PointKey("gpt-oss-20b", "simulated", 4000, 500, None, "gamma", 1.0, None)
    rec = engine.measure(key, 2, False, cfg.seed)
    for r, rep in enumerate(rec.repeats):
        ins, outs = repeat_lengths(cfg, key, 8, 2, r, point_seed(cfg.seed, key), engine.server.max_model_len)
        got = sorted(rep.requests, key=lambda q: q.request_id)
        assert [q.input_tokens for q in got] == ins.tolist() and [q.output_tokens for q in got] == outs.tolist()
        assert [q.drawn_input_len for q in got] == ins.tolist() and [q.drawn_output_len for q in got] == outs.tolist()
    assert engine.server.max_model_len == 7600 + 950 + 64  # the longest request drawn fits the server
    assert engine.server.max_num_seqs == 256  # no grid, no cap: the vllm backend's default, not 1
    from pipeline.metrics.summarize import summarize_point

    assert summarize_point(rec).burstiness == 0.7 and rec.meta["lengths"]["ignore_eos"] is False  # stated per point
    sent = [q.sent_s for q in rec.repeats[0].requests]
    assert np.all(np.diff(sent) >= 0) and len(set(sent)) == len(sent)  # gamma gaps, one send each


def test_plan_predicts_the_held_open_loop_rows():
    """Fault kind: a config the published open-loop rows are written in that ``plan`` refuses or plans as nothing
    (a gamma, EOS-terminated, range-ratio workload with no closed-loop grid).

    config/spark-open-loop-eos.yaml plans its three gamma rates, each simulated with the drawn requests: the
    prediction differs from the same rates planned at the nominal lengths."""
    from pipeline.plan.estimate import make_plan

    cfg = load_config(REPO / "config" / "spark-open-loop-eos.yaml")
    plan = make_plan(cfg)
    points = plan.models[0].points
    assert [(p.load, p.rate_rps) for p in points] == [("gamma", 0.25), ("gamma", 0.5), ("gamma", 1.0)]
    assert all(p.runs and p.output_throughput_tok_s and p.ttft_s for p in points)
    from pipeline.plan.plantext import plan_text

    assert plan_text(plan).splitlines()[1] == ("requests: input uniform (range ratio 0.9), output uniform (range "
                                                 "ratio 0.9), outputs stop at EOS")  # the plan says what it drew
    nominal = make_plan(cfg.model_copy(update={"lengths": None}))
    assert [p.ttft_s for p in points] != [p.ttft_s for p in nominal.models[0].points]


def test_a_prompt_file_is_sent_as_written_with_its_reference_output_lengths(tmp_path):
    """Fault kind: a prompt file's prompts replaced by random ones, or its reference outputs' lengths ignored.

    tests/data/prompts/chat.jsonl by hand (one token a word): (prompt, output) tokens (5, 2), (3, 6), (4, 3), and
    (7, 8: no reference, the output_len of 8, fixed); 6 bodies cycle the four in a seeded order."""
    from pipeline.backends.openai import OpenAIBackend

    seen: list[dict] = []
    loop = asyncio.new_event_loop()
    runner, url = loop.run_until_complete(serve_app("/v1/completions", _fake_server(seen)))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        cfg = parse_config({"name": "w", "hardware": "cpu", "backend": "openai", "concurrency": [2],
                            "input_len": 5, "output_len": 8, "models": [{"name": "m", "served_name": "m"}],
                            "openai": {"base_url": url, "requests_per_point": 4, "engine": "vllm"},
                            "lengths": {"prompt_file": str(REPO / "tests" / "data" / "prompts" / "chat.jsonl")}})
        engine = OpenAIBackend(cfg)
        engine.spec, engine.features = cfg.models[0], streamrecord.Features()
        engine.tokenizer, engine.tokenizer_source = build_tokenizer(tmp_path / "tok"), "tok"
        rec = engine.measure(PointKey("m", "vllm", 5, 8, 2), 1, True, 0)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(runner.cleanup())
        loop.close()
    pairs = {(len(b["prompt"].split()), b["max_tokens"]) for b in seen[:6]}
    assert pairs == {(5, 2), (3, 6), (4, 3), (7, 8)}  # every prompt of the file, each with its output length
    assert all(b.get("ignore_eos") for b in seen)  # ignore_eos stays on: outputs are the reference lengths
    for r in rec.repeats[0].requests:
        assert (r.input_tokens, r.output_tokens) == (r.drawn_input_len, r.drawn_output_len) and r.ok


def test_a_shared_prefix_begins_every_prompt_of_a_file(tmp_path):
    """Fault kind: a prefix given beside a prompt file dropped (prefix caching then has nothing to reuse) or counted
    apart from the prompt the server sees.

    tests/data/prompts/chat.jsonl by hand (one token a word): prompts of 5, 3, 4 and 7 tokens; with a 3-token prefix
    and a space each body is 8, 6, 7 or 10 tokens, its first 3 words one prefix for all four."""
    from pipeline.loadgen.pointrequests import point_requests

    cfg = parse_config({"name": "w", "hardware": "cpu", "backend": "openai", "concurrency": [2],
                        "input_len": 5, "output_len": 8, "models": [{"name": "m", "served_name": "m"}],
                        "lengths": {"prompt_file": str(REPO / "tests" / "data" / "prompts" / "chat.jsonl"),
                                    "prefix_len": 3}})
    reqs = point_requests(cfg, build_tokenizer(tmp_path / "tok"), streamrecord.Features(),
                          PointKey("m", "openai", 5, 8, 2), 4, 0)
    assert sorted(reqs.input_lens.tolist()) == [6, 7, 8, 10]
    assert [len(p.split()) for p in reqs.prompts] == reqs.input_lens.tolist()
    assert len({tuple(p.split()[:3]) for p in reqs.prompts}) == 1
    assert sorted(p.split(maxsplit=3)[3] for p in reqs.prompts) == sorted(
        e.prompt for e in read_prompt_file(REPO / "tests" / "data" / "prompts" / "chat.jsonl"))
