"""Regression tests of measurement truth, result-file half: one test per failing input of ../shared/cases/.

Each input is copied under tests/data/cases/<case>/ with its README.txt (source, what it
reproduces, the right value); each test names the fault kind it pins and asserts the right
value from that README.  Every one of them failed on main before this change.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from pipeline.cli import main
from pipeline.core.errors import BatchmarkError
from pipeline.importers import import_run, parse
from pipeline.views.show import show_run

from tests.conftest import DATA

CASES = DATA / "cases"


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


# -- kind: failed and partial work imported as a measurement ------------------------------------

def test_detailed_json_failed_requests_stay_out_of_medians_and_the_point_is_refused():
    """Case 03: 6 of 8 requests failed (output_lens 0); the median output length was 0."""
    path = CASES / "03-vllm-json-failed-majority" / "qwen3-14b-c2-detailed.json"
    with pytest.raises(BatchmarkError, match=r"6 of 8 requests failed \(75%, above the 5% limit\)"):
        parse("vllm-bench", [path])
    # raising the limit imports it truthfully: the completed requests' length, the failures counted
    p = parse("vllm-bench", [path], max_failure_rate=1.0).summaries[0]
    assert (p.output_len, p.input_len) == (100, 20)
    assert (p.completed, p.failed) == (2, 6)
    assert p.errors == ["Bad Request"]
    assert p.ttft_s["p50"] == pytest.approx((0.051 + 0.049) / 2)  # the failed requests' 0.0 excluded


def test_printed_block_with_one_of_100_requests_is_refused(capsys, scratch_root):
    """Case 02: 'Successful requests: 1' under a 100/100 progress bar at concurrency 2, no 'Failed requests:' line."""
    path = CASES / "02-vllm-block-1-of-100" / "bench-c2.log"
    with pytest.raises(BatchmarkError, match=r"only 1 request\(s\) completed \(99 failed\) at concurrency 2"):
        parse("vllm-bench", [path], model="Qwen/Qwen3-8B")
    with pytest.raises(BatchmarkError, match=r"only 1 request\(s\) completed"):
        parse("vllm-bench", [path], model="Qwen/Qwen3-8B", max_failure_rate=1.0)  # never a point at c=2
    assert main(["import", "vllm-bench", str(path), "--model", "Qwen/Qwen3-8B", "--hardware", "h200"]) == 2
    assert "bench-c2.log" in _one_line(capsys)


def test_failure_counts_of_a_block_with_a_failed_line(tmp_path):
    """Same kind, newer block: 'Failed requests: 3' of 40 at concurrency 4 is 7.5 %, above 5 %."""
    text = (CASES / "02-vllm-block-1-of-100" / "bench-c2.log").read_text()
    text = text.replace("100/100", "40/40").replace("Successful requests:                     1",
                                                    "Successful requests:                     37\nFailed requests:                         3")
    text = text.replace("Maximum request concurrency: 2", "Maximum request concurrency: 4").replace(
        "Maximum request concurrency:             2", "Maximum request concurrency:             4")
    path = tmp_path / "c4.log"
    path.write_text(text)
    with pytest.raises(BatchmarkError, match=r"3 of 40 requests failed \(8%"):
        parse("vllm-bench", [path], model="Qwen/Qwen3-8B")
    p = parse("vllm-bench", [path], model="Qwen/Qwen3-8B", max_failure_rate=0.1).summaries[0]
    assert (p.concurrency, p.completed, p.failed) == (4, 37, 3)


# -- kind: an open-loop (rate-limited) run imported as a closed-loop point ----------------------
# such runs now import as what they are, open-loop points (load, rate, cap), never as a
# closed-loop point at their cap.

def test_rate_limited_json_imports_as_an_open_loop_point(scratch_root):
    """Case 01: request_rate 2.4 with max_concurrency 64: an open-loop point at 2.4 req/s capped at 64, not c = 64."""
    path = CASES / "01-vllm-rate-limited-json" / "deepseek-v3.2-rate2.4-c64.json"
    p = parse("vllm-bench", [path]).summaries[0]
    assert (p.load, p.rate_rps, p.concurrency, p.max_concurrency, p.burstiness) == ("poisson", 2.4, None, 64, 1.0)
    assert p.achieved_rate_rps == pytest.approx(2.3118255294170766)  # request_throughput
    assert p.output_throughput_tok_s == pytest.approx(1155.9127647085384)
    assert (p.input_len, p.output_len, p.completed, p.failed) == (6000, 500, 512, 0)  # 3072000 / 512, 256000 / 512
    # the file's ms figures, in s; no E2EL and no p90 in it: null, never invented
    assert p.ttft_s == pytest.approx({"p50": 0.3981, "p90": None, "p99": 0.6119, "mean": 0.4123})
    assert p.tpot_s == pytest.approx({"p50": 0.0149, "p90": None, "p99": 0.0187, "mean": 0.0151})
    # vLLM's itl is one gap per chunk: stored as itl_chunk_s, the per-token itl_s unknown
    assert p.itl_chunk_s == pytest.approx({"p50": 0.0146, "p90": None, "p99": 0.0294, "mean": 0.0151})
    assert p.itl_s is None
    assert p.e2el_s is None
    run = import_run("vllm-bench", [path], "h200")
    doc = show_run(run)
    pt = doc["points"][0]
    assert (pt["load"], pt["rate_rps"], pt["concurrency"], pt["max_concurrency"]) == ("poisson", 2.4, None, 64)
    model = doc["models"][0]
    assert model["knee_concurrency"] is None and model["peak_output_throughput_tok_s"] is None  # no closed point invented
    assert model["rate_sweeps"][0]["points"][0]["rate_rps"] == 2.4


def test_printed_poisson_block_imports_as_an_open_loop_point():
    """A printed block of a Poisson run at 2 req/s, uncapped (tests/data/vllm-bench-log/poisson-rate2.log, numbers invented)."""
    p = parse("vllm-bench", [DATA / "vllm-bench-log" / "poisson-rate2.log"], model="Qwen/Qwen3-8B").summaries[0]
    assert (p.load, p.rate_rps, p.concurrency, p.burstiness) == ("poisson", 2.0, None, 1.0)
    assert (p.input_len, p.output_len, p.completed, p.failed) == (1024, 256, 200, 0)  # 204800 / 200, 51200 / 200
    assert p.output_throughput_tok_s == pytest.approx(490.57) and p.achieved_rate_rps == pytest.approx(1.92)
    assert p.ttft_s == pytest.approx({"p50": 0.17105, "p90": 0.26230, "p99": 0.41268, "mean": 0.18742})
    assert p.tpot_s == pytest.approx({"p50": 0.02433, "p90": 0.02794, "p99": 0.03156, "mean": 0.02481})
    assert p.itl_chunk_s == pytest.approx({"p50": 0.02371, "p90": 0.02945, "p99": 0.04819, "mean": 0.02480})
    assert p.itl_s is None  # vLLM's ITL is per chunk
    assert p.e2el_s == pytest.approx({"p50": 6.38297, "p90": 7.29052, "p99": 8.21533, "mean": 6.51406})
    assert p.per_user_tok_s == pytest.approx(1 / 0.02433)  # 1 / median TPOT


def test_printed_block_rate_lines_make_open_loop_points(tmp_path):
    """'Traffic request rate: 2.4' above a closed-loop block, or 'Request rate configured (RPS)' inside it: open loop, cap kept."""
    text = (CASES / "02-vllm-block-1-of-100" / "bench-c2.log").read_text().replace(
        "Traffic request rate: inf", "Traffic request rate: 2.4").replace("Successful requests:                     1",
                                                                          "Successful requests:                     100")
    path = tmp_path / "poisson.log"
    path.write_text(text)
    p = parse("vllm-bench", [path], model="Qwen/Qwen3-8B").summaries[0]
    assert (p.load, p.rate_rps, p.concurrency, p.max_concurrency) == ("poisson", 2.4, None, 2)
    path.write_text(text.replace("Burstiness factor: 1.0 (Poisson process)", "Burstiness factor: 0.5 (Gamma distribution)"))
    p = parse("vllm-bench", [path], model="Qwen/Qwen3-8B").summaries[0]
    assert (p.load, p.burstiness) == ("gamma", 0.5)  # not Poisson: kept apart
    path.write_text(text.replace("Traffic request rate: 2.4", "Traffic request rate: -1"))
    with pytest.raises(BatchmarkError, match=r"request_rate.*positive number"):
        parse("vllm-bench", [path], model="Qwen/Qwen3-8B")


# -- kind: result files of other tools and versions ---------------------------------------------

def test_append_result_file_imports_every_line(scratch_root):
    """Case 05: --append-result writes one JSON object per line: three points."""
    run = import_run("vllm-bench", [CASES / "05-vllm-append-result" / "sweep.json"], "h100-sxm", run_id="append")
    doc = show_run(run)
    assert [(p["concurrency"], p["output_throughput_tok_s"]) for p in doc["points"]] == [(1, 118.2), (4, 421.7),
                                                                                         (16, 1380.4)]
    assert {(p["input_len"], p["output_len"]) for p in doc["points"]} == {(1024, 256)}


def test_guidellm_yaml_imports_like_its_json_and_csv_is_refused_plainly(capsys, scratch_root):
    """Case 15: benchmarks.yaml = benchmarks.json (86.0 / 318.0 / 1010.0 tok/s); the CSV is unsupported, not 'truncated'."""
    folder = CASES / "15-guidellm-yaml-csv"
    by_json = parse("guidellm", [folder / "benchmarks.json"]).summaries
    by_yaml = parse("guidellm", [folder / "benchmarks.yaml"]).summaries
    assert [(p.concurrency, p.output_throughput_tok_s) for p in by_yaml] == [(1, 86.0), (4, 318.0), (16, 1010.0)]
    assert [p.as_dict() for p in by_yaml] == [p.as_dict() for p in by_json]
    assert main(["import", "guidellm", str(folder / "benchmarks.csv"), "--hardware", "h100-sxm"]) == 2
    err = _one_line(capsys)
    assert "CSV output is not supported" in err and "benchmarks.json" in err and "truncat" not in err


def _g081(name: str) -> dict:
    return json.loads((CASES / "16-guidellm-0.8.1" / name).read_text())


@pytest.mark.parametrize("name, conc, tput, tpot_p50", [
    # batchmark's own sweep on the same server (README): c=4 123.7 tok/s, TPOT p50 24.4 ms; c=16 202.5, 39.7 ms
    ("benchmarks-c4.json", 4, 123.7, 0.0244),
    ("benchmarks-c16.json", 16, 202.5, 0.0397),
])
def test_guidellm_081_imports_without_model_and_means_batchmarks_metrics(name, conc, tput, tpot_p50, scratch_root):
    """Case 16: real GuideLLM 0.8.1 reports: the model is at config.backend.model; each field mapped by its definition."""
    run = import_run("guidellm", [CASES / "16-guidellm-0.8.1" / name], "cpu", run_id=f"g081-{conc}")
    p = show_run(run)["points"][0]
    b = _g081(name)["benchmarks"][0]
    m = b["metrics"]
    assert p["model"] == "dense-llama" and p["concurrency"] == conc
    assert (p["input_len"], p["output_len"], p["completed"], p["failed"]) == (64, 32, m["request_totals"]["successful"], 0)
    # TPOT = inter_token_latency_ms ((last - first token) / (n - 1)), not time_per_output_token_ms (TTFT included)
    assert p["tpot_s"]["p50"] == pytest.approx(m["inter_token_latency_ms"]["successful"]["percentiles"]["p50"] / 1000)
    assert p["tpot_s"]["p50"] == pytest.approx(tpot_p50, rel=0.2)  # the old mapping was 45-120 % off
    assert p["output_throughput_tok_s"] == pytest.approx(m["output_token_count"]["successful"]["total_sum"] / b["duration"])
    assert p["output_throughput_tok_s"] == pytest.approx(tput, rel=0.15)  # GuideLLM's window includes warm-up
    assert p["ttft_s"]["p50"] == pytest.approx(m["time_to_first_token_ms"]["successful"]["percentiles"]["p50"] / 1000)
    assert p["e2el_s"]["p50"] == pytest.approx(m["request_latency"]["successful"]["percentiles"]["p50"])
    assert json.loads((run / "run.json").read_text())["source_version"] == "0.8.1"


def test_aiperf_profile_export(scratch_root):
    """Case 06: c=32, 950.2 tok/s, per-user 31.2 tok/s, TTFT p50 402.5 ms (AIPerf metrics reference)."""
    run = import_run("aiperf", [CASES / "06-aiperf-profile-export" / "profile_export_aiperf.json"], "h200", run_id="aip")
    doc = show_run(run)
    p = doc["points"][0]
    assert (p["concurrency"], p["input_len"], p["output_len"], p["completed"]) == (32, 1024, 256, 256)
    assert p["output_throughput_tok_s"] == 950.2 and p["per_user_tok_s"] == pytest.approx(31.2)
    assert p["ttft_s"]["p50"] == pytest.approx(0.4025)
    assert p["tpot_s"]["p50"] == pytest.approx(0.0321)  # AIPerf's inter_token_latency = (E2EL - TTFT) / (OSL - 1)
    assert p["e2el_s"]["p99"] == pytest.approx(9.687375)
    assert p["itl_s"] is None  # AIPerf keeps no per-token gaps
    assert doc["source"] == "imported:aiperf" and doc["models"][0]["kind"] == "moe"  # Qwen/Qwen3-30B-A3B's card


@pytest.mark.parametrize("fmt", ["vllm-bench", "guidellm", "llama-benchy"])
def test_aiperf_file_given_to_another_importer_names_aiperf(fmt, capsys, scratch_root):
    """Case 06: the nearest formats must not call the file truncated."""
    path = CASES / "06-aiperf-profile-export" / "profile_export_aiperf.json"
    assert main(["import", fmt, str(path), "--hardware", "h200"]) == 2
    err = _one_line(capsys)
    assert "batchmark import aiperf" in err and "truncat" not in err


def test_aiperf_open_loop_and_failures_are_refused(tmp_path):
    d = json.loads((CASES / "06-aiperf-profile-export" / "profile_export_aiperf.json").read_text())
    d["input_config"]["loadgen"]["request_rate"] = 5.0
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(d))
    with pytest.raises(BatchmarkError, match=r"open loop at 5 req/s capped at 32"):
        parse("aiperf", [path])
    del d["input_config"]["loadgen"]["request_rate"]
    d["error_request_count"] = {"unit": "requests", "avg": 44.0}
    path.write_text(json.dumps(d))
    with pytest.raises(BatchmarkError, match=r"44 of 300 requests failed \(15%"):
        parse("aiperf", [path])


def test_llama_bench_table_given_to_llama_benchy_is_refused(capsys, scratch_root):
    """Case 04: a llama-bench table (pp2048, tg32 @ d4096) shares test/t/s with llama-benchy's; tg32 never follows pp2048."""
    path = CASES / "04-llama-bench-md-as-benchy" / "gpt-oss-20b-llama-bench.md"
    assert main(["import", "llama-benchy", str(path), "--hardware", "dgx-spark"]) == 2
    err = _one_line(capsys)
    assert "llama-bench table" in err and "not llama-benchy" in err
    assert main(["import", "llama-batched-bench", str(path), "--hardware", "dgx-spark"]) == 2
    assert "llama-bench table" in _one_line(capsys)


