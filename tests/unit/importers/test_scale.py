"""Large imports stay linear: the rewritten hot spots give what the old code gave.

Fault kind pinned: quadratic import and analysis (a scan of every point per workload, a grid
check over the product of every PP × TG × B); the speed itself is measured by
``benchmarks/import_scale.py``, never here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pipeline.analysis.analyze import analyze
from pipeline.core.errors import BatchmarkError
from pipeline.importers.base import summary
from pipeline.core.pointsummary import distribution
from pipeline.importers.llama_batched_bench import _check_grid


def _pt(model: str, pp: int, tg: int, b: int, tok_s: float = 10.0):
    return summary(model, "llama.cpp", pp, tg, b, output_throughput_tok_s=tok_s, tpot_s=distribution(p50=0.1),
                   samples={"output_throughput_tok_s": [tok_s]}, server=None)


def test_as_dict_is_what_dataclasses_asdict_gives():
    s = _pt("m", 1, 2, 4)
    s.caveats = {"x": 1}
    s.server = {"kv_cache_usage_max": None}
    d = s.as_dict()
    assert d == dataclasses.asdict(s) and list(d) == list(dataclasses.asdict(s))
    d["samples"]["output_throughput_tok_s"].append(1.0)  # a copy, not the summary's own list
    assert s.samples["output_throughput_tok_s"] == [10.0]


def test_grid_check_names_the_first_missing_row_and_skips_rows_past_n_kv_max():
    full = [_pt("m", pp, 32, b) for pp in (512, 4096) for b in (1, 2, 4)]
    _check_grid(Path("t.md"), 3, full, {})
    # B·(PP + TG) = 4 × 4128 = 16512 > 10000: llama-batched-bench skips that row, so it may be absent
    _check_grid(Path("t.md"), 3, full[:-1], {"n_kv_max": "10000"})
    with pytest.raises(BatchmarkError, match="line 3: table lacks the row PP=4096 TG=32 B=4"):
        _check_grid(Path("t.md"), 3, full[:-1], {})
    with pytest.raises(BatchmarkError, match="lacks the row PP=512 TG=32 B=2"):
        _check_grid(Path("t.md"), 3, [p for p in full if (p.input_len, p.concurrency) != (512, 2)],
                    {"n_kv_max": "10000"})


def test_analysis_groups_interleaved_workloads():
    # two workloads whose points arrive interleaved: each gets its own curve
    pts = []
    for b, (ta, tb) in zip((1, 2, 4, 8), ((10, 5), (19, 10), (21, 20), (22, 40))):
        pts += [_pt("a", 512, 32, b, ta), _pt("b", 512, 32, b, tb)]
    models = {m["model"]: m for m in analyze(pts, {}, {"name": "h"})["models"]}
    # a: gains 90 %, 10.5 %, 4.8 % → knee at c = 2; b: doubles every step → not reached
    assert models["a"]["knee_concurrency"] == 2 and models["a"]["peak_output_throughput_tok_s"] == 22
    assert models["b"]["knee_concurrency"] is None and models["b"]["peak_concurrency"] == 8
    assert models["a"]["regimes"] == {"1": "limits_unknown", "2": "limits_unknown", "4": "limits_unknown",
                                      "8": "limits_unknown"}
