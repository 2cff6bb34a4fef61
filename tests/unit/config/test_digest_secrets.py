"""The config's digest, stored in ``run.json`` beside the published config, holds no credential.

Fault kind pinned: a secret recoverable from a published hash.  ``config_digest`` was 48 bits of a SHA-256 of the
whole config, the server's ``--api-key`` and ``VLLM_API_KEY`` included, stored beside the same config with the key
redacted: whoever reads the run can try candidate keys offline until the digest matches, and a short key
(``k3Y9x``) falls at once.  Right: the digest is of the config as published (credentials redacted), so it is the
same whatever the key, and a config without a credential keeps the digest its runs were stored under.
"""

from __future__ import annotations

from pipeline.config.sweepconfig import parse_config


def _config(args: list[str], env: dict[str, str], command: str | None = None) -> dict:
    vllm = {"extra_args": args, "env": env, **({"command": command} if command else {})}
    return {"name": "d", "hardware": "cpu", "backend": "vllm", "vllm": vllm,
            "models": [{"name": "m", "path": "/models/m"}]}


def test_the_digest_is_the_same_whatever_the_key_and_unchanged_without_one():
    """Two keys, one config: one digest (no oracle for guessing the key), for flags, env and a command's assignment."""
    for make in (lambda k: _config(["--api-key", k], {}), lambda k: _config([f"--api-key={k}"], {}),
                 lambda k: _config([], {"VLLM_API_KEY": k, "HF_TOKEN": k}),
                 lambda k: _config([], {}, f"env VLLM_API_KEY={k} vllm serve {{model}} --port {{port}}")):
        assert parse_config(make("k3Y9x")).digest() == parse_config(make("another-key-entirely")).digest()
    # a config that names no credential keeps the digest of the code before (printed by it), so its runs resume
    cfg = parse_config(_config(["--max-num-batched-tokens", "8192"], {"VLLM_CPU_KVCACHE_SPACE": "4"}))
    assert cfg.digest() == "43e087216a4f"
    assert parse_config(_config(["--max-num-batched-tokens", "4096"], {"VLLM_CPU_KVCACHE_SPACE": "4"})).digest() != cfg.digest()

