"""Run vs run, the report: a :class:`pipeline.diff.rundiff.RunDiff` as text, Markdown, CSV or JSON.

Every format puts the comparability headline first (the CSV leaves it to the caller, which
prints it to stderr).  The numbers are the diff's own (:mod:`pipeline.diff.rundiff`); this module only
formats them: tok/s to 4 significant digits, seconds as milliseconds, shares (MBU, MFU) as
percentages with their change in percentage points.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import asdict
from typing import Any, Callable

from pipeline.diff.rundiff import RunDiff, changes_of
from pipeline.diff.metrics import METRICS, MetricChange, relative_change
from pipeline.analysis.quality import short_reasons
from pipeline.core.words import post_knee_words
from pipeline.core.records import DEFAULT_VARIANT, PointKey
from pipeline.core.texttable import text_table

def format_value(v: Any, unit: str) -> str:
    """A value for tables: tok/s with 4 significant digits, seconds as ms, MBU as a percentage."""
    if v is None:
        return "-"
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return str(v)
    if unit == "s":
        return f"{v * 1e3:.4g} ms"
    if unit == "fraction":
        return f"{v * 100:.1f}%"
    return f"{v:.4g}"


def _half_text(h: float) -> str:
    """A half-width to two significant digits, never in exponent form (``56``, ``1.2``, ``0.012``, ``1234``)."""
    if h == 0 or not math.isfinite(h):
        return f"{h:g}"
    return f"{h:.{max(0, 1 - math.floor(math.log10(abs(h))))}f}"


def format_value_ci(v: Any, ci: list[float] | None, unit: str) -> str:
    """:func:`format_value` of ``v`` and, where ``ci`` (the 95 % interval over repeats, ``[low, high]``) is known,
    `` ±h`` with h half its width to two significant digits in the value's unit: ``1234 ±56``, ``12.34 ms ±1.2 ms``,
    ``45.3% ±1.2 pp``."""
    text = format_value(v, unit)
    if v is None or not ci or len(ci) != 2 or None in ci:
        return text
    h = (ci[1] - ci[0]) / 2
    if unit == "s":
        return f"{text} ±{_half_text(h * 1e3)} ms"
    if unit == "fraction":
        return f"{text} ±{_half_text(h * 100)} pp"
    return f"{text} ±{_half_text(h)}"


def format_change(c: float | None, unit: str | None = None) -> str:
    """A change: relative as a signed percentage (``+0.5%``, ``-20.0%``); of a share (``unit`` ``"fraction"``:
    MBU, MFU, the change B − A) in percentage points (``-16.9 pp``); ``-`` when unknown."""
    if c is None:
        return "-"
    return f"{c * 100:+.1f} pp" if unit == "fraction" else f"{c * 100:+.1f}%"


def figure_words(fld: str, v: Any) -> str:
    """A per-model figure of the diff in words: the knee as ``c = 32`` or ``not reached``, the post-knee
    behaviour as ``plateaus`` / ``declines`` / ``knee not reached`` (never the raw enum), tok/s to 4 digits."""
    if fld == "knee_concurrency":
        return "not reached" if v is None else f"c = {v}"
    if fld == "post_knee":
        return post_knee_words(v)
    return format_value(v, "tok/s")


def _sig(c: MetricChange, marks: dict[str, int], d: RunDiff | None = None) -> str:
    p = "" if c.p_value is None else f"p={c.p_value:.3g} q={c.q_value:.3g} "
    mark = ""
    if c.note:
        marks.setdefault(c.note, len(marks) + 1)
        mark = f" [{marks[c.note]}]"
    word = c.verdict if c.verdict in ("better", "worse") else "~"
    small = (" < min effect" if d is not None and word == "~" and c.effect is not None and c.q_value is not None
             and c.q_value <= d.alpha and abs(c.effect) < d.min_effect else "")  # unlikely noise, but too small
    return f"{word} ({p}n={c.n_a}+{c.n_b}{small}){mark}"


CORE_PROVENANCE = ("hardware", "bandwidth_gb_s_probed", "engine", "engine_version", "workloads", "models",
                   "batchmark_version")


#: The longest provenance cell (characters) in a diff's tables; a longer value ends in "…" (a whole dict
#: of 2,624 characters stood in one cell).
PROVENANCE_CELL_CHARS = 120


def _short(v: Any, none: str = "-", limit: int = PROVENANCE_CELL_CHARS) -> str:
    """One provenance value as text of at most ``limit`` characters (dicts and lists as compact JSON)."""
    if v is None:
        return none
    text = json.dumps(v, sort_keys=True, separators=(",", ": ")) if isinstance(v, (dict, list)) else str(v)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def provenance_cells(label: str, a: Any, b: Any, none: str = "-") -> list[tuple[str, str, str]]:
    """``[(label, A, B)]`` rows of one provenance field, each cell bounded (:data:`PROVENANCE_CELL_CHARS`).

    Two dicts become one row per key whose values differ (``label.key``), recursively, so that a row names what
    changed instead of repeating both dicts whole; anything else is one row.
    """
    if isinstance(a, dict) and isinstance(b, dict):
        rows = []
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k) != b.get(k):
                rows += provenance_cells(f"{label}.{k}", a.get(k), b.get(k), none)
        return rows or [(label, _short(a, none), _short(b, none))]
    return [(label, _short(a, none), _short(b, none))]


def _provenance_rows(d: RunDiff) -> list[tuple[str, str, str, str]]:
    """The core provenance rows and every other row that differs, then a count of identical ones."""
    rows = []
    shown = [it for it in d.provenance if it.field in CORE_PROVENANCE or it.differs]
    for it in shown:
        if it.field == "bandwidth_gb_s_probed":
            a = "-" if it.a is None else f"{it.a:.1f}"
            b = "-" if it.b is None else f"{it.b:.1f} ({format_change(relative_change(it.a, it.b))})"
            rows.append((it.label, a, b, "DIFFERS" if it.differs else "same"))
            continue
        for label, a, b in provenance_cells(it.label, it.a, it.b):
            rows.append((label, a, b, "DIFFERS" if it.differs else "same"))
    hidden = len(d.provenance) - len(shown)
    if hidden:
        rows.append((f"({hidden} more fields)", "", "", "same"))
    return rows


def model_cell(model: str, variant: str | None) -> str:
    """A diff row's model as a reader tells rows apart: ``model · variant`` for a server setting other than
    ``default`` (two tuning runs match point by variant: without it their rows read the same), else the model."""
    return model if variant in (None, "", DEFAULT_VARIANT) else f"{model} · {variant}"


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    esc = lambda x: str(x).replace("|", "\\|")  # noqa: E731
    return (["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
            + ["| " + " | ".join(esc(x) for x in r) + " |" for r in rows])


def _render(d: RunDiff, table: Callable[[list[str], list[list[str]]], list[str]], md: bool) -> str:
    h = (lambda t: f"## {t}") if md else (lambda t: t)
    out = [f"**{d.headline}**" if md else d.headline, ""] + ([d.calls, ""] if d.calls else [])
    out.append(f"A = {d.run_a['run_id']} ({d.run_a['source']}, {d.run_a['hardware']}), "
               f"B = {d.run_b['run_id']} ({d.run_b['source']}, {d.run_b['hardware']}); "
               f"change = (B − A) / A, for MBU and MFU B − A in percentage points (pp); {d.test} at α = {d.alpha:g}, "
               f"minimum effect {d.min_effect * 100:g} %; `~` = not called (p: Welch, q: Benjamini–Hochberg, "
               "n: repeats a side); ± after A and B: half the 95 % interval of the mean of the values tested per repeat"
               if md else
               f"A = {d.run_a['run_id']} ({d.run_a['source']}, {d.run_a['hardware']})\n"
               f"B = {d.run_b['run_id']} ({d.run_b['source']}, {d.run_b['hardware']})\n"
               f"change = (B - A) / A, for MBU and MFU B - A in percentage points (pp); {d.test} at alpha = {d.alpha:g}, "
               f"minimum effect {d.min_effect * 100:g} %; ~ = not called (p: Welch, q: Benjamini-Hochberg, n: repeats a side)\n"
               "± after A and B: half the 95 % interval of the mean of the values tested per repeat (Student's t)")
    for name, q in (("A", d.quality_a), ("B", d.quality_b)):
        if q:
            # condensed as on the Runs index (in full, one line of 1,500 characters); in full in --json
            out.append(f"run quality of {name}: " + ("clean" if q["verdict"] == "clean"
                                                     else "FLAGGED: " + "; ".join(short_reasons(q) or q["reasons"])))
    flagged = d.flagged_points()
    if flagged:
        out.append("⚠ after c marks a point flagged in A or B (its repeats disagree or the machine was busy): "
                   "its change may be interference, not the hardware")
    out += ["", h("Provenance")] + ([""] if md else [])
    out += table(["field", "A", "B", ""], [list(r) for r in _provenance_rows(d)])
    marks: dict[str, int] = {}
    for spec in METRICS:
        rows = changes_of(d, spec.key)
        if not rows:
            continue
        better = "higher" if spec.higher_is_better else "lower"
        unit = {"s": "ms", "fraction": f"% of each run's own {'bandwidth' if spec.key == 'mbu' else 'peak FLOP/s'}, "
                "probed else spec; change in percentage points"}.get(spec.unit, spec.unit)
        out += ["", h(f"{spec.label} ({unit}; {better} is better)")] + ([""] if md else [])
        out += table(["model", "engine", "in/out", "c", "A", "B", "change", "significance"],
                     [[model_cell(c.model, c.variant), c.engine, f"{c.input_len}/{c.output_len}",
                       c.point + (" ⚠" if c.key in flagged else ""),
                       format_value_ci(c.a, c.ci95_a, c.unit), format_value_ci(c.b, c.ci95_b, c.unit),
                       format_change(c.change, c.unit),
                       _sig(c, marks, d)]
                      for c in rows])
    if marks:
        out += ["", h("Notes")] + ([""] if md else [])
        out += [f"[{i}] {note}" + ("  " if md else "") for note, i in sorted(marks.items(), key=lambda x: x[1])]
    if d.models:
        out += ["", h("Per model (from the analysis; no test: one value per run)")] + ([""] if md else [])
        out += table(["model", "engine", "in/out", "figure", "A", "B", "change"],
                     [[model_cell(m.model, m.variant), m.engine, f"{m.input_len}/{m.output_len}", m.label,
                       figure_words(m.field, m.a), figure_words(m.field, m.b),
                       format_change(m.change) if m.change is not None else ("changed" if m.changed else "same")]
                      for m in d.models])
    for name, pts in (("Only in A", d.only_in_a), ("Only in B", d.only_in_b)):
        out += ["", h(f"{name} ({len(pts)} point(s))")] + ([""] if md else [])
        if pts:
            out += table(["model", "engine", "in/out", "c"],
                         [[model_cell(p["model"], p.get("variant")), p["engine"], f"{p['input_len']}/{p['output_len']}",
                           PointKey.of(p).label().removeprefix("c = ")] for p in pts])
        else:
            out.append("none")
    return "\n".join(out) + "\n"


def format_text(d: RunDiff) -> str:
    """The default readable table: headline first, provenance, one table per metric, notes, models, unmatched points."""
    return _render(d, text_table, md=False)


def format_markdown(d: RunDiff) -> str:
    """The same content as :func:`format_text` as Markdown (headline first, in bold)."""
    return _render(d, _md_table, md=True)


CSV_FIELDS = ("scope", "model", "engine", "input_len", "output_len", "concurrency", "metric", "unit", "a", "b",
              "change", "p_value", "n_a", "n_b", "p_floor", "sample_unit", "significant", "verdict", "note",
              "load", "rate_rps", "q_value", "effect", "rate_a_rps", "max_concurrency",
              "variant", "ci95_a_low", "ci95_a_high", "ci95_b_low", "ci95_b_high")
# an open-loop point: its load pattern, rate (B's; A's matched by its place in the sweep in rate_a_rps) and cap;
# closed: "closed", empty.  variant: the server setting; ci95_*: each side's 95 % interval over repeats (empty under
# two repeats).  Each added last: the columns before keep their places.


def format_csv(d: RunDiff) -> str:
    """One CSV row per (point, metric) (scope ``point``), per model figure (``model``) and per
    unmatched point (``only_a`` / ``only_b``); changes are fractions.  The headline is not part
    of the CSV (the CLI prints it to stderr)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for c in d.changes:
        row = {k: v for k, v in asdict(c).items() if k in CSV_FIELDS}
        for side, ci in (("a", c.ci95_a), ("b", c.ci95_b)):
            if ci:
                row[f"ci95_{side}_low"], row[f"ci95_{side}_high"] = ci
        w.writerow({"scope": "point", **row})
    for m in d.models:
        w.writerow({"scope": "model", "model": m.model, "engine": m.engine, "variant": m.variant, "input_len": m.input_len,
                    "output_len": m.output_len, "metric": m.field, "a": m.a, "b": m.b, "change": m.change,
                    "verdict": "changed" if m.changed else "same"})
    for scope, pts in (("only_a", d.only_in_a), ("only_b", d.only_in_b)):
        for p in pts:
            w.writerow({"scope": scope, "load": "closed", **{k: v for k, v in p.items() if k in CSV_FIELDS}})
    return buf.getvalue()


def format_json(d: RunDiff) -> str:
    """The ``--json`` document (:meth:`RunDiff.as_dict`), indented."""
    return json.dumps(d.as_dict(), indent=1) + "\n"
