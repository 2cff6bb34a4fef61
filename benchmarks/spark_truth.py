"""Every published DGX Spark figure batchmark has, predicted by `plan` before any measurement and by `predict` from
three points, before and after the served-format / engine-terms model.

    python benchmarks/spark_truth.py            # the error table, per source and in all
    python benchmarks/spark_truth.py --fit      # the engine terms fitted to these curves (data/hardware/dgx-spark.yaml)

Sources: ../shared/reference/ (llama.cpp batched-bench and llama-bench with depth rows; BATCHMARK_SHARED overrides
the folder) and data/published/dgx-spark.yaml (each with its URL and settings).  Columns: decode throughput,
TPOT and TTFT, median and worst absolute relative error per source.

- before: the model as it was — the card in its checkpoint format (a GGUF pinned to its file size), a step of
  max(bytes / 273 GB/s, FLOPs / 125 TFLOP/s) + 4 ms, uniform routing, a prompt chunk of 8192 tokens costed the
  same way; `predict` by the additive fit of :mod:`pipeline.predict.calibrate` (no TTFT of a static batch);
- after: the served format (:mod:`pipeline.cards.servedformat`), the profile's engine terms
  (:func:`pipeline.cards.stepcost.engine_step_s`: measured peak, attention factor, routing locality, identical
  routing for llama.cpp's benches, its batched MoE kernel, prefill FLOP rate per format); `predict` by :func:`pipeline.predict.enginefit.fit_curve`.
Goals (the project's): plan median <= 15 %, worst <= 35 %; predict median <= 7 %, worst <= 20 %.  The engine terms
were fitted to these same curves (--fit), so the plan figures here are in-sample for those terms; the second table
leaves each source out in turn (its engine's terms fitted to the other sources, :func:`leave_one_out`) and gives
the error on the source left out beside the in-sample one.  Then the held-out curves (``holdout: true`` in
data/published/dgx-spark.yaml: never fitted to, so out of sample), the new set apart (``../shared/reference/``
djangodevreng: gpt-oss-20b and Granite-4.1-8B waves on vLLM 0.26; vLLM's served terms fitted to its single streams and
Granite's pp1024 tg1024 (:mod:`sparkserved`), its other points reported on their own as never fitted:
:func:`sparkdata._djangodevreng`), and the points set aside as one-offs
(:func:`sparkdata.set_aside_one_offs`: a static batch slower than a larger one of the same prompt), each with why.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from sparkdata import Curve, decode_figure, load_curves  # noqa: E402
from pipeline.cards.registry import load_card  # noqa: E402
from pipeline.cards.servedformat import ServedFormat, card_in_format, served_card  # noqa: E402
from pipeline.cards.stepcost import (bytes_per_decode_step, flops_per_decode_step, prefill_flops,  # noqa: E402
                                     weight_bytes_per_step)
from pipeline.importers.cardmatch import card_with_file_size  # noqa: E402
from pipeline.simulation import harness  # noqa: E402
from pipeline.machine.hardware import load_profile  # noqa: E402
from pipeline.predict import calibrate, enginefit  # noqa: E402

HW = load_profile("dgx-spark")
BW = HW.bandwidth_gb_s_spec
OLD_PEAK, OLD_OVERHEAD, OLD_CHUNK = 125.0, 0.004, 8192
METRICS = ("decode_tok_s", "tpot_s", "ttft_s")


def card_before(c: Curve):
    """The card the old model counted: the checkpoint's format, or the published file size's (GiB × 2^30 bytes,
    experts in MXFP4 for an MoE model) where the source states one."""
    card = load_card(c.model)
    return card_with_file_size(card, int(c.file_gib * 2**30), expert_quant="mxfp4" if card.expert_bytes else None) \
        if c.file_gib else card


def card_after(c: Curve):
    """The served card: the source's stated format per tensor group, else the engine's default on the Spark
    (:func:`pipeline.cards.servedformat.served_card`)."""
    card = load_card(c.model)
    if c.served:
        return card_in_format(card, ServedFormat(**c.served, stated=True))
    return served_card(card, None, c.engine, HW.name)


def context(c: Curve, depth: int) -> float:
    """Mean decode context in tokens: prompt + depth already in the KV cache + half the output (docs/definitions.md)."""
    return c.input_len + depth + c.output_len / 2


def measured(c: Curve, p) -> dict[str, float | None]:
    """The point's figures; TPOT as c / decode throughput and TTFT as the prefill time where not published."""
    tpot = p.tpot_s or (p.concurrency / p.decode_tok_s if p.decode_tok_s else None)
    ttft = p.ttft_s or (c.input_len / p.prefill_tok_s if p.prefill_tok_s and p.concurrency == 1 else None)
    return {"decode_tok_s": p.decode_tok_s, "tpot_s": tpot, "ttft_s": ttft}


