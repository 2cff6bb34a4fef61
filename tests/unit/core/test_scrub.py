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


@pytest.mark.parametrize("text, expected", [
    ("vllm serve m --api-key k3Y9x --port 8000", f"vllm serve m --api-key {REDACTED} --port 8000"),
    ("vllm serve m --api-key=k3Y9x", f"vllm serve m --api-key={REDACTED}"),
    ("--hf-token tok123 --max-num-batched-tokens 4096", f"--hf-token {REDACTED} --max-num-batched-tokens 4096"),
    ("['--api-key', 'k3Y9x', '--seed', '0']", f"['--api-key', '{REDACTED}', '--seed', '0']"),
    ("VLLM_API_KEY=k3Y9x vllm serve m", f"VLLM_API_KEY={REDACTED} vllm serve m"),
    ("export HF_TOKEN=plain123", f"export HF_TOKEN={REDACTED}"),
    ('HUGGING_FACE_HUB_TOKEN="plain123"', f'HUGGING_FACE_HUB_TOKEN="{REDACTED}"'),
    ("non-default args: {'api_key': ['k3Y9x']}", f"non-default args: {{'api_key': ['{REDACTED}']}}"),
    ("DB_PASSWORD: hunter2", f"DB_PASSWORD: {REDACTED}"),
])
def test_a_credential_written_as_a_flag_or_an_assignment_is_redacted(text, expected):
    """Fault kind: a credential written as a command-line flag or an environment assignment was stored as it was
    (only ``Authorization``/``api_key`` fields and known key shapes were found); expected by hand."""
    assert redact(text) == expected


@pytest.mark.parametrize("text", [f"Authorization: Bearer {KEY}", '{"api_key": "abc123"}', "x-api-key: zzz; next",
                                  "--api-key k3Y9x", "VLLM_API_KEY=k3Y9x", "{'api_key': ['k3Y9x']}"])
def test_redacting_twice_changes_nothing_more(text):
    """Fault kind: text scrubbed at the client and again at the store became ``[redacted]]`` (the first redaction's
    bracket taken for a value); redaction is idempotent."""
    once = redact(text)
    assert REDACTED in once and redact(once) == once


def test_a_known_key_is_redacted_in_pieces_reversed_and_base64():
    """Fault kind: a server echoing the key split in two, reversed or base64-encoded got it stored; each spelling is
    worked by hand from RFC 4648 (standard and URL-safe alphabets) and the key's two halves."""
    import base64

    key = "Zq7f3a9c01b2e4d5c6b7a8f9e0"  # 26 characters, no known shape
    b64 = base64.b64encode(key.encode()).decode()
    in_header = base64.b64encode(b"Bearer " + key.encode()).decode()
    cases = [f"start {key[:13]} ... end {key[13:]}", f"rev {key[::-1]}", f"b64 {b64}", f"b64 {b64.rstrip('=')}",
             f"url {base64.urlsafe_b64encode(key.encode()).decode().rstrip('=')}", f"hdr {in_header}",
             f"json {json.dumps(key[::-1])}", f"hex {key.encode().hex()}", f"HEX {key.encode().hex().upper()}"]
    for text in cases:
        out = redact(text, [key])
        for piece in (key[:13], key[13:], key[::-1][:13], key[::-1][13:], b64[:20], in_header[10:30],
                      key.encode().hex()[:16], key.encode().hex().upper()[-16:]):
            assert piece not in out, (text, out)
    assert redact("nothing of it here: 0123456789", [key]) == "nothing of it here: 0123456789"


def test_every_folder_of_a_path_list_is_scrubbed():
    """Fault kind: ``PYTHONPATH``/``LD_LIBRARY_PATH`` in a variant's environment kept every folder after the first."""
    from pipeline.core.scrub import scrub_tree

    assert scrub_tree({"PYTHONPATH": "/srv/u/a/lib:/srv/u/b/lib:/opt/x/y"}) == {"PYTHONPATH": "<abs>/lib:<abs>/lib:<abs>/y"}
    # a folder of the machine is replaced where a path starts, never inside another (/var/tmp is not /var + /tmp)
    assert scrub_tree("/tmp/a/b:/var/tmp/c/d:/home/alice/e") == "<tmp>/a/b:<tmp>/c/d:~/e"
    assert scrub_tree("http://127.0.0.1:8000/v1/completions") == "http://127.0.0.1:8000/v1/completions"


