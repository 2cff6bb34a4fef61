"""run.json version 5: one word per thing.  ``engine: {...}`` (the provenance of the server that produced the
tokens) is ``server``, ``driver`` (the NVIDIA driver's version) is ``gpu_driver``, ``engine_fallback`` is
``backend_fallback`` and the stored config's ``engine`` (how batchmark got the tokens) is ``backend``; every value
as stored.  The fault kind these pin: one key name read as three things (docs/definitions.md, "backend")."""

import json

from pipeline.store import schemas
from tests.conftest import REPO

COMMITTED = REPO / "data" / "runs" / "20261130T010035Z-vm" / "run.json"  # a vLLM run, written at version 3


def test_a_committed_run_reads_under_the_new_names_with_every_value_kept():
    old = json.loads(COMMITTED.read_text())
    new = schemas.migrate(schemas.RunFile, COMMITTED, old)
    assert new["schema_version"] == schemas.RunFile.current == 5
    assert "engine" not in new and "driver" not in new
    assert new["server"] == old["engine"] and new["server"]["engine"] == "vllm"  # the serving engine's name kept
    assert new["gpu_driver"] == old["driver"]
    assert new["config"]["backend"] == old["config"]["engine"] == "vllm" and "engine" not in new["config"]
    assert {k: v for k, v in new["config"].items() if k != "backend"} == \
        {k: v for k, v in old["config"].items() if k != "engine"}
    # keys keep their place: driver's slot is gpu_driver's, engine's is server's
    renamed = [{"engine": "server", "driver": "gpu_driver"}.get(k, k) for k in old if k != "schema_version"]
    assert [k for k in new if k not in ("schema_version", "variants")] == renamed


def test_a_fallback_is_renamed_and_a_file_already_saying_server_is_left_alone():
    fb = {"from": "vllm", "to": "transformers", "reason": "no CPU build"}
    v4 = {"schema_version": 4, "engine_fallback": fb, "engine": {"engine": "transformers"}, "driver": "580.65"}
    new = schemas.migrate(schemas.RunFile, "run.json", v4)
    assert new == {"schema_version": 5, "backend_fallback": fb, "server": {"engine": "transformers"},
                   "gpu_driver": "580.65"}
    current = {"schema_version": 5, "server": {"engine": "vllm"}, "gpu_driver": None}
    assert schemas.migrate(schemas.RunFile, "run.json", current) == current
