"""The per-point tables of a workload on its model page, as formatted cells (numbers with separators, latencies in ms,
MBU/MFU, regime, the client's figures, and a second table of each stream's figures): the arithmetic the templates
would otherwise do, done once.

A figure with a 95 % interval over the point's repeats (``ci95``, two repeats or more; Student's t,
:func:`pipeline.metrics.definitions.repeat_ci95`) reads ``1,234.5 ±5.6``: the figure, then half the interval's width,
as ``batchmark show`` prints it (:mod:`pipeline.views.showtable` says why ± and not the bounds)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from pipeline.pages.escape import md_text
from pipeline.pages.views import WorkloadView


def fmt(value: Any, digits: int = 1) -> str:
    """A number for a page: thousands separators and ``digits`` decimals; None as ``–``; anything else as text."""
    if value is None:
        return "–"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,.{digits}f}"
    return str(value)


def _ms(dist: dict[str, Any] | None, q: str) -> float | None:
    """Quantile ``q`` of a latency distribution (seconds) in milliseconds, or None."""
    v = (dist or {}).get(q)
    return None if v is None else v * 1e3


#: The pages' ``±`` in words (under a table with one).
CI_NOTE = ("± is half the 95 % confidence interval of the mean over the point's repeats (Student's t; shown with 2 "
           "repeats or more); the figure before it is the median over repeats (throughput, in flight) or the "
           "percentile over requests (latencies).")


def with_ci(value: float | None, p: dict[str, Any], key: str, scale: float = 1.0, digits: int = 1) -> str:
    """``value × scale`` as :func:`fmt` writes it, then `` ±h`` where the point has an interval of ``key`` (a
    ``samples`` key of ``ci95``; h = half its width × ``scale``, same digits); ``–`` when ``value`` is None."""
    ci = (p.get("ci95") or {}).get(key)
    text = fmt(None if value is None else value * scale, digits)
    if value is None or not ci or len(ci) != 2 or None in ci:
        return text
    return f"{text} ±{fmt((ci[1] - ci[0]) / 2 * scale, digits)}"


def point_rows(w: WorkloadView) -> list[dict[str, str]]:
    """The per-point table of a workload (model pages): one dict of formatted cells per point, in concurrency order.

    Keys: ``c``, ``output``, ``per_user`` (tok/s), ``ttft_p50``, ``ttft_p99``, ``tpot_p50``, ``tpot_p99`` (ms, two
    decimals; ``output`` and the p50s with ± their interval over repeats, :func:`with_ci`), ``roofline`` (tok/s), ``mbu`` (:meth:`WorkloadView.mbu_cell`), ``mfu``, ``regime`` (what the point
    measured, with the KV cache in use in %), ``client`` (:func:`client_cell`), ``note`` (:meth:`WorkloadView.note`, ``–`` when none).  Arithmetic that
    the page templates did (seconds → ms, a scan of the analysis per point) is done here, once.
    """
    aps = {a["concurrency"]: a for a in w.analysis_points}
    rows = []
    for p in w.points:
        c = p["concurrency"]
        a = aps.get(c, {})
        regime = (a.get("regime") or "–").replace("_", " ")
        kv = (a.get("server") or {}).get("kv_cache_usage_max")
        rows.append({"c": str(c), "output": with_ci(p.get("output_throughput_tok_s"), p, "output_throughput_tok_s"),
                     "per_user": fmt(p.get("per_user_tok_s")),
                     "ttft_p50": with_ci((p.get("ttft_s") or {}).get("p50"), p, "ttft_s_per_repeat", 1e3, 2),
                     "ttft_p99": fmt(_ms(p.get("ttft_s"), "p99"), 2),
                     "tpot_p50": with_ci((p.get("tpot_s") or {}).get("p50"), p, "tpot_s_per_repeat", 1e3, 2),
                     "tpot_p99": fmt(_ms(p.get("tpot_s"), "p99"), 2),
                     "roofline": fmt(a.get("roofline_tok_s")), "mbu": w.mbu_cell(c), "mfu": w.mfu_cell(c),
                     "regime": regime + (f" ({kv * 100:,.1f} %)" if kv is not None else ""),
                     "client": client_cell(p), "note": w.note(c) or "–"})
    return rows


def client_cell(p: dict[str, Any]) -> str | Markup:
    """A point's client cell: requests in flight as the client saw them, its CPU (% of a core; both with ± their
    interval over repeats, :func:`with_ci`) and median event-loop wait of a ready read (ms, ``PointSummary.client_read_wait_s``), ``CLIENT-BOUND`` first when the client was the limit (:mod:`pipeline.metrics.clientside`); ``–`` without."""
    if p.get("achieved_concurrency") is None and p.get("client_cpu_share") is None:
        return "–"
    wait = p.get("client_read_wait_s")
    cpu = p.get("client_cpu_share")
    cell = (f"{with_ci(p.get('achieved_concurrency'), p, 'achieved_concurrency')} in flight, "
            f"CPU {with_ci(cpu, p, 'client_cpu_share', 100, 0)} %, read wait {fmt(None if wait is None else wait * 1e3, 1)} ms")
    if not p.get("client_bound"):
        return cell
    return Markup("**CLIENT-BOUND** ") + md_text(cell)  # bold on the page (a plain str's asterisks are escaped)


def stream_rows(w: WorkloadView) -> list[dict[str, str]]:
    """The second per-point table of a workload: what each stream looked like to the client, one dict of formatted
    cells per point in concurrency order, ``[]`` when no point has any of its figures (imports).

    Keys: ``c``, ``first_byte_p50`` (a request's start to its response headers, ms), ``ttst_p50`` (time to second
    token, ms, with ± its interval over repeats), ``tokens_per_chunk``, ``chunks_per_request``, ``delivered`` (tokens
    the server delivered in the measured window, tok/s, ±); :mod:`pipeline.metrics.clientside` and
    :mod:`pipeline.metrics.reads` define them.
    """
    keys = ("first_byte_s", "ttst_s", "tokens_per_chunk", "chunks_per_request", "delivered_output_throughput_tok_s")
    if not any(p.get(k) is not None for p in w.points for k in keys):
        return []
    return [{"c": str(p["concurrency"]), "first_byte_p50": fmt(_ms(p.get("first_byte_s"), "p50"), 2),
             "ttst_p50": with_ci((p.get("ttst_s") or {}).get("p50"), p, "ttst_s_per_repeat", 1e3, 2),
             "tokens_per_chunk": fmt(p.get("tokens_per_chunk"), 2), "chunks_per_request": fmt(p.get("chunks_per_request")),
             "delivered": with_ci(p.get("delivered_output_throughput_tok_s"), p, "delivered_output_throughput_tok_s")}
            for p in w.points]


def ci_note(*tables: list[dict[str, str]]) -> str | None:
    """:data:`CI_NOTE` when a cell of ``tables`` (rows of :func:`point_rows`, :func:`stream_rows`) carries a ±, else
    None."""
    return CI_NOTE if any(" ±" in cell for rows in tables for row in rows for cell in row.values()) else None
