"""What a reader sees: condensed flag reasons, bounded diff provenance, the vLLM version and
server command, and what ``vllm bench serve`` prints in ``show``.

Figures are read from the committed real-vLLM CPU run 20261130T010035Z-vm (its run.json: engine.servers holds
server_version 0.32.0 and each server's command; versions.vllm is null) and worked by hand where stated.
"""

from __future__ import annotations

import pytest

from pipeline.diff.report import PROVENANCE_CELL_CHARS, format_markdown, format_text, provenance_cells
from pipeline.analysis.quality import run_quality, short_reasons
from tests.conftest import REPO

VLLM_RUN = REPO / "data" / "runs" / "20261130T010035Z-vm"


def test_short_reasons_one_line_each():
    pts = [{"model": "m", "input_len": 8, "concurrency": c, "samples": {"output_throughput_tok_s": [10.0, 10.0 * k]},
            "interference": {"wall_s": 2.0, "cpu_count": 2, "outside_share": share, "outside_load_cpus": 2 * share}}
           for c, k, share in ((1, 1.6, 0.5), (2, 2.5, 0.9), (4, 1.0, 0.3))]
    q = run_quality({"probe": {"warning": "bandwidth repeats spread 2.20x"}}, pts,
                    [{"model": "m", "implausible": "MBU above 1 at c = 1 (up to 1.50): x"},
                     {"model": "n", "implausible": "single stream 2 tok/s is above its bandwidth ceiling 1 tok/s: x"}])
    # the spreads 1.6 and 2.5 pass 1.5; all three shares pass 25 %
    assert short_reasons(q) == ["noisy bandwidth probe", "repeats disagree at 2 point(s), up to 2.50×",
                                "machine busy during 3 point(s), up to 90% of its CPUs",
                                "impossible figures (MBU above 1): m, n"]
    assert short_reasons({"verdict": "clean", "reasons": []}) == []


def test_provenance_cells_name_what_differs_and_stay_bounded():
    a = {"servers": {"m": {"port": 1, "command": "x" * 3000}}, "same": 1}
    b = {"servers": {"m": {"port": 2, "command": "x" * 3000}}, "same": 1}
    assert provenance_cells("engine", a, b) == [("engine.servers.m.port", "1", "2")]
    (row,) = provenance_cells("flags", {"k": list(range(2000))}, None)
    assert len(row[1]) == PROVENANCE_CELL_CHARS and row[1].endswith("…") and row[2] == "-"


@pytest.fixture(scope="module")
def vllm_view():
    if not VLLM_RUN.is_dir():
        pytest.skip(f"{VLLM_RUN} is not in this checkout")
    from pipeline.pages.views import view_of
    from pipeline.analysis.stages import load_run

    return view_of(load_run(VLLM_RUN))


def test_vllm_version_and_server_command(vllm_view, tmp_path):
    from pipeline.diff.comparability import provenance_of
    from pipeline.diff.rundiff import diff_runs
    from pipeline.pages.render import render_site
    from pipeline.pages.indexviews import run_page_path

    assert vllm_view.meta["versions"]["vllm"] is None  # as committed: the version lived only under engine.servers
    assert vllm_view.engine_version == "0.32.0"
    cmds = dict(vllm_view.server_commands)
    assert cmds["dense-llama-190m"].startswith(".venv-vllm/bin/python -m vllm.entrypoints.openai.api_server")
    assert provenance_of(vllm_view.results)["engine_version"] == "0.32.0"
    d = diff_runs(vllm_view.results, vllm_view.results)
    assert not [p for p in d.provenance if p.field.startswith("engine_flags.servers")]  # ports and pids: not flags
    render_site(tmp_path, runs=[VLLM_RUN.name])
    page = (tmp_path / run_page_path(VLLM_RUN.name)).read_text()
    assert "| engine version | 0.32.0 |" in page
    # escaped for Markdown (an underscore as &#95;), shown as given in the browser
    assert ("| server command (dense-llama-190m) | <code>.venv-vllm/bin/python -m vllm.entrypoints.openai.api&#95;server "
            "--model data/model-folders/dense-llama-190m-4e82ac1424f1") in page


