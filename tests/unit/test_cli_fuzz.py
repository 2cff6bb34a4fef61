"""Fuzz-style test of the CLI entry points: config files, each import format, capacity
cards, fed truncations, random bytes, non-finite numbers, huge and negative values and hostile strings.

Each case ends in exit 0 (a correct result) or exit 2 with exactly one stderr line — never a traceback.
Fault kinds pinned: UnicodeDecodeError / ZeroDivisionError / TypeError tracebacks from a malformed file.
Seeded, so a failure is reproducible from its case id.
"""

from __future__ import annotations

import json
import random
import re

import pytest

from pipeline.cli import main
from tests.conftest import DATA, TINY_CONFIG

HOSTILE = ["NaN", "Infinity", "-Infinity", ".nan", "-1", "0", "1e308", "-99999999999999999999999",
           "18446744073709551617", '"<script>alert(1)</script>"', '"a|b\\n"', "true", "null", "[]", "{}",
           "-52.8", "-100", "1" + "0" * 399, "-" + "7" * 400,  # negative figures, 400-digit integers
           '"\\ud800"']  # and a string that is not Unicode text (a lone surrogate escape)
CARD = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072}
IMPORTS = [("vllm-bench", DATA / "vllm-bench" / "llama-3.1-8b-c4.json"),
           ("guidellm", DATA / "guidellm" / "benchmarks.json"),
           ("llama-benchy", DATA / "llama-benchy" / "qwen3-30b-a3b.md"),
           ("aiperf", DATA / "aiperf" / "profile_export_genai_perf.json"),
           ("llama-batched-bench", DATA / "llama-batched-bench" / "llama-3.1-8b-q4_0.jsonl")]
NUMBER = re.compile(rb"(?<![\w.])-?\d+(\.\d+)?(e[+-]?\d+)?(?![\w.])")


def mutate(rng: random.Random, data: bytes) -> bytes:
    """One seeded mutation: truncation, random bytes, a number replaced by a hostile value, or a line dropped."""
    kind = rng.choice(["truncate", "bytes", "value", "value", "value", "drop_line"])
    if kind == "truncate":
        return data[: rng.randrange(len(data))]
    if kind == "bytes":
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if kind == "value":
        spans = [m.span() for m in NUMBER.finditer(data)]
        if spans:
            a, b = rng.choice(spans)
            return data[:a] + rng.choice(HOSTILE).encode() + data[b:]
    lines = data.splitlines(keepends=True)
    del lines[rng.randrange(len(lines))]
    return b"".join(lines)


def _check(rc: int, capsys) -> None:
    err = capsys.readouterr().err.strip().splitlines()
    assert rc in (0, 2)
    if rc == 2:
        assert len(err) == 1 and err[0].startswith("batchmark: error: "), err


@pytest.mark.parametrize("seed", range(24))
def test_config_files(seed, scratch_root, tmp_path, monkeypatch, capsys):
    import pipeline.sweep.gridwalk

    monkeypatch.setattr(pipeline.sweep.gridwalk, "run_sweep", lambda cfg, run_dir, **kw: run_dir)  # validate only, never measure
    path = tmp_path / "c.yaml"
    path.write_bytes(mutate(random.Random(seed), TINY_CONFIG.read_bytes()))
    _check(main(["sweep", "--config", str(path), "--run-id", f"fuzz{seed}", "--no-progress"]), capsys)


@pytest.mark.parametrize("fmt, sample", IMPORTS, ids=[f for f, _ in IMPORTS])
def test_imports(fmt, sample, scratch_root, tmp_path, capsys):
    rng = random.Random(fmt)
    for i in range(12):
        path = tmp_path / f"{i}{sample.suffix}"
        path.write_bytes(mutate(rng, sample.read_bytes()))
        model = ["--model", "Llama-3.1-8B"] if fmt == "llama-batched-bench" else []
        _check(main(["import", fmt, str(path), "--hardware", "dgx-spark", "--run-id", f"fuzz-{fmt}-{i}", *model]),
               capsys)
    # nothing half-written: every run folder that exists is complete
    runs_dir = scratch_root / "data" / "runs"
    for d in runs_dir.iterdir() if runs_dir.is_dir() else []:
        assert d.name == ".locks" or (d / "run.json").is_file(), d


@pytest.mark.parametrize("seed", range(24))
def test_capacity_cards(seed, scratch_root, tmp_path, capsys):
    rng = random.Random(seed)
    path = tmp_path / "config.json"
    path.write_bytes(mutate(rng, json.dumps(CARD, indent=1).encode()))
    _check(main(["capacity", "--hardware", "dgx-spark", "--model", str(path), "--json"]), capsys)