def old_step(card, b: int, ctx: float) -> float:
    """The old step model in seconds at batch ``b``: max(bytes / spec bandwidth, FLOPs / 125 TFLOP/s) + 4 ms."""
    mem = bytes_per_decode_step(card, b, ctx) / (BW * 1e9)
    return max(mem, flops_per_decode_step(card, b, ctx) / (OLD_PEAK * 1e12)) + OLD_OVERHEAD


def old_prefill(card, tokens: int, before: float) -> float:
    """The old plan's prefill in seconds: ``tokens`` in chunks of 8,192 after ``before`` tokens of context, each chunk
    max(weight bytes / bandwidth, FLOPs / 125 TFLOP/s) + 4 ms."""
    total, done = 0.0, 0
    while done < tokens:
        n = min(OLD_CHUNK, tokens - done)
        comp = prefill_flops(card, n, before + done) / (OLD_PEAK * 1e12)
        total += max(weight_bytes_per_step(card, n) / (BW * 1e9), comp) + OLD_OVERHEAD
        done += n
    return total


def curve_terms(c: Curve, terms=None):
    """``terms`` (default: the profile's terms of the curve's engine) with the prefill pass the source ran where it
    states one (``ubatch``, llama.cpp's -ub: its MoE reads the experts once a pass of that many tokens)."""
    terms = terms or HW.engine_terms(c.engine)
    return terms.model_copy(update={"prefill_chunk_tokens": c.ubatch}) if c.ubatch and terms else terms


def plan_point(c: Curve, p, after: bool, terms=None) -> dict[str, float]:
    """`plan`'s prediction of one point (no measurement): decode tok/s, TPOT, TTFT; after: by ``terms`` (an
    :class:`~pipeline.machine.engineterms.EngineTerms`), else the profile's terms of the curve's engine."""
    ctx, b = context(c, p.depth), p.concurrency
    if after:
        costing = harness.Costing(card_after(c), curve_terms(c, terms), BW, HW.compute_peak_tflops())
        return decode_figure(c, harness.predict(c.harness, costing, b, c.input_len, c.output_len, p.depth,
                                                c.identical_routing), b)
    card = card_before(c)
    step = old_step(card, b, ctx)
    pre = old_prefill(card, b * c.input_len, p.depth)
    ttft = pre if c.harness == "static" else pre + step  # served: the first token comes with the step after prefill
    return {"decode_tok_s": b / step, "tpot_s": step, "ttft_s": ttft}


def predictable(c: Curve) -> bool:
    """Whether ``predict`` from three points applies: four points or more, each with a decode figure (a pp-only row,
    such as a llama-bench depth without its tg row, has no step time to calibrate on)."""
    return len(c.points) >= 4 and all(p.decode_tok_s for p in c.points)


