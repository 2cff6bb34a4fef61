"""The ``llamacpp`` backend against a real llama-server built from llama.cpp's source, and llama-batched-bench on the same file.

Nothing stood in: the llama.cpp environment made by ``batchmark llamacpp-env`` (``.venv-llamacpp/``; CI makes it in
``.ci/run``; this test builds nothing and skips, saying why, where it is absent), a tiny Llama saved as a
random-weight model folder and written as an F16 GGUF with its word vocabulary (``pipeline/machine/ggufmodels.py``),
``llama-server`` started by the backend, a sweep of three concurrencies, ``/metrics`` (``--metrics``) scraped before
and after every repeat, and a clean stop.

Expected values, each from llama-server's own figures rather than batchmark's:

- every request's ``output_tokens`` (the server's ``usage.completion_tokens``) is ``output_len`` = 8, and their sum
  over a repeat (warm-up and measured requests: every request the server decoded then) equals the growth of the
  server's counter ``llamacpp:tokens_predicted_total`` (its ``timings.predicted_n`` summed at each request's end,
  ``tools/server/server-context.cpp``);
- the prompt tokens the client built (its tokenizer: one word, one token) sum to the growth of
  ``llamacpp:prompt_tokens_total`` (``timings.prompt_n``; ``--no-cache-prompt``: every prompt token evaluated);
- the client's TTFTs of a repeat sum to at least the growth of ``llamacpp:prompt_seconds_total`` (the server's
  ``timings.prompt_ms`` summed): a token cannot arrive before its prompt was evaluated;
- llama-batched-bench on the same GGUF at B = 1, 2 imports (``pipeline/importers/llama_batched_bench.py``) as points
  whose output throughput is its S_TG = B·TG/T_TG, checked against the T_TG of the file.
"""

from __future__ import annotations

import subprocess
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
              "max_position_embeddings": 512, "tie_word_embeddings": False}
INPUT_LEN, OUTPUT_LEN = 16, 8


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
        "models": [{"name": "tiny", "architecture": TINY_LLAMA, "gguf_type": "F16"}]})
    run_dir = scratch_root / "data" / "runs" / "real-llamacpp"
    sweep.run_sweep(cfg, run_dir, progress=False)

    points = sorted(pointfiles.load_points(run_dir), key=lambda p: p.key.concurrency)
    assert [p.key.concurrency for p in points] == [1, 2, 4]
    assert {p.key.engine for p in points} == {"llama.cpp"}
    for p in points:
        (rep,) = p.repeats
        reqs = rep.requests
        assert all(r.ok for r in reqs), [r.error for r in reqs if not r.ok]
        assert [r.output_tokens for r in reqs] == [OUTPUT_LEN] * len(reqs)
        assert [r.input_tokens for r in reqs] == [INPUT_LEN] * len(reqs)
        before, after = rep.server_metrics["before"], rep.server_metrics["after"]
        grown = {k: _counter(after, k) - _counter(before, k)
                 for k in ("tokens_predicted_total", "prompt_tokens_total", "prompt_seconds_total")}
        assert grown["tokens_predicted_total"] == sum(r.output_tokens for r in reqs)
        assert grown["prompt_tokens_total"] == sum(r.input_tokens for r in reqs)
        ttft_sum_s = sum(r.first_token_s - r.sent_s for r in reqs)
        assert ttft_sum_s >= grown["prompt_seconds_total"] > 0
    gguf = next((tmp_path / "model-folders").glob("tiny-*/tiny-F16.gguf"))
    _batched_bench_imports(gguf, tmp_path, scratch_root)


def _batched_bench_imports(gguf: Path, tmp_path: Path, scratch_root: Path) -> None:
    """llama-batched-bench on ``gguf`` (B = 1, 2), its output imported as a run of two points."""
    from pipeline.importers import import_run
    from pipeline.store.runs import read_run_json

    out = tmp_path / "batched-bench.txt"
    res = subprocess.run([str(llamacppenv.binary(ENV, "llama-batched-bench")), "-m", str(gguf), "-c", "256",
                          "-npp", str(INPUT_LEN), "-ntg", str(OUTPUT_LEN), "-npl", "1,2", "--no-warmup"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    out.write_text(res.stderr + res.stdout)
    rows = [ln.split("|")[1:-1] for ln in res.stdout.splitlines() if ln.startswith("|") and ln.split("|")[1].strip().isdigit()]
    t_tg_s = {int(r[2]): float(r[6]) for r in rows}  # B → T_TG s
    run = import_run("llama-batched-bench", [out], "cpu", run_id="20260101T000000Z-bb", model="tiny",
                     runs_dir=scratch_root / "data" / "runs")
    assert read_run_json(run)["source"] == "imported:llama-batched-bench"
    import json

    summaries = {s["concurrency"]: s for s in json.loads((run / "summaries.json").read_text())["points"]}
    assert sorted(summaries) == [1, 2]
    for b, s in summaries.items():  # S_TG = B·TG/T_TG (T_TG printed to 1 ms)
        assert s["output_throughput_tok_s"] == pytest.approx(b * OUTPUT_LEN / t_tg_s[b], rel=0.03)
