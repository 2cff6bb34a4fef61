"""What the command line says of the files an import reads (``batchmark import``'s options), as one value."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImportOptions:
    """``--model`` (every point's model, over what the file names), ``--engine`` (the serving engine behind it),
    ``--max-failure-rate`` (the failed fraction past which a point is refused, 0–1; None: the format's default),
    ``--quant`` (every model's weight format), ``--concurrency`` / ``--rate`` (what a result that states neither ran
    at: requests in flight, requests/s), ``--kv-cache`` (the KV-cache dtype served with); None: not said."""

    model: str | None = None
    engine: str | None = None
    max_failure_rate: float | None = None
    quant: str | None = None
    concurrency: int | None = None
    rate: float | None = None
    kv_cache: str | None = None
