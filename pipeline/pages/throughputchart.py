"""The throughput chart of a model page: output throughput vs concurrency with its ceiling, knee, roofline and
prediction, and where the ceiling's label goes so that no line runs through it.  Pure: dicts in, Vega-Lite specs out.
"""

from __future__ import annotations

import math
from typing import Any

import altair as alt

from pipeline.pages.charts import HEIGHT, WIDTH, concurrency_domain, from_skeleton, x_concurrency

#: The series of a run's own curve: measured, or simulated (a prediction in its own colour, never "measured").
MEASURED_SERIES = "measured (median)"
SIMULATED_SERIES = "SIMULATED (median): a prediction"
SIMULATED_COLOR = "#9467bd"


PREDICTED_SERIES = "calibrated prediction"
PREDICTED_COLOR = "#8c564b"


def throughput_chart(model: dict[str, Any], points: list[dict[str, Any]], analysis_points: list[dict[str, Any]],
                     simulated: bool = False, prediction: dict[str, Any] | None = None) -> dict[str, Any]:
    """Output throughput vs concurrency for one workload.

    ``simulated``: the points come from the simulated server (``source: simulated``): the curve is
    labelled a prediction, drawn in its own colour, and the title says so.
    ``prediction``: the calibrated per-step model's curve (:func:`pipeline.views.predict.predict_workload`),
    drawn dashed beside the roofline, labelled a prediction, its calibration points named in
    the tooltip; left out when it has no fit.

    Layers: measured median (line + points) with the repeat spread (min–max rule), ideal
    linear scaling from the smallest concurrency, the roofline prediction, the single-stream
    bandwidth ceiling (horizontal rule) and the knee (vertical rule).
    """
    rows = []
    own = SIMULATED_SERIES if simulated else MEASURED_SERIES
    pts = sorted(points, key=lambda p: p["concurrency"])
    base = pts[0] if pts else None
    roof = {a["concurrency"]: a.get("roofline_tok_s") for a in analysis_points}
    for p in pts:
        c = p["concurrency"]
        samples = (p.get("samples") or {}).get("output_throughput_tok_s") or []
        t = p.get("output_throughput_tok_s")
        if t is None:
            continue
        rows.append({"concurrency": c, "series": own, "tok_s": t,
                     "lo": min(samples) if samples else t, "hi": max(samples) if samples else t})
        if base and base.get("output_throughput_tok_s"):
            rows.append({"concurrency": c, "series": "ideal linear scaling",
                         "tok_s": base["output_throughput_tok_s"] * c / base["concurrency"]})
        if roof.get(c):
            rows.append({"concurrency": c, "series": "roofline prediction", "tok_s": roof[c]})
    predicted = bool(prediction and prediction.get("fit"))
    if prediction and predicted:
        for q in prediction["points"]:
            t = (q.get("predicted") or {}).get("output_throughput_tok_s")
            if t:
                rows.append({"concurrency": q["concurrency"], "series": PREDICTED_SERIES, "tok_s": t})
    data = {"points": rows}
    side = None
    if model.get("ceiling_tok_s"):
        full = f"single-stream ceiling {model['ceiling_tok_s']:.1f} tok/s"
        label, at, side = full, min((r["concurrency"] for r in rows), default=1), "above"  # the last resort
        # the full label where it is free of the lines and the knee, else the short one (its tooltip and the page
        # name it in full)
        for text in (full, f"ceiling {model['ceiling_tok_s']:.1f} tok/s"):
            place = ceiling_label_place(model["ceiling_tok_s"], rows, len(text), model.get("knee_concurrency"),
                                        legend_px=LEGEND_PREDICTED_PX if predicted else LEGEND_PX)
            if place:
                label, (at, side) = text, place
                break
        data["ceiling"] = [{"y": model["ceiling_tok_s"], "label": full}]
        data["ceiling_label"] = [{"y": model["ceiling_tok_s"], "label": label, "concurrency": at}]
    if model.get("knee_concurrency"):
        data["knee"] = [{"concurrency": model["knee_concurrency"], "label": f"knee c={model['knee_concurrency']}"}]
    title = f"{model['model']}: output throughput vs concurrency" + (
        " — SIMULATED, a prediction, not a measurement" if simulated else "")
    # the axis spans the chart's own concurrencies (one point: one doubling, never a bare [c, c] under fixed ticks)
    concs = [r["concurrency"] for r in rows] + [k["concurrency"] for k in data.get("knee", [])]
    span = concurrency_domain(concs)
    return from_skeleton(("throughput", side, "knee" in data, simulated, predicted, str(span)),
                         lambda: _throughput_skeleton(data, side, own, predicted, concs), data, title=title)


