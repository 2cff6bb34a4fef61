"""``diff`` and probed bandwidth: two runs whose probed bandwidths differ by more than
10 % are not comparable (above 5 %, comparable with a warning), on the first line, in the JSON, and
``--fail-above`` refuses to gate on them.  Values worked by hand from the committed runs' probes:
20261129T161329Z-vm 46.706 GB/s, 20261129T165000Z-vm 49.658 GB/s: 49.658 / 46.706 − 1 = +6.3 %."""

from __future__ import annotations

import json

from pipeline.analysis import stages
from pipeline.diff import comparability, rundiff as diff, report as diffreport

A, B = "20261129T161329Z-vm", "20261129T165000Z-vm"


def _prov(bw):
    return {"hardware": "cpu", "bandwidth_gb_s_probed": bw, "engine": "transformers", "workloads": ["in 64 / out 32"],
            "models": ["m"]}


def test_bandwidth_limits_worked_by_hand():
    rel, text, ok = comparability.bandwidth_words(_prov(100.0), _prov(104.0))  # 4 %: probe noise
    assert (round(rel, 3), text, ok) == (0.04, None, True)
    rel, text, ok = comparability.bandwidth_words(_prov(100.0), _prov(108.0))  # 8 %: warning
    assert ok and "+8.0 %" in text and "within the 10 % limit" in text
    rel, text, ok = comparability.bandwidth_words(_prov(100.0), _prov(88.0))  # −12 %: not comparable
    assert not ok and "-12.0 %" in text and "more than the 10 % limit" in text
    line, ok = comparability.headline(_prov(100.0), _prov(88.0), 3)
    assert not ok and line.startswith("NOT COMPARABLE — probed bandwidth differs by -12.0 %")
    line, ok = comparability.headline(_prov(100.0), _prov(108.0), 3)
    assert ok and line.startswith("Comparable, with a warning: probed bandwidth differs by +8.0 %")


def test_committed_runs_6_percent_apart_are_comparable_with_a_warning():
    d = diff.diff_runs(stages.load_run(A), stages.load_run(B))
    assert d.comparable
    assert d.headline.startswith("Comparable, with a warning: probed bandwidth differs by +6.3 %")
    doc = json.loads(diffreport.format_json(d))
    assert round(doc["bandwidth_change"], 3) == 0.063 and doc["bandwidth_limit"] == 0.10
    assert doc["warnings"] and "+6.3 %" in doc["warnings"][0]
    assert diffreport.format_text(d).splitlines()[0] == d.headline


def test_changes_page_shows_the_bandwidth_warning(tmp_path):
    from pipeline.pages.render import render_site

    render_site(tmp_path, runs=[A, B])
    from pipeline.pages.indexviews import change_page_path

    text = (tmp_path / change_page_path(B)).read_text()  # each comparison has its own page
    assert "Comparable, with a warning: probed bandwidth differs by +6.3 %" in text
