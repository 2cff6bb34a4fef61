"""A variant's server flags reach the server as words, never through a shell (:meth:`VLLMBackend.start`).

Fault kind pinned: command injection (CWE-78, https://cwe.mitre.org/data/definitions/78.html).  A variant's ``args``,
``vllm.extra_args`` and ``env`` are data of a config that may come from someone else; a flag value ``; touch PWNED``,
``$(touch PWNED)`` or backticks would run a command if the server's command line were handed to ``/bin/sh``.  Here
the "server" is a Python process that prints the words it was given and exits: each hostile value arrives as one
word, as written; no file is created; the process was started from a list of words with ``shell=False``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pipeline.config.sweepconfig import parse_config
from pipeline.config.variants import variant_config
from pipeline.core.errors import BatchmarkError
from pipeline.backends import get_backend

HOSTILE = ["; touch PWNED1", "$(touch PWNED2)", "`touch PWNED3`", "| touch PWNED4", "&& touch PWNED5 #", "$HOME"]


def test_hostile_flag_values_never_reach_a_shell(tmp_path, monkeypatch):
    """Each hostile value is one argv word, as written; no PWNED file; Popen got a list and no shell."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    printer = "import json, sys; print('ARGV ' + json.dumps(sys.argv[1:]), flush=True); sys.exit(7)"
    cfg = parse_config({
        "name": "inj", "hardware": "cpu", "backend": "vllm", "input_len": 8, "output_len": 8, "concurrency": [1],
        "vllm": {"command": f"{sys.executable} -c {json.dumps(printer)} --port {{port}}", "tokenizer": "x",
                 "extra_args": ["--note", HOSTILE[0]], "health_timeout_s": 60},
        "variants": [{"name": "inj", "args": ["--x", *HOSTILE[1:]], "env": {"EVIL": "$(touch PWNED6)"}}],
        "models": [{"name": "m", "path": "/models/m", "served_name": "m"}]})
    engine = get_backend(variant_config(cfg, cfg.variant_list()[0]))
    calls = []
    real_popen = subprocess.Popen

    def spy(args, **kw):
        calls.append((args, kw))
        return real_popen(args, **kw)

    monkeypatch.setattr(subprocess, "Popen", spy)
    with pytest.raises(BatchmarkError, match="exited with code 7") as exc:
        engine.start(cfg.models[0])
    assert len(calls) == 1 and isinstance(calls[0][0], list) and not calls[0][1].get("shell", False)
    logged = next(line for line in engine.log_path.read_text().splitlines() if line.startswith("ARGV "))
    words = json.loads(logged[len("ARGV "):])
    assert words[-len(HOSTILE) - 2:] == ["--note", HOSTILE[0], "--x", *HOSTILE[1:]]
    assert "ARGV" in str(exc.value)
    assert sorted(p.name for p in tmp_path.rglob("PWNED*")) == []
