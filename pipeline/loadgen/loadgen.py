"""The streaming load generator shared by the served backends (``openai``, ``vllm``).

Kept importable as one module; each concern lives in its own:

- :mod:`pipeline.loadgen.client`: the HTTP client — request bodies, one streaming request, sessions,
  feature detection;
- :mod:`pipeline.loadgen.streamrecord`: a stream's SSE events and token accounting (:func:`finalize`);
- :mod:`pipeline.loadgen.prompts`: prompts of an exact length in tokens;
- :mod:`pipeline.loadgen.scheduler`: the closed and open loops (warm-up, cool-down, aborts) and the measured window,
  each run from one :class:`pipeline.loadgen.repeatplan.RepeatPlan`.
"""

from __future__ import annotations

from pipeline.loadgen.client import (OPTIONAL_FIELDS, READ_BUFSIZE, Endpoint, Target, build_body,  # noqa: F401
                                     detect_features, make_session, stream_one)
from pipeline.loadgen.prompts import make_prompts, prompt_vocab  # noqa: F401
from pipeline.loadgen.streamrecord import (Features, RawStream, chunk_counts, evidence, finalize,  # noqa: F401
                                           parse_event, per_chunk_usage)
from pipeline.loadgen.scheduler import (ClosedLoop, Hooks, Limits, LoopResult, OpenLoop,  # noqa: F401
                                        RepeatPlan, closed_loop, default_requests, measured_window, run_repeat,
                                        schedule_gaps)
from pipeline.loadgen.chunkcounts import reconcile_counts  # noqa: F401  (kept importable from here)
