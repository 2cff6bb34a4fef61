"""A simulated run is never mistaken for a measured one: run.json, show, diff and the pages say what it is."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from pipeline import cli
from pipeline.diff.comparability import headline, source_words
from tests.conftest import REPO
from tests.runbuilder import SMALL_SIMULATED_CONFIG

SIM_CONFIG = SMALL_SIMULATED_CONFIG
MEASURED = "20261129T161329Z-vm"  # a committed measured run (CPU)


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(args))
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def sim_run(scratch_root: Path) -> Path:
    cfg = scratch_root / "config" / "sim-small.yaml"
    cfg.write_text(SIM_CONFIG)
    shutil.copytree(REPO / "data" / "runs" / MEASURED, scratch_root / "data" / "runs" / MEASURED)
    rc, out, err = run_cli("sweep", "--config", str(cfg), "--run-id", "20261201T000000Z-sim", "--no-progress")
    assert rc == 0, err
    assert "plan: 3 points of 1 model(s)" in err  # the plan's one-line total at the start
    return Path(out.strip().splitlines()[-1])


def test_run_json_says_simulated_and_measures_nothing_of_this_machine(sim_run: Path):
    meta = json.loads((sim_run / "run.json").read_text())
    assert meta["source"] == "simulated"
    assert meta["probe"]["device"] == "simulated:dgx-spark" and meta["probe"]["bandwidth_gb_s"] == 273
    assert meta["server"]["engine"] == "simulated"
    assert meta["server"]["servers"]["llama-3.1-8b-instruct"]["limits"]["max_num_seqs"] == 4


def test_show_says_simulated(sim_run: Path):
    rc, out, _ = run_cli("show", str(sim_run), "--json")
    assert rc == 0 and json.loads(out)["source"] == "simulated"
    rc, out, _ = run_cli("show", str(sim_run))
    assert "SIMULATED: a prediction" in out.splitlines()[1]


def test_summary_of_a_simulated_run_says_simulated(sim_run: Path):
    """Regression (fault kind: a prediction read as a measurement): `batchmark summary` of a simulated run said
    "clean" without "simulated"."""
    from pipeline.views.verdict import summary_line

    assert summary_line(sim_run).startswith(f"run {sim_run.name}: simulated (a prediction, not a measurement), clean")


def test_diff_of_a_prediction_and_a_measurement_says_so(sim_run: Path, scratch_root: Path):
    _, out, _ = run_cli("diff", MEASURED, sim_run.name)
    assert "PREDICTION vs MEASUREMENT — B is simulated" in out.splitlines()[0], out[:400]


def test_source_words():
    m, s = {"source": "measured"}, {"source": "simulated"}
    assert source_words(m, m) == ""
    assert source_words(s, m).startswith("PREDICTION vs MEASUREMENT — A is simulated")
    assert source_words(s, s).startswith("PREDICTION vs PREDICTION")
    prov = {"hardware": "h", "bandwidth_gb_s_probed": 1.0, "workloads": ["w"], "engine": "e", "models": ["m"]}
    line, ok = headline({**prov, **m}, {**prov, **s}, 1)
    assert ok and line.startswith("PREDICTION vs MEASUREMENT — B is simulated")


def test_pages_label_it_and_never_headline_it(sim_run: Path, scratch_root: Path, tmp_path: Path):
    from pipeline.pages.render import render_site

    out = tmp_path / "pages"
    render_site(out, runs=[MEASURED, sim_run.name])
    home = (out / "index.md").read_text()
    headline_part = home.split("<details")[0]
    assert sim_run.name not in headline_part  # never a headline
    assert "simulated (a prediction)" in home  # its row in the table says what it is
    model_page = (out / "models" / "llama-3-1-8b-instruct.md")
    if not model_page.is_file():
        model_page = next(p for p in (out / "models").glob("*.md") if "llama-3.1-8b-instruct" in p.read_text())
    text = model_page.read_text()
    assert "Simulated: a prediction, not a measurement" in text
    charts = [json.loads(p.read_text()) for p in out.rglob("*.json")] if list(out.rglob("*.json")) else []
    blob = text + json.dumps(charts)
    assert "SIMULATED (median): a prediction" in blob and "#9467bd" in blob  # its own label and colour
    run_page = next(p for p in (out / "runs").glob("*.md") if sim_run.name in p.read_text())
    assert "Simulated: a prediction, not a measurement" in run_page.read_text()
    for page in (out / "explain").glob("*.md"):
        assert sim_run.name not in page.read_text(), page.name  # never an explainer's measured example
    assert "(a prediction, not a measurement)" in (out / "runs.md").read_text()


def test_sweep_names_points_that_cannot_fit_before_it_starts(scratch_root: Path):
    # Qwen3-32B at c = 256 with 4,096-token prompts: 256 x 4,112 tokens x 262,144 B of KV = 276 GB beside
    # 65.5 GB of weights in 128 GB x 0.85: named with the reason before the first point
    cfg = scratch_root / "config" / "nofit.yaml"
    cfg.write_text(SIM_CONFIG.replace("input_len: 128", "input_len: 4096").replace("concurrency: [1, 2, 4]", "concurrency: [256]")
                   .replace("repeats: 2", "repeats: 1").replace("name: llama-3.1-8b-instruct\n    card: Llama-3.1-8B",
                                                                "name: qwen3-32b\n    card: Qwen3-32B"))
    rc, _, err = run_cli("sweep", "--config", str(cfg), "--run-id", "20261201T000001Z-sim", "--no-progress")
    assert rc == 0, err
    lines = err.splitlines()
    named = next(i for i, line in enumerate(lines) if line.startswith("does not fit: qwen3-32b c = 256: weights 65.5 GB"))
    assert named < next(i for i, line in enumerate(lines) if line.startswith("probing"))


def test_budget_chooses_what_the_sweep_measures_and_run_json_says_so(scratch_root: Path):
    from pipeline.config.sweepconfig import load_config
    from pipeline.plan.budget import plan_for

    cfg = scratch_root / "config" / "budget.yaml"
    cfg.write_text(SIM_CONFIG.replace("concurrency: [1, 2, 4]", "concurrency: [1, 2, 4, 8, 16]") + "budget: 200s\n")
    plan, measured = plan_for(load_config(cfg))
    assert plan.dropped and measured.concurrency != [1, 2, 4, 8, 16]  # 200 s cannot hold the whole grid
    rc, out, err = run_cli("sweep", "--config", str(cfg), "--run-id", "20261201T000002Z-sim", "--no-progress")
    assert rc == 0, err
    run = Path(out.strip().splitlines()[-1])
    meta = json.loads((run / "run.json").read_text())
    assert meta["config"]["concurrency"] == [1, 2, 4, 8, 16]  # the config as written, its digest kept
    assert meta["config_digest"] == load_config(cfg).digest()
    assert meta["budget"]["dropped"] == plan.dropped and meta["budget"]["concurrency"] == measured.concurrency
    stored = sorted(p.name for p in (run / "points" / "llama-3.1-8b-instruct").glob("*-c*.json"))
    assert len(stored) == len(measured.concurrency)
    assert any(line.startswith("budget: dropped ") for line in err.splitlines())
