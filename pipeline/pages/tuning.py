"""A model's tuning section on its page: what a run of several variants (server settings) or shapes shows (pure).

Only for a run with more than one variant or shape of the model (:func:`tuning_section`), per shape:

- the Pareto frontier chart, output throughput against per-user throughput over every variant and concurrency
  (the InferenceX chart: https://inferencemax.semianalysis.com/; x per-user tok/s, y output tok/s, points coloured by
  variant, the frontier drawn as a line; :mod:`pipeline.analysis.frontier`), with the best point under the SLO named;
- each variant's curve, output throughput against concurrency;

and across shapes the price of context (TTFT p50/p99 at the lowest concurrency and the knee, against input length),
the concurrency at which the KV cache ran out (measured: the first point whose server preempted, filled its KV cache
or queued, :func:`pipeline.analysis.regime.point_regime`; predicted: the Capacity page's sequences that fit,
:func:`pipeline.analysis.capacity.kv_capacity`), what each setting bought (:mod:`pipeline.diff.variants`) and the
arithmetic that explains each difference.  Every chart's value scale is linear from 0 (zero-safe) or
:func:`pipeline.pages.charts.value_scale` (symlog where a value is 0); every string reaches the page through the
templates' escaping (:mod:`pipeline.pages.escape`).
"""

from __future__ import annotations

from typing import Any

import altair as alt

from pipeline.analysis.analyze import mean_decode_context
from pipeline.analysis.capacity import kv_capacity, usable_memory_gb
from pipeline.analysis.frontier import frontiers
from pipeline.config.sweepconfig import EXCLUSION_FAILURE_RATE
from pipeline.diff.variants import variant_diff, variant_names
from pipeline.pages.charts import HEIGHT, WIDTH, from_skeleton, value_scale, x_concurrency

#: The regimes that say the server ran out of room for the concurrency: it queued or its KV cache was full.
OUT_OF_ROOM = ("queueing", "kv_cache_full")


def frontier_chart(f: dict[str, Any]) -> dict[str, Any]:
    """The frontier of one shape (:func:`pipeline.analysis.frontier.frontiers`): every included point coloured by
    variant (x per-user tok/s, y output tok/s, both linear from 0), the frontier a line through its points, the best
    point under the SLO ringed in red."""
    pts = [{"variant": p["variant"], "concurrency": p["concurrency"], "per_user_tok_s": p["per_user_tok_s"],
            "output_tok_s": p["output_tok_s"]} for p in f["points"] if p["excluded_reason"] is None]
    front = [{"variant": p["variant"], "concurrency": p["concurrency"], "per_user_tok_s": p["per_user_tok_s"],
              "output_tok_s": p["output_tok_s"], "order": i} for i, p in enumerate(f["frontier"])]
    b = f.get("best_under_slo")
    best = ([{"best": "best under the SLO", "variant": b["variant"], "concurrency": b["concurrency"],
              "per_user_tok_s": b["per_user_tok_s"], "output_tok_s": b["output_tok_s"]}] if b else [])

    def build() -> alt.TopLevelMixin:
        x = alt.X("per_user_tok_s:Q", title="per-user throughput (tokens/s, 1 / median TPOT)", scale=alt.Scale(zero=True))
        y = alt.Y("output_tok_s:Q", title="output throughput (tokens/s, all users)", scale=alt.Scale(zero=True))
        line = alt.Chart(alt.Data(name="frontier")).mark_line(color="#444", strokeDash=[4, 2]).encode(
            x=x, y=y, order="order:Q")
        dots = alt.Chart(alt.Data(name="points")).mark_point(filled=True, size=60).encode(
            x=x, y=y, color=alt.Color("variant:N", legend=alt.Legend(title="variant")),
            tooltip=["variant:N", "concurrency:Q", alt.Tooltip("per_user_tok_s:Q", format=".1f"),
                     alt.Tooltip("output_tok_s:Q", format=".1f")])
        labels = alt.Chart(alt.Data(name="points")).mark_text(dx=7, dy=-6, align="left", fontSize=10).encode(
            x=x, y=y, text="concurrency:Q")
        ring = alt.Chart(alt.Data(name="best")).mark_point(shape="circle", size=260, color="#d62728", strokeWidth=2).encode(
            x=x, y=y, tooltip=["best:N", "variant:N", "concurrency:Q"])
        return (line + dots + labels + ring).properties(width=WIDTH, height=HEIGHT, title="placeholder")

    return from_skeleton(("tuning_frontier",), build, {"points": pts, "frontier": front, "best": best},
                         title=f"{f['model']}, {f['input_len']} in / {f['output_len']} out: the Pareto frontier over every variant")


