"""Files people really have: other versions of the peers' result files.

Each test builds a variant of a peer's output from the layout its own source writes (named in the test), and
asserts the value worked from that file by the peer's documented definition.  Inputs that are files sit under
tests/data/cases-breaker/ with a README.txt saying where each field layout comes from.
"""

from __future__ import annotations

import json

import pytest

from pipeline.cli import main
from pipeline.core.errors import BatchmarkError
from pipeline.importers import parse

from tests.conftest import DATA

CASES = DATA / "cases-breaker"


def _write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2))
    return path


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


# -- GuideLLM 0.2–0.3: request_totals on the benchmark, not under metrics -----------------------

def _guidellm_03(errored: int):
    """The sample report in GuideLLM 0.3's layout: ``GenerativeBenchmark.request_totals`` (guidellm v0.3.0
    src/guidellm/benchmark/benchmark.py) sits on the benchmark; ``metrics.request_totals`` is 0.4's place."""
    d = json.loads((DATA / "guidellm" / "benchmarks.json").read_text())
    for b in d["benchmarks"]:
        b["request_totals"] = b["metrics"].pop("request_totals")
    t = d["benchmarks"][1]["request_totals"]  # the concurrent@8 benchmark: 40 successful
    t["errored"], t["total"] = errored, t["successful"] + errored
    return d


def test_guidellm_03_errored_count_on_the_benchmark_is_read(tmp_path):
    """Was: failed 0 (the errored count of a 0.3 report was never read).  1 errored of 41 (2.4 %): imported, failed 1;
    10 of 50 (20 %, above the 5 % limit): refused naming the field."""
    (p,) = [p for p in parse("guidellm", [_write(tmp_path, "g.json", _guidellm_03(1))], model="m").summaries
            if p.concurrency == 8]
    assert (p.completed, p.failed) == (40, 1)
    with pytest.raises(BatchmarkError, match=r"benchmarks\[1\].request_totals: 10 of 50 requests failed"):
        parse("guidellm", [_write(tmp_path, "g.json", _guidellm_03(10))], model="m")


def test_guidellm_without_request_totals_has_failures_unknown(tmp_path):
    """A report that states no errored count: failures unknown (caveat, failure rate null), never 0 as measured."""
    d = json.loads((DATA / "guidellm" / "benchmarks.json").read_text())
    for b in d["benchmarks"]:
        del b["metrics"]["request_totals"]
    pts = parse("guidellm", [_write(tmp_path, "g.json", d)], model="m").summaries
    assert [(p.completed, p.caveats, p.failure_rate) for p in pts] == [(40, {"failed_count_unknown": 40}, None)] * 3


# -- AIPerf ≤ 0.1: metrics under "records", TTFT tagged "ttft" ----------------------------------

def test_aiperf_01_records_layout_is_imported():
    """README (aiperf-0.1-records-c32.json): AIPerf v0.1.1's JsonExportData.records.  Was refused as "missing
    output_token_throughput; not an AIPerf/GenAI-Perf profile export"."""
    (p,) = parse("aiperf", [CASES / "aiperf-0.1-records-c32.json"]).summaries
    assert (p.model, p.concurrency, p.input_len, p.output_len) == ("meta-llama/Llama-3.1-8B-Instruct", 32, 1024, 256)
    assert p.output_throughput_tok_s == 950.2 and p.per_user_tok_s == 117.6
    assert p.ttft_s == pytest.approx({"p50": 0.4025, "p90": 0.4804, "p99": 0.5982, "mean": 0.400})  # tag "ttft", ms
    assert p.tpot_s["p50"] == pytest.approx(0.0085) and p.e2el_s["p50"] == pytest.approx(2.59)
    assert (p.completed, p.failed, p.caveats) == (320, 0, {})  # error_summary [] states no error


# -- GenAI-Perf with a config: input_config.perf_analyzer.stimulus ------------------------------

