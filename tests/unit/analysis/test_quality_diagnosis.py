"""An impossible figure is diagnosed among its possible causes in order of evidence, with advice that fits the run.

Regression (fault kind: the wrong cause of an impossible figure): a run measured on a loaded machine whose probe
read 3.6–7 GB/s had its single streams "above their ceiling", and Home, the model page and ``show`` said in red
"wrong model card or weight format … correct the model card or the weight format (`--quant` on import)" — for a run
that was not imported and whose card was right: the probe had under-read.

Hand-made runs (tests/runbuilder.py): dense-a's single stream is 1 / step_s(1) = 1 / 0.01125 s = 88.9 tok/s and
its card reads 1.08 GB of dense weights per step (plus the KV cache), so a probe of 50 GB/s gives a ceiling of
about 50 / 1.08 = 46 tok/s (``show`` prints 46.2): the single stream sits above it, an impossible figure in both runs.  UNDER's probe warned (another load while probing); CARD's probe
was steady, so the card comes first there.
"""

from __future__ import annotations

import pytest

from tests.runbuilder import NOISE_A, make_run

UNDER, CARD = "20261201T100000Z-under", "20261201T110000Z-card"
WARNING = ("probe under another load (machine busy while probing: other processes kept 1.6 of 2 CPUs busy (80%), "
           "load average 9.1): ceilings, roofline, MBU and MFU of this run are less certain")


@pytest.fixture
def site(scratch_root):
    from pipeline.pages.render import render_site

    runs_dir = scratch_root / "data" / "runs"
    make_run(runs_dir, UNDER, noise=NOISE_A, bandwidth_gb_s=50.0, probe_warning=WARNING, models=("dense-a",))
    make_run(runs_dir, CARD, noise=NOISE_A, bandwidth_gb_s=50.0, models=("dense-a",))
    render_site(scratch_root / "data" / "pages", runs_dir=runs_dir)
    return scratch_root


def _pages(root):
    pages = root / "data" / "pages"
    return {str(p.relative_to(pages)): " ".join(p.read_text().split()) for p in pages.rglob("*.md")}


def test_diagnosis_orders_the_causes_by_evidence():
    from pipeline.analysis.quality import IMPLAUSIBLE_CAUSE, implausible_diagnosis

    text = f"single stream 88.9 tok/s is above its bandwidth ceiling 41.7 tok/s: {IMPLAUSIBLE_CAUSE}"
    under = implausible_diagnosis({"source": "measured", "probe": {"warning": WARNING}}, text)
    assert under["causes"][0].startswith("the probe under-read a noisy or loaded machine (probe under another load")
    assert under["causes"][-1] == f"else {IMPLAUSIBLE_CAUSE}" and "--quant" not in under["text"]
    card = implausible_diagnosis({"source": "measured", "probe": {"warning": None}}, text)
    assert card["causes"][0] == IMPLAUSIBLE_CAUSE and card["title"] == "wrong model card or weight format"
    assert "--quant" not in card["advice"] and "models/<model>.json" in card["advice"]
    imported = implausible_diagnosis({"source": "imported:vllm-bench", "probe": {}}, text)
    assert "`--quant` on import" in imported["advice"]
    # a probe under half its spec sheet is evidence too: 120 GB/s against 273 GB/s (the DGX Spark's LPDDR5x)
    low = implausible_diagnosis({"probe": {"bandwidth_gb_s": 120.0}, "hardware": {"bandwidth_gb_s_spec": 273}}, text)
    assert low["causes"][0] == "the probe read 120.0 GB/s, under half the spec sheet's 273 GB/s"


def test_an_under_reading_probe_is_named_on_every_page_and_in_show(site):
    from pipeline.pages.indexviews import run_page_path
    from pipeline.views.show import format_table, show_run

    pages = _pages(site)
    for name in ("index.md", "models/dense-a.md", str(run_page_path(UNDER))):
        page = pages[name]
        at = page.index(UNDER) if name == "index.md" else 0
        part = page[at:]
        assert "Most likely cause: the probe under-read a noisy or loaded machine" in part, name
        assert "--quant" not in page, name
    assert "Implausible numbers: the probe under-read the machine?" in pages["models/dense-a.md"]
    text = " ".join(format_table(show_run(site / "data" / "runs" / UNDER)).split())
    assert "IMPLAUSIBLE, not a result: single stream 88.9 tok/s is above its bandwidth ceiling 46.2 tok/s" in text
    assert "Most likely cause: the probe under-read a noisy or loaded machine" in text
    assert "MBU 1.92 at c = 1 is above 1: most likely the probe under-read" in text  # 88.9 × 1.08 GB / 50 GB/s
    assert "--quant" not in text


def test_a_wrong_card_is_named_as_that_on_every_page_and_in_show(site):
    from pipeline.pages.indexviews import run_page_path
    from pipeline.views.show import format_table, show_run

    pages = _pages(site)
    model = pages["models/dense-a.md"]
    card_part = model[model.index(f"## {CARD}"):]
    card_part = card_part[:card_part.index(f"## {UNDER}")] if f"## {UNDER}" in card_part else card_part
    assert "Implausible numbers: wrong model card or weight format?" in card_part
    for page in (card_part, pages[str(run_page_path(CARD))]):
        assert "Most likely cause: the model card or its weight format (quantisation) does not match what was served" in page
        assert "check the card the run recorded" in page
    text = " ".join(format_table(show_run(site / "data" / "runs" / CARD)).split())
    assert "Most likely cause: the model card or its weight format" in text and "--quant" not in text
