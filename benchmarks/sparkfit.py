"""Fit one set of engine terms per engine to every published Spark curve of that engine (benchmarks/spark_truth.py --fit).

Decode: least squares on log step times over all points of all the engine's curves (static benches with identical
routing, depth rows, waves and closed loops with the routing locality); prefill: seconds = fixed + FLOPs / rate per
compute format (:func:`pipeline.predict.enginefit.fit_prefill`).  Prints the terms as the hardware profile states them.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from scipy.optimize import least_squares

from pipeline.cards.stepcost import compute_format, prefill_attention_flops, prefill_expert_read_s, prefill_flops
from pipeline.simulation import harness
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
            if p.decode_tok_s and not c.new:  # the new set's rows: fitted by sparkserved
                rows.append((c, card, p, p.decode_tok_s))
    return rows, BW, HW.compute_peak_tflops()


def _predicted(c, card, p, terms, bw, peak) -> float:
    from sparkdata import decode_figure

    return decode_figure(c, harness.predict(c.harness, harness.Costing(card, terms, bw, peak), p.concurrency,
                                            c.input_len, c.output_len, p.depth, c.identical_routing),
                         p.concurrency)["decode_tok_s"]


#: Terms an engine's published curves cannot see, held at their neutral value: vLLM's curves are waves at one
#: short context (no depth rows: attention factor 1) with no kernel switch at B = 2 (its MoE kernel is one: no
#: expert_batched_fraction, no expert_token_exponent), of one MoE model (its dense matmuls unseen).  llama.cpp's
#: batched-kernel terms are seen by gpt-oss-20b's llama-batched-bench curves alone (the other batched MoE curves are
#: held out); its single streams cannot see them (left to the start values X0 when those curves are left out).
#: vLLM's dense matmuls: held at 0.5 here (the MoE curves cannot tell them from the experts'), then fitted alone to
#: Granite-4.1-8B's rows of the new set (:func:`sparkserved.fit_dense_compute`).
FIXED = {"vllm": {"attention_factor": 1.0, "expert_batched_fraction": 1.0, "dense_compute_fraction": 0.5,
                  "expert_token_exponent": None}}
#: The terms only a batch sees (B > 1): where the curves fitted are single streams alone (a source left out), held at
#: the start values X0 instead of fitted, for a single stream cannot tell a compute share from a bandwidth share (with
#: llama.cpp's benches file left out, the fit reached 0.99 of the bandwidth and 0.04 of the dense matmul rate, and
#: missed the file's Qwen2.5-Coder-7B at B = 32 by 66 %).
BATCH_TERMS = ("compute_fraction", "dense_compute_fraction", "expert_batched_fraction", "expert_token_exponent",
               "routing_scale")


def fit_decode(curves, engine: str, prefill: dict[str, float], quiet: bool = False, served=None) -> dict[str, float]:
    """The decode terms of ``engine`` over its curves (terms a curve set cannot see stay near their start, the batch
    terms at it where every curve is a single stream: :data:`BATCH_TERMS`); ``quiet``: without the line on the
    residuals."""
    rows, bw, peak = _rows(curves, engine)
    fixed = dict(FIXED.get(engine, {}))
    if max((p.concurrency for _, _, p, _ in rows), default=1) == 1:
        fixed = {**{n: float(X0[NAMES.index(n)]) for n in BATCH_TERMS}, **fixed}

    def resid(x):
        vals = {**dict(zip(NAMES, x)), **fixed}
        terms = EngineTerms(**vals, source="fit")
        terms = terms.model_copy(update={"prefill_tflops": prefill, "prefill_overhead_s": 0.0, **(served or {})})
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


def _ttfts(curves, engine: str, bandwidth_fraction: float | None):
    """(card, curve, point, TTFT less the experts' read per pass) of every non-held-out point of ``engine`` with a TTFT
    or a prefill rate; the read (:func:`pipeline.cards.stepcost.prefill_expert_read_s`, passes of the curve's
    ``ubatch`` or :data:`CHUNK`) only with ``bandwidth_fraction`` (the engine's decode fit)."""
    from spark_truth import BW, card_after, measured

    out = []
    for c in curves:
        if c.engine != engine or c.holdout or c.new:
            continue
        card = card_after(c)
        read = SimpleNamespace(bandwidth_fraction=bandwidth_fraction, prefill_chunk_tokens=c.ubatch or CHUNK.get(engine)) \
            if bandwidth_fraction else None
        for p in c.points:
            t = measured(c, p)["ttft_s"]
            if t:
                out.append((card, c, p, t - (prefill_expert_read_s(card, p.concurrency * c.input_len, read, BW)
                                             if read else 0.0)))
    return out


def fit_attention(curves, engine: str, quiet: bool = False) -> dict[int, float]:
    """The attention TFLOP/s of ``engine``'s prefill per head dimension, from the depth rows (llama-bench "pp @ dN"):
    each curve's extra prompt time over its depth-0 row against its extra attention FLOPs
    (:func:`pipeline.cards.stepcost.prefill_attention_flops`), a least-squares slope through the origin; the median
    over the curves of a head dimension.  The matmuls, the experts' read and the fixed costs are the same at every
    depth of a curve, so the slope is the attention's alone."""
    by_curve: dict[str, list] = {}
    for card, c, p, t in _ttfts(curves, engine, None):
        if c.by_depth:
            by_curve.setdefault(c.source, []).append((card, c, p, t))
    by_hd: dict[int, list[float]] = {}
    for rows in by_curve.values():
        card, c, p0, t0 = min(rows, key=lambda r: r[2].depth)
        a0 = prefill_attention_flops(card, c.input_len, p0.depth)
        df = np.array([prefill_attention_flops(card, c.input_len, p.depth) - a0 for _, _, p, _ in rows])
        dt = np.array([t - t0 for *_, t in rows])
        if (df > 0).sum() and float(df @ dt) > 0:
            by_hd.setdefault(int(card.head_dim), []).append(float(df @ df / (df @ dt)) / 1e12)
    out = {hd: float(np.median(v)) for hd, v in by_hd.items()}
    if not quiet:
        for hd, v in sorted(by_hd.items()):
            print(f"# {engine} attention, head_dim {hd}: {out[hd]:.1f} TFLOP/s (per curve {', '.join(f'{x:.1f}' for x in v)})")
    return out


def fit_prefills(curves, engine: str, quiet: bool = False, bandwidth_fraction: float | None = None,
                 attention: dict[int, float] | None = None) -> dict[str, float]:
    """Prefill TFLOP/s per compute format of ``engine`` (every MoE model's under the key ``moe``), from every point with a TTFT or a prefill rate (``quiet``:
    without a line per format); with ``bandwidth_fraction`` (the engine's decode fit), each TTFT less the experts'
    weight read per pass; with ``attention`` (:func:`fit_attention`), the matmul FLOPs over the TTFT less the
    attention's FLOPs at that rate (its head dimension's), else every FLOP over the TTFT."""
    by_fmt: dict[str, list] = {}
    for card, c, p, t in _ttfts(curves, engine, bandwidth_fraction):
        attn = p.concurrency * prefill_attention_flops(card, c.input_len, p.depth)
        rate = (attention or {}).get(int(card.head_dim))
        f = p.concurrency * prefill_flops(card, c.input_len, p.depth) - (attn if rate else 0.0)
        key = "moe" if card.expert_bytes else compute_format(card)  # an MoE's prompt: the routed-matmul kernel's rate
        by_fmt.setdefault(key, []).append((card, f, t - (attn / (rate * 1e12) if rate else 0.0)))
    out = {}
    for fmt, items in by_fmt.items():
        f = np.array([x for _, x, _ in items])
        y = np.array([x for *_, x in items])
        rate = float(np.exp(np.median(np.log(f / y))) / 1e12)  # through the origin, median in log (no fixed cost fitted)
        worst = float(np.max(np.abs(np.log(f / y / 1e12 / rate))))
        out[fmt] = rate
        if not quiet:
            print(f"# {engine} {fmt}: prefill {rate:.1f} TFLOP/s over {len(items)} points "
                  f"({', '.join(sorted({c.name for c, *_ in items}))}), worst log residual {worst:.2f}")
    return out


def fit_engine(curves, engine: str, quiet: bool = False) -> tuple[dict[str, float], dict[str, float], dict[int, float],
                                                                  dict[str, float]]:
    """(decode terms, prefill TFLOP/s per format, attention TFLOP/s per head dimension, request latency per model) of
    ``engine``: the rates without the experts' read first (the decode fit of a static bench does not depend on them),
    the decode terms, then the attention rates from the depth rows and the format rates less the read and the
    attention.  An engine with single streams of the new set (llama-benchy's ttfr and est_ppt:
    :mod:`sparkserved`) fits its request latency and prompt rates there, and its decode terms again with them (twice:
    a latency is what is left of a one-token request after one pass, which the decode terms cost)."""
    from sparkserved import fit_dense_compute, fit_request_latency, fit_served_prefill

    pre = fit_prefills(curves, engine, quiet=True) or {"default": PREFILL_DEFAULT}
    terms = fit_decode(curves, engine, pre, quiet=True)
    attn = fit_attention(curves, engine, quiet)
    latency: dict[str, float] = {}
    dense = None
    for last in (False, True):
        t = EngineTerms(**terms, source="fit")
        latency = fit_request_latency(curves, engine, t, quiet=quiet or not last)
        if not latency:
            break
        pre_s, attn_s = fit_served_prefill(curves, engine, t.model_copy(update={"request_latency_s": latency}),
                                           quiet=quiet or not last)
        pre, attn = {**pre, **pre_s, "default": pre.get("default", PREFILL_DEFAULT)}, {**attn, **attn_s}
        served = {"request_latency_s": latency, "prefill_attention_tflops": attn,
                  **({"dense_compute_fraction": dense} if dense else {})}  # the dense fit's, once made
        terms = fit_decode(curves, engine, pre, quiet=quiet or not last, served=served)
        dense = fit_dense_compute(curves, engine, EngineTerms(**{**terms, **served}, source="fit").model_copy(
            update={"prefill_tflops": pre}), quiet=quiet or not last)
        terms["dense_compute_fraction"] = dense
    if not latency:
        terms = fit_decode(curves, engine, pre, quiet)
    if CHUNK.get(engine):
        pre = fit_prefills(curves, engine, quiet, bandwidth_fraction=terms["bandwidth_fraction"], attention=attn) or pre
    elif not quiet and not latency:
        fit_prefills(curves, engine, quiet, attention=attn)
    return terms, pre, attn, latency


def fit_profile_terms(curves) -> None:
    """Print each engine's fitted terms."""
    for engine in sorted({c.engine for c in curves if not c.holdout and not c.new}):
        terms, pre, attn, latency = fit_engine(curves, engine)
        print(f"{engine}: {terms} prefill_tflops: {pre} prefill_attention_tflops: {attn} "
              f"prefill_chunk_tokens: {CHUNK.get(engine)} request_latency_s: {latency}")


def fit_terms(curves, engine: str, leave_out: str | None = None) -> EngineTerms | None:
    """``engine``'s terms fitted as :func:`fit_profile_terms` fits them, to its curves but those of the publication
    ``leave_out`` (a curve's ``url``); None when no curve of the engine is left.  Prefill: the fitted rate per
    format and, as the profile states it, their mean as ``default`` (else :data:`PREFILL_DEFAULT`)."""
    kept = [c for c in curves if c.engine == engine and c.url != leave_out and not c.holdout]  # the new set: its fit rows
    if not kept:
        return None
    vals, pre, attn, latency = fit_engine(kept, engine, quiet=True)
    if "default" not in pre:
        pre = {**pre, "default": float(np.mean(list(pre.values())))}
    return EngineTerms(**vals, prefill_tflops=pre, prefill_attention_tflops=attn, prefill_chunk_tokens=CHUNK.get(engine),
                       request_latency_s=latency, source=f"fitted without {leave_out}")