GENAI_CONFIG = CASES / "profile_export_genai_perf-config-c4.json"


def test_genai_perf_config_layout_reads_its_stimulus():
    """README (profile_export_genai_perf-config-c4.json): concurrency 4 from perf_analyzer.stimulus (was refused
    asking for --concurrency); GenAI-Perf states no error count, so failures are unknown, not 0."""
    (p,) = parse("aiperf", [GENAI_CONFIG]).summaries
    assert (p.model, p.concurrency, p.input_len, p.output_len) == ("meta-llama/Llama-3.2-1B-Instruct", 4, 200, 26)
    assert (p.output_throughput_tok_s, p.completed, p.failed) == (312.4, 100, 0)
    assert p.caveats == {"failed_count_unknown": 100} and p.failure_rate is None
    assert p.ttft_s["p50"] == pytest.approx(0.051) and p.tpot_s["p50"] == pytest.approx(0.0101)


@pytest.mark.parametrize("concurrency", [None, 4])
def test_genai_perf_config_request_rate_is_open_loop(tmp_path, concurrency):
    """stimulus {"request_rate": 5}: open loop, refused naming the field, also when --concurrency is given (it only
    says what a file that states neither ran at)."""
    d = json.loads(GENAI_CONFIG.read_text())
    d["input_config"]["perf_analyzer"]["stimulus"] = {"request_rate": 5.0}
    with pytest.raises(BatchmarkError, match=r"field input_config.perf_analyzer.stimulus.request_rate: open loop at 5 "
                                             r"req/s"):
        parse("aiperf", [_write(tmp_path, "p.json", d)], concurrency=concurrency)


def test_genai_perf_config_interval_mode_counts_from_the_interval(tmp_path):
    """measurement {mode: interval, num: 10000} and no request_count statistic: completed = request_throughput ×
    interval = 12.2 req/s × 10 s = 122 (derived, said so), as for the flat layout's measurement_interval."""
    d = json.loads(GENAI_CONFIG.read_text())
    del d["request_count"]
    d["input_config"]["perf_analyzer"]["measurement"] = {"mode": "interval", "num": 10000}
    (p,) = parse("aiperf", [_write(tmp_path, "p.json", d)]).summaries
    assert p.completed == 122 and any("measurement_interval" in e for e in p.errors)


# -- trace replay (fixed schedule) is open loop ----------------------------------------------------

@pytest.mark.parametrize("edit, field", [
    # AIPerf --fixed-schedule: FixedScheduleStrategy (aiperf/timing/fixed_schedule_strategy.py) sends each request at
    # its timestamp; the concurrency setting is not used
    (lambda d: d["input_config"].setdefault("input", {}).update(fixed_schedule=True), "input.fixed_schedule"),
    # GenAI-Perf --input-file payload:… (its fixed schedule, perf_analyzer #284): prompt_source "payload"
    (lambda d: d["input_config"]["input"].update(prompt_source="payload"), "input.prompt_source"),
])
def test_fixed_schedule_run_is_refused_as_open_loop(tmp_path, edit, field):
    """Was: the AIPerf one imported as a closed-loop point at c = 32 (its concurrency setting, unused by a schedule)."""
    src = CASES / "aiperf-0.1-records-c32.json" if field == "input.fixed_schedule" else GENAI_CONFIG
    d = json.loads(src.read_text())
    edit(d)
    with pytest.raises(BatchmarkError, match=rf"field input_config.{field}: a fixed schedule \(trace replay"):
        parse("aiperf", [_write(tmp_path, "p.json", d)], concurrency=8)


def test_genai_perf_flat_export_failures_are_unknown_not_zero():
    """GenAI-Perf's flat export (tests/data/aiperf/profile_export_genai_perf.json) has no error_request_count and no
    error_summary: was failed 0 with failure rate 0 in the analysis; now failures unknown."""
    (p,) = parse("aiperf", [DATA / "aiperf" / "profile_export_genai_perf.json"]).summaries
    assert (p.failed, p.failure_rate, p.caveats) == (0, None, {"failed_count_unknown": 100})


