"""Importers: the reference llama-batched-bench file (its acceptance test) and hand-made samples of the other formats.

The files under tests/data/ are hand-made from each tool's documented output format (see
tests/data/README.md); the reference file is read from ../shared/reference/.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.core import scrub
from pipeline.cli import main
from pipeline.core.errors import BatchmarkError
from pipeline.importers import ImportOptions, import_run, parse
from pipeline.views.show import show_run

from tests.conftest import DATA


def _runs(root: Path) -> list[str]:
    """Everything under data/runs/, hidden temporary folders included."""
    runs_dir = root / "data" / "runs"
    return sorted(p.name for p in runs_dir.iterdir()) if runs_dir.is_dir() else []


def _reference_rows(path: Path) -> dict[tuple[str, int, int], float]:
    """(model heading, PP, B) -> S_TG, read independently of the importer."""
    rows, model = {}, None
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            model = line[3:].strip()
        m = re.match(r"^\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|(?:[^|]*\|){4}\s*([\d.]+)\s*\|", line)
        if m:
            rows[(model, int(m.group(1)), int(m.group(3)))] = float(m.group(4))
    return rows


@pytest.fixture
def reference_run(reference_file, scratch_root):
    run = import_run("llama-batched-bench", [reference_file], "dgx-spark", run_id="spark-ref")
    return run, show_run(run)


def test_every_s_tg_becomes_output_throughput(reference_file, reference_run):
    run, doc = reference_run
    expected = _reference_rows(reference_file)
    assert len(expected) == 36
    got = {(p["model"], p["input_len"], p["concurrency"]): p for p in doc["points"]}
    assert len(got) == 36
    for (heading, pp, b), s_tg in expected.items():
        p = got[(heading, pp, b)]  # the model is named as the file's heading names it
        assert p["output_throughput_tok_s"] == s_tg
        assert p["output_len"] == 32 and p["engine"] == "llama.cpp"
    meta = json.loads((run / "run.json").read_text())
    assert meta["source"] == doc["source"] == "imported:llama-batched-bench"
    assert meta["source_tool"] == "llama-batched-bench" and meta["source_version"] == "6918 (2f68ce7cf)"
    assert meta["source_files"] == [scrub.relative_path(str(reference_file.resolve()))]  # no machine folder
    assert meta["status"] == "complete" and meta["hardware"]["name"] == "dgx-spark"


def test_show_json_at_pp512(reference_run):
    _, doc = reference_run
    models = {(m["model"], m["input_len"]): m for m in doc["models"]}
    assert len(models) == 6  # each PP is its own workload (input_len = PP, output_len = TG = 32)
    qwen, oss = models[("ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF", 512)], models[("ggml-org/gpt-oss-20b-GGUF", 512)]
    assert qwen["kind"] == "dense" and oss["kind"] == "moe"
    # 593.27 / (32 x 29.24) = 0.634
    assert qwen["scaling_efficiency"]["32"] == pytest.approx(593.27 / (32 * 29.24)) == pytest.approx(0.634, abs=5e-4)
    assert qwen["knee_concurrency"] is None and qwen["post_knee"] == "not_reached"
    # 614.82 / (32 x 81.11) = 0.237
    assert oss["scaling_efficiency"]["32"] == pytest.approx(614.82 / (32 * 81.11)) == pytest.approx(0.237, abs=5e-4)
    assert doc["hardware"]["bandwidth_gb_s_spec"] == 273 and doc["hardware"]["bandwidth_gb_s_measured"] is None


def test_ceiling_and_mbu_from_the_file_size(reference_run):
    _, doc = reference_run
    qwen = next(m for m in doc["models"] if m["model"] == "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF" and m["input_len"] == 512)
    file_bytes = round(7.54 * 2**30)
    assert qwen["weight_bytes"] == file_bytes
    # weights alone: 273e9 / (7.54 x 2^30) = 33.72 tok/s; the ceiling at PP 512 adds the KV of the mean
    # decode context 512 + 32/2 = 528 tokens x 57,344 B/token (28 layers x 4 KV heads x 128 x 2 x 2 B)
    assert qwen["kv_bytes_per_token"] == 28 * 4 * 128 * 2 * 2 == 57344
    assert 273e9 / file_bytes == pytest.approx(33.72, abs=0.01)
    assert qwen["ceiling_tok_s"] == pytest.approx(273e9 / (file_bytes + 528 * 57344)) == pytest.approx(33.59, abs=0.01)
    p1 = next(p for p in doc["points"] if p["model"] == "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF" and p["input_len"] == 512
              and p["concurrency"] == 1)
    # MBU = bytes per step / step time / bandwidth, step = T_TG / TG = 1.095 / 32 s
    assert p1["mbu"] == pytest.approx((file_bytes + 528 * 57344) / (1.095 / 32) / 273e9, rel=1e-9)
    assert p1["mbu"] == pytest.approx(0.87, abs=0.005)
    # ttft = T_PP, tpot = T_TG / TG, prefill = S_PP
    assert p1["ttft_s"]["p50"] == 0.215 and p1["tpot_s"]["p50"] == pytest.approx(1.095 / 32)
    assert p1["prefill_throughput_tok_s"] == 2379.83 and p1["itl_s"]["p50"] is None


def test_no_published_point_is_flagged_impossible(reference_run):
    """Every row of the published llama-batched-bench Spark file (a real run, in the format its file states) is
    possible: no point and no model flagged, no MBU above 1 (gpt-oss-20b pp512 B 8 and 16 read MBU 1.02 at uniform
    routing; at the identical routing its identical prompts decode, the routing it is counted at, 0.39 and 0.32)."""
    _, doc = reference_run
    assert [p for p in doc["points"] if p.get("implausible") or p.get("mbu_implausible")] == []
    oss = {p["concurrency"]: p for p in doc["points"] if "gpt-oss" in p["model"] and p["input_len"] == 512}
    assert round(oss[8]["mbu"], 2) == 0.39 and round(oss[16]["mbu"], 2) == 0.32
    assert [m["model"] for m in doc["models"] if m.get("implausible")] == []


def test_roofline_within_2x_of_every_reference_point(reference_run, capsys):
    """The dense model's roofline within 2× of each point; the MoE's, counted at identical routing (k/E: one prompt
    repeated), is a bound its points stay under (MBU below 1) by up to 3.81× at B = 32: past B = 1 the batched MoE
    kernel, not the bytes, sets its step (docs/spark-arithmetic.md, "Routing locality")."""
    run, _ = reference_run
    analysis = json.loads((run / "analysis.json").read_text())
    summaries = {(p["model"], p["input_len"], p["concurrency"]): p["output_throughput_tok_s"]
                 for p in json.loads((run / "summaries.json").read_text())["points"]}
    lines = []
    for p in analysis["points"]:
        measured = summaries[(p["model"], p["input_len"], p["concurrency"])]
        ratio = p["roofline_tok_s"] / measured
        lines.append(f"{p['model']:<18} PP {p['input_len']:>5} B {p['concurrency']:>3} measured {measured:8.2f} "
                     f"roofline {p['roofline_tok_s']:8.1f} ratio {ratio:5.2f} ({p['roofline_bound']})")
        if p["routing"] == "identical":
            assert 1.0 <= ratio <= 4.0, lines[-1]
        else:
            assert p["routing"] is None and 0.5 <= ratio <= 2.0, lines[-1]
    assert len(lines) == 36


def test_truncated_row_is_rejected_and_nothing_written(reference_file, scratch_root, tmp_path):
    text = reference_file.read_text()
    cut = text[: text.index("|  8192 |     32 |   32 | 263168 |  119.441") + 30]  # a row cut mid-way
    bad = tmp_path / "cut.md"
    bad.write_text(cut)
    before = _runs(scratch_root)
    with pytest.raises(BatchmarkError) as exc:
        import_run("llama-batched-bench", [bad], "dgx-spark", run_id="partial")
    msg = str(exc.value)
    assert "cut.md" in msg and re.search(r"line \d+", msg) and "\n" not in msg
    assert _runs(scratch_root) == before  # no run, no temporary folder left


def test_missing_row_at_a_line_boundary_is_truncation(reference_file, tmp_path):
    lines = reference_file.read_text().splitlines()
    bad = tmp_path / "short.md"
    bad.write_text("\n".join(lines[:-1]) + "\n")  # the file loses its last row: PP 8192, B 32
    with pytest.raises(BatchmarkError, match=r"short.md: line \d+: table lacks the row PP=8192 TG=32 B=32"):
        parse("llama-batched-bench", [bad])


def test_shifted_columns_are_rejected(tmp_path):
    bad = tmp_path / "shift.md"
    bad.write_text("## org/Llama-3.1-8B-GGUF\n\n"
                   "|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |\n"
                   "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n"
                   "|   512 |     32 |    1 |    544 |    0.215 |  2379.83 |    1.095 |    92.24 |    1.310 |   415.37 |\n")
    with pytest.raises(BatchmarkError, match=r"shift.md: line 5: S_TG 92.24 does not equal B·TG/T_TG"):
        parse("llama-batched-bench", [bad])


def test_batched_bench_jsonl_needs_a_model_and_reads_its_quant(scratch_root):
    path = DATA / "llama-batched-bench" / "llama-3.1-8b-q4_0.jsonl"
    with pytest.raises(BatchmarkError, match="JSONL carries no model name; pass --model"):
        parse("llama-batched-bench", [path])
    run = import_run("llama-batched-bench", [path], "dgx-spark", run_id="jsonl", options=ImportOptions(model="Llama-3.1-8B-Q4_0"))
    doc = show_run(run)
    assert [p["concurrency"] for p in doc["points"]] == [1, 2, 4, 8]
    assert doc["points"][0]["output_throughput_tok_s"] == pytest.approx(64 / 2.318, rel=1e-5)
    card = json.loads((run / "models" / "Llama-3.1-8B-Q4_0.json").read_text())
    assert card["quantization"] == "q4_0"


def test_batched_bench_jsonl_truncated_line(tmp_path):
    src = (DATA / "llama-batched-bench" / "llama-3.1-8b-q4_0.jsonl").read_text()
    bad = tmp_path / "cut.jsonl"
    bad.write_text(src[: len(src) - 40])
    with pytest.raises(BatchmarkError, match=r"cut.jsonl: line 4: not a JSON object"):
        parse("llama-batched-bench", [bad], model="Llama-3.1-8B")


# -- vllm bench serve (hand-made samples of its documented format) ----------------------------

def test_vllm_save_result_files(scratch_root):
    run = import_run("vllm-bench", [DATA / "vllm-bench"], "dgx-spark", run_id="vllm")
    doc = show_run(run)
    pts = {p["concurrency"]: p for p in doc["points"]}
    assert sorted(pts) == [1, 4, 16]
    p4 = pts[4]
    assert p4["model"] == "meta-llama/Llama-3.1-8B-Instruct" and p4["engine"] == "vllm"
    assert (p4["input_len"], p4["output_len"]) == (1024, 256)
    assert p4["output_throughput_tok_s"] == 52.8
    assert p4["per_user_tok_s"] == pytest.approx(1000 / 75.3)
    assert p4["tpot_s"]["p50"] == pytest.approx(0.0753) and p4["tpot_s"]["p90"] is None  # not in the file
    assert doc["models"][0]["kind"] == "dense"  # found through the card's alias


def test_vllm_truncated_json_names_file_and_line(tmp_path):
    src = (DATA / "vllm-bench" / "llama-3.1-8b-c4.json").read_text()
    bad = tmp_path / "c4.json"
    bad.write_text(src[: len(src) // 2])
    with pytest.raises(BatchmarkError, match=r"c4.json: line \d+: corrupt JSON"):
        parse("vllm-bench", [bad])
    d = json.loads(src)
    del d["output_throughput"]
    bad.write_text(json.dumps(d))
    with pytest.raises(BatchmarkError, match=r"c4.json: field output_throughput: missing"):
        parse("vllm-bench", [bad])
    d = json.loads(src)
    d["max_concurrency"] = None
    bad.write_text(json.dumps(d))
    with pytest.raises(BatchmarkError, match=r"field max_concurrency"):
        parse("vllm-bench", [bad])


def test_vllm_printed_block(scratch_root):
    path = DATA / "vllm-bench-log" / "serve-log.txt"
    # the model is named by the Namespace(...) line vllm bench serve prints first; --model overrides it
    assert {p.model for p in parse("vllm-bench", [path]).summaries} == {"Qwen/Qwen3-30B-A3B-FP8"}
    assert {p.model for p in parse("vllm-bench", [path], model="other").summaries} == {"other"}
    run = import_run("vllm-bench", [path], "dgx-spark", run_id="log", options=ImportOptions(model="Qwen/Qwen3-30B-A3B-FP8"))
    doc = show_run(run)
    assert [(p["concurrency"], p["output_throughput_tok_s"]) for p in doc["points"]] == [(1, 51.18), (8, 156.34)]
    assert doc["points"][1]["input_len"] == 65536 // 64 and doc["points"][1]["output_len"] == 8192 // 64
    assert doc["points"][1]["ttft_s"]["p99"] == pytest.approx(0.9053)
    assert doc["models"][0]["model"] == "Qwen/Qwen3-30B-A3B-FP8" and doc["models"][0]["kind"] == "moe"
    card = json.loads((run / "models" / "Qwen%2FQwen3-30B-A3B-FP8.json").read_text())
    assert card["quantization"] == "fp8"


def test_vllm_block_cut_short(tmp_path):
    text = (DATA / "vllm-bench-log" / "serve-log.txt").read_text()
    bad = tmp_path / "log.txt"
    bad.write_text(text[: text.rindex("Mean TPOT")])
    with pytest.raises(BatchmarkError, match=r"log.txt: line \d+: Serving Benchmark Result block never closed"):
        parse("vllm-bench", [bad], model="Qwen3-30B-A3B")


# -- llama-benchy --------------------------------------------------------------------------------

def test_llama_benchy_json(scratch_root):
    run = import_run("llama-benchy", [DATA / "llama-benchy" / "gpt-oss-120b.json"], "dgx-spark", run_id="benchy")
    doc = show_run(run)
    assert [p["concurrency"] for p in doc["points"]] == [1, 2, 4]  # the context-prefill phase is skipped
    p2 = doc["points"][1]
    assert (p2["input_len"], p2["output_len"]) == (2048, 128)
    assert p2["output_throughput_tok_s"] == pytest.approx(60.4, abs=0.01) and p2["per_user_tok_s"] == pytest.approx(30.6, abs=0.01)
    # TTFT from the six e2e_ttft values (ms), numpy linear percentiles
    assert p2["ttft_s"]["p50"] == pytest.approx((410.3 + 525.0) / 2 / 1000)
    meta = json.loads((run / "run.json").read_text())
    assert meta["source_version"] == "0.3.2" and doc["models"][0]["kind"] == "moe"


def test_llama_benchy_markdown(scratch_root):
    run = import_run("llama-benchy", [DATA / "llama-benchy" / "qwen3-30b-a3b.md"], "dgx-spark", run_id="benchy-md")
    doc = show_run(run)
    pts = {p["concurrency"]: p for p in doc["points"]}
    assert sorted(pts) == [1, 2, 4]
    assert pts[4]["output_throughput_tok_s"] == 121.40 and pts[4]["per_user_tok_s"] == 31.66
    assert (pts[4]["input_len"], pts[4]["output_len"]) == (2048, 128)
    assert pts[2]["ttft_s"]["mean"] == pytest.approx(0.7024) and pts[2]["ttft_s"]["p50"] is None
    assert json.loads((run / "run.json").read_text())["source_version"] == "75bc129"


def test_llama_benchy_bad_files(tmp_path):
    text = (DATA / "llama-benchy" / "qwen3-30b-a3b.md").read_text()
    bad = tmp_path / "t.md"
    bad.write_text(text.replace("| 121.40 ± 2.31    | 31.66 ± 1.20     |", "| 121.40 ± 2.31    |"))
    with pytest.raises(BatchmarkError, match=r"t.md: line \d+: row has 8 cells, header has 9"):
        parse("llama-benchy", [bad])
    d = json.loads((DATA / "llama-benchy" / "gpt-oss-120b.json").read_text())
    del d["benchmarks"][1]["response_size"]
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(d))
    with pytest.raises(BatchmarkError, match=r"r.json: field benchmarks\[1\].response_size"):
        parse("llama-benchy", [bad])


# -- guidellm ------------------------------------------------------------------------------------

def test_guidellm(scratch_root):
    run = import_run("guidellm", [DATA / "guidellm" / "benchmarks.json"], "dgx-spark", run_id="guide")
    doc = show_run(run)
    pts = {p["concurrency"]: p for p in doc["points"] if p["load"] == "closed"}
    assert sorted(pts) == [1, 8]
    assert pts[8]["output_throughput_tok_s"] == pytest.approx(101.0)  # 40 x 256 tokens / (40 x 256 / 101.0) s
    # TPOT is GuideLLM's inter_token_latency_ms ((last - first token) / (output - 1), its
    # request_stats.py), p90 = 78.4 x 1.05 ms in the file; its time_per_output_token_ms (TTFT
    # included) is not batchmark's TPOT and is not read
    assert pts[8]["tpot_s"]["p90"] == pytest.approx(0.0784 * 1.05)
    assert pts[8]["e2el_s"]["p50"] == pytest.approx((420 + 255 * 78.4) / 1000)
    # the sweep's constant-rate benchmark (2 req/s, no cap) is an open-loop point, not skipped and
    # not a closed-loop one: 40 successful requests in its 113.78 s → 0.3516 req/s achieved
    (rate,) = [p for p in doc["points"] if p["load"] != "closed"]
    assert (rate["load"], rate["rate_rps"], rate["concurrency"]) == ("constant", 2.0, None)
    assert rate["achieved_rate_rps"] == pytest.approx(40 / 113.77777777777777)
    meta = json.loads((run / "run.json").read_text())
    assert "skipped" not in meta.get("source_details", {})


def test_guidellm_poisson_benchmark_is_an_open_loop_point(tmp_path):
    """A poisson benchmark at 1.5 req/s capped at 4 (the sample's constant one, its strategy rewritten): open loop, cap kept."""
    d = json.loads((DATA / "guidellm" / "benchmarks.json").read_text())
    d["benchmarks"][2]["args"]["strategy"] = {"type_": "poisson", "rate": 1.5, "max_concurrency": 4, "random_seed": 42}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(d))
    (p,) = [p for p in parse("guidellm", [path]).summaries if p.load != "closed"]
    assert (p.load, p.rate_rps, p.concurrency, p.max_concurrency, p.completed) == ("poisson", 1.5, None, 4, 40)
    d["benchmarks"][2]["args"]["strategy"] = {"type_": "poisson", "rate": "fast"}
    path.write_text(json.dumps(d))
    with pytest.raises(BatchmarkError, match=r"field benchmarks\[2\].config.strategy.rate"):
        parse("guidellm", [path])


