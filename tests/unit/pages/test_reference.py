"""The Guide against the code: the generated reference pages (``docs/reference/``) are what the code generates today,
every ``docs/`` page is on the site's Guide tab, and the defaults ``docs/definitions.md`` states are the code's.

The fault kind these pin: documentation that drifts from the code (a CLI block without options that exist, a config
table without keys that exist).  When a reference test fails, regenerate the pages and commit them:

    python -m tests.unit.pages.test_reference
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs"
REFERENCE = DOCS / "reference"


def generated() -> dict[str, str]:
    from pipeline.cli import build_parser
    from pipeline.pages.reference import reference_pages

    return reference_pages(build_parser())


def committed_run_dirs() -> list[Path]:
    from tests.conftest import committed_runs

    return [REPO / "data" / "runs" / r for r in committed_runs()]


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return generated()


@pytest.mark.parametrize("name", ["cli.md", "config.md", "stored-files.md", "show-json.md", "show.schema.json",
                                  "diff.schema.json", "plan.schema.json", "predict.schema.json"])
def test_reference_page_is_what_the_code_generates(name, pages):
    assert (REFERENCE / name).read_text() == pages[name], (
        f"docs/reference/{name} has drifted from the code: run `python -m tests.unit.pages.test_reference` and commit")


def test_cli_page_names_every_option_of_every_command():
    """Hand-checked against the parser: `diff` has --fail-above, `plan` --budget, `import` --max-failure-rate."""
    from pipeline.cli import build_parser
    from pipeline.pages.reference import _subcommands

    import argparse

    page = (REFERENCE / "cli.md").read_text()
    sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", page, flags=re.M | re.S))
    for name, _, sub in _subcommands(build_parser()):
        assert name in sections, name
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for flag in action.option_strings:
                assert f"`{flag}" in sections[name] or f", {flag}" in sections[name], (name, flag)
    assert "`--fail-above`" in sections["diff"] and "`--budget`" in sections["plan"]
    assert "`--max-failure-rate`" in sections["import"]


def test_config_page_names_every_key_the_schema_accepts():
    """Worked by hand from pipeline/config: `vllm.health_timeout_s` defaults to 1800 s, `cluster.exclusive` to true,
    `models[].name` is a key of each model, `slo.ttft_p99_max_ms` a p99 bound."""
    page = (REFERENCE / "config.md").read_text()
    for key in ("vllm.health_timeout_s", "cluster.exclusive", "models[].name", "slo.ttft_p99_max_ms",
                "open_loop.rates", "adaptive.tolerance", "openai.base_url", "transformers.memory_fraction"):
        assert f"| `{key}` |" in page, key
    assert re.search(r"\| `vllm\.health_timeout_s` \| `float` \| `1800\.0` \|", page)
    assert re.search(r"\| `cluster\.exclusive` \| `bool` \| `true` \|", page)


def _nav_pages(nav: list) -> list[str]:
    out = []
    for item in nav:
        for value in (item.values() if isinstance(item, dict) else [item]):
            out += _nav_pages(value) if isinstance(value, list) else [value]
    return out


def test_every_docs_page_is_on_the_guide_tab():
    """A page written into docs/ must be reachable on the site: the Guide tab lists each one (a new page slots in
    with one line of mkdocs.yml's nav), and every nav entry of the Guide names a page that exists."""
    from pipeline.pages.guide import GUIDE_DIR, guide_files

    text = (REPO / "mkdocs.yml").read_text()
    nav = yaml.safe_load(text)["nav"]
    listed = {p for p in _nav_pages(nav) if p.startswith(f"{GUIDE_DIR}/")}
    pages = {f"{GUIDE_DIR}/{p.as_posix()}" for p in guide_files(DOCS)}
    assert pages - listed == set(), f"docs/ pages on no tab of mkdocs.yml: {sorted(pages - listed)}"
    assert listed - pages == set(), f"Guide entries of mkdocs.yml without a docs/ page: {sorted(listed - pages)}"


def test_definitions_state_the_defaults_of_the_code():
    """docs/definitions.md is the one source the Methodology page shows; the figures it states must be the code's:
    the knee threshold 15 % and the decline 10 % (pipeline/analysis/knee.py), the repeats' spread 1.5×, the probe's
    drift 10 % (pipeline/analysis/quality.py) and the outside load 25 % (pipeline/machine/interference.py)."""
    from pipeline.analysis.knee import DECLINE_FRACTION, KNEE_THRESHOLD
    from pipeline.analysis.quality import PROBE_DRIFT_LIMIT, REPEAT_SPREAD_LIMIT
    from pipeline.machine.interference import OUTSIDE_SHARE_LIMIT

    text = " ".join((DOCS / "definitions.md").read_text().split())
    assert f"threshold (default {KNEE_THRESHOLD:.0%}".replace("%", " %") in text
    assert f"more than {DECLINE_FRACTION:.0%}".replace("%", " %") + " below its peak" in text
    assert f"differ by more than {REPEAT_SPREAD_LIMIT}×" in text
    assert f"by more than {PROBE_DRIFT_LIMIT:.0%}".replace("%", " %") in text
    assert f"more than {OUTSIDE_SHARE_LIMIT:.0%}".replace("%", " %") + " of the machine's CPUs" in text


def test_definitions_per_user_throughput_is_what_the_code_computes():
    """The code (pipeline/metrics/summarize.py) takes per-user throughput as 1 / the median streamed TPOT; the
    definitions said 1 / median TPOT (a TPOT that counts hidden reasoning tokens), the fault of a definition that
    drifted from the code.  Worked by hand: a request of 11 tokens, 5 of them hidden reasoning, streamed from 0.1 s to
    0.6 s has TPOT 0.5 / 10 = 0.05 s but streamed TPOT 0.5 / 5 = 0.1 s: per-user 10 tok/s, not 20."""
    from pipeline.metrics.summarize import summarize_point
    from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord

    chunks = [(0.1 + 0.1 * i, 1) for i in range(6)]  # six streamed tokens, 0.1 s apart
    req = RequestRecord(request_id=0, queued_s=0.0, sent_s=0.0, first_token_s=0.1, done_s=0.6, chunks=chunks,
                        input_tokens=8, output_tokens=11, hidden_tokens=5)
    rep = RepeatRecord(repeat=0, batching="served", window_start_s=0.0, window_end_s=0.6, requests=[req])
    s = summarize_point(PointRecords(PointKey("m", "openai", 8, 11, 1), [rep]), None)
    assert s.per_user_tok_s == pytest.approx(10.0)
    text = " ".join((DOCS / "definitions.md").read_text().split())
    assert "per-user throughput = 1 / the median *streamed* TPOT" in text
    assert "per-user throughput = 1 / median TPOT." not in text


def test_definitions_metrics_table_is_the_registrys():
    """docs/definitions.md's metrics table is the one the registry generates (pipeline/metrics/registry.py); a row
    edited by hand, or a registry entry changed without regenerating, fails here."""
    from pipeline.pages.reference import TABLE_END, TABLE_START, with_metrics_table

    text = (DOCS / "definitions.md").read_text()
    assert text == with_metrics_table(text), (
        "docs/definitions.md's metrics table has drifted from pipeline/metrics/registry.py: run "
        "`python -m tests.unit.pages.test_reference` and commit")
    stale = text.replace(TABLE_START + "\n", TABLE_START + "\n| `ttft_s` | ms | higher | … |\n", 1)
    assert with_metrics_table(stale) == text  # a stale row is replaced, not kept
    assert "| `ttft_s` | s | lower | requests | first − sent |" in text  # worked by hand: TTFT = first − sent
    with pytest.raises(ValueError, match="markers are missing"):
        with_metrics_table(text.replace(TABLE_END, ""))


if __name__ == "__main__":  # write the reference pages anew
    from pipeline.pages.reference import with_metrics_table

    (DOCS / "definitions.md").write_text(with_metrics_table((DOCS / "definitions.md").read_text()))
    print("wrote docs/definitions.md's metrics table", file=sys.stderr)
    REFERENCE.mkdir(exist_ok=True)
    for page_name, page_text in generated().items():
        (REFERENCE / page_name).write_text(page_text)
        print(f"wrote docs/reference/{page_name}", file=sys.stderr)