#: Pixels per character of a chart label (Vega's default 11 px sans-serif, measured ~6 px a character).
LABEL_CHAR_PX = 6.0
#: Height a label needs beside its rule (px): 11 px text, 3 px offset, a margin; a line nearer is under the text.
LABEL_CLEAR_PX = 17.0
#: The throughput chart's legend box at the plot's top left (three entries): width, height in pixels.
LEGEND_PX = (140.0, 60.0)
#: The same with the calibrated prediction's fourth, longer entry.
LEGEND_PREDICTED_PX = (160.0, 80.0)


def ceiling_label_place(ceiling: float, rows: list[dict[str, Any]], chars: int, knee: float | None = None,
                        width_px: float = WIDTH, height_px: float = HEIGHT,
                        legend_px: tuple[float, float] = LEGEND_PX) -> tuple[float, str] | None:
    """Where the ceiling's label goes: ``(concurrency its left end sits at, "above" | "below")`` (the
    label sat at the right end, where the measured line crosses the ceiling, and overlapped it).

    The chart draws each series as straight segments on log2 concurrency × log10 tok/s.  The label covers
    ``chars × LABEL_CHAR_PX`` pixels to the right of its anchor; anchors are tried every 0.1 of a doubling.  A
    placement is out when a series crosses the rule under the text, when the knee's vertical rule (``knee``, a
    concurrency) runs through it, or when the text would sit in the legend's
    corner (top left, :data:`LEGEND_PX`, on a y axis niced to whole decades as Vega does); otherwise it scores the
    smallest pixel distance from the rule to any series on the text's side under it (no series there: the
    plot's height); under :data:`LABEL_CLEAR_PX` a line runs through the text, and the placement is out too.
    The best score wins (ties: the leftmost, above); None when no placement is free.
    """
    by_series: dict[Any, list[tuple[float, float]]] = {}
    for r in rows:
        if r.get("tok_s") and r["tok_s"] > 0 and r.get("concurrency"):
            by_series.setdefault(r.get("series"), []).append((math.log2(r["concurrency"]), math.log10(r["tok_s"])))
    if not by_series:
        return None
    xs = [x for pts in by_series.values() for x, _ in pts]
    ys = [y for pts in by_series.values() for _, y in pts] + [math.log10(ceiling)]
    x0, x1 = min(xs), max(xs)
    span = max(x1 - x0, 1e-9)
    width_log2 = chars * LABEL_CHAR_PX / width_px * span
    top, bottom = math.ceil(max(ys)), math.floor(min(ys))
    px_per_decade = height_px / max(top - bottom, 1e-9)
    rule = math.log10(ceiling)
    y_px = (top - rule) * px_per_decade  # the rule, from the plot's top

    def under(pts: list[tuple[float, float]], lo: float, hi: float) -> list[float]:
        """The series' heights (log10) at the window's edges and its vertices inside: its extremes there."""
        out = [y for x, y in pts if lo <= x <= hi]
        for edge in (lo, hi):
            for (xa, ya), (xb, yb) in zip(pts, pts[1:]):
                if xa <= edge <= xb and xb > xa:
                    out.append(ya + (yb - ya) * (edge - xa) / (xb - xa))
        return out

    best: tuple[float, float, str] | None = None
    steps = max(0, int((span - width_log2) / 0.1 + 1e-9))
    for i in range(steps + 1):
        lo = x0 + 0.1 * i
        hi = lo + width_log2
        heights = {k: under(sorted(pts), lo, hi) for k, pts in by_series.items()}
        if any(any(h > rule for h in hs) and any(h <= rule for h in hs) for hs in heights.values()):
            continue  # a line crosses the rule under the text
        if knee and lo - 0.05 <= math.log2(knee) <= hi + 0.05:
            continue  # the knee's rule runs through the text
        x_px = (lo - x0) / span * width_px
        for side in ("above", "below"):
            text_top = y_px - 15 if side == "above" else y_px + 3
            if x_px < legend_px[0] and text_top < legend_px[1]:
                continue  # under the legend
            mine = [abs(h - rule) * px_per_decade for hs in heights.values() for h in hs if (h > rule) == (side == "above")]
            score = min(mine, default=height_px)
            if score < LABEL_CLEAR_PX:
                continue  # a line runs through the text's height
            if best is None or score > best[0] + 1e-9:
                best = (score, lo, side)
    return None if best is None else (2 ** best[1], best[2])


