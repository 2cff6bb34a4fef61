"""Breaker round of issue 23 (files people really have): other versions of the peers' result files.

Each test builds a variant of a peer's output from the layout its own source writes (named in the test), and
asserts the value worked from that file by the peer's documented definition.  Inputs that are files sit under
tests/data/cases-breaker/ with a README.txt saying where each field layout comes from.
"""

from __future__ import annotations

import copy
import json

import pytest

from pipeline.cli import main
from pipeline.errors import BatchmarkError
from pipeline.importers import parse

from tests.conftest import DATA

CASES = DATA / "cases-breaker"


def _write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2))
    return path


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


# -- GuideLLM 0.2–0.3: request_totals on the benchmark, not under metrics -----------------------

def _guidellm_03(errored: int):
    """The sample report in GuideLLM 0.3's layout: ``GenerativeBenchmark.request_totals`` (guidellm v0.3.0
    src/guidellm/benchmark/benchmark.py) sits on the benchmark; ``metrics.request_totals`` is 0.4's place."""
    d = json.loads((DATA / "guidellm" / "benchmarks.json").read_text())
    for b in d["benchmarks"]:
        b["request_totals"] = b["metrics"].pop("request_totals")
    t = d["benchmarks"][1]["request_totals"]  # the concurrent@8 benchmark: 40 successful
    t["errored"], t["total"] = errored, t["successful"] + errored
    return d


def test_guidellm_03_errored_count_on_the_benchmark_is_read(tmp_path):
    """Was: failed 0 (the errored count of a 0.3 report was never read).  1 errored of 41 (2.4 %): imported, failed 1;
    10 of 50 (20 %, above the 5 % limit): refused naming the field."""
    (p,) = [p for p in parse("guidellm", [_write(tmp_path, "g.json", _guidellm_03(1))], model="m").summaries
            if p.concurrency == 8]
    assert (p.completed, p.failed) == (40, 1)
    with pytest.raises(BatchmarkError, match=r"benchmarks\[1\].request_totals: 10 of 50 requests failed"):
        parse("guidellm", [_write(tmp_path, "g.json", _guidellm_03(10))], model="m")


def test_guidellm_without_request_totals_has_failures_unknown(tmp_path):
    """A report that states no errored count: failures unknown (caveat, failure rate null), never 0 as measured."""
    d = json.loads((DATA / "guidellm" / "benchmarks.json").read_text())
    for b in d["benchmarks"]:
        del b["metrics"]["request_totals"]
    pts = parse("guidellm", [_write(tmp_path, "g.json", d)], model="m").summaries
    assert [(p.completed, p.caveats, p.failure_rate) for p in pts] == [(40, {"failed_count_unknown": 40}, None)] * 3
