"""The config's ``backend`` (how batchmark gets the tokens), its deprecated spelling ``engine``, and the digest kept
across the rename (the digest is part of run ids and of resume: a changed digest refuses to resume a run)."""

import re

import pytest

from pipeline.config.sweepconfig import load_config, parse_config
from pipeline.core.errors import BatchmarkError
from tests.conftest import REPO

ENDPOINT = {"name": "e", "hardware": "cpu", "models": [{"name": "m", "served_name": "m"}]}
OLD = "engine"  # the deprecated key, named once


def test_engine_key_is_read_as_backend_with_one_warning_naming_the_file(capsys):
    cfg = parse_config({**ENDPOINT, OLD: "openai"}, "old.yaml")
    err = capsys.readouterr().err.strip().splitlines()
    assert cfg.backend == "openai"
    assert len(err) == 1 and "old.yaml: engine:" in err[0] and "backend" in err[0]


def test_backend_key_reads_without_a_warning(capsys):
    assert parse_config({**ENDPOINT, "backend": "openai"}, "new.yaml").backend == "openai"
    assert capsys.readouterr().err == ""


def test_both_keys_are_refused_naming_the_file():
    with pytest.raises(BatchmarkError, match=r"^both\.yaml: engine: .*backend") as err:
        parse_config({**ENDPOINT, OLD: "openai", "backend": "openai"}, "both.yaml")
    assert "\n" not in str(err.value)


def test_the_old_and_new_spellings_have_the_digest_the_runs_were_stored_under(tmp_path):
    """config/spark.yaml's digest before the rename was 35d4acd622a5 (its committed runs' ``config_digest``, and the
    figure tests/unit/config/test_tuning_space.py pins); written with either key it stays that."""
    text = (REPO / "config" / "spark.yaml").read_text()
    for key in (OLD, "backend"):
        path = tmp_path / f"{key}.yaml"
        path.write_text(re.sub(rf"\n(?:backend|{OLD}): vllm\n", f"\n{key}: vllm\n", text))
        assert f"\n{key}: vllm\n" in path.read_text()
        assert load_config(path).digest() == "35d4acd622a5"


def test_openai_engine_left_unset_keeps_the_digest_and_set_changes_it():
    plain = parse_config({**ENDPOINT, "backend": "openai"})
    named = parse_config({**ENDPOINT, "backend": "openai", "openai": {"engine": "vllm"}})
    assert plain.openai.engine is None and named.openai.engine == "vllm"
    assert plain.digest() != named.digest()  # another engine behind the endpoint: another grid of points
    with pytest.raises(BatchmarkError, match="openai.engine"):
        parse_config({**ENDPOINT, "backend": "openai", "openai": {"engine": "vLLM 0.11"}})


def test_the_stated_engine_is_the_backend_s_own_or_the_endpoint_s():
    """What a plan keys its points under (no server asked): docs/definitions.md, "engine"."""
    arch = {"name": "m", "architecture": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                                          "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 256}}
    assert parse_config({"name": "t", "hardware": "cpu", "models": [arch]}).stated_engine() == "transformers"
    assert parse_config({**ENDPOINT, "backend": "openai"}).stated_engine() == "openai"  # not known without the server
    assert parse_config({**ENDPOINT, "backend": "openai", "openai": {"engine": "llama.cpp"}}).stated_engine() == "llama.cpp"
    assert parse_config({**ENDPOINT, "backend": "vllm"}).stated_engine() == "vllm"


OLD_FALLBACK = "fallback_engine"  # the deprecated spelling of vllm.fallback_backend, named once
SERVED = {**ENDPOINT, "backend": "vllm"}


def test_fallback_engine_is_read_as_fallback_backend_with_one_warning_naming_the_file(capsys):
    cfg = parse_config({**SERVED, "vllm": {OLD_FALLBACK: "transformers"}}, "old.yaml")
    err = capsys.readouterr().err.strip().splitlines()
    assert cfg.vllm.fallback_backend == "transformers"
    assert len(err) == 1 and f"old.yaml: vllm.{OLD_FALLBACK}:" in err[0] and "fallback_backend" in err[0]
    assert parse_config({**SERVED, "vllm": {"fallback_backend": "transformers"}}, "new.yaml").vllm.fallback_backend
    assert capsys.readouterr().err == ""


def test_both_fallback_keys_are_refused_naming_the_file():
    with pytest.raises(BatchmarkError, match=rf"^both\.yaml: vllm\.{OLD_FALLBACK}: .*fallback_backend") as err:
        parse_config({**SERVED, "vllm": {OLD_FALLBACK: "transformers", "fallback_backend": "transformers"}}, "both.yaml")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name, digest", [("vllm-cpu.yaml", "af177273dc82"), ("vllm-cpu-tuning.yaml", "b789ef349fbe")])
def test_either_fallback_spelling_keeps_the_digest_of_before_the_rename(tmp_path, name, digest):
    """Both configs' digests as main computed them before ``vllm.fallback_backend`` existed (each then written
    ``fallback_engine: transformers``; vllm-cpu-tuning.yaml's since its grid ends at c = 32, the digest of its
    committed run 20261202T073413Z-vm); written with either key they stay that."""
    text = (REPO / "config" / name).read_text()
    for key in (OLD_FALLBACK, "fallback_backend"):
        path = tmp_path / f"{key}.yaml"
        path.write_text(re.sub(rf"\n  (?:fallback_backend|{OLD_FALLBACK}): transformers\n", f"\n  {key}: transformers\n", text))
        assert f"\n  {key}: transformers\n" in path.read_text()
        assert load_config(path).digest() == digest
