"""``batchmark show``'s human tables: a row of cells per point of the show document (:mod:`pipeline.views.show`), the
server's figures in one table and the client's and the stream's in a second, each figure with its confidence
interval over repeats where the point has one (pure; text only).

A figure with a ``ci95`` (the point summary's 95 % Student-t interval of the mean of its per-repeat values, two
repeats or more; :func:`pipeline.metrics.definitions.repeat_ci95`) reads ``1234.5 ±5.6``: the figure, then half the
interval's width.  One number a cell keeps the columns narrow and right-aligned; the interval is symmetric about the
mean of the repeats, so ± loses only its centre, which is near the figure shown (the median over repeats, or the
percentile over requests) but not the same number; the exact ``[low, high]`` is ``ci95`` in ``show --json``.
"""

from __future__ import annotations

from typing import Any

from pipeline.core.records import DEFAULT_VARIANT
from pipeline.core.texttable import text_table
from pipeline.core.words import REGIME_TEXT
from pipeline.metrics import registry

#: The show table's ``±`` in words (printed under a table that has one).
CI_NOTE = ("± is half the 95 % confidence interval of the mean over repeats (Student's t, 2 repeats or more; "
           "the exact bounds are ci95 in --json); the figure before it is the median over repeats (throughputs, "
           "in flight, CPU) or the percentile over requests (latencies)")

#: The server table's figures as (registry metric, statistic or None for the figure, ``±`` its interval): the
#: throughputs, then TTFT, TPOT, ITL and E2EL (median, tails); the server's own cells are between and after them.
THROUGHPUT_COLUMNS = (("output_throughput_tok_s", None, True), ("per_user_tok_s", None, False))
LATENCY_COLUMNS = (("ttft_s", "p50", True), ("ttft_s", "p99", False),
                   *((name, stat, stat == "p50") for name in ("tpot_s", "itl_s", "e2el_s") for stat in ("p50", "p95", "p99.9")))
#: The client-and-stream table's figures (after the point's model, variant, shape, c), as :data:`LATENCY_COLUMNS`.
CLIENT_COLUMNS = (("achieved_concurrency", None, True), ("client_cpu_share", None, True), ("client_read_wait_s", None, False),
                  ("delivered_output_throughput_tok_s", None, True), ("connect_s", "p50", False),
                  ("first_byte_s", "p50", False), ("ttst_s", "p50", True), ("tokens_per_chunk", None, False),
                  ("chunks_per_request", None, False))


def header(columns: tuple[tuple[str, str | None, bool], ...]) -> list[str]:
    """The headers of ``columns`` (:data:`LATENCY_COLUMNS` …): each metric's display word, statistic and unit
    (:meth:`pipeline.metrics.registry.Display.header`: ``TTFT p50 ms``)."""
    return [registry.metric(name).display.header(stat) for name, stat, _ in columns]


#: The client-and-stream table's column headers after the point's (model, variant, shape, c).
CLIENT_HEADER = header(CLIENT_COLUMNS)


def metric_cell(p: dict[str, Any], name: str, stat: str | None = None, ci: bool = False) -> str:
    """A point's cell of a registry metric (:mod:`pipeline.metrics.registry`): its value (:meth:`~pipeline.metrics.
    registry.Metric.value_in`) in the metric's display scale and format, with ``±`` its interval over repeats when
    ``ci`` (:func:`with_ci`, the metric's per-repeat ``samples`` key); ``-`` when unknown."""
    m = registry.metric(name)
    v, d = m.value_in(p, stat), m.display
    return with_ci(v, p, m.repeat_sample_of(stat or "value") or name, d.scale, d.text) if ci else fmt(v, d.scale, d.text)


def metric_cells(p: dict[str, Any], columns: tuple[tuple[str, str | None, bool], ...]) -> list[str]:
    """A point's cells of ``columns`` (:func:`metric_cell` of each)."""
    return [metric_cell(p, name, stat, ci) for name, stat, ci in columns]


def fmt(v: float | None, scale: float = 1.0, spec: str = "{:.1f}") -> str:
    """``v × scale`` in ``spec`` (one decimal by default), ``-`` when unknown."""
    return spec.format(v * scale) if v is not None else "-"


