"""Failed and partial work must not look like a measurement, with real server processes.

Fault kind: a point where some requests got HTTP 503 was stored as a plain point and the
analysis took its peak and scaling efficiency from it.  Here c = 1 and c = 2 are measured
against the correct fake server and c = 4 against one that answers every 4th request with 503
(``fake_stream_server.py --fault fail503``).  The fake server is not capacity-bound, so c = 4
has a throughput of its own that, before the fix, entered the peak and the scaling efficiency.  Expected
(worked from the server's rule): about a quarter of c = 4's measured requests fail, above the
default ``max_failure_rate`` 0.05, so c = 4 is flagged and excluded: the peak is at c = 2 and
the scaling efficiency has no entry for 4; ``show`` (JSON and text), the Benchmarks page and
Home say so.
"""

from __future__ import annotations

import html

import json
import subprocess
import sys

import pytest

from pipeline.analysis import stages
from pipeline.store import runs
from pipeline.config.sweepconfig import parse_config
from pipeline.backends import get_backend
from pipeline.core.records import PointKey
from pipeline.views.show import format_table, show_run
from tests.integration.test_served_token_truth import start_server


@pytest.fixture(scope="module")
def flagged_run(tmp_path_factory):
    from tests.conftest import make_scratch_root
    from tests.integration.served_helpers import build_tokenizer

    base = tmp_path_factory.mktemp("failed-points")
    root = make_scratch_root(base)
    tok = base / "tok"
    build_tokenizer(tok)
    mp = pytest.MonkeyPatch()
    mp.setenv("BATCHMARK_ROOT", str(root))
    run_dir = root / "data" / "runs" / "20260101T000000Z-test"
    cfg_dict = {"name": "t", "hardware": "cpu", "backend": "openai", "input_len": 8, "output_len": 16,
                "concurrency": [1, 2, 4], "repeats": 1,
                "openai": {"base_url": "http://127.0.0.1:1/v1", "requests_per_point": 8, "tokenizer": str(tok),
                           "timeout_s": 5},
                "models": [{"name": "m", "served_name": "m"}]}
    runs.create_run(run_dir, {"source": "measured", "config": parse_config(cfg_dict).model_dump(mode="json"),
                              "hardware": {"name": "cpu"}})
    for c, fault in ((1, "none"), (2, "none"), (4, "fail503")):
        proc, url = start_server(fault, base)
        try:
            cfg = parse_config({**cfg_dict, "openai": {**cfg_dict["openai"], "base_url": url}})
            engine = get_backend(cfg)
            engine.load(cfg.models[0])
            runs.write_point(run_dir, engine.measure(PointKey("m", "openai", 8, 16, c), 1, True, 0))
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    runs.complete_run(run_dir, derive=stages.write_derived)  # published with its derived files, as the sweep does
    yield root, run_dir
    mp.undo()


def test_show_flags_and_excludes_the_failing_point(flagged_run):
    root, run_dir = flagged_run
    doc = show_run(run_dir)
    pts = {p["concurrency"]: p for p in doc["points"]}
    bad = pts[4]
    assert bad["failed"] >= 1 and 0.05 < bad["failure_rate"] <= 0.5
    assert bad["failure_rate"] == pytest.approx(bad["failed"] / (bad["failed"] + bad["completed"]))
    assert "failed_requests" in bad["caveats"] and bad["excluded"] is True
    assert "max_failure_rate" in bad["excluded_reason"]
    for c in (1, 2):
        assert pts[c]["caveats"] == [] and pts[c]["excluded"] is False and pts[c]["failed"] == 0
    # c = 4 has a throughput of its own, but the peak comes from c = 1 and 2 only
    assert bad["output_throughput_tok_s"] > 0
    (m,) = doc["models"]
    assert m["peak_output_throughput_tok_s"] == max(pts[1]["output_throughput_tok_s"], pts[2]["output_throughput_tok_s"])
    assert set(m["scaling_efficiency"]) == {"1", "2"}
    assert m["excluded_concurrency"] == [4]
    # every contract field is still there
    assert {"model", "engine", "concurrency", "completed", "failed", "output_throughput_tok_s", "mbu", "mfu"} <= set(bad)
    text = format_table(doc)
    line4 = next(ln for ln in text.splitlines() if ln.startswith("m ") and ln.split()[1] == "4")
    assert "EXCLUDED" in line4 and "failed" in line4
    assert "left out: c = 4" in text


def test_show_cli_json_has_the_flags(flagged_run):
    root, run_dir = flagged_run
    res = subprocess.run([sys.executable, "-m", "pipeline", "show", str(run_dir), "--json"], capture_output=True,
                         text=True, env={**__import__("os").environ, "BATCHMARK_ROOT": str(root)}, timeout=300)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [p["excluded"] for p in doc["points"]] == [False, False, True]


def test_pages_mark_the_flagged_point(flagged_run, tmp_path):
    from pipeline.pages.render import render_site

    root, run_dir = flagged_run
    render_site(tmp_path / "docs", runs=[str(run_dir)], runs_dir=run_dir.parent)
    # strings from data are escaped as character references where they land: read them back as text
    bench = html.unescape((tmp_path / "docs" / "models" / "m.md").read_text())  # model "m"'s own page
    home = html.unescape((tmp_path / "docs" / "index.md").read_text())
    method = html.unescape((tmp_path / "docs" / "methodology.md").read_text())
    assert "Points left out" in bench and "c = 4: 2 of 8 requests failed" in bench and "max_failure_rate" in bench
    assert "| 4 |" in bench and "EXCLUDED: 2 of 8 failed (25%)" in bench
    assert "c = 4 excluded (failures)" in home
    # the counts per source for the run: every completed request took the server's usage
    assert "usage" in method and "Which token count" in method
