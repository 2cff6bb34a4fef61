"""What reaches a published file: no absolute path of the machine, no bidirectional control obeyed, no CSV
cell a spreadsheet runs.

Fault kinds and sources: machine paths in published provenance (CWE-200, exposure of the measuring machine's
layout: ``/scratch/<user>/models/…``, a home whose user name has a space); "Trojan Source" bidirectional
overrides (CVE-2021-42574, Unicode UAX #9: U+202E makes ``llama\u202etxt.exe`` read ``llamaexe.txt``); CSV
formula injection (OWASP, https://owasp.org/www-community/attacks/CSV_Injection: a cell starting ``= + - @``)
and terminal escape injection (ESC sequences, CWE-150).
"""

from __future__ import annotations

import csv
import io
import json

from pipeline.core import paths, scrub
from pipeline.store import runs
from tests import runbuilder as rb

RLO = "\u202e"


def test_any_absolute_path_is_replaced_keeping_its_name():
    assert scrub.relative_path("/scratch/alice/models/llama-3") == "<abs>/llama-3"
    assert scrub.scrub_tree("--model /scratch/alice/models/llama-3 --port 8000") == "--model <abs>/llama-3 --port 8000"
    assert scrub.scrub_tree({"n": 3, "p": ["/srv/a/b"]}) == {"n": 3, "p": ["<abs>/b"]}
    # a URL's path and a hub id are no machine paths
    assert scrub.scrub_tree("http://127.0.0.1:8000/v1/completions") == "http://127.0.0.1:8000/v1/completions"
    assert scrub.scrub_tree("meta-llama/Llama-3.1-8B") == "meta-llama/Llama-3.1-8B"


def test_a_home_with_a_space_is_one_folder(monkeypatch, tmp_path):
    """``/home/Jane Doe/models/x`` was cut at the space: ``~ Doe/models/x``."""
    assert scrub.scrub_paths("/home/Jane Doe/models/x") == "~/models/x"
    home = tmp_path / "Jane Doe"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert scrub.scrub_tree(f"config {home}/cfg.yaml") == "config ~/cfg.yaml"


def test_a_cards_provenance_note_names_no_machine_folder(scratch_root):
    run = rb.make_run(paths.runs_dir(), "CARD", models=("dense-a",), concurrency=(1,), noise=(1.0,), complete=False)
    card = {**rb.card("dense-b"), "source": "arithmetic from /scratch/alice/models/dense-b/config.json"}
    runs.write_model_card(run, card)
    stored = json.loads(runs.model_card_path(run, "dense-b").read_text())
    assert stored["source"] == "arithmetic from <abs>/config.json" and stored["name"] == "dense-b"


def _site(scratch_root, model: str):
    from pipeline.pages.render import render_site

    rb.make_run(paths.runs_dir(), "HOSTILE", models=(model,), concurrency=(1, 2), noise=(1.0,))
    docs = scratch_root / "site-pages"
    render_site(docs, log=lambda m: None)
    return docs


def test_a_right_to_left_override_is_never_published_raw(scratch_root):
    docs = _site(scratch_root, f"llama{RLO}txt.exe")
    texts = {p: p.read_text(encoding="utf-8") for p in docs.rglob("*") if p.suffix in (".md", ".csv", ".json")}
    raw = [str(p.relative_to(docs)) for p, t in texts.items() if RLO in t]
    assert raw == []
    assert any("llama[U+202E]txt.exe" in t or "llama&#91;U+202E&#93;txt.exe" in t
               for p, t in texts.items() if p.suffix == ".md")


def test_summaries_csv_cells_are_no_formula_and_no_terminal_escape(scratch_root):
    model = "=HYPERLINK(\"http://x\")\x1b[2J"
    docs = _site(scratch_root, model)
    rows = list(csv.reader(io.StringIO((docs / "downloads" / "HOSTILE" / "summaries.csv").read_text())))
    cell = rows[1][0]
    assert cell == "'=HYPERLINK(\"http://x\")\\x1b[2J"
    assert "\x1b" not in (docs / "downloads" / "HOSTILE" / "summaries.csv").read_text()
