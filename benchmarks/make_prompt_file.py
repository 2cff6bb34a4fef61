"""Writes ``data/prompts/cpu-words.jsonl``: the small prompt file the project ships for CPU sweeps and the workload
agreement with ``vllm bench serve --dataset-name custom``.

Each line is ``{"prompt", "output_len", "output_tokens"}``: a prompt of plain English words (one token each under
the word-level tokenizer of batchmark's random-weight model folders, ``pipeline/machine/modelfolders.py``: every
whitespace-separated word is one id, an unknown one ``<unk>``) and the output length it asks for, under both names
(batchmark's ``output_len``, vLLM's ``output_tokens``), so both clients read the same file.  Prompt lengths are
lognormal around 48 words (σ 0.6, 8 … 160), outputs uniform on 8 … 64 tokens, from ``numpy.random.default_rng(7)``.

    PYTHONPATH=$PWD python benchmarks/make_prompt_file.py [--lines 24] [--out data/prompts/cpu-words.jsonl]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("the batch of requests waits while the server reads every weight once per step and each token costs "
         "less when many share that read until the cache is full or the compute roof is reached so the knee "
         "appears where memory bandwidth stops being the limit").split()


def lines(n: int, seed: int = 7) -> list[dict]:
    """``n`` prompt lines (module docstring), seeded."""
    rng = np.random.default_rng(seed)
    ins = np.clip(np.rint(rng.lognormal(np.log(48) - 0.18, 0.6, n)), 8, 160).astype(int)
    outs = rng.integers(8, 65, n)
    return [{"prompt": " ".join(rng.choice(WORDS, int(i))), "output_len": int(o), "output_tokens": int(o)}
            for i, o in zip(ins, outs)]


def main(argv: list[str] | None = None) -> int:
    """Write ``--lines`` prompts (default 24) to ``--out`` (default data/prompts/cpu-words.jsonl) as JSON Lines:
    per line ``prompt`` (words), ``output_len`` and vLLM's ``output_tokens`` (tokens); 0 on success."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=24)
    ap.add_argument("--out", default=str(ROOT / "data" / "prompts" / "cpu-words.jsonl"))
    args = ap.parse_args(argv)
    Path(args.out).write_text("".join(json.dumps(x) + "\n" for x in lines(args.lines)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