def test_guidellm_missing_metric(tmp_path):
    d = json.loads((DATA / "guidellm" / "benchmarks.json").read_text())
    del d["benchmarks"][1]["metrics"]["output_token_count"]
    bad = tmp_path / "g.json"
    bad.write_text(json.dumps(d))
    with pytest.raises(BatchmarkError, match=r"g.json: field benchmarks\[1\].metrics.output_token_count.successful"):
        parse("guidellm", [bad])


# -- command line --------------------------------------------------------------------------------

def test_cli_import_errors_are_one_line(scratch_root, tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('{"benchmarks": [')
    assert main(["import", "guidellm", str(bad), "--hardware", "dgx-spark"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "x.json" in err and "line 1" in err
    assert _runs(scratch_root) == []
    assert main(["import", "guidellm", str(DATA / "guidellm" / "benchmarks.json"), "--hardware", "nope"]) == 2
    assert "unknown hardware profile 'nope'" in capsys.readouterr().err


def test_cli_import_then_refuse_to_overwrite(scratch_root, capsys):
    args = ["import", "vllm-bench", str(DATA / "vllm-bench"), "--hardware", "dgx-spark", "--run-id", "r1"]
    assert main(args) == 0
    assert main(args) == 2
    assert "already exists" in capsys.readouterr().err
