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
(found only because the client knows what it sent).  Then the same for a server that spells the key another way
(``--fault echo_spelled``: halves apart, reversed, base64, URL-encoded), and for the ``vllm`` backend's own server
(``fake_vllm_server.py --api-key``): a variant's ``--api-key``, ``VLLM_API_KEY`` and ``HF_TOKEN``, and a
``VLLM_API_KEY`` exported in the shell, are sent where the server asks for them and never stored.
"""

from __future__ import annotations

import secrets
import sys
import zipfile
from pathlib import Path

import pytest

from pipeline.analysis import stages
from pipeline.store import pointfiles, runs
from pipeline.config.sweepconfig import parse_config
from pipeline.backends import get_backend
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
        engine = get_backend(cfg)
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
            get_backend(cfg).load(cfg.models[0])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "rejected a plain streaming request (HTTP 400" in str(err.value) and "[redacted]" in str(err.value)
    assert key[:12] not in str(err.value)


def _spellings_of(key: str) -> dict[str, str]:
    """Every spelling of ``key`` a stored byte must not hold, each by its name (worked from the definitions: halves of
    ``len // 2``, base64 per RFC 4648 §4 (standard) and §5 (URL-safe), the core of ``base64("Bearer " + key)``)."""
    import base64

    half = len(key) // 2
    in_header = base64.b64encode(("Bearer " + key).encode()).decode()
    return {"key": key, "first half": key[:half], "second half": key[half:], "reversed": key[::-1],
            "base64": base64.b64encode(key.encode()).decode().rstrip("="),
            "base64url": base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
            # "Bearer " is 7 bytes: the key starts 1 byte into a 3-byte group; characters 10 … ⌊8·(7+n)/6⌋ − 1 are its own
            "base64 inside the header": in_header[10:(8 * (7 + len(key))) // 6]}


def test_a_key_echoed_in_pieces_reversed_or_encoded_is_never_stored(tmp_path, monkeypatch):
    """Fault kind: a server that echoes the key split in two, reversed or base64-encoded got every one of those
    spellings into the published ``summaries.json``; the client knows the key it sent and redacts every spelling."""
    from tests.conftest import make_scratch_root
    from tests.integration.served_helpers import build_tokenizer
    from pipeline.pages.render import render_site

    key = "Zq7" + secrets.token_hex(12)  # no known shape, 27 characters: halves of 13 and 14
    root = make_scratch_root(tmp_path)
    monkeypatch.setenv("BATCHMARK_ROOT", str(root))
    monkeypatch.setenv("BATCHMARK_TEST_KEY", key)
    tok = tmp_path / "tok"
    build_tokenizer(tok)
    run_dir = root / "data" / "runs" / "20260101T000000Z-test"
    proc, url = start_server("echo_spelled", tmp_path)
    try:
        cfg = parse_config(_config(url, tok, 2))
        runs.create_run(run_dir, {"source": "measured", "config": cfg.model_dump(mode="json"), "hardware": {"name": "cpu"}})
        engine = get_backend(cfg)
        engine.load(cfg.models[0])
        runs.write_point(run_dir, engine.measure(PointKey("m", "openai", 8, 16, 2), 1, True, 0))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    runs.complete_run(run_dir, derive=stages.write_derived)
    render_site(root / "data" / "pages")

    errors = [r.error for rep in pointfiles.load_point(pointfiles.point_path(run_dir, PointKey("m", "openai", 8, 16, 2))).repeats
              for r in rep.requests if r.error]
    said = {w for e in errors for w in ("key starts", "reversed", "b64 ", "b64url", "header", "quoted", "halves") if w in e}
    assert len(said) >= 5, errors  # the server spelled it several ways (16 requests cycle through 7)
    assert all("[redacted]" in e for e in errors), errors
    files = {**_every_text(run_dir), **_every_text(root / "data" / "pages")}
    assert any(name.endswith("summaries.json") for name in files)
    leaked = [(name, what) for name, data in files.items() for what, form in _spellings_of(key).items()
              if form.encode() in data]
    assert leaked == []


def test_a_key_the_server_inherits_is_sent_and_never_stored(tmp_path, monkeypatch):
    """Fault kind: ``VLLM_API_KEY`` exported in the shell that starts the sweep (vLLM reads it when no ``--api-key``
    is given) made the server refuse every request (the client sent no key), and its log stored the key."""
    from tests.conftest import make_scratch_root
    from tests.integration.served_helpers import FAKE_SERVER, build_tokenizer
    from pipeline.machine.hardware import ProbeResult
    from pipeline.metrics.summarize import summarize_point
    from pipeline.sweep import gridwalk

    key = secrets.token_urlsafe(18)
    root = make_scratch_root(tmp_path)
    monkeypatch.setenv("BATCHMARK_ROOT", str(root))
    monkeypatch.setenv("VLLM_API_KEY", key)
    monkeypatch.setattr(gridwalk, "probe", lambda *a, **k: ProbeResult("cpu", "float32", 10.0, 0.1, [10.0], [0.1], 1, 1, 1))
    tok = tmp_path / "tok"
    build_tokenizer(tok)
    cfg = parse_config({
        "name": "inherited", "hardware": "dgx-spark", "backend": "vllm", "input_len": 16, "output_len": 8,
        "concurrency": [1], "repeats": 1,
        "vllm": {"command": f"{sys.executable} {FAKE_SERVER} --port {{port}} --served-model-name {{served_name}}",
                 "tokenizer": str(tok), "requests_per_point": 4, "stop_grace_s": 5},
        "models": [{"name": "m1", "path": "/models/m1", "served_name": "m1"}]})
    run_dir = gridwalk.run_sweep(cfg, root / "data" / "runs" / "20260101T000000Z-inh", progress=False,
                                 log=lambda m: None, derive=stages.write_derived)
    assert [summarize_point(p).completed for p in pointfiles.load_points(run_dir)] == [4]
    assert [name for name, data in _every_text(run_dir).items() if key.encode() in data] == []


def test_a_variants_server_credentials_are_never_stored(tmp_path, monkeypatch):
    """Fault kind: a variant's ``--api-key KEY`` and its environment's ``VLLM_API_KEY`` / ``HF_TOKEN`` (no ``hf_``
    shape) were stored in ``run.json`` (config, variants' settings, the server's command), the committed server log and
    the published pages; a ``PYTHONPATH`` list kept every folder after its first.  Here a vLLM stand-in that requires
    the key (401 without it, as ``vllm serve --api-key``) and prints it, bare, to its log is measured through the
    ``vllm`` engine: every request completes (the engine sends the server's own key) and no stored byte holds a value."""
    from tests.conftest import make_scratch_root
    from tests.integration.served_helpers import FAKE_SERVER, build_tokenizer
    from pipeline.machine.hardware import ProbeResult
    from pipeline.metrics.summarize import summarize_point
    from pipeline.pages.render import render_site
    from pipeline.sweep import gridwalk

    k_flag, k_env, k_hub = (secrets.token_urlsafe(18) for _ in range(3))
    root = make_scratch_root(tmp_path)
    monkeypatch.setenv("BATCHMARK_ROOT", str(root))
    monkeypatch.setattr(gridwalk, "probe", lambda *a, **k: ProbeResult("cpu", "float32", 10.0, 0.1, [10.0], [0.1], 1, 1, 1))
    tok = tmp_path / "tok"
    build_tokenizer(tok)
    cmd = (f"{sys.executable} {FAKE_SERVER} --host {{host}} --port {{port}} --served-model-name {{served_name}} "
           f"--max-num-seqs {{max_num_seqs}}")
    cfg = parse_config({
        "name": "keyed", "hardware": "dgx-spark", "backend": "vllm", "input_len": 16, "output_len": 8,
        "concurrency": [1], "repeats": 1,
        "vllm": {"command": cmd, "tokenizer": str(tok), "requests_per_point": 4, "stop_grace_s": 5},
        "variants": [{"name": "keyed", "args": ["--api-key", k_flag],
                      "env": {"VLLM_API_KEY": k_env, "HF_TOKEN": k_hub,
                              "PYTHONPATH": "/srv/zq7user/lib/one:/srv/zq7user/lib/two"}}],
        "models": [{"name": "m1", "path": "/models/m1", "served_name": "m1"}]})
    run_dir = gridwalk.run_sweep(cfg, root / "data" / "runs" / "20260101T000000Z-keyed", progress=False,
                                 log=lambda m: None, derive=stages.write_derived)
    render_site(root / "data" / "pages")

    assert [summarize_point(p).completed for p in pointfiles.load_points(run_dir)] == [4]  # the key was sent
    meta = runs.read_run_json(run_dir)
    settings = meta["variants"][0]["settings"]
    assert settings["args"] == ["--api-key", "[redacted]"]
    assert settings["env"] == {"VLLM_API_KEY": "[redacted]", "HF_TOKEN": "[redacted]",
                               "PYTHONPATH": "<abs>/one:<abs>/two"}
    server = next(iter(meta["server"]["servers"].values()))
    assert "--api-key '[redacted]'" in server["command"] or "--api-key [redacted]" in server["command"]
    log = (run_dir / server["log"]).read_text()
    assert "fake-vllm: non-default args" in log and "[redacted]" in log
    files = {**_every_text(run_dir), **_every_text(root / "data" / "pages")}
    assert any(name.endswith("run.json") and "downloads" in name for name in files)
    leaked = [(name, k) for name, data in files.items() for k in (k_flag, k_env, k_hub, "/srv/zq7user")
              if k.encode() in data]
    assert leaked == []


def test_a_credential_in_extra_body_echoed_by_the_server_is_never_stored(tmp_path, monkeypatch):
    """Fault kind: a credential the config sends in ``openai.extra_body`` (``{"api_key": K}``, ``{"metadata":
    {"user_token": K}}``), echoed by a server that refuses the unknown fields (``'input': 'K'``, a field named by no
    credential word), was stored in every record's ``error``: only the ``Authorization`` key was the client's secret."""
    from tests.integration.served_helpers import build_tokenizer

    k_body, k_meta = secrets.token_urlsafe(15), secrets.token_hex(9)
    tok = tmp_path / "tok"
    build_tokenizer(tok)
    run_dir = tmp_path / "20260101T000000Z-body"
    run_dir.mkdir()
    proc, url = start_server("echo_body", tmp_path)
    try:
        raw = _config(url, tok, 1)
        raw["openai"]["extra_body"] = {"api_key": k_body, "metadata": {"user_token": k_meta}}
        raw["openai"]["requests_per_point"] = 4
        cfg = parse_config(raw)
        engine = get_backend(cfg)
        engine.load(cfg.models[0])
        points = engine.measure(PointKey("m", "openai", 8, 16, 1), 1, True, 0)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    errors = [r.error for rep in points.repeats for r in rep.requests if r.error]
    assert errors and all("extra_forbidden" in e and "[redacted]" in e for e in errors), errors
    assert [e for e in errors if k_body in e or k_meta in e] == []
