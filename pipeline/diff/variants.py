"""What each server setting bought: every variant of one run against its baseline, with the diff's statistics (pure).

A tuning run measures the same shapes and concurrencies under several named settings (``PointKey.variant``; the
first is the baseline).  Each variant is compared with the baseline as a run diff compares two runs
(:mod:`pipeline.diff.rundiff`, docs/diff-statistics.md): the repeat is the unit (one value per repeat,
``PointSummary.samples``), Welch's two-sided t-test, Benjamini–Hochberg over each (variant, metric) family's points,
and a change is called only when its q value is ≤ α and its relative size is at least the minimum effect
(:func:`pipeline.diff.stats.called`).  Four kinds of comparison:

- per point: the same shape and concurrency under both settings, for output and per-user throughput and TTFT/TPOT
  p50/p99 (MBU and MFU are the analysis's and are left to the run diff);
- the peak output throughput of each shape: the variant's highest-throughput point against the baseline's (each
  at its own concurrency; their per-repeat throughputs tested), a family of its own;
- the best point under the SLO (:func:`pipeline.analysis.frontier.best_under_slo`) likewise;
- the frontier: at each point of the baseline's frontier, the variant's best output throughput at the same or a
  higher per-user throughput against it (:func:`frontier_changes`, a family of its own), and a count, not a test, of
  how many points of the shape's frontier over both settings are the variant's.

Points left out of the frontier (failed, client-bound, measured on a busy machine:
:func:`pipeline.analysis.frontier.exclusion`) are left out here too.  Each called change is said in one line
("+22 % peak output throughput (c = 256 vs the baseline's c = 64)", "TTFT p99 −30 % at c = 64": per metric, its
largest called change); a variant with none is "no difference beyond noise", where a test ran; where none could (no
shape and concurrency under both settings, or one repeat a side), "not tested" and why.

Which concurrencies a line pairs, and why: a per-point line compares like with like (the same shape and
concurrency under both settings: what the setting changes at a load the reader chose).  The peak, the best point
under the SLO and the frontier lines compare each setting's own best, which may lie at different concurrencies,
because a setting moves it: ``--max-num-seqs 256`` lifts a peak the baseline reached at c = 64 to c = 256, and
comparing at either one concurrency would say what neither setting is at its best (at the baseline's c = 64 the
raised cap has nothing to do; at c = 256 the baseline is queueing, past its own best).  A deployment picks its
concurrency per setting, so the honest question is what each setting's best gives; such a line says the
concurrency each side took (:func:`_pair`), "at c = 64" where they are one.
"""

from __future__ import annotations

from typing import Any

from pipeline.analysis.frontier import best_under_slo, exclusion, frontier_points, shape_of
from pipeline.config.sweepconfig import EXCLUSION_FAILURE_RATE
from pipeline.core.pointsummary import PointSummary
from pipeline.diff.metrics import METRICS, metric_samples, metric_value, relative_change, significance_many
from pipeline.diff.stats import MIN_EFFECT, TEST_NAME, benjamini_hochberg, called

#: The per-point metrics compared (the run diff's, less the analysis's shares).
POINT_METRICS = tuple(m for m in METRICS if m.source != "analysis")
NO_DIFFERENCE = "no difference beyond noise"
#: What a variant says where no comparison could be tested (:func:`_untested`): never "no difference".
NOT_TESTED = "not tested"


def variant_names(meta: dict[str, Any], summaries: list[PointSummary]) -> list[str]:
    """The run's variants in order, baseline first: ``run.json`` ``variants`` (their ``name``), else the order the
    summaries name them in, else ``["default"]``."""
    named = [v.get("name") for v in meta.get("variants") or [] if isinstance(v, dict) and v.get("name")]
    seen = list(dict.fromkeys(s.variant for s in summaries))
    return list(dict.fromkeys(named + seen)) or ["default"]


def _pct(change: float) -> str:
    """A relative change as a reader sees it: ``+22 %``, ``−30 %`` (a true minus sign), one decimal below 10 %."""
    v = change * 100
    body = f"{abs(v):.1f}" if abs(v) < 10 else f"{abs(v):.0f}"
    return f"{'+' if v >= 0 else '−'}{body} %"


