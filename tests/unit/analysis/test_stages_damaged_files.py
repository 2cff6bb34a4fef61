"""A derived file damaged by hand is refused in one line naming the file, the point and the field.

Since derived files are stored at publish, ``show``, ``diff``, ``predict`` and the pages read ``summaries.json`` and ``analysis.json`` as stored,
never recomputing them, so a value of the wrong type there (a hand edit, a bad merge of a JSON file) reached the
code that formats or compares it: ``TypeError: '<' not supported between instances of 'int' and 'str'`` and other
tracebacks (found by the breaker trial of 2026-12-01).  Each case here damaged one value of a hand-made run
(tests/runbuilder.py) and every command must exit 2 with one ``batchmark: error:`` line.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from pipeline import cli
from pipeline.core.pointsummary import summary_mismatch
from tests.runbuilder import make_run


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(args))
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> Path:
    """A complete run of one model (one workload): served closed-loop points c = 1, 2, 4 and one open-loop (Poisson)
    point: 4 points."""
    return make_run(tmp_path_factory.mktemp("runs"), "good", models=("dense-a",), concurrency=(1, 2, 4),
                    served_requests=16, open_loop_rates=(1.0,))


def damaged(good_run: Path, tmp_path: Path, name: str, edit) -> Path:
    """A copy of ``good_run`` whose derived file ``name`` went through ``edit`` (a function of its mapping)."""
    run = tmp_path / "damaged"
    shutil.copytree(good_run, run)
    data = json.loads((run / name).read_text())
    edit(data)
    (run / name).write_text(json.dumps(data))
    return run


def set_summary(field: str, value):
    def edit(d):
        d["points"][0][field] = value
    return edit


def set_analysis(part: str, field: str, value):
    def edit(d):
        d[part][0][field] = value
    return edit


CASES = [
    # (file, edit, words the one line must hold)
    ("summaries.json", set_summary("concurrency", "x"), "points[0]: concurrency: expected int | None, got 'x'"),
    ("summaries.json", set_summary("output_throughput_tok_s", "x"), "points[0]: output_throughput_tok_s: expected float"),
    ("summaries.json", set_summary("output_throughput_tok_s", True), "output_throughput_tok_s: expected float"),
    ("summaries.json", set_summary("tails_s", [1]), "points[0]: tails_s: expected"),
    ("summaries.json", set_summary("ttft_s", {"p50": "slow"}), "points[0]: ttft_s.p50: expected float | None, got 'slow'"),
    ("summaries.json", set_summary("load", "weird"), "points[0]: PointKey.load 'weird' is not one of"),
    ("analysis.json", set_analysis("points", "mbu", "x"), "analysis.json: points.0.mbu: Input should be a valid number"),
    ("analysis.json", set_analysis("models", "peak_output_throughput_tok_s", "x"),
     "analysis.json: models.0.peak_output_throughput_tok_s: Input should be a valid number"),
]


@pytest.mark.parametrize("name, edit, words", CASES, ids=[c[2][:40] for c in CASES])
def test_a_damaged_value_is_one_line_for_every_reader(good_run, tmp_path, name, edit, words):
    run = damaged(good_run, tmp_path, name, edit)
    for args in (["show", str(run)], ["show", "--json", str(run)], ["diff", str(run), str(good_run)],
                 ["diff", str(good_run), str(run)], ["predict", str(run)], ["predict", "--json", str(run)]):
        rc, out, err = run_cli(*args)
        assert rc == 2, (args, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("batchmark: error: "), (args, err)
        assert str(run / name) in lines[0] and words in lines[0], (args, lines[0])


def test_the_named_command_writes_a_damaged_summaries_file_again(good_run, tmp_path):
    """The remedy the line names (summarize, then analyze) gives back the run as published."""
    run = damaged(good_run, tmp_path, "summaries.json", set_summary("output_throughput_tok_s", "x"))
    rc, _, err = run_cli("show", str(run))
    assert rc == 2 and f"`batchmark write-summaries {run} && batchmark analyze {run}`" in err
    assert run_cli("summarize", str(run))[0] == 0 and run_cli("analyze", str(run))[0] == 0
    for name in ("summaries.json", "analysis.json"):
        assert (run / name).read_bytes() == (good_run / name).read_bytes(), name
    assert run_cli("show", str(run))[0] == 0


def test_every_stored_summary_type_is_accepted(good_run):
    """No false alarm: every summary the stages wrote passes, and an int where a float is typed is a number (JSON
    from other tools writes 2.0 as 2)."""
    points = json.loads((good_run / "summaries.json").read_text())["points"]
    assert [summary_mismatch(p) for p in points] == [None] * len(points)
    assert summary_mismatch({**points[0], "output_throughput_tok_s": 3}) is None
    assert summary_mismatch({**points[0], "samples": {"tpot_s": [0.01, None]}}) is None  # as show reads them
    assert summary_mismatch({**points[0], "samples": {"tpot_s": [0.01, "x"]}}) == "samples.tpot_s[1]: expected float | None, got 'x'"


@pytest.mark.parametrize("cut", ["first", "duplicate"])
def test_summaries_of_other_points_than_the_runs_are_refused(good_run, tmp_path, cut):
    """A summaries.json that lost a point (or holds one twice) no longer shows, diffs and publishes fewer points
    than were measured without a word: one line naming the file, the first point that differs and the command."""
    def edit(d):
        if cut == "first":
            del d["points"][0]
        else:
            d["points"].append(d["points"][0])
    run = damaged(good_run, tmp_path, "summaries.json", edit)
    for args in (["show", str(run)], ["diff", str(run), str(good_run)], ["predict", str(run)]):
        rc, _, err = run_cli(*args)
        assert rc == 2 and len(err.strip().splitlines()) == 1, (args, err)
        assert f"{run / 'summaries.json'}: does not match the run's points: " in err
        assert ("1 point(s) of points.json not summarized (first: points/dense-a/transformers-in64-out16-c1.json)"
                if cut == "first" else "a point summarized twice") in err
        assert f"`batchmark write-summaries {run} && batchmark analyze {run}`" in err


@pytest.mark.parametrize("part, words", [("models", "0 model entr(ies) for the 1 workload(s) of summaries.json"),
                                         ("points", "3 point row(s) for the 4 point(s) of summaries.json")])
def test_an_analysis_of_other_summaries_is_refused(good_run, tmp_path, part, words):
    """An analysis.json that lost a model entry (its knee, ceiling, rate sweep) or a point row (its MBU) is refused
    in one line naming the file and `batchmark analyze`, not shown and published without them."""
    def edit(d):
        del d[part][0]
    run = damaged(good_run, tmp_path, "analysis.json", edit)
    for args in (["show", str(run)], ["diff", str(run), str(good_run)], ["predict", str(run)]):
        rc, _, err = run_cli(*args)
        assert rc == 2 and len(err.strip().splitlines()) == 1, (args, err)
        assert f"{run / 'analysis.json'}: does not match summaries.json: {words}; write it again with " \
               f"`batchmark analyze {run}`" in err
    assert run_cli("analyze", str(run))[0] == 0 and run_cli("show", str(run))[0] == 0
