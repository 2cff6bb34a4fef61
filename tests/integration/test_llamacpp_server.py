"""The ``llamacpp`` backend against a real llama-server built from llama.cpp's source, and llama-batched-bench on the same file.

Nothing stood in: the llama.cpp environment made by ``batchmark llamacpp-env`` (``.venv-llamacpp/``; CI makes it in
``.ci/run``; this test builds nothing and skips, saying why, where it is absent), a tiny Llama saved as a
random-weight model folder and written as an F16 GGUF with its word vocabulary (``pipeline/machine/ggufmodels.py``),
``llama-server`` started by the backend, a sweep of three concurrencies, ``/metrics`` (``--metrics``) scraped before
and after every repeat, and a clean stop.

Expected values, each from llama-server's own figures rather than batchmark's:

- every request's ``output_tokens`` (the server's ``usage.completion_tokens``) is ``output_len`` = 8, and their sum
  over a repeat (warm-up and measured requests: every request the server decoded then) equals the growth of the
  server's counter ``llamacpp:tokens_predicted_total`` (each slot's ``timings.predicted_n`` added when it is
  released, ``metrics_on_prediction`` in ``tools/server/server-context.cpp``);
- the prompt tokens the client built (its tokenizer: one word, one token) sum to the growth of
  ``llamacpp:prompt_tokens_total`` (the prompt tokens of every decoded batch; ``--no-cache-prompt``: all of them);
- the client's TTFTs of a repeat sum to at least the growth of ``llamacpp:prompt_seconds_total`` (the server's time
  in batches with prompt tokens, each inside the TTFT of the request whose prompt it evaluates);
- a point whose closed loop sent cool-down requests (cancelled once the measured ones ended, decoded in part) grows
  the counters by at most their lengths more; c = 1 sends none, so one point of each model agrees exactly;
- the same for llama-quantize's Q8_0 of that file, whose card counts 34 bytes per block of 32 weights;
- llama-batched-bench on the same GGUF at B = 1, 2 (TG = 1,024; run by ``pipeline/machine/batchedbench.py``) imports (``pipeline/importers/llama_batched_bench.py``) as points
  whose output throughput is its S_TG = B·TG/T_TG, checked against the T_TG of the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config.sweepconfig import parse_config
from pipeline.machine import llamacppenv
from pipeline.machine.hardware import ProbeResult
from pipeline.machine.serverenv import resolve
from pipeline.store import pointfiles
from pipeline.sweep import gridwalk as sweep

pytestmark = pytest.mark.slow

ENV = resolve(llamacppenv.DEFAULT_DEST)
# head_dim 64 and rows of 256: every llama.cpp CPU kernel takes them; ~3 MB in F16, so a point takes a second
TINY_LLAMA = {"model_type": "llama", "vocab_size": 512, "hidden_size": 256, "intermediate_size": 512,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 2048, "tie_word_embeddings": False}
INPUT_LEN, OUTPUT_LEN = 16, 8
BENCH_TG = 1024


@pytest.fixture(autouse=True)
def need_env():
    ok, why = llamacppenv.usable(ENV)
    if not ok:
        pytest.skip(f"llama.cpp environment {ENV} not usable ({why}); make it with `batchmark llamacpp-env`")


@pytest.fixture(autouse=True)
def no_probe(monkeypatch):
    # the hardware probe is not under test here; it costs seconds on a CPU
    fake = ProbeResult("cpu", "float32", 10.0, 0.1, [10.0], [0.1], 1, 1, 1)
    monkeypatch.setattr(sweep, "probe", lambda *a, **k: fake)


def _counter(block: dict, name: str) -> float:
    return float(block[f"llamacpp:{name}"])


def test_llamacpp_sweep_agrees_with_the_server_and_batched_bench(scratch_root, tmp_path, monkeypatch):
    monkeypatch.setenv("BATCHMARK_MODEL_FOLDERS", str(tmp_path / "model-folders"))
    cfg = parse_config({
        "name": "real-llamacpp", "hardware": "cpu", "backend": "llamacpp", "input_len": INPUT_LEN,
        "output_len": OUTPUT_LEN, "concurrency": [1, 2, 4], "repeats": 1, "stop_after_weak_doublings": 0,
        "llamacpp": {"build": str(ENV), "requests_per_point": 4, "health_timeout_s": 60, "timeout_s": 60},
        "models": [{"name": "tiny", "architecture": TINY_LLAMA, "gguf_type": "F16"},
                   {"name": "tiny-q8", "architecture": TINY_LLAMA, "gguf_type": "Q8_0"}]})
    run_dir = scratch_root / "data" / "runs" / "real-llamacpp"
    sweep.run_sweep(cfg, run_dir, progress=False)

    points = sorted(pointfiles.load_points(run_dir), key=lambda p: (p.point.model, p.point.concurrency))
    assert [(p.point.model, p.point.concurrency) for p in points] == [(m, c) for m in ("tiny", "tiny-q8") for c in (1, 2, 4)]
    assert {p.point.engine for p in points} == {"llama.cpp"}
    exact = 0
    previous: dict[str, int] = {}  # per model, its last point's cool-down requests
    for p in points:
        (rep,) = p.repeats
        reqs = rep.requests
        assert all(r.ok for r in reqs), [r.error for r in reqs if not r.ok]
        assert [r.output_tokens for r in reqs] == [OUTPUT_LEN] * len(reqs)
        assert [r.input_tokens for r in reqs] == [INPUT_LEN] * len(reqs)
        before, after = rep.server_metrics["before"], rep.server_metrics["after"]
        grown = {k: _counter(after, k) - _counter(before, k)
                 for k in ("tokens_predicted_total", "prompt_tokens_total", "prompt_seconds_total")}
        # the closed loop's cool-down requests (sent while the last measured ones finish, then cancelled) are decoded
        # too: at most their lengths more, and the previous point's (a cancelled request's tokens can reach the
        # server's counters after this point's first scrape); a point after none and sending none (c = 1 always,
        # after the model's start) must agree exactly
        cooled = p.meta["cooldown_sent"][0]
        late = previous.get(p.point.model, 0)
        previous[p.point.model] = cooled
        out_sum, in_sum = sum(r.output_tokens for r in reqs), sum(r.input_tokens for r in reqs)
        assert out_sum <= grown["tokens_predicted_total"] <= out_sum + (cooled + late) * OUTPUT_LEN, (p.point, grown)
        assert in_sum <= grown["prompt_tokens_total"] <= in_sum + (cooled + late) * INPUT_LEN, (p.point, grown)
        if cooled == late == 0:
            exact += 1
            assert (grown["tokens_predicted_total"], grown["prompt_tokens_total"]) == (out_sum, in_sum)
            ttft_sum_s = sum(r.first_token_s - r.sent_s for r in reqs)
            assert ttft_sum_s >= grown["prompt_seconds_total"] > 0
    assert exact >= 2  # c = 1 of each model
    gguf = next((tmp_path / "model-folders").glob("tiny-*/tiny-F16.gguf"))
    card = json.loads((run_dir / "models" / "tiny.json").read_text())
    # tensor bytes counted by hand: embeddings and head 2 × 512 × 256 × 2 B; per layer q, o 256 × 256 × 2, k, v
    # 128 × 256 × 2, gate, up, down 512 × 256 × 2, two norms 256 × 4; the final norm 256 × 4
    per_layer = 2 * 131072 + 2 * 65536 + 3 * 262144 + 2 * 1024
    assert card["extra"]["gguf_tensor_bytes"] == 2 * 262144 + 2 * per_layer + 1024 == 2888704
    assert card["weight_bytes"] == card["extra"]["file_bytes"] == gguf.stat().st_size  # the file's size: what is read
    assert card["quantization"] == "fp16" and card["extra"]["gguf_tensor_types"] == {"F16": 16, "F32": 5}
    q8 = json.loads((run_dir / "models" / "tiny-q8.json").read_text())  # llama-quantize's Q8_0 of the same file
    assert q8["quantization"] == "q8_0" and q8["extra"]["gguf_tensor_types"] == {"F32": 5, "Q8_0": 16}
    # Q8_0 stores 34 bytes per 32 weights (a 2-byte scale each block): the matrices' F16 bytes × 34 / 64
    assert q8["extra"]["gguf_tensor_bytes"] == (2888704 - 5 * 1024) * 34 // 64 + 5 * 1024
    _batched_bench_imports(gguf, tmp_path, scratch_root)


def _batched_bench_imports(gguf: Path, tmp_path: Path, scratch_root: Path) -> None:
    """``batchmark batched-bench`` on a config of the same tiny model (B = 1, 2): llama-batched-bench on the same GGUF
    file, its tables kept and imported as a run of two points."""
    import yaml

    from pipeline.commands.batchedbench import batched_bench
    from pipeline.store.runs import read_run_json

    # TG = 1,024: T_TG is printed to 1 ms, and this model decodes a token in a fraction of one (8 tokens read as
    # 8000 tok/s against S_TG 8979, which the importer rightly refuses; at 256 a quiet machine's B = 2 took about
    # 30 ms, 3 % of rounding, and was refused too); at 1,024 B = 2 takes over 100 ms, the rounding under 1 %.
    # The context holds the largest batch: 2 × (16 + 1,024) = 2,080 tokens.  The runner checks that both rows were
    # printed (llama.cpp's logger can drop the last one at exit on a loaded machine) and runs again if not
    config = tmp_path / "bb.yaml"
    config.write_text(yaml.safe_dump({
        "name": "real-llamacpp-bb", "hardware": "cpu", "backend": "llamacpp", "input_len": INPUT_LEN,
        "output_len": BENCH_TG, "concurrency": [1, 2], "llamacpp": {"build": str(ENV), "timeout_s": 60},
        "models": [{"name": "tiny", "architecture": TINY_LLAMA, "gguf_type": "F16"}]}))
    written_ns = gguf.stat().st_mtime_ns
    run = batched_bench(str(config), "20260101T000000Z-bb", runs_dir=scratch_root / "data" / "runs", tables_dir=tmp_path)
    out = tmp_path / "20260101T000000Z-bb.txt"
    assert gguf.stat().st_mtime_ns == written_ns  # the sweep's own file (same folder, seed and type), not rewritten
    rows = [ln.split("|")[1:-1] for ln in out.read_text().splitlines()
            if ln.startswith("|") and ln.split("|")[1].strip().isdigit()]
    t_tg_s = {int(r[2]): float(r[6]) for r in rows}  # B → T_TG s
    assert read_run_json(run)["source"] == "imported:llama-batched-bench"
    summaries = {s["concurrency"]: s for s in json.loads((run / "summaries.json").read_text())["points"]}
    assert sorted(summaries) == [1, 2] and {s["model"] for s in summaries.values()} == {"tiny"}
    for b, s in summaries.items():  # S_TG = B·TG/T_TG (T_TG printed to 1 ms)
        assert s["output_throughput_tok_s"] == pytest.approx(b * BENCH_TG / t_tg_s[b], rel=0.03)
