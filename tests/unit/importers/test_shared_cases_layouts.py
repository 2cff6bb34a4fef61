"""Regression tests of measurement truth, result files: cases 17–19 of ../shared/cases/ and the
fault kinds public reports describe without a file.

Each input of a case is copied under tests/data/cases/<case>/ with its README.txt (source, what it reproduces, the
right value); each test names the fault kind it pins and asserts the right value from that README (or, for the
kinds without a file, from the peer's source named in the test).
"""

from __future__ import annotations

import json

import pytest

from pipeline.cli import main
from pipeline.core.errors import BatchmarkError
from pipeline.importers import parse

from tests.conftest import DATA

CASES = DATA / "cases"
SWEEP = CASES / "18-vllm-sweep-folder" / "results" / "20260901_120000"
RUNS = SWEEP / "BENCH--c16"


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


# -- kind: another tool's result format taken for vLLM's (case 17) ------------------------------

def test_sglang_bench_serving_jsonl_is_sglang_with_failures_unknown():
    """Case 17: request_rate is the bare literal Infinity, E2EL is *_e2e_latency_ms, no model, no failed count.
    Right value (README): engine sglang, E2EL from *_e2e_latency_ms, the failed count marked unknown."""
    p = parse("vllm-bench", [CASES / "17-sglang-jsonl-as-vllm" / "sglang-c200.jsonl"], model="demo-model").summaries[0]
    assert (p.engine, p.load, p.concurrency) == ("sglang", "closed", 200)  # Infinity = all at once, cap 200
    assert p.output_throughput_tok_s == pytest.approx(3866.0721921061695)
    assert (p.input_len, p.output_len, p.completed) == (6000, 1000, 12000)  # 72000000 / 12000, 12000000 / 12000
    assert p.e2el_s == pytest.approx({"p50": 51.6504, "p90": None, "p99": 53.8702, "mean": 51.6531})
    assert p.caveats == {"failed_count_unknown": 12000} and p.failure_rate is None
    assert p.itl_chunk_s["p50"] == pytest.approx(0.0499) and p.itl_s is None  # bench_serving's ITL is per chunk


def test_sglang_without_model_names_sglang(tmp_path):
    with pytest.raises(BatchmarkError, match="SGLang bench_serving results name no model; pass --model"):
        parse("vllm-bench", [CASES / "17-sglang-jsonl-as-vllm" / "sglang-c200.jsonl"])


# -- kind: a new result layout, repeats in three files, a warm-up counted (case 18) ------------

@pytest.mark.parametrize("paths", [
    [RUNS / "run=0.json", RUNS / "run=1.json", RUNS / "run=2.json"],  # command a)
    [RUNS],  # command b): the folder, with summary.json and warmup.json
    [SWEEP.parent],  # the whole sweep output, summary.csv included
    [RUNS / "summary.json"],  # the list of the runs alone
])
def test_vllm_bench_sweep_repeats_are_one_point(paths):
    """Case 18: one point c = 16 of 3 repeats, median 1403.2 tok/s; warmup.json (612.0 tok/s) left out."""
    (p,) = parse("vllm-bench", paths).summaries
    assert (p.concurrency, p.repeats, p.completed, p.failed) == (16, 3, 1440, 0)
    assert p.output_throughput_tok_s == pytest.approx(1403.2)
    assert p.samples["output_throughput_tok_s"] == pytest.approx([1398.6, 1403.2, 1409.9])
    assert p.samples["ttft_s_per_repeat"] == pytest.approx([0.0612, 0.0604, 0.0598])
    assert p.ttft_s["p50"] == pytest.approx(0.0604) and p.tpot_s["p50"] == pytest.approx(0.01091)  # medians of the runs


def test_vllm_bench_sweep_warmup_alone_is_refused_naming_it(capsys, scratch_root):
    path = RUNS / "warmup.json"
    with pytest.raises(BatchmarkError, match=r"only vllm bench sweep's warm-up \(run_number -1"):
        parse("vllm-bench", [path])
    assert main(["import", "vllm-bench", str(path), "--hardware", "h100-sxm"]) == 2
    assert "warmup.json" in _one_line(capsys)
    # beside one run, the warm-up is left out, not a duplicate
    (p,) = parse("vllm-bench", [RUNS / "run=0.json", path]).summaries
    assert p.output_throughput_tok_s == pytest.approx(1398.6) and p.repeats == 1


def test_two_plain_results_of_one_point_are_still_refused(tmp_path):
    """Without run_number the two files are not known repeats (one may be a rerun after a change): refused."""
    for i in (0, 1):
        d = json.loads((RUNS / f"run={i}.json").read_text())
        del d["run_number"]
        (tmp_path / f"{i}.json").write_text(json.dumps(d))
    with pytest.raises(BatchmarkError, match="two results for the same point"):
        parse("vllm-bench", [tmp_path / "0.json", tmp_path / "1.json"])


