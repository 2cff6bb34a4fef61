"""Shared pieces of the served-engine tests: a tiny local model whose every token is visible text, and server starters.

The tokenizer is a word-level vocabulary ``t001 … t255`` (plus ``<unk>``) split on
whitespace, so every generated token decodes to visible text and streams as its own chunk,
and a decode → encode round trip is exact.  The model is a 2-layer Llama with random weights
and no EOS token, so generation always runs to ``max_tokens``.  Nothing is downloaded.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FAKE_SERVER = HERE / "fake_vllm_server.py"


def build_tokenizer(folder: Path):
    """Save the word-level tokenizer to ``folder``; returns it (a PreTrainedTokenizerFast)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, **{f"t{i:03d}": i for i in range(1, 256)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with single spaces
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")
    fast.save_pretrained(folder)
    return fast


def build_tiny_model(folder: Path) -> Path:
    """Save the tokenizer and a random-weights 2-layer Llama (vocab 256, no EOS) to ``folder``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    build_tokenizer(folder)
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      bos_token_id=None, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    model.generation_config.eos_token_id = None
    model.generation_config.bos_token_id = None
    model.save_pretrained(folder)
    return folder


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float, log: Path) -> None:
    """Poll ``url`` until 200; fail the test with the log when the process dies or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"server not healthy after {timeout_s} s: {log.read_text()[-2000:]}")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A local tiny model folder (built once per test session)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def transformers_server(tiny_model_dir, tmp_path_factory):
    """A real ``transformers serve`` process (continuous batching, CPU) serving the tiny model; yields its /v1 URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("serve-log") / "serve.log"
    exe = Path(sys.executable).with_name("transformers")
    cmd = [str(exe), "serve", str(tiny_model_dir), "--port", str(port), "--device", "cpu",
           "--continuous-batching", "--host", "127.0.0.1",
           # a small paged KV cache: left alone, continuous batching sizes it to free memory (13 GB here)
           "--cb-block-size", "32", "--cb-num-blocks", "64", "--cb-max-batch-tokens", "512"]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health", proc, 120, log)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
