"""Why the transformers CPU runs' c = 2 point costs more than c = 1: PyTorch's float32 linear layers by batch size.

The committed transformers CPU runs (``data/runs/20261129T161329Z-vm``, ``20261129T165000Z-vm``) measured a
dense-llama-190m decode step of 34.6 ms at B = 1 and 70.9 ms at B = 2, then 64.6 ms at B = 4 and 56.8 ms at
B = 8: a step that gets cheaper as the batch grows, which no per-step model (bytes ÷ bandwidth + FLOPs ÷
compute + overhead, :mod:`pipeline.predict.calibrate`) can fit, so ``batchmark predict`` calls c = 2 and 4
"unexplained" and ``benchmarks/prediction_accuracy.py`` reports those runs past its goal.

This script times the decode step's own matrix products — the four linear layers of one of that model's
decoder layers (hidden 1024, intermediate 4096, 4 KV heads of 64, float32, as in its ``run.json``) — at each batch
size B, interleaved (every round times every B once, so the machine's load hits all alike), and prints the
median per B and its ratio to B = 1.  Where B = 2 … 4 costs more than B = 1 on a machine, the curve's dip is
the CPU kernels' (a matrix-vector product at B = 1; a matrix-matrix kernel, inefficient at a few rows, above),
not batching's.

Run: ``python benchmarks/cpu_small_batch_gemm.py [--rounds 40] [--threads 2]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

HIDDEN, INTERMEDIATE, KV_DIM = 1024, 4096, 4 * 64  # dense-llama-190m (data/runs/20261129T161329Z-vm/run.json)
BATCHES = (1, 2, 3, 4, 8, 16, 32, 64)


def layer_weights(dtype: torch.dtype) -> list[torch.Tensor]:
    """The weight matrices one decoder layer multiplies per decode step: q, k, v, o, gate, up, down."""
    shapes = [(HIDDEN, HIDDEN), (KV_DIM, HIDDEN), (KV_DIM, HIDDEN), (HIDDEN, HIDDEN),
              (INTERMEDIATE, HIDDEN), (INTERMEDIATE, HIDDEN), (HIDDEN, INTERMEDIATE)]
    return [torch.randn(*s, dtype=dtype) for s in shapes]


def step_s(weights: list[torch.Tensor], x: torch.Tensor, xi: torch.Tensor) -> float:
    """Seconds for one layer's products at the batch of ``x`` (``xi``: the down projection's input)."""
    t0 = time.perf_counter()
    for w in weights[:-1]:
        torch.nn.functional.linear(x, w)
    torch.nn.functional.linear(xi, weights[-1])
    return time.perf_counter() - t0


def main() -> None:
    """Time one decoder layer's float32 linear layers at each batch size of :data:`BATCHES`, interleaved, and print
    per B the median step (ms), its ratio to B = 1 and the ms per sequence.  Options ``--rounds`` (timed rounds,
    each timing every B once) and ``--threads`` (torch threads).  Prints only; raises nothing of its own."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40, help="timed rounds (each times every batch size once)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (the committed runs used 2)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    weights = layer_weights(torch.float32)
    inputs = {b: (torch.randn(b, HIDDEN), torch.randn(b, INTERMEDIATE)) for b in BATCHES}
    for b in BATCHES:  # warm-up: kernels chosen, caches filled
        for _ in range(3):
            step_s(weights, *inputs[b])
    times: dict[int, list[float]] = {b: [] for b in BATCHES}
    for _ in range(args.rounds):
        for b in BATCHES:
            times[b].append(step_s(weights, *inputs[b]))
    base = statistics.median(times[1])
    print(f"float32 linear layers of one dense-llama-190m decoder layer, torch {torch.__version__}, "
          f"{args.threads} threads, median of {args.rounds} interleaved rounds")
    print(f"{'B':>3}  {'ms':>8}  {'× B = 1':>8}  {'ms per sequence':>15}")
    for b in BATCHES:
        med = statistics.median(times[b])
        print(f"{b:>3}  {med * 1e3:8.3f}  {med / base:8.2f}  {med * 1e3 / b:15.3f}")


if __name__ == "__main__":
    main()
