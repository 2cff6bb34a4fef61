"""A served engine's request and prompt terms from llama-benchy's single streams (benchmarks/spark_truth.py --fit).

llama-benchy 0.4.0 (``--latency-mode generation``) prints per prompt ``ttfr`` (time to the first response chunk) and
``est_ppt`` = ttfr − the latency it measures by generating one token; so ``ttfr − est_ppt`` is a one-token request's
time and ``est_ppt`` the prompt's time beyond it.  From the rows of the new set marked ``fit`` at c = 1
(:data:`sparkdata.DJANGO_FIT_BATCHED`: vLLM 0.26, gpt-oss-20b and Granite-4.1-8B, prompts of 256-25,000 tokens):

- ``request_latency_s`` per model: the median over its prompts of ttfr − est_ppt − one pass
  (:func:`pipeline.cards.stepcost.one_pass_s` of its prompt: overhead + weights read), the request's cost outside the
  GPU; ``default`` the median over the models;
- ``prefill_tflops`` (``moe`` for the MoE, the compute format for a dense model) and ``prefill_attention_tflops`` (per
  head dimension): least squares of est_ppt − the extra passes = matmul FLOPs / rate + attention FLOPs / rate, each
  row weighted by its stated spread (1 / the file's ± of est_ppt over its three runs: Granite's first test, pp1024
  at c = 1, spreads 338 ± 102 ms, its long prompts 1-5 %).  A prompt longer than ``--max-num-batched-tokens`` (8192 in every run: vLLM's chunked
  prefill) takes ceil(n / 8192) passes, each reading the weights again: the passes after the first are the extra
  ones; the attention FLOPs of the chunks add up to the one pass's (causal: Σ n_i × (before_i + n_i / 2) = n² / 2);
- ``dense_compute_fraction``: the dense model's decode figures of its rows marked ``fit`` (its single streams and its
  first test's waves, c 5 and 10), the one term free (the MoE curves fitted the rest), least squares on their logs.
  Its single streams check the bandwidth fraction the MoE fitted: a bf16 dense model reads at the same fraction
  within their spread (printed), so one ``bandwidth_fraction`` serves both formats.
"""

from __future__ import annotations

import statistics

import numpy as np
from scipy.optimize import minimize_scalar

from pipeline.simulation import harness
from pipeline.cards.stepcost import compute_format, one_pass_s, prefill_attention_flops, prefill_flops

#: djangodevreng's ``--max-num-batched-tokens`` (every model's server flags): vLLM's prefill chunk.
MAX_BATCHED = 8192