# -- kind: non-finite numbers -------------------------------------------------------------------

@pytest.mark.parametrize("fmt, src, edit, field", [
    ("vllm-bench", DATA / "vllm-bench" / "llama-3.1-8b-c4.json", lambda t: t.replace('"output_throughput": 52.8', '"output_throughput": NaN'), "output_throughput"),
    ("vllm-bench", DATA / "vllm-bench" / "llama-3.1-8b-c4.json", lambda t: t.replace('"median_tpot_ms": 75.3', '"median_tpot_ms": Infinity'), "median_tpot_ms"),
    ("guidellm", CASES / "15-guidellm-yaml-csv" / "benchmarks.yaml", lambda t: t.replace("mean: 86.0", "mean: .nan", 1), "benchmarks[0].metrics.output_tokens_per_second.successful.mean"),
    ("aiperf", CASES / "06-aiperf-profile-export" / "profile_export_aiperf.json", lambda t: t.replace('"avg": 950.2', '"avg": -Infinity'), "output_token_throughput.avg"),
])
def test_non_finite_numbers_are_refused_naming_file_and_field(fmt, src, edit, field, tmp_path):
    text = src.read_text()
    bad = edit(text)
    assert bad != text
    path = tmp_path / src.name
    path.write_text(bad)
    with pytest.raises(BatchmarkError, match=rf"{path.name}: field {field.replace('[', '.').replace(']', '.')}.*not a finite number"):
        parse(fmt, [path])


