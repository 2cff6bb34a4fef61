"""The ``vllm`` backend knows its server's credentials (:mod:`pipeline.backends.serverproc`).

Fault kinds pinned: a server started with ``--api-key`` (or ``VLLM_API_KEY`` in its environment, which
``vllm serve`` reads when the flag is absent: https://docs.vllm.ai/en/latest/cli/serve.html) answered every request
401, since the client sent no key; and its keys reached the stored server log, which was scrubbed of key shapes
only.  Expected values by hand from the command lines written here.
"""

from __future__ import annotations

from pipeline.backends.serverproc import server_api_key, server_secrets


def test_the_key_a_server_asks_for_is_the_flags_else_its_environments():
    """The flag wins over the environment, as vLLM's ``args.api_key or envs.VLLM_API_KEY``; both spellings of it."""
    assert server_api_key(["vllm", "serve", "m", "--api-key", "K1"], {"VLLM_API_KEY": "K2"}) == "K1"
    assert server_api_key(["vllm", "serve", "m", "--api-key=K1"], {}) == "K1"
    assert server_api_key(["vllm", "serve", "m"], {"VLLM_API_KEY": "K2"}) == "K2"
    assert server_api_key(["vllm", "serve", "m", "--api-key", "--port"], {}) is None


def test_a_servers_secrets_are_its_credential_flags_and_variables():
    """Configured values whatever their length; inherited ones from 8 characters (``X_TOKEN=1`` would take every 1)."""
    cmd = ["vllm", "serve", "m", "--api-key", "K1", "--hf-token=K2", "--max-num-batched-tokens", "4096"]
    got = server_secrets(cmd, {"HF_TOKEN": "K3", "VLLM_CPU_KVCACHE_SPACE": "4"},
                         {"GITHUB_TOKEN": "ghtoken-12345678", "X_TOKEN": "1", "HOME": "/root"})
    assert got == ("K1", "K2", "K3", "ghtoken-12345678")


def test_a_credential_assigned_in_the_command_is_the_servers_and_redacted():
    """Fault kind: a credential set as an environment assignment inside ``vllm.command`` (``env VLLM_API_KEY=K vllm
    serve …``, ``docker run -e HF_TOKEN=K …``) was no secret of the server: its log, which prints it bare, was stored
    with it, and the client sent no key to a server that asked for one (every request 401).  A count or a tokenizer's
    field assigned the same way (``MAX_NUM_BATCHED_TOKENS=8192``, ``eos_token=2``) stays."""
    from pipeline.core.credentials import redact_argv

    cmd = ["env", "VLLM_API_KEY=K1", "MAX_NUM_BATCHED_TOKENS=8192", "vllm", "serve", "m", "eos_token=2"]
    assert server_secrets(cmd, {}) == ("K1",)
    assert server_api_key(cmd, {"VLLM_API_KEY": "K0"}) == "K1"  # the command's assignment wins over the inherited
    assert server_api_key(["vllm", "serve", "m", "--api-key", "K2", *cmd], {}) == "K2"  # the flag wins over both
    docker = ["docker", "run", "-e", "HF_TOKEN=K3", "--env", "VLLM_API_KEY=K4", "img", "vllm", "serve", "m"]
    assert server_secrets(docker, {}) == ("K3", "K4") and server_api_key(docker, {}) == "K4"
    assert redact_argv(docker)[3:6] == ["HF_TOKEN=[redacted]", "--env", "VLLM_API_KEY=[redacted]"]
    assert redact_argv(cmd)[2:] == cmd[2:]