# -- llama-batched-bench since 2025: "llama_batched_bench:" settings line, -pps and -tgs ----------

BATCHED_2025 = """## ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF

llama_batched_bench: n_kv_max = 4096, n_batch = 2048, n_ubatch = 512, flash_attn = 1, is_pp_shared = {pps}, \
is_tg_separate = {tgs}, n_gpu_layers = -1, n_threads = 8, n_threads_batch = 8

|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|
|   512 |     32 |    1 |    544 |    0.250 |  2048.00 |    1.000 |    32.00 |    1.250 |   435.20 |
|   512 |     32 |    2 |   1088 |    0.500 |  2048.00 |    1.100 |    58.18 |    1.600 |   680.00 |
"""


@pytest.mark.parametrize("pps, tgs, refusal", [
    (1, 0, r"line 5: is_pp_shared = 1 \(one prompt shared by all sequences\)"),
    (0, 1, r"line 5: is_tg_separate = 1 \(-tgs: each sequence generates alone"),
])
def test_batched_bench_2025_settings_line_is_read(tmp_path, pps, tgs, refusal):
    """llama.cpp tools/batched-bench/batched-bench.cpp prints its settings as "%s: n_kv_max = …" with __func__, which
    became llama_batched_bench (with is_tg_separate, -tgs: "decode pattern 0 0 0 ... 1 1 1 ...", one sequence after
    another).  The settings were read only after "main:", so -pps and -tgs runs were imported as batches of B."""
    path = tmp_path / "bb.md"
    path.write_text(BATCHED_2025.format(pps=0, tgs=0))
    assert [p.output_throughput_tok_s for p in parse("llama-batched-bench", [path]).summaries] == [32.0, 58.18]
    path.write_text(BATCHED_2025.format(pps=pps, tgs=tgs))
    with pytest.raises(BatchmarkError, match=refusal):
        parse("llama-batched-bench", [path])


# -- files of the wrong kind: one line naming what the file is and the importer that reads it ------

SGLANG_LINE = (DATA / "cases" / "17-sglang-jsonl-as-vllm" / "sglang-c200.jsonl").read_text().splitlines()[0]
BATCHED_JSONL = (DATA / "llama-batched-bench" / "llama-3.1-8b-q4_0.jsonl").read_text()


@pytest.mark.parametrize("fmt, name, text, says", [
    # SGLang bench_serving's line (request_rate the bare literal Infinity) was "field request_rate: not a finite number"
    ("aiperf", "sglang.jsonl", SGLANG_LINE + "\n", "SGLang bench_serving results (*_e2e_latency_ms"),
    ("guidellm", "sglang.json", SGLANG_LINE, "import them with 'batchmark import vllm-bench' (engine sglang)"),
    # llama-batched-bench -oj (one object per line) was "holds more than one JSON document"
    ("llama-benchy", "bb.jsonl", BATCHED_JSONL, "one JSON object per line of llama-batched-bench output, not a "
                                                "llama-benchy report; import it with 'batchmark import llama-batched-bench'"),
    ("aiperf", "bb.jsonl", BATCHED_JSONL, "import it with 'batchmark import llama-batched-bench'"),
    # a pretty-printed report given to batched-bench was "line 1: not a JSON object (…; cut short?)"
    ("llama-batched-bench", "benchy.json", (DATA / "llama-benchy" / "gpt-oss-120b.json").read_text(),
     "it looks like llama-benchy output; import it with 'batchmark import llama-benchy'"),
    ("llama-batched-bench", "aiperf.json", (DATA / "cases" / "06-aiperf-profile-export" / "profile_export_aiperf.json"
                                            ).read_text(), "it looks like aiperf output; import it with 'batchmark import aiperf'"),
    # llama-bench -o csv (tools/llama-bench/llama-bench.cpp csv_printer: header of test::get_fields(), unquoted) was
    # "no llama-batched-bench table found"
    ("llama-batched-bench", "bench.csv", "build_commit,build_number,cpu_info,gpu_info,backends,model_filename,model_type,"
     "model_size,model_n_params,n_batch,n_ubatch,n_threads,n_prompt,n_gen,n_depth,test_time,avg_ns,stddev_ns,avg_ts,"
     'stddev_ts\n"2f68ce7","6918","AMD","RTX","CUDA","m.gguf","qwen2 7B Q8_0","8098525184","7615616512","2048","512",'
     '"8","512","0","0","2025-01-01T00:00:00Z","120000000","1000","4266.6","10.0"\n', "llama-bench output (-o csv"),
])
def test_wrong_kind_of_file_is_named(tmp_path, capsys, scratch_root, fmt, name, text, says):
    path = tmp_path / name
    path.write_text(text)
    assert main(["import", fmt, str(path), "--hardware", "h200", "--model", "m"]) == 2
    err = _one_line(capsys)
    assert says in err and str(path) in err


