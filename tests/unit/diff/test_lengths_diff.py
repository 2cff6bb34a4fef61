"""``diff`` of runs whose requests were drawn differently (``lengths:``): named in the headline as a different
workload, never compared as like for like; an import, which does not state its distribution, is not called
different for it."""

from __future__ import annotations

from pipeline.config.workload import lengths_words
from pipeline.diff import comparability

HELD = {"input": {"distribution": "uniform", "range_ratio": 0.9, "std": None, "sigma": None},
        "output": {"distribution": "uniform", "range_ratio": 0.9, "std": None, "sigma": None},
        "prefix_len": 0, "ignore_eos": False, "prompt_file": None}


def _prov(lengths):
    return {"hardware": "dgx-spark", "bandwidth_gb_s_probed": 273.0, "engine": "vllm", "workloads": ["in 4000 / out 500"],
            "models": ["gpt-oss-20b"], "lengths": lengths}


def test_lengths_in_words():
    """Fault kind: a distribution named wrongly (or not at all) where a reader compares two runs."""
    assert lengths_words(None) == "fixed lengths"
    assert lengths_words(HELD) == ("input uniform (range ratio 0.9), output uniform (range ratio 0.9), "
                                   "outputs stop at EOS")


def test_a_diff_of_two_distributions_is_not_like_for_like():
    """Fault kind: a run of random 4000/500 at range ratio 0.9 with EOS-terminated outputs diffed against a fixed
    4000/500 one as if the same workload (the same point keys, other requests), its changes called regressions."""
    line, ok = comparability.headline(_prov("fixed lengths"), _prov(lengths_words(HELD)), 3)
    assert not ok and line.startswith("NOT COMPARABLE — different workload: length distribution A fixed lengths vs "
                                      "B input uniform (range ratio 0.9)")
    items = {i.field: i for i in comparability.compare_provenance(
        {**_prov("fixed lengths"), "engine_version": None, "engine_flags": {}, "model_revisions": {}, "batchmark_version": None,
         "versions": {}, "gpu_driver": None, "source": "measured"},
        {**_prov(lengths_words(HELD)), "engine_version": None, "engine_flags": {}, "model_revisions": {},
         "batchmark_version": None, "versions": {}, "gpu_driver": None, "source": "measured"})}
    assert items["lengths"].differs
    line, ok = comparability.headline(_prov(None), _prov("fixed lengths"), 3)  # an import states none
    assert ok and line.startswith("Comparable")
