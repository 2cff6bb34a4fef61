"""Config validation: one-line errors that name the bad field."""

import pytest
import yaml

from pipeline.config.sweepconfig import load_config
from pipeline.core.errors import BatchmarkError
from tests.conftest import REPO, TINY_CONFIG


def _write(tmp_path, mutate):
    data = yaml.safe_load(TINY_CONFIG.read_text())
    mutate(data)
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_default_config_is_valid():
    cfg = load_config(REPO / "config" / "transformers-cpu.yaml")
    assert cfg.backend == "transformers" and len(cfg.models) == 2


@pytest.mark.parametrize("mutate,expected", [
    (lambda d: d.update(concurency=[1]), "concurency: unknown key"),
    (lambda d: d.update(concurrency=[1, -2]), "concurrency"),
    (lambda d: d.update(hardware="dgx-sparkle"), "unknown hardware profile 'dgx-sparkle'"),
    (lambda d: d["models"][0].update(architecture={"hidden_size": 8}), "models.0.architecture"),
    (lambda d: d.update(repeats=0), "repeats"),
    # Regression (fault kind: bad architecture caught only after the probe, with a 12 KB message)
    (lambda d: d["models"][0]["architecture"].update(model_type="lllama"), "models.0.architecture: unknown model_type 'lllama'"),
    (lambda d: d["models"][0]["architecture"].update(hidden_size=-5), "models.0.architecture"),
])
def test_bad_field_is_named(tmp_path, mutate, expected):
    with pytest.raises(BatchmarkError) as err:
        load_config(_write(tmp_path, mutate))
    msg = str(err.value)
    assert expected in msg and "\n" not in msg
    assert str(tmp_path / "c.yaml") in msg


def test_not_yaml(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(BatchmarkError, match="not valid YAML"):
        load_config(p)


def test_vllm_cpu_config_is_the_real_vllm_default():
    """The main job's config: the vllm engine, from its own environment, with an in-process fallback."""
    cfg = load_config(REPO / "config" / "vllm-cpu.yaml")
    assert cfg.backend == "vllm" and cfg.vllm.fallback_engine == "transformers"
    assert "{python}" in cfg.vllm.command and cfg.vllm.python == ".venv-vllm/bin/python"
    assert [m.architecture["model_type"] for m in cfg.models] == ["llama", "qwen3_moe"]
