"""Imports that never invent a number: repeats grouped by what was configured, failures unknown where unstated.

Inputs are built from the fixtures' own files in each tool's layout (``vllm bench sweep serve``'s ``run=N.json``,
AIPerf's ``profile_runs/``); each test says which fault kind it pins and the value worked by hand.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.importers import parse

from tests.conftest import DATA

EXPERIMENT = DATA / "vllm-bench-sweep" / "20261202_100000"
CONC = DATA / "aiperf-sweep" / "concurrency-sweep" / "artifacts" / "llama-3-8b-openai-chat-concurrency_sweep"
ONE = "SERVE--max_num_seqs=2-BENCH--max_concurrency=4-random_input_len=32"


def _edit(path: Path, **changes) -> None:
    d = json.loads(path.read_text())
    d.update(changes)
    path.write_text(json.dumps(d))


def test_vllm_sweep_repeats_a_token_apart_are_one_point(tmp_path):
    """Fault kind: measured lengths taken for identity.  run=0 measured 256 output tokens over 8 requests (32 each),
    run=1 264 (33 each): one configured point (one combination folder), so one point of 2 repeats, not two shapes
    32 and 33.  By hand: output length median(32, 33) = 32.5 → 32 (half to even); throughput median(70, 74) = 72.0."""
    folder = tmp_path / ONE
    shutil.copytree(EXPERIMENT / ONE, folder)
    _edit(folder / "run=1.json", total_output_tokens=264)
    pts = parse("vllm-bench", [folder]).summaries
    assert [(p.output_len, p.repeats, p.output_throughput_tok_s) for p in pts] == [(32, 2, 72.0)]


def test_vllm_sweep_log_repeats_a_token_apart_are_one_point_per_bench_combination(tmp_path):
    """Fault kind: measured lengths taken for identity, in a ``--show-stdout`` log.  One server section runs bench
    combination A (runs 0, 1: 32 and 33 tokens per request) then B (runs 0, 1 at another input length): A's two runs
    are one point, and B's run numbers starting again at 0 begin another point.  By hand: A 2 repeats, median(70, 74)
    = 72.0; B 2 repeats, median(50, 54) = 52.0."""
    def block(tput: float, out_tokens: int, in_tokens: int) -> str:
        return "\n".join([
            "============ Serving Benchmark Result ============", "Successful requests:                     8",
            "Failed requests:                         0", "Maximum request concurrency:             4",
            "Benchmark duration (s):                  3.46", f"Total input tokens:                      {in_tokens}",
            f"Total generated tokens:                  {out_tokens}",
            f"Output token throughput (tok/s):         {tput}", "Median TPOT (ms):                        25.0",
            "=================================================="])
    log = ["Server overrides: {'max_num_seqs': 2}"]
    for run, (tput, out, inp) in enumerate([(70.0, 256, 256), (74.0, 264, 256)]):
        log += [f"Run Number: {run}", block(tput, out, inp)]
    for run, (tput, out, inp) in enumerate([(50.0, 256, 1024), (54.0, 256, 1024)]):
        log += [f"Run Number: {run}", block(tput, out, inp)]
    f = tmp_path / "sweep.log"
    f.write_text("\n".join(log) + "\n")
    pts = sorted(parse("vllm-bench", [f], model="m").summaries, key=lambda p: p.input_len)
    assert [(p.input_len, p.output_len, p.repeats, p.output_throughput_tok_s) for p in pts] == [
        (32, 32, 2, 72.0), (128, 32, 2, 52.0)]


def test_aiperf_multi_run_repeats_a_token_apart_are_one_point(tmp_path):
    """Fault kind: measured lengths taken for identity (AIPerf ``--num-profile-runs``).  run_0002 measured a median
    output length of 129 beside run_0001's 128, same settings: one point of 2 repeats.  By hand: median(128, 129) =
    128.5 → 128; throughput median(1250, 1230) = 1240.0."""
    src = CONC / "profile_runs"
    out = []
    for i, trial in enumerate(("trial_0001", "trial_0002"), 1):
        d = json.loads((src / trial / "concurrency_10" / "profile_export_aiperf.json").read_text())
        d["input_config"]["loadgen"]["concurrency"] = 10  # one point's multi-run, not the sweep's list
        if i == 2:
            d["output_sequence_length"].update(avg=129.0, p50=129.0, max=129.0)
        dest = tmp_path / "art" / "profile_runs" / f"run_000{i}" / "profile_export_aiperf.json"
        dest.parent.mkdir(parents=True)
        dest.write_text(json.dumps(d))
        out.append(dest)
    pts = parse("aiperf", [tmp_path / "art"]).summaries
    assert [(p.output_len, p.repeats, p.output_throughput_tok_s) for p in pts] == [(128, 2, 1240.0)]


def test_vllm_file_without_failed_has_failures_unknown(tmp_path):
    """Fault kind: an unstated count imported as a measured 0.  A ``vllm bench serve`` result without ``failed`` (and
    no ``errors`` list): failed count unknown (caveat over its 32 completed requests, failure rate null), never a
    clean 0; the same file with ``failed: 0`` keeps its measured 0."""
    d = json.loads((DATA / "vllm-bench" / "llama-3.1-8b-c4.json").read_text())
    del d["failed"]
    f = tmp_path / "c4.json"
    f.write_text(json.dumps(d))
    (p,) = parse("vllm-bench", [f]).summaries
    assert p.caveats.get("failed_count_unknown") == 32 and p.failure_rate is None
    assert any("states no failed count" in e for e in p.errors)
    (q,) = parse("vllm-bench", [DATA / "vllm-bench" / "llama-3.1-8b-c4.json"]).summaries
    assert "failed_count_unknown" not in q.caveats and q.failure_rate == 0.0


def _sweep_log(tmp_path: Path, overrides: str) -> Path:
    """A ``vllm bench sweep serve --show-stdout`` log of one server section (its ``Server overrides:`` line) and one
    run's printed block."""
    f = tmp_path / "sweep.log"
    f.write_text("\n".join([
        f"Server overrides: {overrides}", "Run Number: 0",
        "============ Serving Benchmark Result ============", "Successful requests:                     8",
        "Failed requests:                         0", "Maximum request concurrency:             4",
        "Benchmark duration (s):                  3.46", "Total input tokens:                      256",
        "Total generated tokens:                  256", "Output token throughput (tok/s):         74.0",
        "=================================================="]) + "\n")
    return f


