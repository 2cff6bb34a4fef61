"""The length distribution of each point of a workload as small histograms (Altair): the drawn prompt and output
lengths and, where outputs stop at EOS, the output tokens each request really got, from each summary's
``length_hist`` (:mod:`pipeline.metrics.lengthhist`).  No I/O.

One row of panels per point (``c = 4``, ``gamma 1 req/s``), a column each for the prompts and the outputs, each
column's token axis its own (prompts of 4,000 tokens and outputs of 500 share no scale); the bars are the stored bins
as they are (Vega-Lite's pre-binned ``bin: "binned"`` with ``x2``), never re-binned in the browser.
"""

from __future__ import annotations

from typing import Any

import altair as alt

#: What each stored histogram is called on the chart: (its panel, its series).
#: The prompt's count the shared prefix in; an output's drawn length is the most it may get where it stops at EOS.
SERIES = {"input": ("prompt tokens", "drawn"), "output": ("output tokens", "drawn"),
          "got": ("output tokens", "got (stopped at EOS)")}
#: The series' colours: drawn in blue, what the requests got in orange, over it.
COLORS = {"drawn": "#1f77b4", "got (stopped at EOS)": "#ff7f0e"}


def point_label(p: dict[str, Any]) -> str:
    """A point's row name: ``c = 4`` closed loop; ``gamma 1 req/s`` (``, cap 8``) open loop."""
    if (p.get("load") or "closed") == "closed":
        return f"c = {p.get('concurrency')}"
    cap = f", cap {p['max_concurrency']}" if p.get("max_concurrency") else ""
    rate = p.get("rate_rps")
    return f"{p.get('load')} {rate:g} req/s{cap}" if isinstance(rate, (int, float)) else f"{p.get('load')}{cap}"


def length_rows(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per stored bin of every point with a ``length_hist``: ``{point, length, series, start, end,
    requests}`` (tokens in [start, end), requests in the bin)."""
    rows = []
    for p in points:
        for kind, h in (p.get("length_hist") or {}).items():
            if kind not in SERIES or not isinstance(h, dict):
                continue
            panel, series = SERIES[kind]
            edges, counts = h.get("edges") or [], h.get("counts") or []
            rows += [{"point": point_label(p), "length": panel, "series": series, "start": lo, "end": hi,
                      "requests": n} for lo, hi, n in zip(edges, edges[1:], counts)]
    return rows


def length_chart(model: dict[str, Any], points: list[dict[str, Any]], simulated: bool = False) -> dict[str, Any] | None:
    """The histograms of a workload's points (module docstring): requests (y, from 0) per bin of tokens (x, the bins'
    own span); None where no point has drawn lengths (fixed lengths need no chart: the page says so in words).
    ``simulated``: the title says the outputs are the simulated server's (it cannot know where a model stops)."""
    rows = length_rows(points)
    if not rows:
        return None
    order = list(dict.fromkeys(r["point"] for r in rows))
    base = alt.Chart().mark_bar(opacity=0.7, binSpacing=0).encode(
        x=alt.X("start:Q", bin="binned", title="tokens", scale=alt.Scale(zero=False)),
        x2="end:Q",
        y=alt.Y("requests:Q", title="requests", stack=None, scale=alt.Scale(zero=True)),
        color=alt.Color("series:N", scale=alt.Scale(domain=list(dict.fromkeys(r["series"] for r in rows)),
                                                    range=[COLORS[s] for s in dict.fromkeys(r["series"] for r in rows)]),
                        legend=alt.Legend(title=None, orient="top")),
        tooltip=["point:N", "series:N", alt.Tooltip("start:Q", title="from (tokens)"),
                 alt.Tooltip("end:Q", title="below (tokens)"), "requests:Q"],
    ).properties(width=240, height=70)
    chart = alt.layer(base, data=alt.Data(values=rows)).facet(
        row=alt.Row("point:N", title=None, sort=order), column=alt.Column("length:N", title=None,
                                                                           sort=["prompt tokens", "output tokens"]),
    ).resolve_scale(x="independent")
    title = f"{model['model']}: each point's request lengths" + (" (SIMULATED)" if simulated else "")
    return chart.properties(title=title).to_dict()


def eos_words(points: list[dict[str, Any]], simulated: bool = False) -> str:
    """What EOS did to a workload whose outputs could stop at it, from each point's ``length_hist`` (``got`` beside
    the drawn ``output``, means over the finished requests): the tokens the requests got on average against those
    they asked for, mean over mean across the points, and how many points had outputs shorter than asked; ``""``
    where no point has a ``got`` histogram (outputs were their drawn length: ``ignore_eos``).  ``simulated``: the
    simulated server generates every output to its drawn length, and the words say so."""
    pairs = [(h["got"]["mean"], h["output"]["mean"]) for p in points
             if isinstance(h := p.get("length_hist"), dict) and isinstance(h.get("got"), dict)
             and isinstance(h.get("output"), dict)]
    if not pairs:
        return ""
    got, asked = sum(g for g, _ in pairs) / len(pairs), sum(a for _, a in pairs) / len(pairs)
    short = sum(g < a for g, a in pairs)
    said = (f"What EOS did: the outputs could stop where the model sampled its end-of-sequence token, and got "
            f"{got:,.1f} tokens on average of the {asked:,.1f} they asked for ({got / asked:.0%}); ")
    why = ("the simulated server cannot know where a model stops: it generates every output to the most it asks for" if
           simulated else "a model with random weights, or one whose folder names no EOS token, rarely or never samples it")
    if not short:
        return said + f"at all {len(pairs)} points every output ran to the most it asked for, none stopped at EOS ({why})."
    return said + f"outputs stopped early at {short} of {len(pairs)} points."
