"""The per-point tables of a workload on its model page, as formatted cells (numbers with separators, latencies in ms,
MBU/MFU, regime, the client's figures, and a second table of each stream's figures): the arithmetic the templates
would otherwise do, done once.

A figure with a 95 % interval over the point's repeats (``ci95``, two repeats or more; Student's t,
:func:`pipeline.metrics.definitions.repeat_ci95`) reads ``1,234.5 ±5.6``: the figure, then half the interval's width,
as ``batchmark show`` prints it (:mod:`pipeline.views.showtable` says why ± and not the bounds)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from pipeline.metrics import registry
from pipeline.pages.escape import md_text
from pipeline.pages.views import WorkloadView


def fmt(value: Any, digits: int = 1) -> str:
    """A number for a page: thousands separators and ``digits`` decimals; None as ``–``; anything else as text."""
    if value is None:
        return "–"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,.{digits}f}"
    return str(value)


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


def metric_cell(p: dict[str, Any], name: str, stat: str | None = None, ci: bool = False) -> str:
    """A point's page cell of a registry metric (:mod:`pipeline.metrics.registry`): its value
    (:meth:`~pipeline.metrics.registry.Metric.value_in`) × the metric's display scale with its page digits
    (:func:`fmt`), with ``±`` its interval over repeats when ``ci`` (:func:`with_ci`); ``–`` when unknown."""
    m = registry.metric(name)
    v, d = m.value_in(p, stat), m.display
    if ci:
        return with_ci(v, p, m.repeat_sample_of(stat or "value") or name, d.scale, d.digits)
    return fmt(None if v is None else v * d.scale, d.digits)


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
        rows.append({"c": str(c), "output": metric_cell(p, "output_throughput_tok_s", ci=True),
                     "per_user": metric_cell(p, "per_user_tok_s"),
                     "ttft_p50": metric_cell(p, "ttft_s", "p50", ci=True), "ttft_p99": metric_cell(p, "ttft_s", "p99"),
                     "tpot_p50": metric_cell(p, "tpot_s", "p50", ci=True), "tpot_p99": metric_cell(p, "tpot_s", "p99"),
                     "roofline": fmt(a.get("roofline_tok_s")), "mbu": w.mbu_cell(c), "mfu": w.mfu_cell(c),
                     "regime": regime + (f" ({kv * 100:,.1f} %)" if kv is not None else ""),
                     "client": client_cell(p), "note": w.note(c) or "–"})
    return rows


def client_cell(p: dict[str, Any]) -> str | Markup:
    """A point's client cell: requests in flight as the client saw them, its CPU (% of a core; both with ± their
    interval over repeats, :func:`with_ci`) and median event-loop wait of a ready read (ms, ``PointSummary.client_read_wait_s``), ``CLIENT-BOUND`` first when the client was the limit (:mod:`pipeline.metrics.clientside`); ``–`` without."""
    if p.get("achieved_concurrency") is None and p.get("client_cpu_share") is None:
        return "–"
    cell = (f"{metric_cell(p, 'achieved_concurrency', ci=True)} in flight, "
            f"CPU {metric_cell(p, 'client_cpu_share', ci=True)} %, read wait {metric_cell(p, 'client_read_wait_s')} ms")
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
    if not any(p.get(name) is not None for p in w.points for name, _, _ in STREAM_COLUMNS.values()):
        return []
    return [{"c": str(p["concurrency"]), **{key: metric_cell(p, *col) for key, col in STREAM_COLUMNS.items()}}
            for p in w.points]


#: The stream table's cells: its key → (registry metric, statistic or None, ``±`` its interval).
STREAM_COLUMNS = {"first_byte_p50": ("first_byte_s", "p50", False), "ttst_p50": ("ttst_s", "p50", True),
                  "tokens_per_chunk": ("tokens_per_chunk", None, False),
                  "chunks_per_request": ("chunks_per_request", None, False),
                  "delivered": ("delivered_output_throughput_tok_s", None, True)}


def ci_note(*tables: list[dict[str, str]]) -> str | None:
    """:data:`CI_NOTE` when a cell of ``tables`` (rows of :func:`point_rows`, :func:`stream_rows`) carries a ±, else
    None."""
    return CI_NOTE if any(" ±" in cell for rows in tables for row in rows for cell in row.values()) else None
