"""Pure pieces of the served engines: count reconciliation, exact-length prompts, metrics parsing, templates, config."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config.sweepconfig import parse_config
from pipeline.loadgen import loadgen
from pipeline.backends.scrape import DURING, next_wait_s
from pipeline.backends.served import parse_prometheus
from pipeline.backends.serverproc import format_command, log_tail
from pipeline.core.errors import BatchmarkError
from tests.integration.served_helpers import build_tokenizer


@pytest.mark.parametrize("counts,total,expected", [
    ([1, 1, 1], 3, [1, 1, 1]),          # already consistent
    ([1, 3], 4, [1, 3]),
    ([1, 2, 1], 8, [2, 4, 2]),          # by hand: 1 each, 5 left shared 1:2:1 → 1.25, 2.5, 1.25 → 1,2,1 + 1 by largest remainder (the middle)
    ([2, 2], 1, [1, 0]),                # fewer tokens than chunks: ties go to the earlier chunk
    ([0, 5], 5, [0, 5]),
])
def test_reconcile_counts(counts, total, expected):
    out = loadgen.reconcile_counts(counts, total)
    assert out == expected and sum(out) == total


def test_default_requests():
    assert loadgen.default_requests(1) == 32 and loadgen.default_requests(64) == 256  # max(4·N, 32)


def _bpe_tokenizer(folder: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    words = ["batching", "throughput", "latency", "memory", "bandwidth", "decode", "prefill", "token", "the", "a"]
    corpus = [" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(200)]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                        special_tokens=["<eos>"]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")


@pytest.mark.parametrize("kind", ["wordlevel", "bpe"])
def test_prompts_have_exact_length_and_are_repeatable(kind, tmp_path):
    tok = build_tokenizer(tmp_path) if kind == "wordlevel" else _bpe_tokenizer(tmp_path)
    prompts, inexact = loadgen.make_prompts(tok, 20, 64, seed=7)
    assert inexact == 0
    assert all(len(tok.encode(p, add_special_tokens=False)) == 64 for p in prompts)
    assert len(set(prompts)) == 20  # distinct: prefix caching cannot help
    assert loadgen.make_prompts(tok, 20, 64, seed=7)[0] == prompts  # same seed, same prompts
    assert loadgen.make_prompts(tok, 20, 64, seed=8)[0] != prompts


def test_chunk_counts_prefers_per_chunk_usage():
    raw = loadgen.RawStream(0, False, 0.0, 0.0, times=[0.1, 0.2, 0.3], texts=["a", "bcd", ""], cum_usage=[1, 4, 4])
    raw.completion_tokens = 4
    assert loadgen.chunk_counts(raw) == [1, 3, 0]
    # usage only in the last (empty) chunk, as transformers serve sends it: one token per text chunk
    raw = loadgen.RawStream(0, False, 0.0, 0.0, times=[0.1, 0.2, 0.3], texts=["a", "b", ""], cum_usage=[None, None, 2])
    raw.completion_tokens = 2
    assert loadgen.chunk_counts(raw) == [1, 1, 0]


def test_build_body_respects_features():
    t = loadgen.Target(base_url="http://x/v1", model="m", endpoint="chat")
    import orjson

    full = orjson.loads(loadgen.build_body(t, loadgen.Features(), "hi", 8))
    assert full["messages"] == [{"role": "user", "content": "hi"}] and full["ignore_eos"] and full["min_tokens"] == 8
    assert full["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    plain = orjson.loads(loadgen.build_body(t, loadgen.Features(False, False, False, False), "hi", 8))
    assert set(plain) == {"model", "stream", "max_tokens", "temperature", "messages"}
    assert t.url == "http://x/v1/chat/completions"


def test_parse_prometheus_sums_labels_and_skips_histograms():
    text = """# HELP vllm:num_requests_running x
