"""batchmark's ``vllm-bench`` importer on REAL files of vLLM 0.32.0.

The files under ``tests/data/vllm-real-0.32/`` were written by vLLM's own ``vllm bench serve --save-result`` (with
its stdout) and ``vllm bench sweep serve`` (CPU build, ``.venv-vllm``); ``tests/data/README.md`` gives the commands,
the date and the version, and ``benchmarks/vllm_real_files.py`` makes them again (``tests/integration/
test_vllm_real_files.py`` does so with the vLLM installed, to catch a format change).

Every expected value here is read from vLLM's own files in the test, never typed in: what batchmark imports must
equal what vLLM wrote, by vLLM's definitions (``vllm/benchmarks/serve.py``): output throughput = output tokens /
``duration`` (``output_throughput``); TTFT and TPOT p50 = ``median_ttft_ms`` / ``median_tpot_ms``; vLLM's ITL is
one gap per streamed chunk, so it lands in ``itl_chunk_s`` and the per-token ``itl_s`` stays empty.  A sweep's
``run=N.json`` are repeats of one point per concurrency (the median of the repeats' figures, each repeat's kept),
``warmup.json`` ("excluded from summary statistics") never counts, ``summary.json`` / ``summary.csv`` are not read
as results of their own.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median

import pytest

from pipeline.cli import main
from pipeline.core.errors import BatchmarkError
from pipeline.importers import parse
from pipeline.views.show import show_run

from tests.conftest import DATA

REAL = DATA / "vllm-real-0.32"
BENCH = REAL / "bench-serve"
EXPERIMENT = REAL / "sweep" / "20261201_160717"
CONCURRENCIES = (1, 4)


def comb(c: int) -> Path:
    """vllm bench sweep serve's folder of bench params ``{"max_concurrency": c}``."""
    return EXPERIMENT / f"BENCH--max_concurrency={c}"


def load(path: Path):
    return json.loads(path.read_text())


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


# -- vllm bench serve --save-result: one JSON per concurrency -----------------------------------