def _test(rows: list[dict[str, Any]], pairs: list[tuple[list[float], list[float]]], alpha: float,
          min_effect: float) -> None:
    """Fill each row's ``p_value``, ``q_value`` (one Benjamini–Hochberg family: the rows given) and ``called``."""
    tests = significance_many(pairs, alpha)
    for row, res, q in zip(rows, tests, benjamini_hochberg([t.p_value for t in tests])):
        row.update(p_value=res.p_value, q_value=q, n_base=res.n_a, n_variant=res.n_b, note=res.note,
                   called=called(q, row["change"], alpha, min_effect) and bool(row["change"]))


def point_changes(base: list[PointSummary], other: list[PointSummary], alpha: float, min_effect: float,
                  max_failure_rate: float) -> list[dict[str, Any]]:
    """One row per (matched point, metric): baseline's and the variant's value, the relative change (variant −
    baseline) / baseline, Welch p, BH q over the metric's points, ``called``; excluded points are not matched."""
    ok = lambda s: exclusion(s, max_failure_rate) is None  # noqa: E731
    bmap = {(*shape_of(s), s.concurrency): s for s in base if s.load == "closed" and ok(s)}
    matched = [(bmap[k], s) for s in other if s.load == "closed" and ok(s)
               and (k := (*shape_of(s), s.concurrency)) in bmap]
    out = []
    for spec in POINT_METRICS:
        rows, pairs = [], []
        for b, v in matched:
            vb, vv = metric_value(spec, b, None), metric_value(spec, v, None)
            rows.append({"model": v.model, "engine": v.engine, "input_len": v.input_len, "output_len": v.output_len,
                         "concurrency": v.concurrency, "metric": spec.key, "label": spec.label, "unit": spec.unit,
                         "higher_is_better": spec.higher_is_better, "base": vb, "variant": vv,
                         "change": relative_change(vb, vv)})
            pairs.append((metric_samples(spec, b, None)[0], metric_samples(spec, v, None)[0]))
        _test(rows, pairs, alpha, min_effect)
        out.extend(rows)
    return out


def _best(points: list[PointSummary], key: str, max_failure_rate: float) -> dict[tuple, PointSummary]:
    """Per shape, the included point named by ``key``: ``peak`` (highest output throughput) or ``slo`` (best under
    the SLO)."""
    out: dict[tuple, PointSummary] = {}
    shapes: dict[tuple, list[PointSummary]] = {}
    for s in points:
        if s.load == "closed":
            shapes.setdefault(shape_of(s), []).append(s)
    for shape, group in shapes.items():
        inside = [s for s in group if exclusion(s, max_failure_rate) is None]
        if key == "peak" and inside:
            out[shape] = max(inside, key=lambda s: s.output_throughput_tok_s or 0.0)
        elif key == "slo":
            best, _ = best_under_slo(frontier_points(group, max_failure_rate))
            if best is not None:
                out[shape] = next(s for s in group if s.concurrency == best.concurrency)
    return out


def best_changes(base: list[PointSummary], other: list[PointSummary], key: str, alpha: float, min_effect: float,
                 max_failure_rate: float) -> list[dict[str, Any]]:
    """Per shape, the variant's peak (``key`` ``peak``) or best point under the SLO (``slo``) against the
    baseline's, on their per-repeat output throughputs (one BH family over the shapes)."""
    bb, bv = _best(base, key, max_failure_rate), _best(other, key, max_failure_rate)
    rows, pairs = [], []
    for shape in sorted(set(bb) & set(bv)):
        b, v = bb[shape], bv[shape]
        rows.append({"model": shape[0], "engine": shape[1], "input_len": shape[2], "output_len": shape[3],
                     "metric": key, "base": b.output_throughput_tok_s, "variant": v.output_throughput_tok_s,
                     "base_concurrency": b.concurrency, "variant_concurrency": v.concurrency,
                     "change": relative_change(b.output_throughput_tok_s, v.output_throughput_tok_s)})
        pairs.append((list(b.samples.get("output_throughput_tok_s") or []),
                      list(v.samples.get("output_throughput_tok_s") or [])))
    _test(rows, pairs, alpha, min_effect)
    return rows


