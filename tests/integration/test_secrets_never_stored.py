"""The API key never reaches a stored file, whatever the server sends back (fault kind: a credential echoed by a server and stored).

Regression (fault kind: a secret echoed by the server is stored): a server that echoed the
``Authorization`` header in its 400 answer got ``Bearer sk-…`` into the records' ``error`` text, and
``pages`` copied it into ``downloads/…/records.zip``.  Here a real server process
(``fake_stream_server.py --fault echo_auth``) sends the header or the bare key back four ways (a JSON
400 body with every request header, a stream error event, a non-JSON stream event, a plain-text
401); a point is measured through the real ``openai`` engine with the key from the environment, the
run is completed and its pages and downloads are rendered, and no byte of any file written (the run
folder, the pages, the zip's members) holds the key, while the errors still say what the server said
(``[redacted]`` where the key was).  Two keys: an OpenAI-shaped one and one of no known shape
(found only because the client knows what it sent).
"""

from __future__ import annotations

import secrets
import zipfile
from pathlib import Path

import pytest

from pipeline.analysis import stages
from pipeline.store import pointfiles, runs
from pipeline.config.sweepconfig import parse_config
from pipeline.engines import get_engine
from pipeline.core.errors import BatchmarkError
from pipeline.core.records import PointKey
from tests.integration.test_served_token_truth import start_server

pytestmark = pytest.mark.slow


def _every_text(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (zip members too, as ``file!member``) → its bytes."""
    out: dict[str, bytes] = {}
    for p in folder.rglob("*"):
        if p.is_file():
            out[str(p)] = p.read_bytes()
            if p.suffix == ".zip":
                with zipfile.ZipFile(p) as zf:
                    out.update({f"{p}!{n}": zf.read(n) for n in zf.namelist()})
    return out


def _config(url: str, tok: Path, c: int) -> dict:
    return {"name": "t", "hardware": "cpu", "backend": "openai", "input_len": 8, "output_len": 16,
            "concurrency": [c], "repeats": 1,
            "openai": {"base_url": url, "requests_per_point": 16, "tokenizer": str(tok), "timeout_s": 5,
                       "api_key_env": "BATCHMARK_TEST_KEY", "max_consecutive_failures": 0},
            "models": [{"name": "m", "served_name": "m"}]}


@pytest.mark.parametrize("key", [f"sk-proj-{secrets.token_urlsafe(24)}", secrets.token_hex(12)],
                         ids=["openai-project-key", "hex-key"])  # fixed ids: pytest-xdist workers must collect alike
def test_a_key_echoed_by_the_server_is_never_stored(tmp_path, monkeypatch, key):
    from tests.conftest import make_scratch_root
    from tests.integration.served_helpers import build_tokenizer
    from pipeline.pages.render import render_site

    root = make_scratch_root(tmp_path)
    monkeypatch.setenv("BATCHMARK_ROOT", str(root))
    monkeypatch.setenv("BATCHMARK_TEST_KEY", key)
    tok = tmp_path / "tok"
    build_tokenizer(tok)
    run_dir = root / "data" / "runs" / "20260101T000000Z-test"
    proc, url = start_server("echo_auth", tmp_path)
    try:
        cfg = parse_config(_config(url, tok, 2))
        runs.create_run(run_dir, {"source": "measured", "config": cfg.model_dump(mode="json"), "hardware": {"name": "cpu"}})
        engine = get_engine(cfg)
        engine.load(cfg.models[0])
        runs.write_point(run_dir, engine.measure(PointKey("m", "openai", 8, 16, 2), 1, True, 0))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    runs.complete_run(run_dir, derive=stages.write_derived)  # published with its derived files, as the sweep does
    render_site(root / "data" / "pages")

    errors = [r.error for rep in pointfiles.load_point(pointfiles.point_path(run_dir, PointKey("m", "openai", 8, 16, 2))).repeats
              for r in rep.requests if r.error]
    # every kind of echo happened (the server's rule: after the probe, requests cycle 400 / event / not JSON / 401)
    assert any(e.startswith("HTTP 400") for e in errors) and any(e.startswith("HTTP 401") for e in errors)
    assert any(e.startswith("server error event") for e in errors) and any("not JSON" in e for e in errors)
    assert all("[redacted]" in e for e in errors), errors
    files = {**_every_text(run_dir), **_every_text(root / "data" / "pages")}
    assert any(name.endswith("records.zip") for name in files)
    leaked = [name for name, data in files.items() if key.encode() in data or key[:12].encode() in data]
    assert leaked == []


def test_a_refused_probe_names_the_answer_without_the_key(tmp_path, monkeypatch):
    from tests.integration.served_helpers import build_tokenizer

    key = f"sk-{secrets.token_hex(20)}"
    monkeypatch.setenv("BATCHMARK_TEST_KEY", key)
    tok = tmp_path / "tok"
    build_tokenizer(tok)
    proc, url = start_server("echo_auth_probe", tmp_path)
    try:
        cfg = parse_config(_config(url, tok, 1))
        with pytest.raises(BatchmarkError) as err:
            get_engine(cfg).load(cfg.models[0])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "rejected a plain streaming request (HTTP 400" in str(err.value) and "[redacted]" in str(err.value)
    assert key[:12] not in str(err.value)