@pytest.mark.parametrize("overrides, why", [
    ("{'max_num_seqs': {2, 4}}", "a Python set"),
    ("{'kv_cache_dtype': b'fp8'}", "a Python bytes"),
    ("{'max_num_seqs': 2+3j}", "a Python complex"),
    ("{'gpu_memory_utilization': 1e999}", "inf is not a finite number"),
    ("{'max_num_seqs': [1, -1e999]}", "-inf is not a finite number"),
    ("{1, 2}", "is not a parameter combination"),
])
def test_server_overrides_of_no_plain_values_are_refused_naming_the_log_line(tmp_path, capsys, scratch_root,
                                                                             overrides, why):
    """Fault kind: untrusted text reaching the run store.  A set, bytes, a complex number or ``1e999`` in a log's
    ``Server overrides:`` was a TypeError traceback or a refusal naming the run store's temporary run.json: now one
    line naming the log and its line 1, and nothing written."""
    from pipeline.cli import main
    from pipeline.core import paths

    log = _sweep_log(tmp_path, overrides)
    assert main(["import", "vllm-bench", str(log), "--hardware", "h200", "--model", "m"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"batchmark: error: {log}: line 1: Server overrides: ") and why in err, err
    assert err.count("\n") == 1 and ".tmp" not in err and "Traceback" not in err
    assert not any(paths.runs_dir().glob("*/run.json"))


def test_output_throughput_of_zero_beside_its_tokens_is_refused_naming_the_field(tmp_path):
    """Fault kind: a stated figure taken without its own file's cross-check.  ``output_throughput: 0`` beside
    ``total_output_tokens: 256`` in ``duration: 2.08`` s (vLLM serve.py: output_throughput = total output / duration,
    so 256 / 2.08 = 123.1 tok/s) is no measured 0: refused naming the field."""
    from pipeline.core.errors import BatchmarkError

    d = json.loads((DATA / "vllm-bench" / "llama-3.1-8b-c4.json").read_text())
    d.update(completed=8, num_prompts=8, total_input_tokens=8192, total_output_tokens=256, duration=2.08,
             output_throughput=0.0, request_throughput=8 / 2.08, total_token_throughput=(8192 + 256) / 2.08)
    f = tmp_path / "c4.json"
    f.write_text(json.dumps(d))
    with pytest.raises(BatchmarkError, match=r"c4.json: field output_throughput: 0 tok/s, but total_output_tokens 256 "
                                             r"in duration 2.08 s is 123.1 tok/s"):
        parse("vllm-bench", [f])


def test_output_throughput_off_its_tokens_over_duration_flags_the_point_and_the_run(tmp_path):
    """Fault kind: a stated figure taken without its own file's cross-check.  AIPerf's output_token_throughput is
    total_osl / benchmark_duration = 25,600 / 20.48 = 1250 tok/s; an export stating 2500 keeps its figure but has
    the caveat figures_disagree (naming the field), and the run's verdict is flagged, not clean."""
    from pipeline.analysis.quality import run_quality

    src = CONC / "profile_runs" / "trial_0001" / "concurrency_10" / "profile_export_aiperf.json"
    d = json.loads(src.read_text())
    d["input_config"]["loadgen"]["concurrency"] = 10
    d["output_token_throughput"]["avg"] = 2500.0
    f = tmp_path / "profile_export_aiperf.json"
    f.write_text(json.dumps(d))
    (p,) = parse("aiperf", [f]).summaries
    assert p.output_throughput_tok_s == 2500.0 and p.caveats["figures_disagree"] == 200
    assert any(e.startswith("output_token_throughput.avg: 2500 tok/s, but total_osl 25600 in benchmark_duration "
                            "20.48 s is 1250 tok/s") for e in p.errors)
    q = run_quality({}, [p.as_dict()])
    assert q["verdict"] == "flagged" and any("own figures disagree" in r and "c = 10" in r for r in q["reasons"])
    d["output_token_throughput"]["avg"] = 1250.0  # the consistent export: no caveat
    f.write_text(json.dumps(d))
    assert "figures_disagree" not in parse("aiperf", [f]).summaries[0].caveats


def test_sweep_folder_import_resolves_each_path_a_bounded_number_of_times(tmp_path, monkeypatch):
    """Fault kind: quadratic import (every file compared with every run=N.json beside it: a folder of 10,000 sub-runs
    took hours; benchmarks/sweep_import_scale.py times it).  60 combination folders × (2 runs + summary.json) = 180
    files: the old code resolved a path once per (file, run file) pair, 180 × 120 = 21,600 times; now at most a
    few per file."""
    for i in range(60):
        folder = tmp_path / "exp" / f"BENCH--max_concurrency=4-random_input_len={32 + i}"
        shutil.copytree(EXPERIMENT / ONE, folder)
        runs = []
        for r in (0, 1):
            d = json.loads((folder / f"run={r}.json").read_text())
            d.update(random_input_len=32 + i, total_input_tokens=8 * (32 + i))
            del d["max_num_seqs"]
            (folder / f"run={r}.json").write_text(json.dumps(d))
            runs.append(d)
        (folder / "summary.json").write_text(json.dumps(runs))
    calls = [0]
    real = Path.resolve

    def counting(self, *a, **kw):
        calls[0] += 1
        return real(self, *a, **kw)

    files = sorted(q for q in (tmp_path / "exp").rglob("*") if q.is_file())
    assert len(files) == 180
    from pipeline.importers import vllm_bench

    monkeypatch.setattr(Path, "resolve", counting)
    pts = vllm_bench.parse(files, model="m").summaries
    monkeypatch.undo()
    assert len(pts) == 60 and {p.repeats for p in pts} == {2}
    assert calls[0] <= 12 * len(files), calls[0]


def test_sglang_newer_total_input_and_total_output_keys_are_read(tmp_path):
    """Fault kind: a peer's renamed field refused as missing.  SGLang bench_serving's newer result dict writes its
    BenchmarkMetrics as ``total_input`` / ``total_output`` / ``total_output_retokenized`` (and, in some writers,
    ``benchmark_duration``); was refused as "the input length is unknown".  By hand from case 17's line renamed:
    72,000,000 / 12,000 = 6000 input and 12,000,000 / 12,000 = 1000 output tokens per request; output throughput
    12,000,000 / 3103.93 s = 3866.07 tok/s agrees with the stated one (no caveat)."""
    line = json.loads((DATA / "cases" / "17-sglang-jsonl-as-vllm" / "sglang-c200.jsonl").read_text().splitlines()[0]
                      .replace("Infinity", '"inf"'))
    for old, new in (("total_input_tokens", "total_input"), ("total_output_tokens", "total_output"),
                     ("total_output_tokens_retokenized", "total_output_retokenized"), ("duration", "benchmark_duration")):
        line[new] = line.pop(old)
    f = tmp_path / "sglang.jsonl"
    f.write_text(json.dumps(line) + "\n")
    (p,) = parse("vllm-bench", [f], model="demo-model").summaries
    assert (p.engine, p.input_len, p.output_len, p.concurrency) == ("sglang", 6000, 1000, 200)
    assert p.output_throughput_tok_s == pytest.approx(3866.07, abs=0.01) and "figures_disagree" not in p.caveats


def _sla_folder(tmp_path: Path, variable: str) -> Path:
    """``vllm bench sweep serve_sla``'s layout (vllm/benchmarks/sweep/serve_sla.py): per combination folder one
    ``<variable>=<value>/`` per search iteration with ``run=N.json`` and ``summary.json``, and ``SLA--<criteria>.json``
    beside them listing every iteration's runs (``search_sla``); each run states the value (``bench_comb |
    {variable: value}``)."""
    base = tmp_path / "20261203_120000" / "SERVE--max_num_seqs=2-BENCH--random_input_len=32"
    src = json.loads((EXPERIMENT / ONE / "run=0.json").read_text())
    every = []
    for value, tput in ((8, 70.0), (4, 40.0)):
        runs = []
        for r in (0, 1):
            d = {**src, "run_number": r, "output_throughput": tput + r, "duration": 256 / (tput + r),
                 "request_throughput": 8 / (256 / (tput + r))}
            if variable == "request_rate":
                d.update(request_rate=float(value), max_concurrency=None)
            else:
                d.update(max_concurrency=value)
            runs.append(d)
        folder = base / f"{variable}={value}"
        folder.mkdir(parents=True)
        for r, d in enumerate(runs):
            (folder / f"run={r}.json").write_text(json.dumps(d))
        (folder / "summary.json").write_text(json.dumps(runs))
        every += runs
    (base / "SLA--p99_e2el_ms<=500.json").write_text(json.dumps(every))
    return tmp_path / "20261203_120000"


def test_vllm_serve_sla_search_folder_imports_each_iteration_once(tmp_path):
    """Fault kind: a peer's layout read twice.  ``serve_sla``'s ``SLA--<criteria>.json`` repeats the runs of its
    iterations' folders; it was read beside them and refused as "two results for the same point".  Right: one point
    per iteration, its two runs the repeats, of the server combination the folder above names.  By hand: rate 8
    median(70, 71) = 70.5 tok/s, rate 4 median(40, 41) = 40.5; concurrency 8 and 4 alike."""
    res = parse("vllm-bench", [_sla_folder(tmp_path / "rate", "request_rate")])
    assert res.variants == [{"name": "max_num_seqs_2", "baseline": True, "settings": {"max_num_seqs": 2}}]
    assert sorted((p.rate_rps, p.repeats, p.output_throughput_tok_s) for p in res.summaries) == [
        (4.0, 2, 40.5), (8.0, 2, 70.5)]
    res = parse("vllm-bench", [_sla_folder(tmp_path / "conc", "max_concurrency")])
    assert sorted((p.concurrency, p.repeats, p.output_throughput_tok_s) for p in res.summaries) == [
        (4, 2, 40.5), (8, 2, 70.5)]



def test_guidellm_max_seconds_counts_the_tokens_of_requests_cut_off_in_its_throughput(tmp_path):
    """Fault kind: work done in the measured window left out of its throughput.  A GuideLLM benchmark stopped by
    ``--max-seconds`` cancels the requests in flight (request_totals.incomplete); the tokens they streamed before
    the stop are in output_token_count.incomplete.total_sum.  Case 16's c = 4 benchmark cut at 6.86 s: 20 successful
    × 32 = 640 tokens and 4 incomplete with 60 tokens.  By hand: (640 + 60) / 6.860121965 s = 102.04 tok/s (was
    640 / 6.86 = 93.29); completed 20, failed 0 (incomplete requests are neither)."""
    d = json.loads((DATA / "cases" / "16-guidellm-0.8.1" / "benchmarks-c4.json").read_text())
    b = d["benchmarks"][0]
    b["config"]["constraints"] = {"max_seconds": {"type_": "max_duration", "args": {"duration": 6.86}}}
    m = b["metrics"]
    m["request_totals"].update(successful=20, incomplete=4, total=24)
    m["output_token_count"]["successful"].update(count=20, total_sum=640.0)
    m["output_token_count"]["incomplete"].update(count=4, total_sum=60.0, mean=15.0, median=15.0)
    f = tmp_path / "benchmarks.json"
    f.write_text(json.dumps(d))
    (p,) = [p for p in parse("guidellm", [f]).summaries if p.concurrency == 4]
    assert p.output_throughput_tok_s == pytest.approx(700 / 6.860121965408325) == pytest.approx(102.04, abs=0.01)
    assert (p.completed, p.failed) == (20, 0)
    assert any("60 output tokens of 4 request(s) cut off" in e for e in p.errors)


_BENCHY_HEAD = ["| model | test | t/s (total) | t/s (req) | peak t/s | peak t/s (req) | ttfr (ms) | est_ppt (ms) | e2e_ttft (ms) |",
                "|:--|--:|--:|--:|--:|--:|--:|--:|--:|"]


def _benchy(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join(_BENCHY_HEAD + rows) + "\n")
    return path


def test_llama_benchy_generation_rate_imports_clean_with_no_invented_request_rate(scratch_root, tmp_path):
    """Fault kind: a number invented from a figure of another definition.  A llama-benchy table at c = 1, pp2048 /
    tg32: t/s (total) 58.71 is generated tokens after the first over first token → last token (results.py
    ``_process_batch``), prefill excluded.  ÷ 32 it gave 1.83 req/s and (2048 + 32) × 1.83 = 3,816 total tok/s,
    and the check against c / E2EL flagged the real file.  By llama-benchy's definitions a request lasts E2EL =
    e2e_ttft + (n − 1) / t/s (req) = 0.979 + 31 / 58.71 = 1.5070 s, so c / E2EL = 0.6636 req/s (derived, said so)
    and 2080 × 0.6636 = 1,380.3 total tok/s; t/s (total) = t/s (req) at c = 1, so nothing disagrees."""
    from pipeline.importers import import_run
    from pipeline.views.show import format_table, show_run

    f = _benchy(tmp_path / "benchy.md", [
        "| m | pp2048 (c1) | 2100.00 ± 5.00 | 2100.00 ± 5.00 | | | 977.00 ± 1.00 | 975.00 ± 1.00 | 979.00 ± 1.00 |",
        "| m | tg32 (c1) | 58.71 ± 0.10 | 58.71 ± 0.10 | 60.00 ± 0.00 | 60.00 ± 0.00 | | | |"])
    (p,) = parse("llama-benchy", [f]).summaries
    assert p.caveats == {"failed_count_unknown": 1}
    doc = show_run(import_run("llama-benchy", [f], "h200", run_id="benchy-c1"))
    (row,) = doc["points"]
    assert row["request_throughput_basis"] == "c_over_e2el"
    assert row["request_throughput_rps"] == pytest.approx(1 / (0.979 + 31 / 58.71)) == pytest.approx(0.6636, abs=1e-4)
    assert row["total_token_throughput_tok_s"] == pytest.approx(2080 / 1.5070, rel=1e-4)
    assert "figures_disagree" not in row["caveats"]
    assert not any("own figures disagree" in r for r in doc["models"][0]["run_quality"]["reasons"])
    assert "req/s and total tok/s at c = 1: derived: c / E2EL" in format_table(doc)


def test_generation_only_throughput_without_latencies_has_no_request_rate():
    """Fault kind: a number invented from a figure of another definition.  A generation-window throughput
    (``decode_phase``) of 80 tok/s over 32 tokens per request with no E2EL, TTFT or TPOT: 80 / 32 = 2.5 req/s was
    shown, but the prefill it leaves out is unknown, so the rate and the total tok/s are unknown (None, "-"); a
    send-to-completion window's 80 / 32 = 2.5 req/s stays (every request's tokens are in it)."""
    from pipeline.views.show import serve_figures

    base = {"output_throughput_tok_s": 80.0, "output_len": 32, "input_len": 64, "concurrency": 2}
    gen = serve_figures({**base, "output_throughput_window": "decode_phase"})
    assert (gen["request_throughput_rps"], gen["total_token_throughput_tok_s"], gen["request_throughput_basis"]) == (
        None, None, None)
    whole = serve_figures({**base, "output_throughput_window": "send_to_completion"})
    assert (whole["request_throughput_rps"], whole["request_throughput_basis"]) == (2.5, "tokens_over_window")
    assert whole["total_token_throughput_tok_s"] == 96 * 2.5


def test_llama_benchy_figures_that_truly_disagree_flag_the_run(tmp_path):
    """Fault kind: an impossible figure published as a clean run.  Two contradictions by llama-benchy's own
    definitions (results.py: t/s (req) = mean (n − 1) / (end − first token); t/s (total) = Σ (n − 1) / (last token −
    first first token), a window holding every request's generation): at c = 1, pp16 / tg512, t/s (total) 30.00 beside
    t/s (req) 58.71, where both are the one request's rate (the old check let it pass: 30 / 512 = 0.059 req/s is under
    1 / (0.02 + 511 / 58.71) = 0.115); at c = 4, t/s (total) 200.00 above 4 × t/s (req) 20.00 = 80 tok/s."""
    from pipeline.analysis.quality import run_quality

    f = _benchy(tmp_path / "benchy.md", [
        "| m | pp16 (c1) | 800.00 ± 5.00 | 800.00 ± 5.00 | | | 20.00 ± 1.00 | 18.00 ± 1.00 | 20.00 ± 1.00 |",
        "| m | tg512 (c1) | 30.00 ± 0.10 | 58.71 ± 0.10 | 60.00 ± 0.00 | 60.00 ± 0.00 | | | |",
        "| m | pp16 (c4) | 900.00 ± 5.00 | 300.00 ± 5.00 | | | 70.00 ± 1.00 | 68.00 ± 1.00 | 71.00 ± 1.00 |",
        "| m | tg512 (c4) | 200.00 ± 0.10 | 20.00 ± 0.10 | 90.00 ± 0.00 | 22.00 ± 0.00 | | | |"])
    one, four = parse("llama-benchy", [f]).summaries
    assert one.caveats["figures_disagree"] == 1 and four.caveats["figures_disagree"] == 4
    assert any("t/s (total) 30 tok/s differs from t/s (req) 58.71 tok/s at c = 1" in e for e in one.errors)
    assert any("t/s (total) 200 tok/s is above c = 4 × t/s (req) 20 = 80 tok/s" in e for e in four.errors)
    q = run_quality({"source": "imported:llama-benchy"}, [one.as_dict(), four.as_dict()])
    assert q["verdict"] == "flagged" and any("own figures disagree" in r for r in q["reasons"])


def test_static_batch_request_rate_counts_its_prefill():
    """Fault kind: a number invented from a figure of another definition.  A static batch of B = 4 (llama-batched-
    bench: T_PP 1.0 s, T_TG 4.0 s for 128 tokens, S_TG = 4 × 128 / 4.0 = 128 tok/s, E2EL = T_PP + T_TG = 5.0 s):
    S_TG ÷ 128 gave 1.0 req/s, but the batch's 4 requests take 5.0 s, so 4 / 5.0 = 0.8 req/s and
    (512 + 128) × 0.8 = 512 total tok/s."""
    from pipeline.views.show import serve_figures

    got = serve_figures({"output_throughput_tok_s": 128.0, "output_len": 128, "input_len": 512, "concurrency": 4,
                         "output_throughput_window": "decode_phase", "e2el_s": {"p50": 5.0, "mean": 5.0},
                         "ttft_s": {"p50": 1.0, "mean": 1.0}, "tpot_s": {"p50": 4.0 / 128, "mean": 4.0 / 128}})
    assert got["request_throughput_rps"] == pytest.approx(0.8)
    assert got["total_token_throughput_tok_s"] == pytest.approx(512.0)
    assert got["request_throughput_basis"] == "c_over_e2el"
