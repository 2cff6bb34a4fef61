"""The per-point table of a workload on its model page, as formatted cells (numbers with separators, latencies in ms,
MBU/MFU, regime, the client's figures): the arithmetic the templates would otherwise do, done once."""

from __future__ import annotations

from typing import Any

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


def point_rows(w: WorkloadView) -> list[dict[str, str]]:
    """The per-point table of a workload (model pages): one dict of formatted cells per point, in concurrency order.

    Keys: ``c``, ``output``, ``per_user`` (tok/s), ``ttft_p50``, ``ttft_p99``, ``tpot_p50``, ``tpot_p99`` (ms, two
    decimals), ``roofline`` (tok/s), ``mbu`` (:meth:`WorkloadView.mbu_cell`), ``mfu``, ``regime`` (what the point
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
        rows.append({"c": str(c), "output": fmt(p.get("output_throughput_tok_s")), "per_user": fmt(p.get("per_user_tok_s")),
                     "ttft_p50": fmt(_ms(p.get("ttft_s"), "p50"), 2), "ttft_p99": fmt(_ms(p.get("ttft_s"), "p99"), 2),
                     "tpot_p50": fmt(_ms(p.get("tpot_s"), "p50"), 2), "tpot_p99": fmt(_ms(p.get("tpot_s"), "p99"), 2),
                     "roofline": fmt(a.get("roofline_tok_s")), "mbu": w.mbu_cell(c), "mfu": w.mfu_cell(c),
                     "regime": regime + (f" ({kv * 100:,.1f} %)" if kv is not None else ""),
                     "client": client_cell(p), "note": w.note(c) or "–"})
    return rows


def client_cell(p: dict[str, Any]) -> str:
    """A point's client cell: requests in flight as the client saw them, its CPU (% of a core) and median event-loop
    wait of a ready read (ms, ``PointSummary.client_read_wait_s``), ``CLIENT-BOUND`` first when the client was the limit (:mod:`pipeline.metrics.clientside`); ``–`` without."""
    if p.get("achieved_concurrency") is None and p.get("client_cpu_share") is None:
        return "–"
    wait = p.get("client_read_wait_s")
    cpu = p.get("client_cpu_share")
    cell = (f"{fmt(p.get('achieved_concurrency'))} in flight, CPU {fmt(None if cpu is None else cpu * 100, 0)} %, "
            f"read wait {fmt(None if wait is None else wait * 1e3, 1)} ms")
    return ("**CLIENT-BOUND** " if p.get("client_bound") else "") + cell
