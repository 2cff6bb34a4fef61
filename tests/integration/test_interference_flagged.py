"""A run measured while CPU hogs load the machine is flagged everywhere and never chosen (must hold).

Regression (fault kind: noisy run as headline): the newest run had been measured on a busy machine, and Home,
Benchmarks, the explainers and Changes used it as their headline.  Here the test itself starts the load: one busy
Python process per CPU (a busy loop, :data:`HOG`), started through a shell that exits at once, so they are not
descendants of the measuring process (the meter counts those as its own) but the outside load a user's other
jobs would be.  A real sweep of the in-process transformers engine (a tiny random Llama, three points) runs
meanwhile, beside a clean hand-made run of the same hardware (tests/runbuilder.py) that is older and has fewer
points, so that without the flag the hogged run would be both the newest (Home's headline) and the workload with
the most points (an explainer's example, :func:`pipeline.pages.explain.pick`).

The bandwidth probe is replaced by a named stand-in with steady repeats, so the flag here comes from the outside
load measured during the points (and the repeats' spread), not from the probe.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from pathlib import Path

import pytest

from pipeline.sweep import gridwalk as sweep
from pipeline.machine.hardware import ProbeResult
from tests.browser import mkdocs_build
from tests.runbuilder import NOISE_A, make_run

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # alone: it starts CPU hogs of its own (run alone: they would slow every test beside it)

CLEAN, HOGGED = "20261129T100000Z-clean", "20261130T120000Z-hogged"
PROBE_STAND_IN = ProbeResult(device="cpu", dtype="float32", bandwidth_gb_s=10.0, peak_tflops=0.1,
                             bandwidth_repeats_gb_s=[10.0, 10.1], tflops_repeats=[0.1, 0.1], buffer_bytes=1,
                             matmul_n=1, threads=1)
CONFIG = """name: hogged
hardware: cpu
backend: transformers
input_len: 8
output_len: 160
concurrency: [1, 2, 4]
repeats: 3
stop_after_weak_doublings: 0
models:
  - name: tiny-llama
    architecture: {model_type: llama, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2,
                   num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 256, tie_word_embeddings: false}
