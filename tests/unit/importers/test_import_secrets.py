"""A ``vllm bench sweep serve --serve-params`` combination that sets the server's key is no published setting
(:mod:`pipeline.importers.importsecrets`).

Fault kind pinned: a secret of the measured server stored by an import.  vLLM's sweep writes each server
combination's parameters into every ``run=N.json`` (``_update_run_data``: ``run_data.update(serve_overrides)``), into
its folder's name (``SERVE--api_key=K-max_num_seqs=2-BENCH--…``) and, with ``--show-stdout``, into the log's
``Server overrides: {…}`` line (vllm-project/vllm ``vllm/benchmarks/sweep/serve.py``); the import made the key the
variant's published setting and its name.  The inputs are built from the committed sweep fixtures in vLLM's own
formats; the right result is the same variants, named and set with ``redacted`` where the key was, and no byte of
the stored run holding the key.
"""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.core import paths

from tests.conftest import DATA

EXPERIMENT = DATA / "vllm-bench-sweep" / "20261202_100000"
LOG = DATA / "vllm-real-0.32" / "sweep-serve-params" / "sweep-show-stdout.log"


def _stored_bytes(run_dir: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}


def test_a_serve_params_api_key_is_no_published_setting(tmp_path, scratch_root):
    """Fault kind: a sweep folder's ``--serve-params`` key stored as the variant's setting and name (two servers,
    max_num_seqs 2 and 4, both with the key)."""
    key = "Zq7" + secrets.token_hex(10)
    exp = tmp_path / "exp"
    for seqs in (2, 4):
        src = EXPERIMENT / f"SERVE--max_num_seqs={seqs}-BENCH--max_concurrency=1-random_input_len=32"
        dest = exp / f"SERVE--api_key={key}-max_num_seqs={seqs}-BENCH--max_concurrency=1-random_input_len=32"
        shutil.copytree(src, dest)
        for f in dest.glob("run=*.json"):
            f.write_text(json.dumps({**json.loads(f.read_text()), "api_key": key}))
    assert main(["import", "vllm-bench", str(exp), "--hardware", "cpu", "--run-id", "20261202T100000Z-key"]) == 0
    run_dir = paths.runs_dir() / "20261202T100000Z-key"
    run = json.loads((run_dir / "run.json").read_text())
    assert [(v["name"], v["settings"]) for v in run["variants"]] == [
        ("api_key_redacted-max_num_seqs_2", {"api_key": "[redacted]", "max_num_seqs": 2}),
        ("api_key_redacted-max_num_seqs_4", {"api_key": "[redacted]", "max_num_seqs": 4})]
    points = json.loads((run_dir / "summaries.json").read_text())["points"]
    assert sorted(p["variant"] for p in points) == ["api_key_redacted-max_num_seqs_2", "api_key_redacted-max_num_seqs_4"]
    assert [name for name, data in _stored_bytes(run_dir).items() if key.encode() in data] == []


def test_a_show_stdout_logs_server_overrides_api_key_is_no_published_setting(tmp_path, scratch_root):
    """Fault kind: the same key read from a ``--show-stdout`` log's ``Server overrides: {'api_key': …}``."""
    key = "Zq7" + secrets.token_hex(10)
    log = tmp_path / "sweep.log"
    log.write_text(LOG.read_text().replace("Server overrides: {'max_num_seqs': ",
                                           f"Server overrides: {{'api_key': '{key}', 'max_num_seqs': "))
    assert main(["import", "vllm-bench", str(log), "--hardware", "cpu", "--run-id", "20261202T100000Z-log"]) == 0
    run_dir = paths.runs_dir() / "20261202T100000Z-log"
    run = json.loads((run_dir / "run.json").read_text())
    assert [(v["name"], v["settings"]) for v in run["variants"]] == [
        ("api_key_redacted-max_num_seqs_2", {"api_key": "[redacted]", "max_num_seqs": 2}),
        ("api_key_redacted-max_num_seqs_4", {"api_key": "[redacted]", "max_num_seqs": 4})]
    assert [name for name, data in _stored_bytes(run_dir).items() if key.encode() in data] == []


@pytest.mark.parametrize("sep", ["/", "+="], ids=["slash", "plus-equals"])
def test_a_base64_serve_params_key_is_redacted_from_every_name(tmp_path, scratch_root, sep):
    """Fault kind: a key of the base64 alphabet (``openssl rand -base64``) that vLLM's ``sanitize_filename`` writes
    into its folder's name with ``/`` as ``_`` kept its pieces around the ``_`` in the variant's name, the points and
    the source files (only the spellings of the key as sent were redacted); one with ``+`` or ``=`` made the import
    refuse the whole sweep ("gives no variant name"), naming the key.  Right: the same variants as for any key."""
    from pipeline.importers.vllm_sweep import sanitize

    parts = ["Zq7" + secrets.token_hex(4), secrets.token_hex(5), secrets.token_hex(4) + "Q"]
    key = sep.join(parts) if sep == "/" else f"{parts[0]}+{parts[1]}+{parts[2]}=="
    exp = tmp_path / "exp"
    for seqs in (2, 4):
        src = EXPERIMENT / f"SERVE--max_num_seqs={seqs}-BENCH--max_concurrency=1-random_input_len=32"
        dest = exp / f"SERVE--api_key={sanitize(key)}-max_num_seqs={seqs}-BENCH--max_concurrency=1-random_input_len=32"
        shutil.copytree(src, dest)
        for f in dest.glob("run=*.json"):
            f.write_text(json.dumps({**json.loads(f.read_text()), "api_key": key}))
    assert main(["import", "vllm-bench", str(exp), "--hardware", "cpu", "--run-id", "20261202T100000Z-b64"]) == 0
    run_dir = paths.runs_dir() / "20261202T100000Z-b64"
    run = json.loads((run_dir / "run.json").read_text())
    assert [(v["name"], v["settings"]) for v in run["variants"]] == [
        ("api_key_redacted-max_num_seqs_2", {"api_key": "[redacted]", "max_num_seqs": 2}),
        ("api_key_redacted-max_num_seqs_4", {"api_key": "[redacted]", "max_num_seqs": 4})]
    assert [(name, p) for name, data in _stored_bytes(run_dir).items() for p in parts if p.encode() in data] == []
