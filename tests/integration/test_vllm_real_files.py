"""A ``vllm bench sweep serve`` folder made now by the vLLM installed, imported by batchmark: a format change in a new vLLM shows here, not in a user's import.

``benchmarks/vllm_real_files.py`` runs vLLM's own ``vllm bench sweep serve`` (the CPU build in ``.venv-vllm``; its
``vllm serve`` and ``vllm bench serve``) on the small random-weights Llama of the agreement test: bench params
``max_concurrency`` 1 and 4, ``--num-runs 2``, ``--warmup-num-prompts 4``, 8 prompts of 32 tokens in and 32 out.  The
folder it writes (per concurrency ``warmup.json``, ``run=0.json``, ``run=1.json``, ``summary.json``; the experiment's
``summary.csv``) is imported as a user would (``batchmark import vllm-bench <experiment folder>``), and every figure
is compared with the one vLLM wrote in its ``run=N.json`` (values read from those files; ``tests/unit/
test_import_vllm_real.py`` does the same on the committed files of vLLM 0.32.0).  The sweep runs with
``--show-stdout``, and its log (every run's printed block) is imported too.

Takes 82 to 109 s on this 2-core machine at load average 0.8 to 3.9 (2026-12-01; server start ~30 s, six ``vllm
bench serve`` processes of ~10 s of import each), plus the model folder's build where it was never built.  Skips, saying why, where the vLLM environment (``.venv-vllm``, made by
``batchmark server-env``) is missing or lacks pandas (vLLM's ``bench`` extra: the sweep writes ``summary.csv`` with it;
``config/vllm-cpu-requirements.txt`` lists it).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from statistics import median

import pytest

from benchmarks.vllm_agreement import vllm_python
from benchmarks.vllm_real_files import make_sweep
from pipeline.machine import serverenv
from pipeline.cli import main
from pipeline.importers import parse
from pipeline.views.show import show_run

from tests.conftest import make_scratch_root

pytestmark = pytest.mark.slow

CONCURRENCIES = (1, 4)


@pytest.fixture(autouse=True)
def need_env():
    python = vllm_python()
    if python is None:
        status = serverenv.read_status(serverenv.resolve(serverenv.DEFAULT_DEST))
        why = status.get("reason") if status else "never made"
        pytest.skip(f"vLLM CPU environment .venv-vllm not usable ({why}); make it with `batchmark server-env`")
    if subprocess.run([str(python), "-c", "import pandas"], capture_output=True).returncode != 0:
        pytest.skip("pandas is missing in .venv-vllm (vllm bench sweep serve writes summary.csv with it); "
                    "remake the environment with `batchmark server-env`")


def test_vllm_bench_sweep_folder_of_this_vllm_imports_as_repeats(tmp_path, capsys, monkeypatch):
    cmd, experiment = make_sweep(tmp_path / "vllm", CONCURRENCIES, num_prompts=8, input_len=32, output_len=32,
                                 num_runs=2, warmup_num_prompts=4, show_stdout=True)
    monkeypatch.setenv("BATCHMARK_ROOT", str(make_scratch_root(tmp_path)))  # the import's run goes there
    print(" ".join(cmd))
    combs = {c: experiment / f"BENCH--max_concurrency={c}" for c in CONCURRENCIES}
    assert sorted(p.name for p in experiment.iterdir()) == sorted([*(d.name for d in combs.values()), "summary.csv"])
    for d in combs.values():
        assert sorted(p.name for p in d.iterdir()) == ["run=0.json", "run=1.json", "summary.json", "warmup.json"]
    runs = {c: [json.loads((d / f"run={i}.json").read_text()) for i in (0, 1)] for c, d in combs.items()}
    for c, rs in runs.items():  # the keys batchmark reads, as this vLLM writes them
        for i, r in enumerate(rs):
            assert (r["run_number"], r["max_concurrency"], r["request_rate"], r["completed"], r["failed"]) == \
                (i, c, "inf", 8, 0), (c, i)
        assert json.loads((combs[c] / "warmup.json").read_text())["run_number"] == -1

    capsys.readouterr()
    assert main(["import", "vllm-bench", str(experiment), "--hardware", "cpu", "--run-id", "regenerated"]) == 0
    run_dir = Path(capsys.readouterr().out.strip())
    doc = show_run(run_dir)
    got = {p["concurrency"]: p for p in doc["points"]}
    assert sorted(got) == list(CONCURRENCIES)
    for c, rs in runs.items():
        p = got[c]
        assert (p["repeats"], p["completed"], p["failed"], p["input_len"], p["output_len"]) == (2, 16, 0, 32, 32), c
        assert p["output_throughput_tok_s"] == pytest.approx(median(r["output_throughput"] for r in rs), rel=1e-9)
        assert p["output_throughput_tok_s"] == pytest.approx(
            median(r["total_output_tokens"] / r["duration"] for r in rs), rel=1e-9)  # vLLM's definition
        for ours, theirs in (("ttft_s", "ttft"), ("tpot_s", "tpot"), ("e2el_s", "e2el")):
            assert p[ours]["p50"] == pytest.approx(median(r[f"median_{theirs}_ms"] for r in rs) / 1e3, rel=1e-9), ours
        # vLLM's ITL is one gap per chunk: itl_chunk_s; the per-token itl_s stays empty
        assert p["itl_chunk_s"]["p50"] == pytest.approx(median(r["median_itl_ms"] for r in rs) / 1e3, rel=1e-9)
        assert p["itl_s"] is None

    # the sweep's own log (--show-stdout): each run's printed block after "Run Number: N", the model named by the
    # Namespace(...) line: the same points, to the block's rounding (0.01), the warm-up's block left out
    logged = {p.concurrency: p for p in parse("vllm-bench", [tmp_path / "vllm" / "sweep.log"]).summaries}
    assert sorted(logged) == list(CONCURRENCIES)
    for c, rs in runs.items():
        q = logged[c]
        assert (q.model, q.repeats, q.completed, q.failed) == ("agreement-llama", 2, 16, 0), c
        assert q.samples["output_throughput_tok_s"] == pytest.approx([round(r["output_throughput"], 2) for r in rs],
                                                                     abs=1e-9)
