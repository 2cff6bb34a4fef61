"""A failed ``batchmark sweep`` leaves no run behind; what can be checked is checked before a run exists.

Regression (fault kind: empty incomplete run): each failed sweep of ``config/endpoint.yaml`` (no server, no
``BATCHMARK_API_KEY``, a tokenizer hub id with no network, which retried the hub for ~40 s) left an empty
"incomplete" run folder under ``data/runs/``.  Here a real HTTP server on 127.0.0.1 stands in for an endpoint
(one that wants the key ``k1`` and one that does not), and a closed port for a server that is not running.
"""

from __future__ import annotations

import http.server
import socket
import threading
import time

import pytest

from pipeline.config.sweepconfig import parse_config
from pipeline.core.errors import BatchmarkError
from pipeline.sweep.preflight import check_endpoint, check_tokenizer, discard_if_empty, preflight


class _Handler(http.server.BaseHTTPRequestHandler):
    key: str | None = None

    def do_GET(self):  # noqa: N802 (http.server's name)
        want = self.server.key  # type: ignore[attr-defined]
        if want and self.headers.get("Authorization") != f"Bearer {want}":
            self.send_response(401)
        else:
            self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"data": []}')

    def log_message(self, *a):  # quiet
        pass


@pytest.fixture
def server():
    """Start a real HTTP server; ``server(key)`` returns its base URL (``/v1``)."""
    started = []

    def start(key: str | None) -> str:
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        srv.key = key  # type: ignore[attr-defined]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        started.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}/v1"

    yield start
    for srv in started:
        srv.shutdown()
        srv.server_close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: nothing listens there


def test_endpoint_checks(server, monkeypatch):
    monkeypatch.delenv("BM_KEY", raising=False)
    check_endpoint(server(None), "BM_KEY")  # no key wanted, none set: fine
    keyed = server("k1")
    with pytest.raises(BatchmarkError, match=r"^openai.base_url: http://127.0.0.1:\d+/v1 wants an API key \(HTTP 401\); export BM_KEY$"):
        check_endpoint(keyed, "BM_KEY")
    monkeypatch.setenv("BM_KEY", "wrong")
    with pytest.raises(BatchmarkError, match=r"refused the key in BM_KEY \(HTTP 401\)$"):
        check_endpoint(keyed, "BM_KEY")
    monkeypatch.setenv("BM_KEY", "k1")
    check_endpoint(keyed, "BM_KEY")
    with pytest.raises(BatchmarkError, match=r"^openai.base_url: nothing answers at http://127.0.0.1:\d+/v1 .*start the server"):
        check_endpoint(f"http://127.0.0.1:{closed_port()}/v1", None)


def test_tokenizer_offline_fails_at_once_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.monotonic()
    with pytest.raises(BatchmarkError) as exc:
        check_tokenizer("no-such-org/no-such-model-24", "models.m: path")
    assert time.monotonic() - t0 < 2.0  # no retries of an unreachable hub (they took ~40 s)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("models.m: path: tokenizer 'no-such-org/no-such-model-24' is not a local folder")
    assert "HF_HUB_OFFLINE is set" in msg
    check_tokenizer(str(tmp_path), "models.m: path")  # a local folder passes
    with pytest.raises(BatchmarkError, match="is no folder"):
        check_tokenizer(str(tmp_path / "missing"), "models.m: path")
    # an unreachable hub (here: a check that says so) fails the same way
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(BatchmarkError, match=r"hub cannot be asked \(down\)"):
        check_tokenizer("no-such-org/no-such-model-24", "f", reachable=lambda: (False, "down"))


def test_preflight_of_an_endpoint_config(server, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    base = {"name": "x", "hardware": "cpu", "backend": "openai", "models": [{"name": "a", "served_name": "m", "path": str(tmp_path)}]}
    notes = []
    monkeypatch.delenv("BM_KEY", raising=False)
    preflight(parse_config({**base, "openai": {"base_url": server(None), "api_key_env": "BM_KEY"}}), log=notes.append)
    assert notes == ["note: BM_KEY (openai.api_key_env) is not set: requests carry no API key"]
    with pytest.raises(BatchmarkError, match="served_name: tokenizer 'org/m'"):
        preflight(parse_config({**base, "models": [{"name": "a", "served_name": "org/m"}],
                                "openai": {"base_url": server(None)}}))


def test_discard_if_empty_keeps_a_server_log(tmp_path):
    from pipeline.store import runs

    bare = tmp_path / "R1"
    bare.mkdir()
    assert discard_if_empty(bare) and not bare.exists()
    with_log = tmp_path / "R2"
    runs.create_run(with_log, {"source": "measured"})
    (with_log / "servers").mkdir()
    (with_log / "servers" / "m.log").write_text("CUDA out of memory")
    assert not discard_if_empty(with_log) and with_log.exists()
    empty = tmp_path / "R3"
    runs.create_run(empty, {"source": "measured"})
    assert discard_if_empty(empty) and not empty.exists()
