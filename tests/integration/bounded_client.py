"""A client process for the hostile-stream tests: measures two points of 16 tokens and says what its memory did.

``python bounded_client.py URL TOKENIZER TRANSPORT TIMEOUT_S`` measures a first point (the server's correct
streams: every import and allocation of a measurement made once), reads its peak resident memory
(``resource.getrusage``), measures a second point (the server's hostile streams), reads it again, and prints one
JSON object: ``{"errors": [each measured request's error], "took_s": the second point's wall time,
"rss_before_kib", "rss_after_kib"}``.
"""

from __future__ import annotations

import json
import resource
import sys
import time

from pipeline.config.sweepconfig import parse_config
from pipeline.core.records import PointKey
from pipeline.backends import get_backend


def main() -> None:
    url, tok, transport, timeout_s = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    cfg = parse_config({"name": "t", "hardware": "cpu", "backend": "openai", "input_len": 8, "output_len": 16,
                        "concurrency": [1], "repeats": 1,
                        "openai": {"base_url": url, "endpoint": "completions", "requests_per_point": 2,
                                   "tokenizer": tok, "timeout_s": timeout_s, "transport": transport},
                        "models": [{"name": "m", "served_name": "m"}]})
    engine = get_backend(cfg)
    engine.load(cfg.models[0])
    key = PointKey("m", "openai", 8, 16, 1)
    first = engine.measure(key, 1, False, 0)
    ok = [r.error for rep in first.repeats for r in rep.requests]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.monotonic()
    rec = engine.measure(key, 1, False, 1)
    took = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"first_errors": ok, "errors": [r.error for rep in rec.repeats for r in rep.requests],
                      "took_s": took, "rss_before_kib": before, "rss_after_kib": after}))


if __name__ == "__main__":
    main()