def calibration(c: Curve) -> list[int]:
    """The three x values ``predict`` calibrates on: its default points by concurrency, or first, middle and last
    depth for a curve over context depth."""
    xs = [p.depth if c.by_depth else p.concurrency for p in c.points]
    kind = "moe" if load_card(c.model).expert_bytes else "dense"
    return calibrate.default_calibration(xs, kind)[0] if not c.by_depth else [xs[0], xs[len(xs) // 2], xs[-1]]


def predict_curve(c: Curve, after: bool, terms=None) -> dict[int, dict[str, float | None]]:
    """`predict` from three points: the prediction of every point by x (calibration points included); after: the fit
    starts from ``terms`` (its prior), else from the profile's terms of the curve's engine."""
    xs_all = [p.depth if c.by_depth else p.concurrency for p in c.points]
    cal = calibration(c)
    pts = {x: p for x, p in zip(xs_all, c.points)}
    steps = {x: measured(c, pts[x])["tpot_s"] for x in xs_all}
    out: dict[int, dict[str, float | None]] = {}
    if after:
        card = card_after(c)
        axis = enginefit.CurveAxis(card, context(c, 0), BW, HW.compute_peak_tflops(), by_depth=c.by_depth,
                                   identical_routing=c.identical_routing)
        fit = enginefit.fit_curve(axis, cal, [steps[x] for x in cal], curve_terms(c, terms))
        ttfts = [(pts[x].concurrency, c.input_len, pts[x].depth, measured(c, pts[x])["ttft_s"]) for x in cal]
        pre = enginefit.fit_prefill(card, ttfts) if all(t[3] for t in ttfts) else None
        for x in xs_all:
            _, step, _ = enginefit.band(axis, fit, x)
            b, d = pts[x].concurrency, pts[x].depth
            ttft = None
            if pre:
                ttft = pre[1] + b * prefill_flops(card, c.input_len, d) / (pre[0] * 1e12)
            out[x] = {"decode_tok_s": b / step, "tpot_s": step, "ttft_s": ttft, "note": fit.note}
        return out
    if c.by_depth:
        return {x: {"decode_tok_s": None, "tpot_s": None, "ttft_s": None} for x in xs_all}
    roofs = calibrate.Roofs(card_before(c), context(c, 0), BW, OLD_PEAK)
    terms = calibrate.fit_step_terms(roofs, cal, [steps[x] for x in cal])
    for x, s in zip(xs_all, calibrate.step_time_s(roofs, terms, xs_all)):
        out[x] = {"decode_tok_s": x / float(s), "tpot_s": float(s), "ttft_s": None}
    return out


def errors(c: Curve, mode: str, after: bool, terms=None, fitted: bool | None = None) -> dict[str, list[float]]:
    """Absolute relative errors per metric of one curve (``mode`` plan: every point; predict: the non-calibration ones),
    after: by ``terms`` (default: the profile's); ``fitted`` True / False: only the points the terms were / were not
    fitted to (``Point.fit``, the new set's), None: all."""
    errs: dict[str, list[float]] = {m: [] for m in METRICS}
    pred = predict_curve(c, after, terms) if mode == "predict" else None
    cal = set(calibration(c)) if mode == "predict" else set()
    for p in c.points:
        x = p.depth if c.by_depth else p.concurrency
        if x in cal or (fitted is not None and p.fit != fitted):
            continue
        got = plan_point(c, p, after, terms) if mode == "plan" else pred[x]
        meas = measured(c, p)
        for m in METRICS:
            if got.get(m) is not None and meas[m]:
                errs[m].append(abs(got[m] / meas[m] - 1))
    return errs


def _fmt(v: list[float]) -> str:
    return f"{statistics.median(v):5.1%} / {max(v):5.1%}" if v else "      -      "


def report(curves: list[Curve]) -> None:
    """Print the table: per source, plan and predict, before and after, median / worst per metric."""
    head = f"{'source':44} {'mode':8} {'model':6} " + " ".join(f"{m:>15}" for m in ("decode tok/s", "TPOT", "TTFT"))
    print(head + "\n" + "-" * len(head))
    total = {(mode, a): {m: [] for m in METRICS} for mode in ("plan", "predict") for a in (False, True)}
    for c in curves:
        for mode in ("plan", "predict"):
            if mode == "predict" and not predictable(c):
                continue
            for after in (False, True):
                e = errors(c, mode, after)
                for m in METRICS:
                    total[(mode, after)][m] += e[m]
                print(f"{c.source[:44]:44} {mode:8} {'after' if after else 'before':6} "
                      + " ".join(f"{_fmt(e[m]):>15}" for m in METRICS))
    print("-" * len(head))
    for (mode, after), e in total.items():
        both = e["decode_tok_s"] + e["ttft_s"]
        goal = (0.15, 0.35) if mode == "plan" else (0.07, 0.20)
        ok = both and statistics.median(both) <= goal[0] and max(both) <= goal[1]
        print(f"{'ALL':44} {mode:8} {'after' if after else 'before':6} " + " ".join(f"{_fmt(e[m]):>15}" for m in METRICS)
              + f"   decode+TTFT {_fmt(both)} ({'meets' if ok else 'misses'} median <= {goal[0]:.0%}, worst <= {goal[1]:.0%})")


def leave_one_out(curves: list[Curve]) -> None:
    """Print, per published source (a publication, its ``url``: the llama.cpp benches file's curves are one), plan's and
    predict's error on it (after) with the profile's terms (in-sample: the terms were fitted to every source) beside
    the terms fitted without it (out-of-sample: :func:`sparkfit.fit_terms` with ``leave_out``), median / worst for
    decode tok/s and TTFT; then over all sources.
    A source whose engine has no other source cannot be left out (no terms without it): said, and left out of ALL."""
    from sparkfit import fit_terms

    head = (f"{'left out':52} {'mode':8} " + " ".join(f"{m:>15}" for m in ("decode in", "decode out", "TTFT in",
                                                                              "TTFT out")))
    print("\nleave one source out (after): in = the profile's terms, out = fitted without the source\n" + head)
    print("-" * len(head))
    total = {(mode, k): {m: [] for m in METRICS} for mode in ("plan", "predict") for k in ("in", "out")}
    for url in dict.fromkeys(c.url for c in curves):
        mine = [c for c in curves if c.url == url]
        source = mine[0].source if len(mine) == 1 else f"{url.split(' (')[0]} ({len(mine)} curves)"
        terms = {e: fit_terms(curves, e, leave_out=url) for e in {c.engine for c in mine}}
        if any(t is None for t in terms.values()):
            print(f"{source[:52]:52} no other source of {', '.join(e for e, t in terms.items() if t is None)}: "
                  "no terms without it")
            continue
        for mode in ("plan", "predict"):
            got = {k: {m: [] for m in METRICS} for k in ("in", "out")}
            for c in mine:
                if mode == "predict" and not predictable(c):
                    continue
                for k, t in (("in", None), ("out", terms[c.engine])):
                    for m, v in errors(c, mode, True, t).items():
                        got[k][m] += v
                        total[(mode, k)][m] += v
            print(f"{source[:52]:52} {mode:8} " + " ".join(f"{_fmt(got[k][m]):>15}" for m in ("decode_tok_s", "ttft_s")
                                                           for k in ("in", "out")))
    print("-" * len(head))
    for mode in ("plan", "predict"):
        print(f"{'ALL':52} {mode:8} " + " ".join(f"{_fmt(total[(mode, k)][m]):>15}" for m in ("decode_tok_s", "ttft_s")
                                                 for k in ("in", "out")))


def held_out(curves: list[Curve], new: bool = False) -> None:
    """Print plan's and predict's error (after, the profile's terms) on each held-out curve (``holdout``: never fitted
    to, so out of sample), then over them all; ``new``: the set handed for fitting (``Curve.new``: djangodevreng),
    apart from both."""
    mine = [c for c in curves if (c.new if new else c.holdout and not c.new)]
    if not mine:
        return
    name = "new set (djangodevreng)" if new else "held out (never fitted)"
    head = f"{name:44} {'mode':8} " + " ".join(f"{m:>15}" for m in ("decode tok/s", "TPOT", "TTFT"))
    print(("\nthe new set (vLLM 0.26 gpt-oss-20b and Granite-4.1-8B waves, llama-benchy 0.4.0 t/s (total) or c x t/s (req), "
           "and ttfr), reported apart; the vLLM served terms fitted to its single streams and Granite's pp1024 tg1024\n"
           if new else "\nheld-out sources (out of sample: added after the terms were fitted)\n") + head + "\n"
          + "-" * len(head))
    total = {mode: {m: [] for m in METRICS} for mode in ("plan", "predict")}
    unseen = {m: [] for m in METRICS}  # the new set's points no term was fitted to
    for c in mine:
        for mode in ("plan", "predict"):
            if mode == "predict" and not predictable(c):
                continue
            e = errors(c, mode, True)
            for m in METRICS:
                total[mode][m] += e[m]
                unseen[m] += errors(c, mode, True, fitted=False)[m] if new and mode == "plan" else []
            print(f"{c.source[:44]:44} {mode:8} " + " ".join(f"{_fmt(e[m]):>15}" for m in METRICS))
    print("-" * len(head))
    stand_in = sorted({f"{c.engine} by {HW.terms_owner(c.engine)}'s" for c in mine
                       if HW.terms_owner(c.engine) not in (None, c.engine)})
    rows = list(total.items()) + ([("plan", unseen)] if new else [])
    for i, (mode, e) in enumerate(rows):
        both = e["decode_tok_s"] + e["ttft_s"]
        name = "ALL " + ("new" if new else "held out") + (", not fitted" if i == 2 else "")
        print(f"{name:44} {mode:8} " + " ".join(f"{_fmt(e[m]):>15}" for m in METRICS) + f"   decode+TTFT {_fmt(both)}"
              + (" (goal: median <= 15%, worst <= 35%)" if i == 2 else ""))
    if stand_in:
        print(f"  priced by another engine's terms (a stand-in, no terms of its own): {', '.join(stand_in)}")


def set_aside(curves: list[Curve]) -> None:
    """Print each point set aside as a one-off (:func:`sparkdata.set_aside_one_offs`): why, and plan's error on it."""
    rows = [(c, p, why) for c in curves for p, why in c.set_aside]
    if not rows:
        return
    print("\nset aside, in no table above (a one-off, not the steady state plan predicts); plan's error (after):")
    for c, p, why in rows:
        got, meas = plan_point(c, p, True), measured(c, p)
        errs = ", ".join(f"{m} {got[m] / meas[m] - 1:+.1%}" for m in ("decode_tok_s", "ttft_s") if meas[m])
        print(f"  {c.source} B = {p.concurrency}: {why}; {errs}")


def main() -> int:
    """Print per source the median and worst error of plan and predict, before and after; 0 (``--fit``: the terms)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="fit the engine terms to the curves and print them")
    ap.add_argument("--no-loo", action="store_true", help="without the leave-one-source-out table (a refit per source)")
    args = ap.parse_args()
    curves, note = load_curves()
    if note:
        print(note)
    if args.fit:
        from sparkfit import fit_profile_terms

        fit_profile_terms(curves)
        return 0
    fitted = [c for c in curves if not c.holdout and not c.new]
    report(fitted)
    if not args.no_loo:
        leave_one_out(fitted)
    held_out(curves)
    held_out(curves, new=True)
    set_aside(curves)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
