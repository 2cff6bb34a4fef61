"""Imported model names are kept and shown exactly as the file gives them.

Fault kind pinned: a name mangled on import — cut at its last ``/`` (``<script>…</script>``
showed as ``script>``, ``org/Model`` lost its org) — and file names derived from a model
name that could leave the run folder or break (``/``, ``..``, spaces, ``<>``).
"""

from __future__ import annotations

import json

import pytest

from pipeline.store import pointfiles, runs
from pipeline.importers import ImportOptions, import_run
from pipeline.core.records import PointKey
from pipeline.views.show import show_run

from tests.conftest import DATA

JSONL = DATA / "llama-batched-bench" / "llama-3.1-8b-q4_0.jsonl"


@pytest.mark.parametrize("name", ["<script>alert(1)</script>", "acme/Model", "../../etc/passwd", " a b<>|c ", "..", "%2F"])
def test_jsonl_model_name_is_kept_as_given(name, scratch_root):
    run = import_run("llama-batched-bench", [JSONL], "dgx-spark", run_id="named", options=ImportOptions(model=name))
    doc = show_run(run)
    assert {p["model"] for p in doc["points"]} == {m["model"] for m in doc["models"]} == {name.strip()}
    assert json.loads((run / "run.json").read_text())["models_as_named"] == {name.strip(): name}
    # nothing written beside the run (but the run's lock, held while it was built: .locks/ is git-ignored)
    assert sorted(p.name for p in run.parent.iterdir() if p.name != ".locks") == ["named"]


def test_markdown_heading_with_an_org_keeps_it_and_its_card(scratch_root, tmp_path):
    src = tmp_path / "t.md"
    rows = "\n".join(f"| 512 | 32 | {b} | {b * 544} | 0.100 | 5120.00 | {t:.3f} | {b * 32 / t:.2f} | 1.000 | 1.00 |"
                     for b, t in ((1, 0.400), (2, 0.500)))
    src.write_text("## ggml-org/gpt-oss-20b-GGUF\n\ngpt-oss 20B MXFP4 MoE, 11.27 GiB, 20.91 B params\n\n"
                   "| PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |\n"
                   "|---|---|---|---|---|---|---|---|---|---|\n" + rows + "\n")
    run = import_run("llama-batched-bench", [src], "dgx-spark", run_id="org")
    doc = show_run(run)
    assert doc["models"][0]["model"] == "ggml-org/gpt-oss-20b-GGUF" and doc["models"][0]["kind"] == "moe"
    # the card is stored under an escaped file name and read back under the name as given
    assert [p.name for p in (run / "models").iterdir()] == ["ggml-org%2Fgpt-oss-20b-GGUF.json"]
    assert list(runs.load_model_cards(run)) == ["ggml-org/gpt-oss-20b-GGUF"]


def test_file_stems_stay_inside_the_run_folder(tmp_path):
    # plain names are their own stem (existing runs keep their files); others are percent-encoded
    assert pointfiles.file_stem("dense-llama-190m") == "dense-llama-190m"
    assert pointfiles.file_stem("org/Model") == "org%2FModel"
    assert pointfiles.file_stem("..") == "%2E%2E" and pointfiles.file_stem(".hidden") == "%2Ehidden"
    assert pointfiles.file_stem("a b<>") == "a%20b%3C%3E" and pointfiles.file_stem("é") == "%C3%A9"
    assert pointfiles.file_stem("a%2Fb") == "a%252Fb"  # % is escaped too, so two names never share a stem
    assert len(pointfiles.file_stem("x/" * 200)) <= 150
    for name in ("../../x", "/abs", "a/../../b", "..", "<img src=x onerror=alert(1)>"):
        path = pointfiles.point_path(tmp_path, PointKey(name, "../e", 1, 2, 4))
        assert path.parent.parent == tmp_path / "points" and "/" not in path.parent.name + path.name
        card = runs.model_card_path(tmp_path, name)
        assert card.parent == tmp_path / "models"


def test_a_sweep_card_with_a_slash_in_its_name_round_trips(tmp_path):
    runs.write_model_card(tmp_path, {"name": "org/dense model", "kind": "dense"})
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["org%2Fdense%20model.json"]
    assert runs.load_model_cards(tmp_path) == {"org/dense model": {"name": "org/dense model", "kind": "dense"}}