def frontier_changes(base: list[PointSummary], other: list[PointSummary], alpha: float, min_effect: float,
                     max_failure_rate: float) -> list[dict[str, Any]]:
    """Whether the frontier moved up: for each point of the baseline's own frontier (per-user throughput u), the
    variant's included point of highest output throughput among those at a per-user throughput of at least u, their
    per-repeat output throughputs tested (one BH family over every such pair of the run); no row where no point of
    the variant reaches u (the variant gave that interactivity up)."""
    rows, pairs = [], []
    for shape in sorted({shape_of(s) for s in base if s.load == "closed"}):
        mine = [s for s in base if s.load == "closed" and shape_of(s) == shape]
        theirs = [s for s in other if s.load == "closed" and shape_of(s) == shape and exclusion(s, max_failure_rate) is None]
        by_c = {s.concurrency: s for s in mine}
        for p in (q for q in frontier_points(mine, max_failure_rate) if q.on_frontier):
            reach = [s for s in theirs if (s.per_user_tok_s or 0) >= (p.per_user_tok_s or 0)]
            if not reach:
                continue
            v, b = max(reach, key=lambda s: s.output_throughput_tok_s or 0.0), by_c[p.concurrency]
            rows.append({"model": shape[0], "engine": shape[1], "input_len": shape[2], "output_len": shape[3],
                         "metric": "frontier", "per_user_tok_s": p.per_user_tok_s, "base": b.output_throughput_tok_s,
                         "variant": v.output_throughput_tok_s, "base_concurrency": b.concurrency,
                         "variant_concurrency": v.concurrency,
                         "change": relative_change(b.output_throughput_tok_s, v.output_throughput_tok_s)})
            pairs.append((list(b.samples.get("output_throughput_tok_s") or []),
                          list(v.samples.get("output_throughput_tok_s") or [])))
    _test(rows, pairs, alpha, min_effect)
    return rows


def frontier_share(base: list[PointSummary], other: list[PointSummary], variant: str,
                   max_failure_rate: float) -> list[dict[str, Any]]:
    """Per shape, how many points of the frontier over both settings are the variant's (a count, not a test)."""
    out = []
    shapes: dict[tuple, list[PointSummary]] = {}
    for s in base + other:
        if s.load == "closed":
            shapes.setdefault(shape_of(s), []).append(s)
    for shape, group in sorted(shapes.items()):
        front = [p for p in frontier_points(group, max_failure_rate) if p.on_frontier]
        out.append({"model": shape[0], "engine": shape[1], "input_len": shape[2], "output_len": shape[3],
                    "frontier_points": len(front), "variant_points": sum(p.variant == variant for p in front)})
    return out


def _pair(r: dict[str, Any], what: str = "") -> str:
    """The concurrency each side of a paired row took (module docstring): `` at c = 64`` where they are one, else
    `` (c = 256 vs the baseline's c = 64)`` (``what`` names the baseline's point: ``frontier point ``)."""
    if r["base_concurrency"] == r["variant_concurrency"]:
        return f" at c = {r['variant_concurrency']}"
    return f" (c = {r['variant_concurrency']} vs the baseline's {what}c = {r['base_concurrency']})"


def _lines(entry: dict[str, Any], many_shapes: bool) -> list[str]:
    """The variant's called changes in words (module docstring), or :data:`NO_DIFFERENCE`; a line that pairs two
    points says the concurrency of each (:func:`_pair`)."""
    lines = []
    shape = (lambda r: f" ({r['input_len']}/{r['output_len']})" if many_shapes else "")  # noqa: E731
    for r in entry["peak"]:
        if r["called"]:
            lines.append(f"{_pct(r['change'])} peak output throughput{_pair(r)}{shape(r)}")
    for r in entry["slo_best"]:
        if r["called"]:
            lines.append(f"{_pct(r['change'])} output throughput at the best point under the SLO{_pair(r)}{shape(r)}")
    moved = [r for r in entry["frontier_moved"] if r["called"]]
    if moved:
        top = max(moved, key=lambda r: abs(r["change"]))
        more = f" (called at {len(moved)} of {len(entry['frontier_moved'])} frontier points)" if len(moved) > 1 else ""
        lines.append(f"{_pct(top['change'])} output throughput at a per-user throughput of at least "
                     f"{top['per_user_tok_s']:,.1f} tok/s{_pair(top, 'frontier point ')}{shape(top)}{more}")
    for spec in POINT_METRICS:
        rows = [r for r in entry["points"] if r["metric"] == spec.key]
        hits = [r for r in rows if r["called"]]
        if hits:
            top = max(hits, key=lambda r: abs(r["change"]))
            more = f" (called at {len(hits)} of {len(rows)} points)" if len(hits) > 1 else ""
            lines.append(f"{spec.label} {_pct(top['change'])} at c = {top['concurrency']}{shape(top)}{more}")
    return lines or [_untested(entry) or NO_DIFFERENCE]