# -- unknown failures stay unknown downstream ---------------------------------------------------

@pytest.mark.parametrize("fmt, path, model", [
    ("vllm-bench", DATA / "cases" / "17-sglang-jsonl-as-vllm" / "sglang-c200.jsonl", "demo-model"),  # SGLang: no failed count
    ("aiperf", DATA / "aiperf" / "profile_export_genai_perf.json", None),  # GenAI-Perf: no error count
])
def test_show_gives_no_failure_rate_where_the_file_states_no_failures(scratch_root, fmt, path, model):
    """The import kept failure_rate null with the caveat failed_count_unknown, but the analysis recomputed
    failed / (completed + failed) = 0 / n and `show` printed failure_rate 0.0 (0 % failures, as if measured)."""
    from pipeline.importers import ImportOptions, import_run
    from pipeline.views.show import show_run

    (p,) = show_run(import_run(fmt, [path], "h200", run_id="u", options=ImportOptions(model=model)))["points"]
    assert p["failure_rate"] is None and "failed_count_unknown" in p["caveats"] and not p["excluded"]


@pytest.mark.parametrize("sample", ["gpt-oss-120b.json", "qwen3-30b-a3b.md"])
def test_llama_benchy_failures_are_unknown(sample):
    """llama-benchy's results.py keeps only `valid_results = [r for r in results if r and not r.error]` and writes no
    error count (schemas/benchmark_report_schema.json): was imported as failed 0; now failures unknown."""
    pts = parse("llama-benchy", [DATA / "llama-benchy" / sample]).summaries
    assert pts and all(p.caveats == {"failed_count_unknown": p.concurrency} and p.failure_rate is None for p in pts)


def test_aiperf_run_with_request_cancellation_is_refused_naming_it(tmp_path):
    """AIPerf --request-cancellation-rate 20 (aiperf/timing/request_cancellation_strategy.py: each request cancelled
    with that probability, error 499 RequestCancellationError, was_cancelled false): was refused as "64 of 320
    requests failed", blaming the server for the client's aborts."""
    d = json.loads((CASES / "aiperf-0.1-records-c32.json").read_text())
    d["input_config"]["loadgen"]["request_cancellation_rate"] = 20.0
    d["error_summary"] = [{"error_details": {"code": 499, "type": "RequestCancellationError",
                                             "message": "Request was cancelled after 1.000 seconds"}, "count": 64}]
    with pytest.raises(BatchmarkError, match=r"request_cancellation_rate: is 20 %: the client cancelled"):
        parse("aiperf", [_write(tmp_path, "p.json", d)])


