"""Fit one set of engine terms per engine to every published Spark curve of that engine (benchmarks/spark_truth.py --fit).

Decode: least squares on log step times over all points of all the engine's curves (static benches with identical
routing, depth rows, waves and closed loops with the routing locality); prefill: seconds = fixed + FLOPs / rate per
compute format (:func:`pipeline.predict.enginefit.fit_prefill`).  Prints the terms as the hardware profile states them.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from scipy.optimize import least_squares

from pipeline.cards.stepcost import compute_format, prefill_expert_read_s, prefill_flops
from pipeline.engines import harness
from pipeline.machine.engineterms import EngineTerms

#: An engine without published prefill figures here: the measured BF16 matmul rate of the profile (TFLOP/s).
PREFILL_DEFAULT = 92.3
NAMES = ("step_overhead_s", "bandwidth_fraction", "compute_fraction", "expert_batched_fraction", "attention_factor",
         "routing_scale", "dense_compute_fraction", "expert_token_exponent")
LO = np.array([0.0, 0.2, 1e-3, 0.05, 0.3, 0.5, 1e-3, 0.0])
HI = np.array([0.05, 1.0, 1.0, 1.0, 5.0, 1e4, 1.0, 1.5])
X0 = np.array([0.002, 0.8, 0.2, 0.5, 1.5, 30.0, 0.3, 0.5])


def _rows(curves, engine):
    from spark_truth import BW, HW, card_after

    rows = []
    for c in curves:
        if c.engine != engine or c.holdout:
            continue
        card = card_after(c)
        for p in c.points:
            if p.decode_tok_s:
                rows.append((c, card, p, p.decode_tok_s))
    return rows, BW, HW.compute_peak_tflops()


def _predicted(c, card, p, terms, bw, peak) -> float:
    return harness.predict(c.harness, card, terms, bw, peak, p.concurrency, c.input_len, c.output_len, p.depth,
                           c.identical_routing)["decode_tok_s"]


#: Terms an engine's published curves cannot see, held at their neutral value: vLLM's curves are waves at one
#: short context (no depth rows: attention factor 1) with no kernel switch at B = 2 (its MoE kernel is one: no
#: expert_batched_fraction, no expert_token_exponent), of one MoE model (its dense matmuls unseen).  llama.cpp's
#: batched-kernel terms are seen by gpt-oss-20b's llama-batched-bench curves alone (the other batched MoE curves are
#: held out); its single streams cannot see them (left to the start values X0 when those curves are left out).
#: vLLM's dense matmuls: no dense curve at hand, a prior of half the measured matmul rate (not fitted).
FIXED = {"vllm": {"attention_factor": 1.0, "expert_batched_fraction": 1.0, "dense_compute_fraction": 0.5,
                  "expert_token_exponent": None}}


def fit_decode(curves, engine: str, prefill: dict[str, float], quiet: bool = False) -> dict[str, float]:
    """The decode terms of ``engine`` over its curves (terms a curve set cannot see stay near their start);
    ``quiet``: without the line on the residuals."""
    rows, bw, peak = _rows(curves, engine)
    fixed = FIXED.get(engine, {})

    def resid(x):
        vals = {**dict(zip(NAMES, x)), **fixed}
        terms = EngineTerms(**vals, source="fit")
        terms = terms.model_copy(update={"prefill_tflops": prefill, "prefill_overhead_s": 0.0})
        r = [np.log(_predicted(c, card, p, terms, bw, peak)) - np.log(t) for c, card, p, t in rows]
        return np.concatenate([r, 0.01 * (np.log(x + 1e-6) - np.log(X0 + 1e-6))])

    fit = least_squares(resid, X0, bounds=(LO, HI))
    res = resid(fit.x)[:len(rows)]
    if not quiet:
        print(f"# {engine}: {len(rows)} decode points, log residual sd {np.std(res):.3f}, worst {np.max(np.abs(res)):.3f}")
    return {**dict(zip(NAMES, (float(v) for v in fit.x))), **fixed}


#: Tokens of one prefill pass per engine (``prefill_chunk_tokens``), as the sources ran it: llama.cpp's n_ubatch 2048
#: (ggml-org/llama.cpp benches/dgx-spark.md: n_ubatch 2048 in every table; jetsonhacks.com: -ub 2048); vLLM: none
#: stated (its prefill rate a prior, no TTFT at hand): the experts' read per pass not modelled.
CHUNK = {"llama.cpp": 2048}


def fit_prefills(curves, engine: str, quiet: bool = False, bandwidth_fraction: float | None = None) -> dict[str, float]:
    """Prefill TFLOP/s per compute format of ``engine``, from every point with a TTFT or a prefill rate (``quiet``:
    without a line per format); with ``bandwidth_fraction`` (the engine's decode fit), each TTFT less the experts'
    weight read per pass of :data:`CHUNK` (:func:`pipeline.cards.stepcost.prefill_expert_read_s`)."""
    from spark_truth import BW, card_after, measured

    by_fmt: dict[str, list] = {}
    for c in curves:
        if c.engine != engine or c.holdout:
            continue
        card = card_after(c)
        read = SimpleNamespace(bandwidth_fraction=bandwidth_fraction, prefill_chunk_tokens=c.ubatch or CHUNK.get(engine)) \
            if bandwidth_fraction else None
        for p in c.points:
            t = measured(c, p)["ttft_s"]
            if t:
                t -= prefill_expert_read_s(card, p.concurrency * c.input_len, read, BW) if read else 0.0
                by_fmt.setdefault(compute_format(card), []).append((card, (p.concurrency, c.input_len, p.depth, t)))
    out = {}
    for fmt, items in by_fmt.items():
        f = np.array([b * prefill_flops(card, n, d) for card, (b, n, d, _) in items])
        y = np.array([t for _, (*_, t) in items])
        rate = float(np.exp(np.median(np.log(f / y))) / 1e12)  # through the origin, median in log (no fixed cost fitted)
        worst = float(np.max(np.abs(np.log(f / y / 1e12 / rate))))
        out[fmt] = rate
        if not quiet:
            print(f"# {engine} {fmt}: prefill {rate:.1f} TFLOP/s over {len(items)} points "
                  f"({', '.join(sorted({c.name for c, _ in items}))}), worst log residual {worst:.2f}")
    return out


def fit_engine(curves, engine: str, quiet: bool = False) -> tuple[dict[str, float], dict[str, float]]:
    """(decode terms, prefill TFLOP/s per format) of ``engine``: the rates without the experts' read first (the
    decode fit of a static bench does not depend on them), the decode terms, then the rates less the read at the
    decode's bandwidth fraction."""
    pre = fit_prefills(curves, engine, quiet=True) or {"default": PREFILL_DEFAULT}
    terms = fit_decode(curves, engine, pre, quiet)
    if CHUNK.get(engine):
        pre = fit_prefills(curves, engine, quiet, bandwidth_fraction=terms["bandwidth_fraction"]) or pre
    elif not quiet:
        fit_prefills(curves, engine, quiet)
    return terms, pre


def fit_profile_terms(curves) -> None:
    """Print each engine's fitted terms."""
    for engine in sorted({c.engine for c in curves}):
        terms, pre = fit_engine(curves, engine)
        print(f"{engine}: {terms} prefill_tflops: {pre} prefill_chunk_tokens: {CHUNK.get(engine)}")


def fit_terms(curves, engine: str, leave_out: str | None = None) -> EngineTerms | None:
    """``engine``'s terms fitted as :func:`fit_profile_terms` fits them, to its curves but those of the publication
    ``leave_out`` (a curve's ``url``); None when no curve of the engine is left.  Prefill: the fitted rate per
    format and, as the profile states it, their mean as ``default`` (else :data:`PREFILL_DEFAULT`)."""
    kept = [c for c in curves if c.engine == engine and c.url != leave_out and not c.holdout]
    if not kept:
        return None
    vals, pre = fit_engine(kept, engine, quiet=True)
    if "default" not in pre:
        pre = {**pre, "default": float(np.mean(list(pre.values())))}
    return EngineTerms(**vals, prefill_tflops=pre, prefill_chunk_tokens=CHUNK.get(engine),
                       source=f"fitted without {leave_out}")