def ci_half(p: dict[str, Any], key: str, scale: float = 1.0) -> float | None:
    """Half the width of the point's 95 % interval of ``key`` (a ``samples`` key of ``ci95``) × ``scale``; None
    without one (one repeat, or a summary written before it was kept)."""
    ci = (p.get("ci95") or {}).get(key)
    if not ci or len(ci) != 2 or ci[0] is None or ci[1] is None:
        return None
    return (ci[1] - ci[0]) / 2 * scale


def with_ci(v: float | None, p: dict[str, Any], key: str, scale: float = 1.0, spec: str = "{:.1f}") -> str:
    """A cell: ``v × scale`` in ``spec``, then `` ±h`` (h: :func:`ci_half` of ``key``, in the same ``spec``) where the
    point has an interval and the figure is known; ``-`` when unknown."""
    half = ci_half(p, key, scale)
    return fmt(v, scale, spec) + (f" ±{spec.format(half)}" if v is not None and half is not None else "")


def point_label(p: dict[str, Any]) -> str:
    """The table's point column: the concurrency (closed loop), or ``poisson 2.4/s ≤64`` (open loop, cap after ≤)."""
    if p.get("load", "closed") == "closed":
        return str(p["concurrency"])
    cap = f" ≤{p['max_concurrency']}" if p.get("max_concurrency") else ""
    late = " LATE" if p.get("schedule_kept") is False else ""
    return f"{p['load']} {p['rate_rps']:g}/s{cap}{late}"


def _lead(p: dict[str, Any], tuned: bool, shaped: bool) -> list[str]:
    """A row's first cells: the model, its variant (``tuned``), ``input/output`` (``shaped``), the point."""
    return [p["model"], *([p.get("variant") or DEFAULT_VARIANT] if tuned else []),
            *([f"{p['input_len']}/{p['output_len']}"] if shaped else []), point_label(p)]


def point_header(tuned: bool, shaped: bool) -> tuple[list[str], str]:
    """The server table's header and alignment (:func:`point_rows`)."""
    head = ["model", *(["variant"] if tuned else []), *(["in/out"] if shaped else []), "c",
            *header(THROUGHPUT_COLUMNS), "req/s", "total tok/s", "repeats max/min", *header(LATENCY_COLUMNS),
            registry.metric("mbu").display.header(), registry.metric("mfu").display.header(), "KV %", "regime; notes"]
    return head, "l" + "l" * (tuned + shaped) + "r" * (len(head) - 2 - tuned - shaped) + "l"


def point_rows(points: list[dict[str, Any]], noisy_probe: str | None, tuned: bool = False,
               shaped: bool = False) -> list[list[str]]:
    """The cells of each point's row of the server table (:func:`point_header`): throughputs in tok/s, latencies in
    ms, each p50 and the output throughput with ``±`` its interval (:func:`with_ci`: the per-repeat medians' and
    throughputs' ``ci95``), MBU marked ! when implausible and ? when the run's probe was noisy, MFU, KV %, regime
    and notes (:func:`point_note`)."""
    return [[*_lead(p, tuned, shaped), *metric_cells(p, THROUGHPUT_COLUMNS),
             fmt(p.get("request_throughput_rps"), 1, "{:.2f}"),
             fmt(p.get("total_token_throughput_tok_s")), fmt((p.get("repeat_spread") or {}).get("ratio"), 1, "{:.2f}x"),
             *metric_cells(p, LATENCY_COLUMNS),
             metric_cell(p, "mbu") + ("!" if p.get("implausible") or p.get("mbu_implausible") else
                                      "?" if noisy_probe and p["mbu"] is not None else ""),
             ("withheld" if p.get("mfu_withheld") else metric_cell(p, "mfu")) + ("!" if p.get("mfu_implausible") else ""),
             fmt((p.get("server") or {}).get("kv_cache_usage_max"), 100),
             f"{REGIME_TEXT.get(p.get('regime') or '', '-')}; {point_note(p)}".rstrip().rstrip(";")]
            for p in points]


