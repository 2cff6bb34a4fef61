"""Secrets and machine paths are removed from text before it is stored (Security items 3 and 6).

Fault kinds pinned: a server's answer echoing ``Authorization: Bearer sk-…`` was stored in a record's
``error`` and published; stored server logs and point metadata carried the measuring machine's home,
temporary and environment folders.  Expected values are the inputs with the secret spans replaced by
hand.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import urllib.parse

import pytest

from pipeline.core import paths
from pipeline.core.scrub import REDACTED, redact, relative_path, scrub_paths

KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t"


@pytest.mark.parametrize("text, expected", [
    (f"invalid header Authorization: Bearer {KEY}", f"invalid header Authorization: Bearer {REDACTED}"),
    (f'{{"Authorization": "Bearer {KEY}", "Host": "x"}}', f'{{"Authorization": "Bearer {REDACTED}", "Host": "x"}}'),
    (f"{{'authorization': 'Bearer {KEY}'}}", f"{{'authorization': 'Bearer {REDACTED}'}}"),
    (f"key {KEY} was revoked", f"key {REDACTED} was revoked"),
    ("got bearer abc.def-ghi_jkl", f"got bearer {REDACTED}"),
    ("Authorization: Basic dXNlcjpwYXNz", f"Authorization: Basic {REDACTED}"),
    ('{"api_key": "abc123", "max_tokens": 256}', f'{{"api_key": "{REDACTED}", "max_tokens": 256}}'),
    ("x-api-key: zzz; next", f"x-api-key: {REDACTED}; next"),
    ("see https://user:pw@host/v1", f"see https://{REDACTED}@host/v1"),
    ("token hf_" + "a1" * 17 + " used", f"token {REDACTED} used"),
    ("id AKIAABCDEFGHIJKLMNOP here", f"id {REDACTED} here"),
    ("Bearer%20" + KEY, f"Bearer%20{REDACTED}"),
])
def test_credentials_are_redacted_by_shape(text, expected):
    assert redact(text) == expected


@pytest.mark.parametrize("text", ["maximum context length is 2048 tokens", "a basic test", "model sk-llama-2-7b-chat",
                                  "max_tokens=16", "HTTP 503: server overloaded", "disk-cache-12345678"])
def test_ordinary_text_is_left_alone(text):
    assert redact(text) == text


def test_the_key_sent_is_redacted_in_every_spelling_whatever_its_shape():
    key = "p/l+a=i\"n-0042"  # no known shape: only the client's knowledge of what it sent finds it
    for spelled in (key, urllib.parse.quote(key, safe=""), urllib.parse.quote_plus(key), json.dumps(key)[1:-1]):
        out = redact(f"echo <{spelled}>", [key])
        assert out == f"echo <{REDACTED}>", (spelled, out)
    assert redact(None, [key]) is None and redact("", [key]) == ""


def test_machine_paths_become_stand_ins(tmp_path, monkeypatch):
    monkeypatch.setenv("BATCHMARK_ROOT", str(tmp_path / "proj"))
    home = os.path.expanduser("~")
    text = (f"{tmp_path}/proj/data/models/x {sys.prefix}/lib/python3 {tempfile.gettempdir()}/abc "
            f"{home}/.cache/hf /home/alice/models/m /Users/bob/m /root/.cache /tmpfoo /usr/lib/x")
    out = scrub_paths(text)
    assert out.split() == ["<repo>/data/models/x", "<venv>/lib/python3", "<tmp>/abc", "~/.cache/hf", "~/models/m",
                           "~/m", "~/.cache", "/tmpfoo", "/usr/lib/x"]
    assert scrub_paths("/home/me.bak/x") != "/home/me.bak/x" and scrub_paths(None) is None


def test_paths_inside_the_repository_are_stored_relative(monkeypatch, tmp_path):
    monkeypatch.setenv("BATCHMARK_ROOT", str(tmp_path))
    (tmp_path / "data" / "models" / "tok").mkdir(parents=True)
    assert relative_path(str(tmp_path / "data" / "models" / "tok")) == "data/models/tok"
    assert relative_path(str(paths.root() / "x")) == "x"
    assert relative_path("Qwen/Qwen3-0.6B") == "Qwen/Qwen3-0.6B"  # a hub id: as given
    assert relative_path("/home/alice/tok") == "~/tok"


def test_an_import_records_its_files_without_machine_folders(scratch_root, tmp_path):
    # Regression (fault kind: the measuring machine's paths in a published run): source_files and command held the imported file's absolute (temporary) path
    import shutil

    from pipeline.store import runs
    from pipeline.importers import import_run
    from tests.conftest import DATA

    inside = scratch_root / "imports" / "c1.json"
    inside.parent.mkdir()
    shutil.copy(DATA / "vllm-bench" / "llama-3.1-8b-c1.json", inside)
    outside = tmp_path / "elsewhere" / "c4.json"
    outside.parent.mkdir()
    shutil.copy(DATA / "vllm-bench" / "llama-3.1-8b-c4.json", outside)
    run_dir = import_run("vllm-bench", [inside, outside], "dgx-spark")
    meta = runs.read_run_json(run_dir)
    expected = ["imports/c1.json", f"<tmp>/{outside.relative_to(tempfile.gettempdir())}"]
    assert meta["source_files"] == expected
    assert meta["command"].startswith(f"batchmark import vllm-bench {expected[0]} {expected[1]} --hardware")
    assert str(tmp_path) not in (run_dir / "run.json").read_text()