@pytest.mark.parametrize("c", CONCURRENCIES)
def test_bench_serve_json_imports_vllms_figures(c):
    d = load(BENCH / f"c{c}.json")
    (p,) = parse("vllm-bench", [BENCH / f"c{c}.json"]).summaries
    assert (p.model, p.engine) == (d["model_id"], "vllm") == ("agreement-llama", "vllm")
    # closed loop at --max-concurrency c: request_rate "inf"
    assert (d["request_rate"], d["max_concurrency"]) == ("inf", c)
    assert (p.load, p.concurrency, p.rate_rps, p.max_concurrency) == ("closed", c, None, None)
    assert (p.completed, p.failed, p.repeats) == (d["completed"], d["failed"], 1) == (8, 0, 1)
    assert (p.input_len, p.output_len) == (d["total_input_tokens"] // 8, d["total_output_tokens"] // 8) == (32, 32)
    # vLLM's output throughput: output tokens / the benchmark's duration
    assert p.output_throughput_tok_s == pytest.approx(d["output_throughput"], rel=1e-12)
    assert p.output_throughput_tok_s == pytest.approx(d["total_output_tokens"] / d["duration"], rel=1e-12)
    for ours, theirs in (("ttft_s", "ttft"), ("tpot_s", "tpot"), ("itl_chunk_s", "itl"), ("e2el_s", "e2el")):
        dist = getattr(p, ours)
        assert dist["p50"] == pytest.approx(d[f"median_{theirs}_ms"] / 1e3, rel=1e-12), ours
        assert dist["mean"] == pytest.approx(d[f"mean_{theirs}_ms"] / 1e3, rel=1e-12), ours
        assert dist["p99"] == pytest.approx(d[f"p99_{theirs}_ms"] / 1e3, rel=1e-12), ours
        assert dist["p90"] is None  # --metric-percentiles was vLLM's default (99): no p90 in the file
    assert p.itl_s is None  # vLLM measured per chunk, not per token
    assert p.per_user_tok_s == pytest.approx(1e3 / d["median_tpot_ms"], rel=1e-12)
    assert p.step_time_s == pytest.approx(d["median_tpot_ms"] / 1e3, rel=1e-12)


def test_bench_serve_folder_of_jsons_is_one_point_per_concurrency():
    got = {p.concurrency: p.output_throughput_tok_s
           for p in parse("vllm-bench", [BENCH / "c1.json", BENCH / "c4.json"]).summaries}
    assert got == {c: pytest.approx(load(BENCH / f"c{c}.json")["output_throughput"], rel=1e-12) for c in CONCURRENCIES}


# -- vllm bench serve's stdout: the printed "Serving Benchmark Result" block ----------------------

@pytest.mark.parametrize("c", CONCURRENCIES)
def test_bench_serve_stdout_imports_the_same_figures_as_its_json(c):
    """The block prints vLLM's figures rounded to 0.01 ({:<10.2f}); the model is read from the Namespace(...) line
    vLLM prints first (fix of the real stdout was refused for want of --model)."""
    d = load(BENCH / f"c{c}.json")  # the same run's --save-result
    (p,) = parse("vllm-bench", [BENCH / f"c{c}.txt"]).summaries
    assert p.model == d["model_id"]
    assert (p.load, p.concurrency, p.completed, p.failed) == ("closed", c, d["completed"], d["failed"])
    assert (p.input_len, p.output_len) == (32, 32)
    assert p.output_throughput_tok_s == pytest.approx(round(d["output_throughput"], 2), abs=1e-9)
    for ours, theirs in (("ttft_s", "ttft"), ("tpot_s", "tpot"), ("itl_chunk_s", "itl"), ("e2el_s", "e2el")):
        dist = getattr(p, ours)
        for q, key in (("p50", "median"), ("mean", "mean"), ("p99", "p99")):
            assert dist[q] == pytest.approx(round(d[f"{key}_{theirs}_ms"], 2) / 1e3, abs=1e-12), (ours, q)
    assert p.itl_s is None


def test_bench_serve_stdout_model_option_overrides_and_a_bare_block_still_asks_for_it(tmp_path):
    text = (BENCH / "c4.txt").read_text()
    (p,) = parse("vllm-bench", [BENCH / "c4.txt"], model="my/llama").summaries
    assert p.model == "my/llama"
    bare = tmp_path / "block.txt"  # the block alone, as copied from a terminal
    bare.write_text("\n".join(line for line in text.splitlines() if not line.startswith("Namespace(")) + "\n")
    with pytest.raises(BatchmarkError, match=r"block.txt: line \d+: the printed Serving Benchmark Result block names no "
                                             r"model; pass --model"):
        parse("vllm-bench", [bare])


# -- vllm bench sweep serve: run=N.json repeats, warmup.json, summary.json, summary.csv ----------

def _check_sweep_point(p, c: int) -> None:
    runs = [load(comb(c) / f"run={i}.json") for i in (0, 1)]
    assert [r["run_number"] for r in runs] == [0, 1] and all(r["max_concurrency"] == c for r in runs)
    assert (p.model, p.load, p.concurrency, p.repeats) == ("agreement-llama", "closed", c, 2)
    assert (p.completed, p.failed) == (sum(r["completed"] for r in runs), sum(r["failed"] for r in runs)) == (16, 0)
    assert (p.input_len, p.output_len) == (32, 32)
    # one output-throughput sample per repeat, the point's figure their median (of two: their mean)
    assert p.samples["output_throughput_tok_s"] == pytest.approx([r["output_throughput"] for r in runs], rel=1e-12)
    assert p.output_throughput_tok_s == pytest.approx(median(r["output_throughput"] for r in runs), rel=1e-12)
    assert p.samples["ttft_s_per_repeat"] == pytest.approx([r["median_ttft_ms"] / 1e3 for r in runs], rel=1e-12)
    assert p.samples["tpot_s_per_repeat"] == pytest.approx([r["median_tpot_ms"] / 1e3 for r in runs], rel=1e-12)
    for ours, theirs in (("ttft_s", "ttft"), ("tpot_s", "tpot"), ("itl_chunk_s", "itl"), ("e2el_s", "e2el")):
        assert getattr(p, ours)["p50"] == pytest.approx(median(r[f"median_{theirs}_ms"] / 1e3 for r in runs),
                                                        rel=1e-12), ours
    assert p.itl_s is None
    # the warm-up (run_number -1, 4 prompts) is in none of it
    warm = load(comb(c) / "warmup.json")
    assert (warm["run_number"], warm["num_prompts"]) == (-1, 4)
    assert warm["output_throughput"] not in p.samples["output_throughput_tok_s"]


@pytest.mark.parametrize("paths", [
    [EXPERIMENT],  # the experiment folder: summary.csv, and per concurrency warmup.json, run=N.json, summary.json
    [EXPERIMENT.parent],  # vllm bench sweep serve's -o folder
    [comb(1), comb(4)],  # the two combination folders
    [comb(c) / f"run={i}.json" for c in CONCURRENCIES for i in (0, 1)],  # the run files alone
    [comb(c) / f"run={i}.json" for c in CONCURRENCIES for i in (0, 1)] + [EXPERIMENT / "summary.csv"],
    [comb(c) / "summary.json" for c in CONCURRENCIES],  # the lists of the runs alone
])
def test_sweep_repeats_import_as_repeats_of_one_point_per_concurrency(paths):
    points = sorted(parse("vllm-bench", paths).summaries, key=lambda p: p.concurrency)
    assert [p.concurrency for p in points] == list(CONCURRENCIES)
    for p, c in zip(points, CONCURRENCIES):
        _check_sweep_point(p, c)


def test_sweep_warmup_json_alone_is_refused_naming_it(capsys, scratch_root):
    path = comb(4) / "warmup.json"
    with pytest.raises(BatchmarkError, match=r"warmup.json: holds only vllm bench sweep's warm-up \(run_number -1"):
        parse("vllm-bench", [path])
    assert main(["import", "vllm-bench", str(path), "--hardware", "cpu"]) == 2
    assert "warmup.json" in _one_line(capsys)


def test_sweep_summary_csv_alone_is_refused_naming_what_to_import(capsys, scratch_root):
    path = EXPERIMENT / "summary.csv"
    assert main(["import", "vllm-bench", str(path), "--hardware", "cpu"]) == 2
    err = _one_line(capsys)
    assert "summary.csv" in err and "run=N.json" in err


def test_sweep_folder_through_the_cli_stores_the_repeats(capsys, scratch_root):
    """`batchmark import vllm-bench <experiment folder> --hardware cpu` as a user types it, then `show --json`."""
    assert main(["import", "vllm-bench", str(EXPERIMENT), "--hardware", "cpu", "--run-id", "real-sweep"]) == 0
    run = Path(capsys.readouterr().out.strip())
    doc = show_run(run)
    assert doc["source"] == "imported:vllm-bench"
    got = {p["concurrency"]: p for p in doc["points"]}
    assert sorted(got) == list(CONCURRENCIES)
    for c in CONCURRENCIES:
        runs = [load(comb(c) / f"run={i}.json") for i in (0, 1)]
        assert (got[c]["repeats"], got[c]["completed"], got[c]["failed"]) == (2, 16, 0)
        assert got[c]["output_throughput_tok_s"] == pytest.approx(median(r["output_throughput"] for r in runs),
                                                                  rel=1e-9)
        assert got[c]["tpot_s"]["p50"] == pytest.approx(median(r["median_tpot_ms"] for r in runs) / 1e3, rel=1e-9)
        assert got[c]["itl_s"] is None
    sources = load(run / "run.json")["source_files"]
    assert len(sources) == 9 and not any(s.endswith(".bin") for s in sources)  # 2 × (run=0, run=1, summary, warmup) + csv


# -- vllm bench serve --save-detailed: the per-request lists --------------------------------------

@pytest.mark.parametrize("c", CONCURRENCIES)
def test_bench_serve_save_detailed_json_imports_vllms_figures(c):
    """With --save-detailed vLLM keeps one entry per request (ttfts, output_lens, itls, errors, ...); TTFT is then
    computed from ttfts (numpy's linear percentiles, as vLLM's own), the rest read as stated."""
    d = load(BENCH / f"c{c}-detailed.json")
    assert len(d["ttfts"]) == len(d["output_lens"]) == len(d["errors"]) == d["completed"] == 8
    (p,) = parse("vllm-bench", [BENCH / f"c{c}-detailed.json"]).summaries
    assert (p.load, p.concurrency, p.completed, p.failed) == ("closed", c, 8, 0)
    assert (p.input_len, p.output_len) == (median(d["input_lens"]), median(d["output_lens"])) == (32, 32)
    assert p.output_throughput_tok_s == pytest.approx(d["output_throughput"], rel=1e-12)
    assert p.ttft_s["p50"] == pytest.approx(d["median_ttft_ms"] / 1e3, rel=1e-9)
    assert p.ttft_s["mean"] == pytest.approx(d["mean_ttft_ms"] / 1e3, rel=1e-9)
    assert p.ttft_s["p99"] == pytest.approx(d["p99_ttft_ms"] / 1e3, rel=1e-9)
    assert p.tpot_s["p50"] == pytest.approx(d["median_tpot_ms"] / 1e3, rel=1e-12)
    assert p.itl_chunk_s["p50"] == pytest.approx(d["median_itl_ms"] / 1e3, rel=1e-12) and p.itl_s is None


# -- vllm bench sweep serve --show-stdout: every run's printed block, after "Run Number: N" ---------

SHOWN = REAL / "sweep-show-stdout"
SHOWN_EXPERIMENT = SHOWN / "sweep" / "20261201_161414"


def test_sweep_log_blocks_are_repeats_and_its_warmup_is_left_out():
    """The sweep's own log (--show-stdout) prints each run's block after "Run Number: N" (-1: the warm-up).  Before
    the fix the warm-up block was read as a measurement and the two runs of c = 1 refused as "two results
    for the same point".  Right value: each point's repeats are the run=0/run=1 blocks, equal to that sweep's
    run=N.json rounded as printed (0.01), and the warm-up's figures are in none of them."""
    points = sorted(parse("vllm-bench", [SHOWN / "sweep.log"]).summaries, key=lambda p: p.concurrency)
    assert [p.concurrency for p in points] == list(CONCURRENCIES)
    for p, c in zip(points, CONCURRENCIES):
        folder = SHOWN_EXPERIMENT / f"BENCH--max_concurrency={c}"
        runs = [load(folder / f"run={i}.json") for i in (0, 1)]
        assert (p.model, p.load, p.repeats, p.completed, p.failed) == ("agreement-llama", "closed", 2, 16, 0)
        assert p.samples["output_throughput_tok_s"] == pytest.approx(
            [round(r["output_throughput"], 2) for r in runs], abs=1e-9)
        assert p.samples["tpot_s_per_repeat"] == pytest.approx([round(r["median_tpot_ms"], 2) / 1e3 for r in runs],
                                                               abs=1e-12)
        warm = load(folder / "warmup.json")
        assert round(warm["output_throughput"], 2) not in p.samples["output_throughput_tok_s"]
    # the same sweep's folder gives the same points (to the printed rounding)
    folder_points = {p.concurrency: p for p in parse("vllm-bench", [SHOWN_EXPERIMENT]).summaries}
    for p in points:
        assert p.output_throughput_tok_s == pytest.approx(folder_points[p.concurrency].output_throughput_tok_s,
                                                          abs=0.01)


def test_sweep_log_of_only_the_warmup_is_refused_naming_it(tmp_path):
    text = (SHOWN / "sweep.log").read_text()
    first_run = text.index("Run Number: 0")
    only_warmup = tmp_path / "warmup.log"
    only_warmup.write_text(text[:first_run])
    with pytest.raises(BatchmarkError, match=r"warmup.log: holds only vllm bench sweep's warm-up \(1 block\(s\) after "
                                             r"'Run Number: -1'\)"):
        parse("vllm-bench", [only_warmup])


# -- open loop: vllm bench serve --request-rate 4, uncapped and with --max-concurrency 2 ----------

@pytest.mark.parametrize("name, cap", [("rate4-c0", None), ("rate4-c2", 2)])
def test_bench_serve_request_rate_is_an_open_loop_point(name, cap):
    """A finite request_rate is open loop (Poisson at burstiness 1), never a closed-loop point at its cap; the cap
    (max_concurrency, None when not given) is kept apart; the achieved rate is vLLM's request_throughput.  The
    printed stdout of the same run says the same ("Traffic request rate: 4.0", "Maximum request concurrency: None"
    or 2, "Request rate configured (RPS): 4.00")."""
    d = load(BENCH / f"{name}.json")
    assert (d["request_rate"], d["burstiness"], d["max_concurrency"]) == (4.0, 1.0, cap)
    (p,) = parse("vllm-bench", [BENCH / f"{name}.json"]).summaries
    (q,) = parse("vllm-bench", [BENCH / f"{name}.txt"]).summaries
    for x, digits in ((p, None), (q, 2)):
        def r(v, digits=digits):
            return v if digits is None else round(v, digits)

        assert (x.load, x.concurrency, x.rate_rps, x.max_concurrency, x.burstiness) == ("poisson", None, 4.0, cap, 1.0)
        assert (x.completed, x.failed) == (d["completed"], d["failed"]) == (8, 0)
        assert x.achieved_rate_rps == pytest.approx(r(d["request_throughput"]), abs=1e-9)
        assert x.output_throughput_tok_s == pytest.approx(r(d["output_throughput"]), abs=1e-9)
        assert x.tpot_s["p50"] == pytest.approx(r(d["median_tpot_ms"]) / 1e3, abs=1e-12)
        assert x.itl_chunk_s["p50"] == pytest.approx(r(d["median_itl_ms"]) / 1e3, abs=1e-12) and x.itl_s is None


# -- vllm bench sweep serve --continue-on-error: a run whose requests all failed, a run that crashed ---

ALL_FAILED = REAL / "sweep-all-failed" / "20261201_161937"
CRASHED = REAL / "sweep-crashed-run" / "20261201_162043"


def test_sweep_run_whose_requests_all_failed_is_refused_naming_it(capsys, scratch_root):
    """Bench params random_input_len 1000 beside --max-model-len 512: vLLM 0.32 wrote run=0.json with completed 0,
    failed 8 (read here); the import refuses it in one line naming that file, and the good combination beside it
    imports alone."""
    bad = ALL_FAILED / "BENCH--max_concurrency=1-random_input_len=1000" / "run=0.json"
    d = load(bad)
    assert (d["completed"], d["failed"]) == (0, 8)
    assert main(["import", "vllm-bench", str(ALL_FAILED), "--hardware", "cpu"]) == 2
    err = _one_line(capsys)
    assert "random_input_len=1000/run=0.json" in err and "no request completed (8 failed)" in err
    (p,) = parse("vllm-bench", [ALL_FAILED / "BENCH--max_concurrency=1"]).summaries
    good = load(ALL_FAILED / "BENCH--max_concurrency=1" / "run=0.json")
    assert (p.concurrency, p.repeats, p.completed, p.failed) == (1, 1, good["completed"], 0)
    assert p.output_throughput_tok_s == pytest.approx(good["output_throughput"], rel=1e-12)


def test_sweep_crashed_run_record_alone_is_refused_naming_it(capsys, scratch_root):
    """A run whose vllm bench serve exited (bench params dataset_name no-such-dataset) leaves only
    run=0.failure.json (run_number, error_type, error, overrides; read here).  Before the fix the import
    said "field model_id: missing; pass --model"; now it names the record for what it is."""
    record = CRASHED / "BENCH--max_concurrency=4-dataset_name=no-such-dataset" / "run=0.failure.json"
    assert (load(record)["run_number"], load(record)["error_type"]) == (0, "CalledProcessError")
    assert main(["import", "vllm-bench", str(CRASHED), "--hardware", "cpu"]) == 2
    err = _one_line(capsys)
    assert "run=0.failure.json: vllm bench sweep's record of a failed run (run_number 0, CalledProcessError)" in err
    assert "model_id" not in err
    (p,) = parse("vllm-bench", [CRASHED / "BENCH--max_concurrency=1"]).summaries
    assert (p.concurrency, p.repeats, p.caveats) == (1, 1, {})


def test_sweep_crashed_run_beside_other_runs_flags_their_point(tmp_path):
    """A point of three runs, one of which crashed: the real c = 4 folder of the 2-run sweep with the real failure
    record beside it, renamed run=2.failure.json and its run_number set to 2 (the only edit).  The two results are
    the point (nothing of the failed run in it) and the point is flagged."""
    import shutil

    folder = tmp_path / "BENCH--max_concurrency=4"
    shutil.copytree(comb(4), folder)
    record = load(CRASHED / "BENCH--max_concurrency=4-dataset_name=no-such-dataset" / "run=0.failure.json")
    (folder / "run=2.failure.json").write_text(json.dumps({**record, "run_number": 2}))
    (p,) = parse("vllm-bench", [folder]).summaries
    _check_sweep_point(p, 4)  # the same figures as without the record
    assert p.caveats == {"sweep_runs_failed": 1}
    assert p.errors == ["vllm bench sweep run 2 failed (CalledProcessError; run=2.failure.json): left out"]


# -- vllm bench sweep serve --serve-params: the same point on different servers = one run, two variants ------------

SERVE_SWEEP = REAL / "sweep-serve-params" / "20261201_162551"


def test_sweep_over_serve_params_imports_as_variants_of_one_run():
    """--serve-params [{max_num_seqs: 2}, {max_num_seqs: 4}] with one bench combination (max_concurrency 4): vLLM
    wrote the same point once per server (run=0.json in each SERVE-… folder, max_num_seqs written into it by the
    sweep's _update_run_data).  Each server is a variant named from its combination (max_num_seqs=2 →
    max_num_seqs_2), the first server run (the earlier date) the baseline, its settings read from the run; each
    point's figures are vLLM's own (before: refused, "import each combination as a run of its own")."""
    folders = sorted(p for p in SERVE_SWEEP.iterdir() if p.is_dir())
    assert [load(f / "run=0.json")["max_num_seqs"] for f in folders] == [2, 4]
    res = parse("vllm-bench", [SERVE_SWEEP])
    assert res.variants == [{"name": "max_num_seqs_2", "baseline": True, "settings": {"max_num_seqs": 2}},
                            {"name": "max_num_seqs_4", "baseline": False, "settings": {"max_num_seqs": 4}}]
    by_variant = {p.variant: p for p in res.summaries}
    for f in folders:
        d = load(f / "run=0.json")
        p = by_variant[f"max_num_seqs_{d['max_num_seqs']}"]
        assert (p.concurrency, p.repeats, p.completed) == (4, 1, d["completed"])
        assert p.output_throughput_tok_s == pytest.approx(d["output_throughput"], rel=1e-12)
        assert p.tpot_s["p50"] == pytest.approx(d["median_tpot_ms"] / 1e3, rel=1e-12)


def test_runs_of_different_servers_never_merge_as_repeats(tmp_path):
    """Two results of one point with distinct run numbers merge as repeats only from one combination's folder: here
    run 0 of the max_num_seqs=2 server and run 0 of the max_num_seqs=4 server saved as run=1.json with run_number 1
    (the only edit: as if that server's run 0 had crashed) were merged as two repeats of one point before; they are
    one point of each variant, one repeat each."""
    for n, run in ((2, 0), (4, 1)):
        src = SERVE_SWEEP / f"SERVE--max_num_seqs={n}-BENCH--max_concurrency=4" / "run=0.json"
        dest = tmp_path / f"SERVE--max_num_seqs={n}-BENCH--max_concurrency=4"
        dest.mkdir()
        (dest / f"run={run}.json").write_text(json.dumps({**load(src), "run_number": run}))
    res = parse("vllm-bench", [tmp_path])
    assert sorted((p.variant, p.repeats) for p in res.summaries) == [("max_num_seqs_2", 1), ("max_num_seqs_4", 1)]


def test_sweep_log_over_serve_params_gives_the_same_variants():
    """The --show-stdout log of the same kind of sweep (run again; sweep-serve-params/sweep-show-stdout.log): each
    server's section starts with "Server overrides: {'max_num_seqs': 2}" (the combination as Python prints it), and
    its block is that variant's point; the first section is the baseline."""
    res = parse("vllm-bench", [REAL / "sweep-serve-params" / "sweep-show-stdout.log"])
    assert [(v["name"], v["baseline"], v["settings"]) for v in res.variants] == [
        ("max_num_seqs_2", True, {"max_num_seqs": 2}), ("max_num_seqs_4", False, {"max_num_seqs": 4})]
    assert sorted(p.variant for p in res.summaries) == ["max_num_seqs_2", "max_num_seqs_4"]