def _untested(entry: dict[str, Any]) -> str | None:
    """Why nothing of a variant could be tested against the baseline, or None where a test ran (then "no
    difference beyond noise" is a finding): no shape and concurrency measured (and included) under both settings, or
    fewer than 2 repeats a side at every one (no spread to test against)."""
    rows = [r for k in ("points", "peak", "slo_best", "frontier_moved") for r in entry[k]]
    if not rows:
        return (f"{NOT_TESTED}: no shape and concurrency was measured (and included) under both it and the "
                "baseline, so nothing could be compared")
    if all(r.get("p_value") is None for r in rows):
        n = max(min(r.get("n_base") or 0, r.get("n_variant") or 0) for r in rows)
        return (f"{NOT_TESTED}: a side has at most {n} repeat{'s' if n != 1 else ''} at every point, so there is no "
                "spread to test against; measure at least 2 repeats")
    return None


def variant_diff(summaries: list[PointSummary], variants: list[str], alpha: float = 0.05,
                 min_effect: float = MIN_EFFECT, max_failure_rate: float = EXCLUSION_FAILURE_RATE) -> dict[str, Any]:
    """Every variant after the first (the baseline) against it, within one run.

    Returns:
        ``{"baseline", "alpha", "min_effect", "test", "variants": [{"variant", "points": [per-point rows],
        "peak": [per-shape rows], "slo_best": [per-shape rows], "frontier_moved": [per baseline frontier point],
        "frontier": [per-shape counts],
        "lines": [str]}]}``; each row: ``base``, ``variant`` (values), ``change`` (fraction), ``p_value``,
        ``q_value``, ``n_base``, ``n_variant`` (repeats), ``note``, ``called``.
    """
    by: dict[str, list[PointSummary]] = {}
    for s in summaries:
        by.setdefault(s.variant, []).append(s)
    baseline = variants[0] if variants else "default"
    base = by.get(baseline, [])
    many = len({shape_of(s) for s in summaries if s.load == "closed"}) > 1
    out = []
    for name in variants[1:]:
        other = by.get(name, [])
        entry = {"variant": name,
                 "points": point_changes(base, other, alpha, min_effect, max_failure_rate),
                 "peak": best_changes(base, other, "peak", alpha, min_effect, max_failure_rate),
                 "slo_best": best_changes(base, other, "slo", alpha, min_effect, max_failure_rate),
                 "frontier_moved": frontier_changes(base, other, alpha, min_effect, max_failure_rate),
                 "frontier": frontier_share(base, other, name, max_failure_rate)}
        entry["lines"] = _lines(entry, many)
        out.append(entry)
    return {"baseline": baseline, "alpha": alpha, "min_effect": min_effect, "test": TEST_NAME, "variants": out}


def format_lines(diff: dict[str, Any]) -> list[str]:
    """The text ``show`` prints: one block per variant, its lines against the baseline."""
    out = [f"what each setting bought (against {diff['baseline']}; called = q ≤ {diff['alpha']:g} and at least "
           f"{diff['min_effect'] * 100:g} %):"]
    for v in diff["variants"]:
        out.append(f"  {v['variant']}: " + "; ".join(v["lines"]))
    return out


def tuning_of(meta: dict[str, Any], summaries: list[PointSummary]) -> dict[str, Any] | None:
    """What ``show --json`` carries as ``tuning`` for a run of more than one variant: ``{"variants": [names,
    baseline first], "frontiers": :func:`pipeline.analysis.frontier.frontiers`, "bought": :func:`variant_diff`}``;
    None for a run of one variant (the run's config ``max_failure_rate`` excludes as the analysis does)."""
    names = variant_names(meta, summaries)
    if len(names) < 2:
        return None
    from pipeline.analysis.frontier import frontiers

    rate = (meta.get("config") or {}).get("max_failure_rate", EXCLUSION_FAILURE_RATE)
    return {"variants": names, "frontiers": frontiers(summaries, rate),
            "bought": variant_diff(summaries, names, max_failure_rate=rate)}


def format_tuning(tuning: dict[str, Any]) -> list[str]:
    """``show``'s text of a tuning run: each shape's frontier and best point under the SLO, then what each setting
    bought (:func:`format_lines`)."""
    out = []
    for f in tuning["frontiers"]:
        front = ", ".join(f"{p['variant']} c = {p['concurrency']}" for p in f["frontier"]) or "-"
        left = f"; left out: {len(f['excluded'])} point(s)" if f["excluded"] else ""
        out.append(f"{f['model']} (in {f['input_len']} / out {f['output_len']}) frontier: {front}; {f['best_words']}{left}")
    return out + format_lines(tuning["bought"])