def curves_chart(model: str, input_len: int, output_len: int, points: list[dict[str, Any]]) -> dict[str, Any]:
    """Each variant's output throughput against concurrency at one shape (log2 concurrency, linear from 0)."""
    rows = [{"variant": p.get("variant") or "default", "concurrency": p["concurrency"],
             "output_tok_s": p["output_throughput_tok_s"]} for p in points if p.get("output_throughput_tok_s")]

    def build() -> alt.TopLevelMixin:
        return alt.Chart(alt.Data(name="points")).mark_line(point=True).encode(
            x=x_concurrency(), y=alt.Y("output_tok_s:Q", title="output throughput (tokens/s)", scale=alt.Scale(zero=True)),
            color=alt.Color("variant:N", legend=alt.Legend(title="variant")),
            tooltip=["variant:N", "concurrency:Q", alt.Tooltip("output_tok_s:Q", format=".1f")]
        ).properties(width=WIDTH, height=HEIGHT, title="placeholder")

    return from_skeleton(("tuning_curves",), build, {"points": rows},
                         title=f"{model}, {input_len} in / {output_len} out: each variant's curve")


def context_chart(model: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """TTFT p50 and p99 (ms) at the lowest concurrency against input length, one line per variant and quantile."""
    data = [{"variant": r["variant"], "input_len": r["input_len"], "quantile": q, "ms": r[f"ttft_{q}_ms"]}
            for r in rows for q in ("p50", "p99") if r.get(f"ttft_{q}_ms") is not None]
    scale = value_scale([d["ms"] for d in data])

    def build() -> alt.TopLevelMixin:
        return alt.Chart(alt.Data(name="points")).mark_line(point=True).encode(
            x=alt.X("input_len:Q", title="input length (tokens)", scale=alt.Scale(zero=True)),
            y=alt.Y("ms:Q", title="TTFT (ms)", scale=scale), color=alt.Color("variant:N", legend=alt.Legend(title="variant")),
            strokeDash=alt.StrokeDash("quantile:N", legend=alt.Legend(title=None)),
            tooltip=["variant:N", "input_len:Q", "quantile:N", alt.Tooltip("ms:Q", format=".2f")]
        ).properties(width=WIDTH, height=220, title="placeholder")

    return from_skeleton(("tuning_context", scale.type), build, {"points": data},
                         title=f"{model}: the price of context (TTFT at the lowest concurrency)")


def _settings(meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each variant's settings from ``run.json`` ``variants`` (flat, or under ``vllm``), by name."""
    out = {}
    for v in meta.get("variants") or []:
        if isinstance(v, dict) and v.get("name"):
            s = v.get("settings") or {}
            out[str(v["name"])] = {**(s.get("vllm") or {} if isinstance(s.get("vllm"), dict) else {}), **s}
    return out


def fp8_kv(settings: dict[str, Any]) -> bool:
    """Whether a variant's settings store the KV cache in an 8-bit float (vLLM ``--kv-cache-dtype fp8*``)."""
    return str(settings.get("kv_cache_dtype") or "").startswith("fp8")


def kv_rows(workloads: list[Any], card: dict[str, Any] | None, hardware: dict[str, Any],
            settings: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Per variant and shape: the first concurrency that ran out of room, measured (its regime) beside the
    sequences predicted to fit (the Capacity page's arithmetic at context = input + output tokens; a variant with an
    fp8 KV cache at half the card's KV bytes per token: 1 byte a value against a 16-bit cache's 2)."""
    usable = usable_memory_gb(hardware)["usable_gb"] if hardware.get("memory_gb") else None
    rows = []
    for w in workloads:
        m = w.model
        first = next((a for a in sorted(w.analysis_points, key=lambda a: a["concurrency"])
                      if a.get("regime") in OUT_OF_ROOM), None)
        context = int(m["input_len"]) + int(m["output_len"])
        predicted = None
        if card and usable:
            from pipeline.cards.modelcards import ModelCard

            mine = (settings or {}).get(m.get("variant") or "default") or {}
            kv = card["kv_bytes_per_token"] / 2 if fp8_kv(mine) else card["kv_bytes_per_token"]
            predicted = kv_capacity(ModelCard.from_dict({**card, "kv_bytes_per_token": kv}), usable, 0.0,
                                    context)["max_sequences"]
        rows.append({"variant": m.get("variant") or "default", "input_len": m["input_len"], "output_len": m["output_len"],
                     "context": context, "measured_concurrency": first["concurrency"] if first else None,
                     "measured_regime": first["regime"] if first else None, "predicted_sequences": predicted,
                     "knee": m.get("knee_concurrency")})
    return rows


def explanations(settings: dict[str, dict[str, Any]], card: dict[str, Any] | None,
                 shapes: list[tuple[int, int]], knees: dict[int, int | None] | None = None,
                 prefix_len: int = 0) -> list[str]:
    """The arithmetic behind each difference a reader sees (docs/definitions.md: KV bytes per token, the decode
    context in + out / 2); ``knees``: the baseline's measured knee by input length, said beside the context's;
    ``prefix_len``: the tokens every request shares (``lengths.prefix_len``), what prefix caching can skip."""
    out = [prefix_words(name, s["prefix_caching"], prefix_len, shapes) for name, s in settings.items()
           if isinstance(s.get("prefix_caching"), bool)]
    kv = (card or {}).get("kv_bytes_per_token")
    for name, s in settings.items():
        dtype = str(s.get("kv_cache_dtype") or "")
        if fp8_kv(s) and kv:
            out.append(f"{name}: kv_cache_dtype {dtype} stores each KV value in 1 byte instead of a 16-bit cache's 2, so a token's KV "
                       f"takes {kv / 2:,.0f} bytes instead of {kv:,.0f}: twice the sequences fit, and each decode step "
                       "reads half the KV bytes")
        if s.get("max_num_seqs"):
            out.append(f"{name}: max_num_seqs {s['max_num_seqs']} caps the batch: past c = {s['max_num_seqs']} the "
                       "requests beyond it queue, and throughput stops growing there")
    if len(shapes) > 1 and kv:
        (i0, o0), (i1, o1) = shapes[0], shapes[-1]
        c0, c1 = mean_decode_context(i0, o0), mean_decode_context(i1, o1)
        out.append(f"a longer context: a decode step reads on average input + output / 2 tokens of KV per sequence, "
                   f"{c0:,.0f} tokens × {kv:,.0f} B = {c0 * kv / 1e6:,.2f} MB at {i0} in against {c1:,.0f} × {kv:,.0f} B "
                   f"= {c1 * kv / 1e6:,.2f} MB at {i1} in ({c1 / c0:.1f}×), so each step costs more KV bytes per "
                   "sequence and the knee moves left" + _knee_words(knees or {}, i0, i1))
    return out


def prefix_words(name: str, on: bool, prefix_len: int, shapes: list[tuple[int, int]]) -> str:
    """What ``prefix_caching`` does to the prefill (derived: with the shared prefix's KV blocks cached, a request
    after the first prefills only its own input of its prefix + input prompt tokens): with 256 shared before 4,000
    its own, ``"on: prefix caching on: … a later request prefills 4,000 of its 4,256 prompt tokens (6 % less
    prefill …)"``."""
    if not on:
        return f"{name}: prefix caching off: every request prefills its whole prompt" + (
            f", the {prefix_len:,} shared tokens included" if prefix_len else "")
    if not prefix_len or not shapes:
        return f"{name}: prefix caching on, but the workload shares no prefix: only repeated prompts gain"
    total = prefix_len + shapes[0][0]
    return (f"{name}: prefix caching on: the {prefix_len:,} shared tokens are prefilled once and their KV blocks reused, "
            f"so a later request prefills {shapes[0][0]:,} of its {total:,} prompt tokens ({100 * prefix_len / total:.0f} % "
            "less prefill: TTFT falls most where prefill is most of it)")


def _knee_words(knees: dict[int, int | None], i0: int, i1: int) -> str:
    """`` (measured: the knee at c = 8 at 64 in, c = 4 at 256 in)``, or nothing without both inputs' knees."""
    if i0 not in knees or i1 not in knees:
        return ""
    said = [f"c = {knees[i]}" if knees[i] else "not reached" for i in (i0, i1)]
    return f" (measured, baseline: the knee {said[0]} at {i0} in, {said[1]} at {i1} in)"


def tuning_section(view: Any, model: str, max_failure_rate: float | None = None) -> dict[str, Any] | None:
    """The tuning section of ``model`` in one run's view (:class:`pipeline.pages.views.RunView`); None unless the run
    measured the model under more than one variant or shape.

    Returns ``{"variants", "frontiers": [{..., "chart"}], "curves": [chart], "context_chart", "kv_rows",
    "bought": [{"variant", "lines"}], "explanations": [str]}``.
    """
    if view.results is None:  # a view made without its run's results (tests of other sections): nothing to tune
        return None
    summaries = [s for s in view.results.summaries if s.model == model and s.load == "closed"]
    names = variant_names(view.meta, summaries)
    shapes = sorted({(s.input_len, s.output_len) for s in summaries})
    if len(names) < 2 and len(shapes) < 2:
        return None
    rate = max_failure_rate if max_failure_rate is not None else (view.meta.get("config") or {}).get(
        "max_failure_rate", EXCLUSION_FAILURE_RATE)
    fronts = frontiers(summaries, rate)
    for f in fronts:
        f["chart"] = frontier_chart(f) if f["frontier"] else None  # nothing included: no chart of empty scales
        f["frontier_words"] = ", ".join(f"{p['variant']} at c = {p['concurrency']}" for p in f["frontier"]) or "empty"
    workloads = [w for w in view.workloads if w.model["model"] == model and w.points]
    curves = [curves_chart(model, i, o, [p for w in workloads if (w.model["input_len"], w.model["output_len"]) == (i, o)
                                         for p in w.points]) for i, o in shapes]
    ctx_rows = []
    for w in workloads:
        low = min(w.points, key=lambda p: p["concurrency"])
        ttft = low.get("ttft_s") or {}
        ctx_rows.append({"variant": w.model.get("variant") or "default", "input_len": w.model["input_len"],
                         "concurrency": low["concurrency"],
                         "ttft_p50_ms": ttft["p50"] * 1e3 if ttft.get("p50") is not None else None,
                         "ttft_p99_ms": ttft["p99"] * 1e3 if ttft.get("p99") is not None else None,
                         "knee": w.model.get("knee_concurrency")})
    from pipeline.store import runs

    cards = runs.load_model_cards(view.results.run_dir) if (view.results.run_dir / "models").is_dir() else {}
    card = cards.get(model)
    bought = (variant_diff(summaries, names, max_failure_rate=rate)["variants"] if len(names) > 1 else [])
    return {"variants": names, "frontiers": fronts, "curves": curves,
            "context_chart": context_chart(model, ctx_rows) if len(shapes) > 1 else None, "context_rows": ctx_rows,
            "kv_rows": kv_rows(workloads, card, view.meta.get("hardware") or {}, _settings(view.meta)),
            "bought": [{"variant": b["variant"], "lines": b["lines"], "frontier_words": "; ".join(
                f"{f['variant_points']} of the {f['frontier_points']} frontier point(s) at {f['input_len']} in"
                for f in b["frontier"])} for b in bought],
            "explanations": explanations(_settings(view.meta), card, shapes,
                                         {r["input_len"]: r["knee"] for r in ctx_rows if r["variant"] == names[0]},
                                         _prefix_len(view.meta))}


def _prefix_len(meta: dict[str, Any]) -> int:
    """The run's shared prefix (``config.lengths.prefix_len``, tokens; 0 where none or not a whole number)."""
    cfg: dict[str, Any] = meta.get("config") if isinstance(meta.get("config"), dict) else {}
    lengths: dict[str, Any] = cfg.get("lengths") if isinstance(cfg.get("lengths"), dict) else {}
    n = lengths.get("prefix_len")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0
