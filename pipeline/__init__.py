"""batchmark: how LLM inference throughput and latency change as requests are batched, and why.

Stages (one module each, data flows one way):
config -> sweep (engines/) -> request records (runs.py) -> point summaries (metrics.py)
-> analysis (analysis.py) -> pages (pages/) -> site (mkdocs build).
"""

__version__ = "0.1.0"
