"""A part's ``run.json`` is checked and scrubbed as strictly as its points before a merge publishes it.

Fault kind: provenance taken on trust from a file anyone can edit — a key in a recorded command line (vLLM's
``--api-key`` flag, https://docs.vllm.ai/en/latest/cli/serve.html, and the OpenAI key shape ``sk-…``) and a
machine path in ``platform`` were published unredacted; a part claiming another run or other hardware was
merged.  Right values: no secret and no absolute path of the machine in the merged ``run.json``; a claim that
disagrees with the config or the run is refused in one line naming the file and the field.
"""

from __future__ import annotations

import json

import pytest

from pipeline.core.errors import BatchmarkError
from pipeline.store import runs
from pipeline.sweep import parts
from tests import runbuilder as rb
from tests.unit.sweep.test_parts import _cfg, make_part

KEY = "sk-proj-Abcdefghijklmnop0123456789"


def _edit_run_json(part, **fields) -> None:
    """Change a part's run.json by hand (json, not the store's writer, which scrubs what it writes)."""
    doc = json.loads((part / "run.json").read_text())
    doc.update(fields)
    (part / "run.json").write_text(json.dumps(doc))


def test_a_parts_command_key_and_machine_paths_are_scrubbed_in_the_merged_run(scratch_root):
    cfg = _cfg()
    a = make_part(cfg, "RS", "dense-a")
    make_part(cfg, "RS", "moe-b")
    _edit_run_json(a, command=f"batchmark sweep --config /scratch/alice/batchmark/config/x.yaml --api-key {KEY}",
                   platform="Linux (venv /scratch/alice/envs/bm/bin/python)", host="node1")
    text = (parts.merge_parts(cfg, "RS") / "run.json").read_text()
    assert KEY not in text and "sk-proj" not in text and "/scratch/alice" not in text
    meta = json.loads(text)
    part_a = next(p for p in meta["parts"] if p["model"] == "dense-a")
    assert part_a["command"] == "batchmark sweep --config <abs>/x.yaml --api-key [redacted]"
    assert part_a["platform"] == "Linux (venv <abs>/python)"


@pytest.mark.parametrize("field,value,says", [
    ("part_of", "ANOTHER", "part_of is 'ANOTHER', but the part is merged as 'RC'"),
    ("models", ["moe-b"], "models is ['moe-b'], but the part is merged as ['dense-a']"),
    ("source", "simulated", "source is 'simulated', but the part is merged as 'measured'"),
])
def test_a_part_claiming_another_run_or_model_is_refused(scratch_root, field, value, says):
    cfg = _cfg()
    a = make_part(cfg, "RC", "dense-a")
    make_part(cfg, "RC", "moe-b")
    _edit_run_json(a, **{field: value})
    with pytest.raises(BatchmarkError) as exc:
        parts.merge_parts(cfg, "RC")
    assert says in str(exc.value) and "dense-a/run.json" in str(exc.value) and "\n" not in str(exc.value)


def test_parts_that_all_claim_other_hardware_are_refused(scratch_root):
    """Every part on an H200 agrees with the others (check_same_hardware passes) but not with the config's cpu."""
    cfg = _cfg()
    h200 = {"profile": "h200", "gpus": ["NVIDIA H200"], "cpu": "Xeon"}
    for model in ("dense-a", "moe-b"):
        make_part(cfg, "RH", model, hardware=rb.H200_PROFILE, machine=h200)
    with pytest.raises(BatchmarkError, match="hardware.name is 'h200', but the part is merged as 'cpu'"):
        parts.merge_parts(cfg, "RH")
    assert not (runs.paths.runs_dir() / "RH" / "run.json").exists()
