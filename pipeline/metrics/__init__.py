"""Request records → point summaries: the metric definitions (TTFT, TPOT, ITL, E2EL, output throughput, one
function per formula), goodput and SLO attainment, and a point's summary computed over its arrays (pure).

May import: pipeline.core, pipeline.store."""