def test_a_variants_flags_and_environment_are_redacted_by_name():
    """Fault kind: a variant's ``args: [--api-key, K]`` and ``env: {VLLM_API_KEY: K, HF_TOKEN: K}`` stored in
    ``run.json``; by name, the value is redacted, and that value wherever else the tree repeats it."""
    from pipeline.core.scrub import scrub_tree

    tree = {"settings": {"args": ["--api-key", "k3Y9xQ2w", "--hf-token=plain123", "--max-num-seqs", "8"],
                         "env": {"VLLM_API_KEY": "envkey42", "HF_TOKEN": "plain123", "VLLM_CPU_KVCACHE_SPACE": "4"}},
            "log_tail": "serving with k3Y9xQ2w and envkey42", "kv_bytes_per_token": 12}
    assert scrub_tree(tree) == {
        "settings": {"args": ["--api-key", REDACTED, f"--hf-token={REDACTED}", "--max-num-seqs", "8"],
                     "env": {"VLLM_API_KEY": REDACTED, "HF_TOKEN": REDACTED, "VLLM_CPU_KVCACHE_SPACE": "4"}},
        "log_tail": f"serving with {REDACTED} and {REDACTED}", "kv_bytes_per_token": 12}
    assert scrub_tree({"headers": {"Authorization": "Basic dXNlcjpwYXNz", "X-Api-Key": "k", "Accept": "*/*"}}) == {
        "headers": {"Authorization": REDACTED, "X-Api-Key": REDACTED, "Accept": "*/*"}}
    # a short value is redacted where it is named, not in every other word that holds it (a model "test-model")
    assert scrub_tree({"env": {"VLLM_API_KEY": "test"}, "model": "test-model", "note": "latest"}) == {
        "env": {"VLLM_API_KEY": REDACTED}, "model": "test-model", "note": "latest"}
    # the other side: a count of tokens, a tokenizer's special token, the name of the key's variable are no credential
    for text in ("--max-num-batched-tokens 4096", "eos_token: </s>", "Missing key: foo",
                 "--return-tokens-as-token-ids --seed 0", "api_key_env=BATCHMARK_KEY"):
        assert redact(text) == text


@pytest.mark.parametrize("text", [
    "print_info: EOS token        = 2 '</s>'", "print_info: EOT token = 128009 '<|eot_id|>'", "LF token = 13 'Ċ'",
    "eot_token: 128009", "boi_token: <start_of_image>", "eoi_token=<end_of_image>", "fim_prefix_token: <fim>",
    "first_token=2.1", "last_token: 5", "stop_token: </s>", "output_token=16", "token=64",
])
def test_a_token_id_count_or_special_token_is_no_credential(text):
    """Fault kind: over-redaction.  A llama.cpp server log's special tokens (``EOS token = 2``), a tokenizer's
    ``eot_token``/``boi_token`` and a count named ``…_token`` became ``[redacted]``, destroying published data: a
    number is no token of a credential, nor is a special token's name."""
    assert redact(text, pieces=False) == text


@pytest.mark.parametrize("text, expected", [
    ("HF_TOKEN=12345678901234567890", f"HF_TOKEN={REDACTED}"),  # a long number still is a credential's value
    ("token: 4f3a9c2e1b", f"token: {REDACTED}"), ("BOT_TOKEN=123456:ABC-def", f"BOT_TOKEN={REDACTED}"),
    ("DB_PASSWORD=1234", f"DB_PASSWORD={REDACTED}"),
    ("GET https://h/v1/models?key=AIzaSyA1b2c3 failed", f"GET https://h/v1/models?key={REDACTED} failed"),
    ("https://acct.blob.core.windows.net/c/f?sv=2022&sig=Zq7abc%2Bdef%3D", f"https://acct.blob.core.windows.net/c/f?sv=2022&sig={REDACTED}"),
])
def test_a_credential_in_a_query_or_of_digits_is_still_redacted(text, expected):
    """Fault kind: a key passed as a URL's ``?key=`` (Google's API keys) or an Azure SAS ``&sig=`` was stored as it
    was (a lone ``key`` is no credential in running text); the rule that keeps a token id keeps no credential."""
    assert redact(text, pieces=False) == expected


def test_a_name_used_as_a_key_is_no_credentials_name():
    """Fault kind: over-redaction of published data by name: a model named ``../../etc/passwd`` keys its entry in
    ``models_as_named``, and its last word "passwd" made the entry's value (the name as given) ``[redacted]``.  Only a
    key shaped as a field, variable or flag name (``HF_TOKEN``, ``--api-key``) names a credential."""
    from pipeline.core.scrub import scrub_tree

    doc = {"models_as_named": {"../../etc/passwd": "../../etc/passwd", "my secret model": "my secret model"},
           "env": {"HF_TOKEN": "abcdefgh12345678"}, "args": ["--api-key", "zyxwvuts98765432"]}
    out = scrub_tree(doc)
    assert out["models_as_named"] == doc["models_as_named"]
    assert out["env"] == {"HF_TOKEN": "[redacted]"} and out["args"] == ["--api-key", "[redacted]"]