vllm:num_requests_running{model_name="a"} 3
vllm:num_requests_running{model_name="b"} 2
vllm:kv_cache_usage_perc{model_name="a"} 0.25
vllm:e2e_request_latency_seconds_bucket{le="1"} 9
vllm:e2e_request_latency_seconds_sum 4
process_cpu_seconds_total 12
"""
    assert parse_prometheus(text) == {"vllm:num_requests_running": 5.0, "vllm:kv_cache_usage_perc": 0.25}


def test_parse_prometheus_reads_a_closing_brace_inside_a_label_value():
    # the old regex ended the label set at the first "}" and lost both samples of this page
    text = ('# TYPE vllm:num_requests_running gauge\n'
            'vllm:num_requests_running{model_name="odd}name",engine="0"} 3\n'
            'vllm:num_requests_running{model_name="plain"} 2\n'
            'vllm:num_requests_waiting{model_name="a \\"quoted\\" {x}"} 1\n')
    assert parse_prometheus(text) == {"vllm:num_requests_running": 5.0, "vllm:num_requests_waiting": 1.0}


def test_parse_prometheus_skips_an_unreadable_line_and_keeps_the_rest():
    text = "vllm:num_requests_running 4\nvllm:broken{model_name=\"a\" 7\nvllm:num_requests_waiting 2\n"
    assert parse_prometheus(text) == {"vllm:num_requests_running": 4.0, "vllm:num_requests_waiting": 2.0}


def test_format_command_fills_each_word_and_names_unknown_placeholders():
    cmd = format_command("vllm serve {model} --port {port}", {"model": "/m dir/x", "port": 9}, ["--enforce-eager"])
    assert cmd == ["vllm", "serve", "/m dir/x", "--port", "9", "--enforce-eager"]
    with pytest.raises(BatchmarkError, match=r"vllm.command: unknown placeholder \{prot\}"):
        format_command("vllm serve --port {prot}", {"port": 9}, [])


def test_log_tail_is_one_line(tmp_path):
    log = tmp_path / "s.log"
    log.write_text("\n".join(f"line {i}" for i in range(40)) + "\n\n")
    tail = log_tail(log, lines=3)
    assert tail == "line 37 | line 38 | line 39"


@pytest.mark.parametrize("data,match", [
    ({"backend": "openai", "models": [{"name": "a"}]}, "served_name"),
    ({"backend": "openai", "openai": {"api_key": "sk-x"}, "models": [{"name": "a", "served_name": "m"}]}, "openai.api_key: unknown key"),
    ({"backend": "openai", "openai": {"base_url": "localhost:8000"}, "models": [{"name": "a", "served_name": "m"}]}, "openai.base_url"),
    ({"backend": "vllm", "concurrency": [1, 64], "vllm": {"max_num_seqs": 8}, "models": [{"name": "a", "path": "p"}]}, "vllm.max_num_seqs"),
    ({"backend": "vllm", "vllm": {"gpu_memory_utilization": 1.5}, "models": [{"name": "a", "path": "p"}]}, "vllm.gpu_memory_utilization"),
])
def test_config_errors_name_the_field(data, match):
    with pytest.raises(BatchmarkError, match=match):
        parse_config({"name": "x", "hardware": "cpu", **data})


def test_served_card_order(tmp_path):
    from pipeline.config.sweepconfig import ModelSpec
    from pipeline.backends.served import served_card

    # an alias in data/models/ (gpt-oss-20b.yaml lists openai/gpt-oss-20b) wins over counting
    card = served_card(ModelSpec(name="g", path="openai/gpt-oss-20b"), str(tmp_path))
    assert card["name"] == "g" and "card file" in card["source"]
    # nothing known and no config at the source: no card
    assert served_card(ModelSpec(name="x", served_name="unknown-model"), str(tmp_path)) is None
    with pytest.raises(BatchmarkError, match=r"models.x.card: "):
        served_card(ModelSpec(name="x", served_name="m", card="no-such-card"), str(tmp_path))


def test_shipped_configs_validate():
    root = Path(__file__).resolve().parents[3]
    from pipeline.config.sweepconfig import load_config

    spark = load_config(root / "config" / "spark.yaml")
    assert spark.backend == "vllm" and spark.hardware == "dgx-spark"
    assert spark.input_len == 1024 and spark.output_len == 256 and spark.repeats >= 5
    assert spark.concurrency[0] == 1 and spark.concurrency[-1] == 256
    assert len(spark.models) == 5
    from pipeline.backends.served import served_card

    for m in spark.models:  # every card resolves from data/models/ and carries the sweep's model name
        card = served_card(m, "/nonexistent")
        assert card is not None and card["name"] == m.name
    assert {m.name: served_card(m, "/x")["kind"] for m in spark.models} == {
        "gpt-oss-20b": "moe", "gpt-oss-120b": "moe", "qwen3-30b-a3b": "moe",
        "llama-3.1-8b-instruct": "dense", "qwen3-32b": "dense"}
    endpoint = load_config(root / "config" / "endpoint.yaml")
    assert endpoint.backend == "openai" and endpoint.openai.api_key_env
    assert "sk-" not in (root / "config" / "endpoint.yaml").read_text()


def test_missing_api_key_variable_sends_no_key(monkeypatch):
    """A key only if the server wants one (docs/endpoint.md, config/endpoint.yaml): an unset variable is no error,
    the requests carry no key; a server that wants one is named in one line by the preflight (tests/unit/sweep/test_preflight.py)."""
    from pipeline.backends import get_backend

    monkeypatch.delenv("BM_NO_SUCH_KEY", raising=False)
    cfg = parse_config({"name": "x", "hardware": "cpu", "backend": "openai",
                        "openai": {"api_key_env": "BM_NO_SUCH_KEY"}, "models": [{"name": "a", "served_name": "m"}]})
    assert get_backend(cfg).api_key is None
    monkeypatch.setenv("BM_NO_SUCH_KEY", "k1")
    assert get_backend(cfg).api_key == "k1"


#: A real vLLM 0.32.0 CPU page (tests/data/README.md), scraped with 4 requests running and 2 waiting.
REAL_PAGE = Path(__file__).resolve().parents[2] / "data" / "vllm-metrics" / "cpu-0.32-c4.txt"


def test_sampler_parse_keeps_only_the_sampled_gauges_of_a_real_vllm_page():
    page = REAL_PAGE.read_text()
    got = parse_prometheus(page, only=DURING)
    # the page's own lines (grep '^vllm:num_requests\|^vllm:kv_cache_usage' in the file)
    assert got == {"vllm:num_requests_running": 4.0, "vllm:num_requests_waiting": 2.0,
                   "vllm:num_requests_waiting_by_reason": 2.0, "vllm:kv_cache_usage_perc": 0.00782013685239491}
    # the same values the whole page's parse gives for those names
    full = parse_prometheus(page)
    assert got == {k: v for k, v in full.items() if DURING.search(k)}


def test_sampler_parse_reads_a_brace_in_a_label_value_of_a_kept_gauge():
    text = 'vllm:num_requests_running{model_name="odd}name"} 3\nvllm:prompt_tokens_total 9\n'
    assert parse_prometheus(text, only=DURING) == {"vllm:num_requests_running": 3.0}


@pytest.mark.parametrize("every_s,scrape_s,expected", [
    (1.0, 0.0064, 1.0),      # vLLM's CPU page (6.4 ms): 0.0064 · 99 = 0.63 s < 1 s
    (1.0, 0.040, 3.96),      # a 40 ms scrape at 1 %: 0.040 · 0.99 / 0.01
    (1.0, 0.122, 12.078),    # the 122 ms parse of a GPU vLLM's 77 KiB page
    (0.25, 0.0, 0.25),
])
def test_next_scrape_waits_so_scraping_takes_at_most_one_percent(every_s, scrape_s, expected):
    wait = next_wait_s(every_s, scrape_s)
    assert wait == pytest.approx(expected)
    assert scrape_s / (scrape_s + wait) <= 0.01 + 1e-12 or scrape_s == 0

