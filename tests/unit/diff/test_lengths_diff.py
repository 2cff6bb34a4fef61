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


def _import_prov(*lengths):
    """The provenance of an import whose points state ``lengths`` (``PointSummary.lengths`` each)."""
    from types import SimpleNamespace

    from pipeline.diff.lengthsdiff import imported_parts, parts_words

    parts = imported_parts([SimpleNamespace(lengths=x, input_len=4000) for x in lengths])
    return {**_prov(parts_words(parts, False)), "lengths_parts": parts}


def _measured_prov(stored):
    from pipeline.diff.lengthsdiff import measured_parts, parts_words

    return {**_prov(parts_words(None, True, stored)), "lengths_parts": measured_parts(stored)}


def test_an_imports_stated_distribution_is_compared_with_a_measured_one():
    """Fault kinds: a vLLM import of random 4000/500 at range ratio 0.5 diffed as like for like against a measured
    run at 0.9 (or a fixed one), or called different from a run of its own distribution for what it does not state
    (``ignore_eos``, which vLLM's result does not say).

    By hand: the import states uniform 0.5 for both lengths; the measured run draws uniform 0.9 → different, named;
    an import stating 0.9 → comparable though the run's outputs stop at EOS and the import says nothing of it."""
    u = lambda r: {"distribution": "uniform", "range_ratio": r}  # noqa: E731
    at05 = _import_prov({"input": None, "output": None, "stated": {"input": u(0.5), "output": u(0.5)}})
    line, ok = comparability.headline(_measured_prov(HELD), at05, 3)
    assert not ok and ("length distribution A input uniform (range ratio 0.9), output uniform (range ratio 0.9), "
                       "outputs stop at EOS vs B input uniform (range ratio 0.5), output uniform (range ratio 0.5)") in line
    at09 = _import_prov({"input": None, "output": None, "stated": {"input": u(0.9), "output": u(0.9)}})
    assert comparability.headline(_measured_prov(HELD), at09, 3)[1]


def test_an_imports_observed_prompt_lengths_are_compared_with_fixed_ones():
    """Fault kind: an import whose prompts vary (399–7600 tokens, no distribution stated) diffed as like for like
    against a fixed-length run; or one of fixed prompts (every request 4000) called different from a fixed run.

    Varying prompts differ from fixed ones, not from a drawn distribution (how they were drawn is not stated)."""
    varies = _import_prov({"input": {"mean": 4000.0, "p50": 4001.0, "min": 399.0, "max": 7600.0}, "output": None,
                           "stated": None})
    assert varies["lengths"] == "input 399–7600 tokens (how drawn not stated)"
    line, ok = comparability.headline(_measured_prov(None), varies, 3)
    assert not ok and "length distribution A fixed lengths vs B input 399–7600 tokens" in line
    assert comparability.headline(_measured_prov(HELD), varies, 3)[1]
    fixed = _import_prov({"input": {"mean": 4000.0, "p50": 4000.0, "min": 4000.0, "max": 4000.0}, "output": None,
                          "stated": None})
    assert fixed["lengths"] == "input fixed" and comparability.headline(_measured_prov(None), fixed, 3)[1]