def extra_passes_s(card, tokens: int, terms, bandwidth_gb_s: float, chunk: int = MAX_BATCHED) -> float:
    """The passes a prompt of ``tokens`` takes beyond its first (s): (ceil(tokens / chunk) − 1) × one pass of a chunk."""
    return max(-(-int(tokens) // chunk) - 1, 0) * one_pass_s(card, chunk, terms, bandwidth_gb_s)


def _singles(curves, engine: str):
    from spark_truth import card_after

    for c in curves:
        if c.engine != engine or not c.new:
            continue
        for p in c.points:
            if p.fit and p.concurrency == 1 and p.ttft_s and p.est_ppt_s:
                yield c, card_after(c), p


def fit_request_latency(curves, engine: str, terms, quiet: bool = False) -> dict[str, float]:
    """``request_latency_s`` of ``engine`` per model card name and ``default`` (module docstring); {} without rows."""
    from spark_truth import BW

    by_model: dict[str, list[float]] = {}
    for c, card, p in _singles(curves, engine):
        by_model.setdefault(card.name.lower(), []).append(p.ttft_s - p.est_ppt_s - one_pass_s(card, c.input_len,
                                                                                             terms, BW))
    out = {m: max(statistics.median(v), 0.0) for m, v in by_model.items()}
    if out:
        out["default"] = statistics.median(out.values())
    if not quiet:
        for m, v in sorted(by_model.items()):
            print(f"# {engine} request latency, {m}: {out[m] * 1000:.1f} ms (per prompt "
                  f"{', '.join(f'{x * 1000:.1f}' for x in v)})")
    return out


def fit_served_prefill(curves, engine: str, terms, quiet: bool = False) -> tuple[dict[str, float], dict[int, float]]:
    """(``prefill_tflops``, ``prefill_attention_tflops``) of ``engine`` from its single streams' est_ppt (module
    docstring), one pair per (rate key, head dimension); ({}, {}) without rows."""
    from spark_truth import BW

    groups: dict[tuple[str, int], list] = {}
    for c, card, p in _singles(curves, engine):
        key = "moe" if card.expert_bytes else (compute_format(card) or "default")
        attn = prefill_attention_flops(card, c.input_len, 0)
        mat = prefill_flops(card, c.input_len, 0) - attn
        y = p.est_ppt_s - extra_passes_s(card, c.input_len, terms, BW)
        sd = max(p.est_ppt_sd_s or 0.0, 0.01 * p.est_ppt_s)  # a spread of at least 1 %
        groups.setdefault((key, int(card.head_dim)), []).append((mat, attn, y, sd, card.name))
    pre: dict[str, float] = {}
    att: dict[int, float] = {}
    for (key, hd), rows in groups.items():
        a = np.array([[m / e, f / e] for m, f, _, e, _ in rows])
        b = np.array([y / e for _, _, y, e, _ in rows])
        (inv_rate, inv_attn), *_ = np.linalg.lstsq(a, b, rcond=None)
        pre[key], att[hd] = 1e-12 / inv_rate, 1e-12 / inv_attn
        if not quiet:
            res = [(m * inv_rate + f * inv_attn) / y - 1 for m, f, y, _, _ in rows]
            print(f"# {engine} prefill {key}, head_dim {hd}: {pre[key]:.1f} TFLOP/s matmuls, {att[hd]:.1f} attention over "
                  f"{len(rows)} prompts ({rows[0][4]}), residuals {', '.join(f'{r:+.0%}' for r in res)}")
    return pre, att


def fit_dense_compute(curves, engine: str, terms, quiet: bool = False) -> float:
    """``dense_compute_fraction`` of ``engine`` from its dense model's rows marked ``fit`` (module docstring): least
    squares on the log of each row's TPOT (1 / llama-benchy's ``t/s (req)``, the step time the requests saw: the
    ``t/s (total)`` of a wave also counts how its requests end, which the file does not state), the prior's value
    where there are none."""
    from spark_truth import BW, HW, card_after

    rows = [(c, card_after(c), p) for c in curves if c.engine == engine and c.new for p in c.points
            if p.fit and p.per_request_tok_s and not card_after(c).expert_bytes]
    if not rows:
        return float(terms.dense_compute_fraction or terms.compute_fraction)
    peak = HW.compute_peak_tflops()

    def tpot(c, card, p, t) -> float:
        costing = harness.Costing(card, t, BW, peak)
        return harness.predict(c.harness, costing, p.concurrency, c.input_len, c.output_len)["tpot_s"]

    def cost(log_f: float) -> float:
        t = terms.model_copy(update={"dense_compute_fraction": float(np.exp(log_f))})
        return sum(np.log(tpot(c, card, p, t) * p.per_request_tok_s) ** 2 for c, card, p in rows)

    best = minimize_scalar(cost, bounds=(np.log(1e-3), 0.0), method="bounded")
    f = float(np.exp(best.x))
    if not quiet:
        t = terms.model_copy(update={"dense_compute_fraction": f})
        res = [tpot(c, card, p, t) * p.per_request_tok_s - 1 for c, card, p in rows]
        print(f"# {engine} dense_compute_fraction {f:.3f} over {len(rows)} TPOTs of {rows[0][1].name}, residuals "
              f"{', '.join(f'{r:+.0%}' for r in res)} (c {', '.join(str(p.concurrency) for *_, p in rows)})")
    return f