def _throughput_skeleton(data: dict[str, Any], side: str | None = None, own: str = MEASURED_SERIES,
                         predicted: bool = False, concs: list[Any] | None = None) -> alt.TopLevelMixin:
    """The layers of :func:`throughput_chart` with placeholder data (ceiling and knee layers when ``data`` has them;
    the ceiling's label ``side`` of its rule, at the concurrency :func:`ceiling_label_place` chose); ``own`` names the
    run's own curve (measured, or simulated in its own colour); ``concs``: the concurrencies the axis spans."""
    def _x() -> alt.X:
        return x_concurrency(concurrencies=concs)

    pts = alt.Data(name="points")
    own_color = SIMULATED_COLOR if own == SIMULATED_SERIES else "#1f77b4"
    domain, colors = [own, "ideal linear scaling", "roofline prediction"], [own_color, "#9e9e9e", "#d62728"]
    if predicted:
        domain, colors = domain + [PREDICTED_SERIES], colors + [PREDICTED_COLOR]
    color = alt.Color("series:N", scale=alt.Scale(domain=domain, range=colors),
                      legend=alt.Legend(title=None, orient="top-left"))
    y = alt.Y("tok_s:Q", title="output throughput (tokens/s)", scale=alt.Scale(type="log"))
    lines = alt.Chart(pts).mark_line(point=True).encode(
        x=_x(), y=y, color=color,
        strokeDash=alt.condition(alt.datum.series == own, alt.value([1, 0]), alt.value([5, 4])),
        tooltip=["series:N", "concurrency:Q", alt.Tooltip("tok_s:Q", format=".1f")])
    spread = alt.Chart(pts).transform_filter(alt.datum.series == own).mark_rule(
        color=own_color, strokeWidth=2).encode(x=_x(), y="lo:Q", y2="hi:Q")
    layers = [spread, lines]
    if "ceiling" in data:
        ceil = alt.Chart(alt.Data(name="ceiling"))
        layers.append(ceil.mark_rule(color="#ff7f0e", strokeDash=[2, 2]).encode(y="y:Q", tooltip=["label:N"]))
        layers.append(alt.Chart(alt.Data(name="ceiling_label"))
                      .mark_text(align="left", baseline="bottom" if side != "below" else "top",
                                 dy=-3 if side != "below" else 3, color="#ff7f0e")
                      .encode(x=_x(), y="y:Q", text="label:N"))
    if "knee" in data:
        knee = alt.Data(name="knee")
        layers.append(alt.Chart(knee).mark_rule(color="#2ca02c", strokeWidth=2).encode(x=_x(), tooltip=["label:N"]))
        layers.append(alt.Chart(knee).mark_text(align="left", dx=4, dy=-8, color="#2ca02c", y=10)
                      .encode(x=_x(), text="label:N"))
    return alt.layer(*layers).properties(width=WIDTH, height=HEIGHT, title="placeholder")