def test_non_finite_cells_of_printed_tables_are_refused(tmp_path):
    text = (CASES / "02-vllm-block-1-of-100" / "bench-c2.log").read_text().replace("44.60", "nan")
    path = tmp_path / "b.log"
    path.write_text(text)
    with pytest.raises(BatchmarkError, match=r"b.log: line \d+: not a finite number: 'nan'"):
        parse("vllm-bench", [path], model="Qwen3-8B")


def test_genai_perf_export_per_user_is_one_over_median_itl():
    """GenAI-Perf layout (hand-made, tests/data/aiperf/): ITL in ns; its output_token_throughput_per_request includes
    the TTFT (output tokens / request latency), so per-user = 1 / median inter_token_latency = 1e9 / 3988754.5."""
    p = parse("aiperf", [DATA / "aiperf" / "profile_export_genai_perf.json"]).summaries[0]
    assert p.per_user_tok_s == pytest.approx(1e9 / 3988754.5) != pytest.approx(214.4)
    assert p.tpot_s["p50"] == pytest.approx(3.9887545e-3) and p.output_throughput_tok_s == 217.1
    assert (p.model, p.concurrency, p.input_len, p.output_len, p.completed) == ("gpt2", 1, 550, 18, 100)
    assert p.errors  # the counts are not stated by the file, and the point says so


