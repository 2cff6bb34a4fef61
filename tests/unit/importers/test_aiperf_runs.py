"""AIPerf's sweeps and repeated profile runs (:mod:`pipeline.importers.aiperf_runs`): shapes and concurrencies of one
run, and the repeats of each point.

Fixtures (``tests/data/README.md``, every figure invented, chosen to be worked by hand):
``aiperf-sweep/concurrency-sweep/`` follows ai-dynamo/aiperf ``docs/tutorials/parameter-sweeping.md`` ("Output
Structure (Sweep + Confidence)", repeated mode: ``--concurrency 10,20 --num-profile-runs 2``);
``aiperf-sweep/isl-osl-sweep/`` follows ``docs/tutorials/sweeps.md`` ("Sweep + Multi-Run": a scenario sweep of two
ISL/OSL pairs with ``multi_run.num_runs`` 2, ``variation_NNNN_<label>/profile_runs/run_NNNN/``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.core.errors import BatchmarkError
from pipeline.importers import parse

from tests.conftest import DATA

SWEEP = DATA / "aiperf-sweep"
CONC = SWEEP / "concurrency-sweep" / "artifacts" / "llama-3-8b-openai-chat-concurrency_sweep"
SHAPES = SWEEP / "isl-osl-sweep" / "artifacts"


def _export(trial: int, c: int) -> Path:
    return CONC / "profile_runs" / f"trial_{trial:04d}" / f"concurrency_{c}" / "profile_export_aiperf.json"


def _points(res) -> dict:
    return {(p.input_len, p.output_len, p.concurrency): p for p in res.summaries}


def test_concurrency_sweep_with_trials_is_one_point_per_value_of_two_repeats():
    """trial_0001 and trial_0002 of each concurrency_N are its repeats.  By hand: c = 10 output throughput 1250 and
    1230 → median 1240.0; c = 20: 2010, 1990 → 2000.0; the exports' loadgen.concurrency is the swept list [10, 20],
    each value read from its concurrency_N folder; per-user = 1 / ITL p50 7.7 ms = 129.87 tok/s.  The aggregates
    (aggregate/concurrency_N/, sweep_aggregate/) are not exports: left out of a folder import."""
    pts = _points(parse("aiperf", [CONC]))
    assert set(pts) == {(512, 128, 10), (512, 128, 20)}
    assert pts[512, 128, 10].output_throughput_tok_s == 1240.0
    assert pts[512, 128, 10].samples["output_throughput_tok_s"] == [1250.0, 1230.0]
    assert pts[512, 128, 20].output_throughput_tok_s == 2000.0 and pts[512, 128, 20].repeats == 2
    assert pts[512, 128, 10].per_user_tok_s == pytest.approx(1 / 0.0077)


def test_aggregates_given_beside_their_runs_are_left_out_and_alone_refused():
    files = sorted(CONC.rglob("*.json"))  # the 4 exports, 2 per-value aggregates and the sweep aggregate
    assert len(files) == 7 and len(parse("aiperf", files).summaries) == 2
    with pytest.raises(BatchmarkError, match=r"profile_export_aiperf_sweep.json: field metadata.aggregation_type: "
                                             r"AIPerf's aggregate"):
        parse("aiperf", [CONC / "sweep_aggregate" / "profile_export_aiperf_sweep.json"])


def test_isl_osl_sweep_is_one_run_of_two_shapes_and_its_pages_section(scratch_root):
    """Two ISL/OSL pairs at c = 8, two runs each: shapes 128/32 (610, 590 → 600.0 tok/s) and 2048/256 (820, 800 →
    810.0); imported with the concurrency sweep, one run of three shapes whose tuning section has a frontier each."""
    from pipeline.analysis.stages import load_run
    from pipeline.cli import main
    from pipeline.core import paths
    from pipeline.pages.tuning import tuning_section
    from pipeline.pages.views import view_of

    pts = _points(parse("aiperf", [SHAPES]))
    assert {k: (p.output_throughput_tok_s, p.repeats) for k, p in pts.items()} == {
        (128, 32, 8): (600.0, 2), (2048, 256, 8): (810.0, 2)}
    assert main(["import", "aiperf", str(SHAPES), str(CONC), "--hardware", "h200", "--run-id",
                 "20261202T100000Z-aiperf"]) == 0
    section = tuning_section(view_of(load_run(paths.runs_dir() / "20261202T100000Z-aiperf")), "llama-3-8b")
    assert sorted((f["input_len"], f["output_len"]) for f in section["frontiers"]) == [(128, 32), (512, 128),
                                                                                      (2048, 256)]


def _copy_export(src: Path, dest: Path, **changes) -> Path:
    d = json.loads(src.read_text())
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = d
        for p in parents:
            node = node[p]
        node[leaf] = value
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(d))
    return dest


def test_exports_of_identical_settings_made_by_hand_are_repeats(tmp_path):
    """Two runs of `aiperf profile` by hand into two artifact folders: the same settings (input_config less where the
    files went), so one point of 2 repeats, not 'two results for the same point'.  By hand: 1250, 1100 → 1175.0."""
    a = _copy_export(_export(1, 10), tmp_path / "first" / "profile_export_aiperf.json",
                     input_config__output={"artifact_directory": "first"}, input_config__loadgen={"concurrency": 10})
    b = _copy_export(_export(1, 10), tmp_path / "second" / "profile_export_aiperf.json",
                     input_config__output={"artifact_directory": "second"}, input_config__loadgen={"concurrency": 10},
                     output_token_throughput__avg=1100.0)
    (p,) = parse("aiperf", [a, b]).summaries
    assert (p.repeats, p.output_throughput_tok_s) == (2, 1175.0)


def test_a_repeat_with_other_settings_is_refused_naming_file_and_field(tmp_path):
    """The same point (c = 10, 512/128) profiled with another random seed: not one point measured again; one line
    naming the file and the setting."""
    a = _copy_export(_export(1, 10), tmp_path / "a" / "concurrency_10" / "profile_export_aiperf.json")
    b = _copy_export(_export(2, 10), tmp_path / "b" / "concurrency_10" / "profile_export_aiperf.json",
                     input_config__input__random_seed=7)
    with pytest.raises(BatchmarkError, match=rf"^{b}: field input_config.input.random_seed: 7, but {a} of the same "
                                             r"point says 42: a repeat with other settings$"):
        parse("aiperf", [a, b])


def test_a_swept_list_outside_its_folder_is_refused_naming_the_field(tmp_path):
    """loadgen.concurrency [10, 20] in an export that is not in a concurrency_N folder: which one ran is unknown."""
    f = tmp_path / "profile_export_aiperf.json"
    shutil.copy(_export(1, 10), f)
    with pytest.raises(BatchmarkError, match=r"field input_config.loadgen.concurrency: is \[10, 20\]"):
        parse("aiperf", [f])