def test_aiperf_negative_error_count_is_refused(tmp_path):
    """error_request_count {avg: -5}: an impossible count, was clamped silently to 0 failed."""
    d = json.loads((CASES / "aiperf-0.1-records-c32.json").read_text())
    d["error_request_count"] = {"unit": "requests", "avg": -5}
    with pytest.raises(BatchmarkError, match=r"field error_request_count: -5 is negative"):
        parse("aiperf", [_write(tmp_path, "p.json", d)])


@pytest.mark.parametrize("totals, says", [
    # GuideLLM's StatusBreakdown: total = successful + incomplete + errored (guidellm benchmark schemas)
    ({"successful": 40, "errored": 2, "incomplete": 1, "total": 40}, r"request_totals.total: 40 is fewer than the "
                                                                      r"requests it sums \(43\)"),
    # the per-request output_token_count distribution covers every successful request (count 40 in the sample)
    ({"successful": 400, "errored": 0, "incomplete": 0, "total": 400}, r"400 successful requests, but "
                                                                        r"output_token_count covers 40"),
])
def test_guidellm_impossible_request_counts_are_refused(tmp_path, totals, says):
    """Was imported: 400 completed from a benchmark whose distributions hold 40 requests; a total below its parts."""
    d = json.loads((DATA / "guidellm" / "benchmarks.json").read_text())
    d["benchmarks"][1]["metrics"]["request_totals"] = totals
    with pytest.raises(BatchmarkError, match=says):
        parse("guidellm", [_write(tmp_path, "g.json", d)], model="m")


# -- SGLang bench_serving / vLLM: a fallback 0 taken for a measured latency (fix belongs in vllm_result.py) ----

@pytest.mark.parametrize("zeroed", [("ttft", "itl", "tpot"), ("tpot",)])
def test_zero_fallback_latencies_are_not_imported_as_measured(tmp_path, zeroed):
    """SGLang bench_serving's calculate_metrics writes mean_ttft_ms = np.mean(ttfts or 0) * 1000 ("ttfts is empty if
    streaming is not supported by backend"), likewise TPOT and ITL; vLLM's serve.py writes np.mean(tpots or 0) when no
    request has more than one output token.  A TTFT or TPOT of exactly 0.0 ms over 12000 completed requests is that
    fallback, not a measurement: right value null.  batchmark stored ttft_s / tpot_s 0.0 (and step_time_s 0.0)."""
    d = json.loads(SGLANG_LINE)
    for k in list(d):
        if any(k.endswith(f"_{m}_ms") for m in zeroed):
            d[k] = 0.0
    path = tmp_path / "sglang.jsonl"
    path.write_text(json.dumps(d) + "\n")
    (p,) = parse("vllm-bench", [path], model="demo-model").summaries
    assert p.tpot_s is None and p.step_time_s is None
    if "ttft" in zeroed:
        assert p.ttft_s is None


@pytest.mark.parametrize("name, text, says", [
    # AIPerf docs/tutorials/working-with-profile-exports.md: profile_export.jsonl, one MetricRecordInfo per request
    ("profile_export.jsonl", '{"metadata": {"session_num": 0, "x_request_id": "a", "benchmark_phase": "profiling"}, '
                             '"metrics": {"request_latency": {"value": 297.5, "unit": "ms"}}, "error": null}\n'
                             '{"metadata": {"session_num": 1}, "metrics": {}, "error": null}\n',
     "AIPerf's per-request records (profile_export.jsonl"),
    # GenAI-Perf writes perf_analyzer's own profile_export.json beside its summary (genai-perf
    # docs/process_export_files.md: experiments [{experiment {mode, value}, requests [...]}], version)
    ("profile_export.json", json.dumps({"experiments": [{"experiment": {"mode": "concurrency", "value": 4},
                                                         "requests": [], "window_boundaries": [1, 2]}],
                                        "version": "2.57.0", "service_kind": "openai"}),
     "perf_analyzer's per-request export (profile_export.json"),
])
def test_aiperf_neighbour_files_are_named(tmp_path, capsys, scratch_root, name, text, says):
    """Was "holds more than one JSON document" / "input_config: missing; the concurrency of the run is unknown"."""
    path = tmp_path / name
    path.write_text(text)
    assert main(["import", "aiperf", str(path), "--hardware", "h200"]) == 2
    assert says in _one_line(capsys)