"""


#: A hog's loop: busy, and gone within a loop turn once the test's process is (a killed test run runs no
#: ``finally``: orphaned hogs once loaded a machine for 24 minutes after it), and after 600 s in any case.
HOG = "import os, time\nend = time.time() + 600\nwhile time.time() < end:\n    os.kill({pid}, 0)"


def start_hogs(n: int) -> list[int]:
    """Start ``n`` busy processes outside this process tree (a shell starts them and exits); their pids."""
    out = subprocess.run(["sh", "-c", f'for i in $(seq {n}); do "$0" -c "$1" '
                          '</dev/null >/dev/null 2>&1 & echo $!; done', sys.executable, HOG.format(pid=os.getpid())],
                         capture_output=True, text=True, timeout=30, check=True)
    return [int(x) for x in out.stdout.split()]


def stop(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def hogged_site(scratch_root, monkeypatch):
    from pipeline.config.sweepconfig import load_config
    from pipeline.pages.render import render_site
    from pipeline.analysis.stages import write_derived

    monkeypatch.setattr(sweep, "probe", lambda *a, **k: PROBE_STAND_IN)
    runs_dir = scratch_root / "data" / "runs"
    make_run(runs_dir, CLEAN, noise=NOISE_A, models=("dense-a",), concurrency=(1, 2))
    cfg_path = scratch_root / "config" / "hogged.yaml"
    cfg_path.write_text(CONFIG)
    pids = start_hogs(max(2, os.cpu_count() or 2))
    try:
        time.sleep(0.3)  # the hogs are running before the first point starts
        # published with its derived files, as `batchmark sweep` publishes it
        sweep.run_sweep(load_config(cfg_path), runs_dir / HOGGED, progress=False, derive=write_derived)
    finally:
        stop(pids)
    render_site(scratch_root / "data" / "pages", runs_dir=runs_dir)
    return scratch_root


@pytest.mark.slow
def test_run_measured_under_cpu_hogs_is_flagged_shown_and_never_chosen(hogged_site):
    from pipeline.machine.hardware import load_profile
    from pipeline.pages.indexviews import headline_runs
    from pipeline.pages.views import view_of
    from pipeline.views.show import format_table, show_run
    from pipeline.analysis.stages import load_run

    root = hogged_site
    doc = show_run(HOGGED)
    # every point long enough to judge (0.5 s; 160 tokens a request, over 3× the 48 that once gave points of 0.36–0.48 s,
    # none judged) saw the hogs: one busy process per CPU leaves the outside load far above 25 %
    judged = [p for p in doc["points"] if (p["interference"] or {}).get("wall_s", 0) >= 0.5]
    assert judged, [p["interference"] for p in doc["points"]]
    for p in judged:
        assert p["interference"]["outside_share"] > 0.25, p["interference"]
        assert p["quality"]["verdict"] == "flagged"
        assert any(r.startswith("machine busy: other processes kept") for r in p["quality"]["reasons"])
    quality = doc["models"][0]["run_quality"]
    assert quality["verdict"] == "flagged"
    assert any("other processes kept more than 25% of the machine's CPUs busy" in r for r in quality["reasons"])
    assert "bandwidth probe" not in " ".join(quality["reasons"][:1])  # the stand-in probe was steady
    table = format_table(doc)
    assert "FLAGGED RUN" in table and "FLAGGED: " in table and "machine busy: other processes kept" in table
    meta = load_run(root / "data" / "runs" / HOGGED).meta
    assert meta["probe_after"]["bandwidth_gb_s"] == 10.0  # the probe after the sweep is kept (here the stand-in)

    views = [view_of(load_run(root / "data" / "runs" / r)) for r in (HOGGED, CLEAN)]
    assert [v.flagged for v in views] == [True, False]
    # not the headline: the newest clean run of the hardware is
    (head,) = headline_runs(views)
    assert head["view"].run_id == CLEAN
    # not an explainer's example, though it has more points than the clean run (3 vs 2)
    from pipeline.pages import explain

    ctx = explain.explain_context(views, load_profile("dgx-spark").model_dump(mode="json"), explain.worked_example_model())
    assert ctx["dense_run"] == CLEAN

    # shown as flagged on every page that names it
    pages = root / "data" / "pages"
    naming = {p.relative_to(pages): p.read_text() for p in pages.rglob("*.md") if HOGGED in p.read_text()}
    assert {"index.md", "benchmarks.md", "runs.md"} <= {str(p) for p in naming}
    # each model and run has its own page: the hogged run's, and its models'
    assert any(str(p).startswith("models/") for p in naming) and any(str(p).startswith("runs/") for p in naming)
    for page, text in naming.items():
        assert "flagged" in text.lower(), page
    home = naming[next(p for p in naming if str(p) == "index.md")]
    rows = [line for line in home.splitlines() if line.startswith("| [")]
    assert CLEAN in rows[0] and "| clean |" in rows[0]  # clean first, though the hogged run is newer
    assert any(HOGGED in r and "| ⚠ flagged |" in r for r in rows)
    # Benchmarks' index: tiny-llama's only run is the hogged one, shown flagged; its page has a section per run
    index_row = next(line for line in naming[Path("benchmarks.md")].splitlines() if HOGGED in line)
    assert "⚠ flagged" in index_row and "tiny-llama" in index_row
    bench = naming[next(p for p in naming if str(p).startswith("models/"))]
    section = bench.split(f"## {HOGGED}", 1)[1].split("\n## 2", 1)[0]
    assert '!!! warning "Flagged run: its numbers may not show the hardware"' in section
    assert "FLAGGED: " in section and "machine busy: other processes kept" in section  # the per-point table's note
    batching = (pages / "explain" / "batching.md").read_text()
    assert f"From run <code>{CLEAN}</code>" in batching

    # and the real site builds with it
    res = mkdocs_build(root)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "flagged" in (root / "site" / "index.html").read_text()