# -- kind: failures not counted, a cancelled run imported as finished (case 19) -----------------

def test_aiperf_error_summary_counts_and_a_cancelled_run_has_a_caveat():
    """Case 19: error_request_count null, error_summary 81 × 499 RequestCancellationError + 3 × 500, was_cancelled.
    Right value (README): imported with failed ≥ 3 (the HTTP 500s) and a caveat, was_cancelled reported: failed 3
    of 203 (1.5 %); the 81 cancelled in flight by the hand stop are counted apart."""
    (p,) = parse("aiperf", [CASES / "19-aiperf-cancelled-errors" / "profile_export_aiperf.json"]).summaries
    assert (p.completed, p.failed, p.concurrency) == (200, 3, 100)
    assert p.caveats == {"run_cancelled": 81}
    assert any("was_cancelled" in e for e in p.errors) and any("3 × 500 InternalServerError" in e for e in p.errors)


def test_aiperf_error_summary_without_cancel_counts_every_error(tmp_path):
    """Not cancelled: every listed error is a failure: 84 of 284 (30 %) is above 5 %, refused."""
    d = json.loads((CASES / "19-aiperf-cancelled-errors" / "profile_export_aiperf.json").read_text())
    d["was_cancelled"] = False
    path = tmp_path / "p.json"
    path.write_text(json.dumps(d))
    with pytest.raises(BatchmarkError, match=r"84 of 284 requests failed \(30%"):
        parse("aiperf", [path])


# -- kind: a ramp-up run imported as closed loop ---------------------------------------------

def test_vllm_ramp_up_run_is_open_loop_and_refused_naming_it(tmp_path):
    """vllm/benchmarks/serve.py writes ramp_up_strategy, ramp_up_start_rps, ramp_up_end_rps beside request_rate "inf":
    the rate changes over the run, so it is no closed-loop point at max_concurrency."""
    d = json.loads((RUNS / "run=0.json").read_text())
    d.update(ramp_up_strategy="linear", ramp_up_start_rps=1, ramp_up_end_rps=20)
    path = tmp_path / "ramp.json"
    path.write_text(json.dumps(d))
    with pytest.raises(BatchmarkError, match=r"ramp_up_strategy: is 'linear' \(from 1 to 20 req/s\): a ramp-up run is open loop"):
        parse("vllm-bench", [path])


# -- kind: a message naming an option import does not have --------------------------------------

def _old_block(tmp_path):
    """Case 02's block with 40 of 40 requests, without its concurrency and rate lines (an old vLLM's printout)."""
    text = (CASES / "02-vllm-block-1-of-100" / "bench-c2.log").read_text()
    text = text.replace("100/100", "40/40").replace("Successful requests:                     1",
                                                    "Successful requests:                     40")
    text = "\n".join(ln for ln in text.splitlines()
                     if not ln.startswith(("Maximum request concurrency", "Traffic request rate", "Burstiness")))
    path = tmp_path / "old.log"
    path.write_text(text + "\n")
    return path


def test_old_block_without_concurrency_names_import_options(tmp_path, capsys, scratch_root):
    path = _old_block(tmp_path)
    with pytest.raises(BatchmarkError, match="pass batchmark import --concurrency N") as exc:
        parse("vllm-bench", [path], model="Qwen/Qwen3-8B")
    assert "--max-concurrency" not in str(exc.value)
    (p,) = parse("vllm-bench", [path], model="Qwen/Qwen3-8B", concurrency=2).summaries
    assert (p.load, p.concurrency, p.completed) == ("closed", 2, 40)
    (p,) = parse("vllm-bench", [path], model="Qwen/Qwen3-8B", rate=1.5).summaries
    assert (p.load, p.rate_rps, p.concurrency) == ("poisson", 1.5, None)
    run_id = "old-block"
    assert main(["import", "vllm-bench", str(path), "--model", "Qwen/Qwen3-8B", "--hardware", "h200",
                 "--concurrency", "2", "--run-id", run_id]) == 0


def test_concurrency_option_is_refused_where_files_state_it(capsys, scratch_root):
    path = CASES / "16-guidellm-0.8.1"
    assert main(["import", "guidellm", str(path), "--hardware", "cpu", "--concurrency", "4"]) == 2
    assert "--concurrency: only for vllm-bench and aiperf" in _one_line(capsys)


# -- kind: GenAI-Perf exports refused although they hold a measurement --------------------------

def _genai(tmp_path, edit):
    d = json.loads((DATA / "aiperf" / "profile_export_genai_perf.json").read_text())
    edit(d)
    path = tmp_path / "profile_export_genai_perf.json"
    path.write_text(json.dumps(d))
    return path