def test_early_genai_perf_chunk_itl_keeps_only_its_mean(tmp_path):
    """GenAI-Perf 0.0.3dev at perf_analyzer c18c493e (the JSON export's first version, num_output_token names, unit
    "ns"): inter_token_latency = every response gap / the tokens of the later response, flattened over all requests
    (llm_metrics.py, Statistics._preprocess_data "flatten inter token latencies"); #694 (June 2024) made it per request
    (latency − TTFT) / (output − 1).  The p50/p90/p99 of chunk gaps are not TPOT's: was stored as tpot_s with its
    percentiles (and per-user = 1 / p50).  Only the mean (= TPOT's token-weighted mean with a token per chunk) is kept."""
    d = json.loads((DATA / "aiperf" / "profile_export_genai_perf.json").read_text())
    d["num_output_token"] = d.pop("output_sequence_length")
    d["num_input_token"] = d.pop("input_sequence_length")
    d["inter_token_latency"] = {"unit": "ns", "avg": 4.0e6, "p50": 3.1e6, "p90": 5.0e6, "p99": 40.0e6}
    (p,) = parse("aiperf", [_write(tmp_path, "p.json", d)]).summaries
    assert p.tpot_s == {"p50": None, "p90": None, "p99": None, "mean": pytest.approx(0.004)}
    assert p.per_user_tok_s is None and p.step_time_s is None
    assert any("only its mean is kept" in e for e in p.errors)


def test_sglang_random_range_ratio_is_not_an_output_length_mismatch(tmp_path):
    """SGLang's random dataset draws each output length as np.random.randint(int(output_len * range_ratio),
    output_len + 1) (bench_serving.py sample_random_requests; --random-range-ratio was 0.0 by default in older
    versions): with ratio 0 and random_output_len 1000 the requested mean is (0 + 1000) / 2 = 500 tokens.  A run that
    produced 500 per request (6,000,000 / 12,000) did what it asked; batchmark flagged output_len_mismatch ("the server
    did not generate the requested length")."""
    d = json.loads(SGLANG_LINE)
    d.update(random_range_ratio=0.0, total_output_tokens=6_000_000)
    path = tmp_path / "sglang.jsonl"
    path.write_text(json.dumps(d) + "\n")
    (p,) = parse("vllm-bench", [path], model="demo-model").summaries
    assert p.output_len == 500 and "output_len_mismatch" not in p.caveats


def test_aiperf_export_of_a_run_where_every_request_failed(tmp_path):
    """AIPerf's command outputs reference ("Real Example - Failed Run (All Requests Timeout)"): only
    records.error_request_count {avg 5}, error_summary 5 × TimeoutError, loadgen.request_count 5, no request_count.
    Was refused as "5 of 10 requests failed (50 %)": the 5 requests it was told to send were taken as completed.
    Right: none completed, nothing was measured."""
    d = {"records": {"error_request_count": {"tag": "error_request_count", "unit": "requests",
                                             "header": "Error Request Count", "avg": 5.0, "min": None, "max": None,
                                             "p50": None, "p99": None, "std": None, "count": 1}},
         "input_config": {"endpoint": {"model_names": ["test-model"], "type": "chat", "url": "http://localhost:8000"},
                          "input": {"prompt": {"input_tokens": {"mean": 100}, "output_tokens": {"mean": 50}}},
                          "loadgen": {"concurrency": 1, "request_rate_mode": "concurrency_burst", "request_count": 5}},
         "was_cancelled": False,
         "error_summary": [{"error_details": {"code": None, "type": "TimeoutError", "message": ""}, "count": 5}]}
    with pytest.raises(BatchmarkError, match=r"no request completed \(5 failed\); nothing was measured"):
        parse("aiperf", [_write(tmp_path, "profile_export_aiperf.json", d)])


