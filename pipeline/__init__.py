"""batchmark: how LLM inference throughput and latency change as requests are batched, and why.

Stages (one module each, data flows one way):
config -> sweep (backends/, loadgen/) -> request records (store/) -> point summaries (metrics/)
-> analysis (analysis/) -> pages (pages/) -> site (mkdocs build).
"""

__version__ = "0.1.0"