def client_rows(points: list[dict[str, Any]], tuned: bool = False, shaped: bool = False) -> list[list[str]]:
    """The cells of each point's row of the client-and-stream table (:data:`CLIENT_HEADER`), ``[]`` when no point has
    any of its figures (the in-process backend, imports): requests in flight as the client saw them, its CPU (% of
    a core), a ready read's wait for its event loop (ms, ! on a client-bound point), what the server delivered in the
    window (tok/s), the HTTP phases (connect, first byte: p50 ms), the time to second token (p50 ms), tokens per
    chunk and chunks per request (:mod:`pipeline.metrics.clientside`, :mod:`pipeline.metrics.reads`)."""
    if not any(p.get(name) is not None for p in points for name, _, _ in CLIENT_COLUMNS):
        return []
    bound = [i for i, (name, _, _) in enumerate(CLIENT_COLUMNS) if name == "client_read_wait_s"]
    rows = []
    for p in points:
        cells = metric_cells(p, CLIENT_COLUMNS)
        for i in bound if p.get("client_bound") else []:
            cells[i] += "!"
        rows.append([*_lead(p, tuned, shaped), *cells])
    return rows


def point_tables(points: list[dict[str, Any]], noisy_probe: str | None, tuned: bool = False,
                 shaped: bool = False) -> list[str]:
    """The lines of show's point tables: the server's figures (:func:`point_rows`), then, where a point has any, the
    client's and the stream's (:func:`client_rows`), then :data:`CI_NOTE` where a cell carries a ``±``."""
    head, align = point_header(tuned, shaped)
    rows = point_rows(points, noisy_probe, tuned, shaped)
    lines = text_table(head, rows, align=align, rule=False)
    client = client_rows(points, tuned, shaped)
    if client:
        lead = 2 + tuned + shaped  # model, variant, shape, c
        lines += ["", "client and stream:"] + text_table(
            head[:lead] + CLIENT_HEADER, client, align="l" * (lead - 1) + "r" * (len(CLIENT_HEADER) + 1), rule=False)
    if any(" ±" in cell for row in rows + client for cell in row):
        lines += ["", CI_NOTE]
    return lines


def point_note(p: dict[str, Any]) -> str:
    """One short note on a point for tables (``""`` when it has no verdict flagged, no caveat, no exclusion), e.g.
    ``EXCLUDED: 2 of 8 failed (25 %); usage_missing ×3`` or ``caveats: …``."""
    if p.get("implausible"):
        head = f"IMPLAUSIBLE: {p['implausible']}"
        rest = point_note({**p, "implausible": None})
        return head + (f"; {rest}" if rest else "")
    if (p.get("quality") or {}).get("verdict") == "flagged":
        head = "FLAGGED: " + "; ".join(p["quality"]["reasons"])
        rest = point_note({**p, "quality": None})
        return head + (f"; {rest}" if rest else "")
    done, failed = p.get("completed") or 0, p.get("failed") or 0
    if p.get("completed") == 0 and not failed:  # every figure of the row is a dash: say why
        rest = point_note({**p, "completed": None})
        return "NOTHING MEASURED: no request completed or failed" + (f"; {rest}" if rest else "")
    if not p.get("caveats"):
        return ""
    head = "EXCLUDED" if p.get("excluded") else "caveats"
    parts = [f"{failed} of {done + failed} failed ({failed / (done + failed):.0%})"] if failed else []
    counts = p.get("caveat_counts") or {}
    parts += [f"{f} ×{counts[f]}" if f in counts else f for f in p["caveats"] if f != "failed_requests"]
    return f"{head}: " + "; ".join(parts)


#: Characters of one error shown by ``show`` (its full text: ``show --json``'s ``errors``, the records).
ERROR_CHARS = 200


def error_lines(points: list[dict[str, Any]]) -> list[str]:
    """The errors of the failed requests, one line per point that has any (``errors``: a point's first ten distinct,
    :func:`pipeline.metrics.summarize.summarize_point`), each cut to :data:`ERROR_CHARS`: what ``show`` promises a
    run where every point failed lists."""
    out = []
    for p in points:
        errs = [e if len(e) <= ERROR_CHARS else e[:ERROR_CHARS - 1] + "…" for e in p.get("errors") or [] if e]
        if errs:
            where = " · ".join(str(x) for x in (p.get("model"), p.get("variant") if p.get("variant") not in
                                                 (None, "default") else None,
                                                 f"in {p['input_len']} / out {p['output_len']}",
                                                 ("c = " if p.get("load", "closed") == "closed" else "")
                                                 + point_label(p)) if x)
            out.append(f"  {where}: {p.get('failed') or 0} failed: " + "; ".join(errs))
    return ["errors of the failed requests (first 10 distinct a point):", *out] if out else []