def test_newer_aiperf_csv_with_a_unit_column_is_named(tmp_path, capsys, scratch_root):
    """The same reference's "CSV Export Format": header Metric,Unit,avg,min,max,p50,p99,std.  Was "corrupt JSON … cut
    short" (only Metric,avg,… was recognised)."""
    path = tmp_path / "profile_export_aiperf.csv"
    path.write_text("Metric,Unit,avg,min,max,p50,p99,std\nrequest_throughput,requests/sec,0.2504302580624667,,,,\n"
                    "time_to_first_token,ms,30.81,28.66,34.71,30.66,34.34,1.37\n")
    assert main(["import", "aiperf", str(path), "--hardware", "h200"]) == 2
    assert "an AIPerf/GenAI-Perf CSV export; the aiperf importer reads the JSON export beside it" in _one_line(capsys)


# -- newer AIPerf load settings (its load generator options reference, docs/benchmark_modes) --------------------

def _aiperf(tmp_path, **loadgen):
    d = json.loads((CASES / "aiperf-0.1-records-c32.json").read_text())
    d["input_config"]["loadgen"].update(loadgen)
    return _write(tmp_path, "p.json", d)


def test_aiperf_user_centric_rate_is_refused(tmp_path):
    """--user-centric-rate 1.0 --num-users 15: each user's turns 15 s apart, --concurrency only a ceiling: open loop.
    Was imported as a closed-loop point at c = 32."""
    with pytest.raises(BatchmarkError, match=r"loadgen.user_centric_rate: is 1.0: per-user turn-gap scheduling"):
        parse("aiperf", [_aiperf(tmp_path, user_centric_rate=1.0, num_users=15)])


def test_aiperf_mooncake_trace_is_a_replayed_schedule(tmp_path):
    """"--fixed-schedule or mooncake_trace dataset → timestamp-based scheduling" (AIPerf's option priority): was a
    closed-loop point at c = 32."""
    d = json.loads((CASES / "aiperf-0.1-records-c32.json").read_text())
    d["input_config"]["input"].update(custom_dataset_type="mooncake_trace", file="trace.jsonl")
    with pytest.raises(BatchmarkError, match=r"input.custom_dataset_type: a fixed schedule \(trace replay"):
        parse("aiperf", [_write(tmp_path, "p.json", d)])


def test_aiperf_concurrency_ramp_is_a_caveat(tmp_path):
    """--concurrency-ramp-duration 30: from 1 to 32 in flight over 30 s, inside the measured run: imported, with the
    caveat concurrency_ramp (was silent)."""
    (p,) = parse("aiperf", [_aiperf(tmp_path, concurrency_ramp_duration=30)]).summaries
    assert p.concurrency == 32 and p.caveats == {"concurrency_ramp": 320}
    assert any("ramped from 1 to 32 over the first 30 s" in e for e in p.errors)


def test_guidellm_concurrent_rampup_is_a_caveat(tmp_path):
    """GuideLLM ≥ 0.4 ConcurrentStrategy.rampup_duration (guidellm scheduler/strategies.py: the first `streams`
    requests start spread over it): imported with the caveat concurrency_ramp (was silent)."""
    d = json.loads((DATA / "guidellm" / "benchmarks.json").read_text())
    d["benchmarks"][1]["args"]["strategy"] = {"type_": "concurrent", "streams": 8, "rampup_duration": 20.0}
    (p,) = [p for p in parse("guidellm", [_write(tmp_path, "g.json", d)], model="m").summaries if p.concurrency == 8]
    assert p.caveats == {"concurrency_ramp": 40} and any("over the first 20 s" in e for e in p.errors)