def test_show_adds_what_vllm_bench_serve_prints():
    """c = 1 of dense-llama-190m: output 40.648 tok/s at output_len 32, so 40.648 / 32 = 1.270 requests/s and
    (64 + 32) × 1.270 = 121.9 total tok/s; the three repeats' output throughput 39.886 … 40.698 tok/s, 1.020×."""
    if not VLLM_RUN.is_dir():
        pytest.skip(f"{VLLM_RUN} is not in this checkout")
    import numpy as np

    from pipeline.views.show import format_table, show_run
    from pipeline.analysis.stages import load_run

    doc = show_run(VLLM_RUN)
    p = next(p for p in doc["points"] if p["model"] == "dense-llama-190m" and p["concurrency"] == 1)
    assert p["request_throughput_rps"] == pytest.approx(p["output_throughput_tok_s"] / 32)
    assert p["request_throughput_rps"] == pytest.approx(1.270, abs=1e-3)
    assert p["total_token_throughput_tok_s"] == pytest.approx(96 * p["request_throughput_rps"])
    spread = p["repeat_spread"]
    assert spread["n"] == 3 and spread["ratio"] == pytest.approx(spread["max"] / spread["min"]) == pytest.approx(1.020, abs=1e-3)
    s = next(s for s in load_run(VLLM_RUN).summaries if s.model == "dense-llama-190m" and s.concurrency == 1)
    assert p["tails_s"]["tpot"]["p95"] == pytest.approx(float(np.percentile(s.samples["tpot_s"], 95)))
    assert p["tails_s"]["tpot"]["p99_9"] == pytest.approx(float(np.percentile(s.samples["tpot_s"], 99.9)))
    assert p["tails_s"]["ttft"]["p99_9"] == pytest.approx(float(np.percentile(s.samples["ttft_s"], 99.9)))
    assert set(p["tpot_s"]) == {"p50", "p90", "p99", "mean"}  # the contract's fields stay exactly as they were
    header = format_table(doc).splitlines()[2]
    assert "req/s" in header and "total tok/s" in header and "TPOT p99.9 ms" in header


def test_ceiling_label_goes_where_no_line_crosses_it():
    """Hand case on the throughput chart's axes (560 × 300 px): ceiling 1,000 tok/s; measured 100 · 2^(log2 c) at
    c = 1 … 32 crosses it at log2 c = 3 + log10(1000/800) / log10(2) = 3.32; a roofline above it (1,200 … 2,000).
    A 10-character label spans 10 × 6 px / 560 px × 5 doublings = 0.536 of a doubling.  Left of the crossing,
    the roofline is 0.079 decades (12 px) above the rule and the measured line ≥ 0.68 decades below; right of it
    (anchors from log2 c = 3.4, after the crossing, up to 5 − 0.536) nothing lies below the rule: the plot's
    height, 300 px, wins, leftmost first: log2 c = 3.4, below.  With the knee at c = 11 (log2 3.46), anchors up
    to 3.5 put its rule under the text (± 0.05): 3.6."""
    from pipeline.pages.throughputchart import ceiling_label_place

    rows = [{"series": "measured (median)", "concurrency": 2 ** i, "tok_s": 100.0 * 2 ** i} for i in range(6)]
    rows += [{"series": "roofline prediction", "concurrency": 2 ** i, "tok_s": v}
             for i, v in enumerate((1200.0, 1500.0, 2000.0, 2000.0, 2000.0, 2000.0))]
    at, side = ceiling_label_place(1000.0, rows, 10)
    assert side == "below" and at == pytest.approx(2 ** 3.4)
    at, side = ceiling_label_place(1000.0, rows, 10, knee=11)
    assert side == "below" and at == pytest.approx(2 ** 3.6)
    # nowhere free (the label as wide as the plot, crossed by the measured line): None, the caller's last resort
    assert ceiling_label_place(1000.0, rows, 94) is None