def test_open_loop_points_diff_by_rate(scratch_root, tmp_path):
    """``diff`` matches open-loop points by workload, load, cap and rate; a rate only one run has is listed apart."""
    from pipeline.diff.rundiff import diff_runs
    from pipeline.diff.report import format_csv, format_text
    from pipeline.analysis.stages import load_run

    src = json.loads((CASES / "01-vllm-rate-limited-json" / "deepseek-v3.2-rate2.4-c64.json").read_text())
    a = tmp_path / "a.json"
    a.write_text(json.dumps(src))
    b = tmp_path / "b.json"
    b.write_text(json.dumps({**src, "output_throughput": 1271.5, "p99_ttft_ms": 700.0}) + "\n"
                 + json.dumps({**src, "request_rate": 4.8}))
    ra, rb = import_run("vllm-bench", [a], "h200", run_id="ra"), import_run("vllm-bench", [b], "h200", run_id="rb")
    d = diff_runs(load_run(ra), load_run(rb))
    tput = next(c for c in d.changes if c.metric == "output_throughput_tok_s")
    assert (tput.load, tput.rate_rps, tput.concurrency, tput.max_concurrency) == ("poisson", 2.4, None, 64)
    assert tput.change == pytest.approx(1271.5 / 1155.9127647085384 - 1)  # matched at 2.4 req/s, nowhere else
    assert d.only_in_a == [] and [(p["load"], p["rate_rps"]) for p in d.only_in_b] == [("poisson", 4.8)]
    text = format_text(d)
    assert "poisson 2.4 req/s, cap 64" in text and "poisson 4.8 req/s, cap 64" in text
    rows = list(csv.DictReader(io.StringIO(format_csv(d))))
    assert {(r["scope"], r["load"], r["rate_rps"]) for r in rows if r["scope"] != "model"} == {
        ("point", "poisson", "2.4"), ("only_b", "poisson", "4.8")}