def test_genai_perf_measurement_interval_export_is_imported(tmp_path):
    """GenAI-Perf's default mode measures for measurement_interval (10000 ms) with request_count 0 (its
    input_config as genai-perf writes it): was "no request completed; nothing was measured".  Completed =
    request_throughput × interval = 12.2 req/s × 10 s = 122 (derived, and the point says so)."""
    path = _genai(tmp_path, lambda d: d["input_config"].update(request_count=0, measurement_interval=10000))
    (p,) = parse("aiperf", [path]).summaries
    assert (p.completed, p.concurrency, p.output_throughput_tok_s) == (122, 1, 217.1)
    assert any("measurement_interval" in e for e in p.errors)


def test_early_genai_perf_export_with_old_names_and_string_statistics(tmp_path):
    """Early GenAI-Perf (its Metrics.metric_labels: num_output_token, num_input_token) wrote the lengths under those
    names and statistics as strings: was refused as not an export.  The lengths are read under the old names."""
    def edit(d):
        d["num_output_token"] = {k: str(v) if k != "unit" else v for k, v in d.pop("output_sequence_length").items()}
        d["num_input_token"] = {k: str(v) if k != "unit" else v for k, v in d.pop("input_sequence_length").items()}
        d["time_to_first_token"] = {k: str(v) if k != "unit" else v for k, v in d["time_to_first_token"].items()}
    (p,) = parse("aiperf", [_genai(tmp_path, edit)]).summaries
    assert (p.input_len, p.output_len) == (550, 18)
    assert p.ttft_s == pytest.approx({"p50": 0.009, "p90": 0.012, "p99": 0.015, "mean": 0.010})


def test_output_five_times_the_requested_length_is_a_caveat(tmp_path):
    """Asked for 18 output tokens (output_tokens_mean), the export measured 90: the caveat output_len_mismatch (was
    accepted silently).  Within the tolerance (18 asked, 18 measured) no caveat."""
    def edit(d):
        d["input_config"]["output_tokens_mean"] = 18
        d["output_sequence_length"] = {"unit": "tokens", "avg": 90.0, "p50": 90.0}
    (p,) = parse("aiperf", [_genai(tmp_path, edit)]).summaries
    # GenAI-Perf states no error count: its failures are unknown (failed_count_unknown), whatever the lengths
    # and 90 is above the 18 asked (max_tokens), which no server generates: the count is not measured either
    # (GenAI-Perf 24.11-24.12's streaming over-count; tests/unit/importers/test_peer_layouts_and_counts.py)
    assert p.output_len == 90 and p.caveats == {"output_len_mismatch": 100, "failed_count_unknown": 100,
                                                "output_count_not_measured": 100}
    (p,) = parse("aiperf", [_genai(tmp_path, lambda d: d["input_config"].update(output_tokens_mean=18))]).summaries
    assert p.caveats == {"failed_count_unknown": 100}


# -- kind: files of the wrong kind refused with a message about the wrong thing ----------------

def test_aiperf_csv_given_to_the_json_importer_names_the_csv(tmp_path, capsys, scratch_root):
    """AIPerf writes profile_export_aiperf.csv beside the JSON (first row: Metric,avg,min,max,p99,…): was
    "corrupt JSON … cut short"."""
    path = tmp_path / "profile_export_aiperf.csv"
    path.write_text("Metric,avg,min,max,p99,p90,p75,std\nTime to First Token (ms),1588.80,382.24,4121.09,4100.1,"
                    "3000.2,2000.3,1000.4\n")
    assert main(["import", "aiperf", str(path), "--hardware", "h200"]) == 2
    assert "an AIPerf/GenAI-Perf CSV export; the aiperf importer reads the JSON export beside it" in _one_line(capsys)


@pytest.mark.parametrize("jsonl", [False, True])
def test_llama_bench_json_given_to_batched_bench_names_llama_bench(tmp_path, capsys, scratch_root, jsonl):
    """llama-bench -o json / -o jsonl (tests with n_prompt, n_gen, avg_ts; llama.cpp tools/llama-bench): was
    "no llama-batched-bench table found" / "line 1: missing field 'pp'"."""
    tests = [{"model_type": "qwen2 7B Q8_0", "n_prompt": 512, "n_gen": 0, "avg_ts": 4266.6},
             {"model_type": "qwen2 7B Q8_0", "n_prompt": 0, "n_gen": 128, "avg_ts": 128.0}]
    path = tmp_path / ("bench.jsonl" if jsonl else "bench.json")
    path.write_text("\n".join(json.dumps(t) for t in tests) if jsonl else json.dumps(tests, indent=2))
    assert main(["import", "llama-batched-bench", str(path), "--hardware", "h200", "--model", "m"]) == 2
    assert "llama-bench output (-o json/jsonl: n_prompt, n_gen, avg_ts per test)" in _one_line(capsys)