def test_diff_carries_each_sides_interval_over_repeats(tmp_path):
    """Two hand-made runs (tests/runbuilder.py) at c = 1 with repeat multipliers 0.98, 1.00, 1.02 (A) and one repeat
    (B).  A's throughput per repeat is 1 / step_s(1, m) = 1 / (0.01125 m) = 90.703, 88.889, 87.146 tok/s: mean
    88.913, s = 1.7786, half-width t(0.975, 2) · s / √3 = 4.303 × 1.7786 / 1.732 = 4.418 → [84.494, 93.331]; B has
    one repeat: no interval (and no test).  The text table prints A as the median ± the half-width to two digits;
    the CSV the bounds.  The interval is of the values the test used, so the verdict is untouched by it."""
    import csv
    import io

    import tests.runbuilder as rb
    from pipeline.analysis import stages
    from pipeline.diff.report import format_csv, format_text, format_value_ci
    from pipeline.diff.rundiff import diff_runs

    a = rb.make_run(tmp_path, "a", models=("dense-a",), concurrency=(1,), noise=(0.98, 1.00, 1.02))
    b = rb.make_run(tmp_path, "b", models=("dense-a",), concurrency=(1,), noise=(1.0,))
    d = diff_runs(stages.load_run(a), stages.load_run(b))
    thr = next(c for c in d.changes if c.metric == "output_throughput_tok_s")
    assert thr.ci95_a == pytest.approx([84.4943, 93.3309], abs=1e-3) and thr.ci95_b is None
    assert thr.verdict == "~" and thr.p_value is None  # one repeat in B: no test, whatever A's interval
    line = next(x for x in format_text(d).split("output throughput (")[1].splitlines() if x.startswith("dense-a"))
    assert "88.89 ±4.4  88.89 " in line
    row = next(r for r in csv.DictReader(io.StringIO(format_csv(d))) if r["metric"] == "output_throughput_tok_s")
    assert float(row["ci95_a_low"]) == pytest.approx(84.4943, abs=1e-3) and row["ci95_b_low"] == ""
    assert format_value_ci(0.0123, [0.0111, 0.0135], "s") == "12.3 ms ±1.2 ms"
    assert format_value_ci(0.453, [0.441, 0.465], "fraction") == "45.3% ±1.2 pp"
    assert format_value_ci(1234.0, [1178.0, 1290.0], "tok/s") == "1234 ±56"


def test_a_diff_of_two_tuning_runs_names_each_rows_variant(tmp_path):
    """Fault kind: rows a reader cannot tell apart (``diff A B`` of two tuning runs printed dense-a 64/16 c = 4 once per
    variant, none naming its server setting, in the text, the Markdown and on the Changes page).  Each row of a
    variant other than ``default`` says ``model · variant``."""
    from pipeline.analysis import stages
    from pipeline.diff.rundiff import diff_runs
    from pipeline.pages.render import render_site
    from tests.runbuilder import make_variant_run

    a = make_variant_run(tmp_path / "runs", "20261129T000000Z-testhost", concurrency=(1, 4))
    b = make_variant_run(tmp_path / "runs", "20261130T000000Z-testhost", concurrency=(1, 4))
    d = diff_runs(stages.load_run(a), stages.load_run(b))
    assert {c.variant for c in d.changes} == {"default", "fp8-kv"}
    for text in (format_text(d), format_markdown(d)):
        rows = [line for line in text.splitlines() if "dense-a" in line and "64/16" in line]
        assert any("dense-a · fp8-kv" in r for r in rows) and any("dense-a · fp8-kv" not in r for r in rows)
    page = next(p for p in render_site(tmp_path / "pages", runs_dir=tmp_path / "runs")
                if p.parent.name == "changes" and p.stem == b.name.lower()).read_text()
    table = "\n".join(line for line in page.splitlines() if line.startswith("|"))  # the tables, not the chart's JSON
    assert "| dense-a · fp8-kv | 64 / 16 |" in table and "| dense-a | 64 / 16 |" in table
