"""Prefix caching as a tuning setting (``variants[].prefix_caching``, pipeline.config.variants): its flag reaches the
vLLM command after the template's own, a value that is not a boolean is refused in one line, and the model page says
what caching a shared prefix saves (pipeline.pages.tuning.prefix_words).

Fault kinds: a shared-prefix workload could not be swept with prefix caching on and off (the only way was a raw
``args`` flag the pages could not read); the flag placed before the template's ``--no-enable-prefix-caching`` would
lose to it (vLLM's boolean flags: the last one given wins).
"""

from __future__ import annotations

import pytest

from pipeline.config.sweepconfig import load_config
from pipeline.config.variants import variant_config
from pipeline.core.errors import BatchmarkError
from pipeline.backends.serverproc import format_command
from tests.conftest import REPO


def test_the_example_config_sweeps_prefix_caching_off_and_on():
    """config/vllm-cpu-prefix-caching.yaml: its template turns caching off; the baseline repeats it, the other
    variant's --enable-prefix-caching comes after it, last, so it is the one vLLM keeps."""
    cfg = load_config(REPO / "config" / "vllm-cpu-prefix-caching.yaml")
    assert cfg.lengths.prefix_len == 192
    off, on = (variant_config(cfg, v).vllm for v in cfg.variant_list())
    cmd = format_command(on.command, {"model": "m", "served_name": "m", "host": "h", "port": 1, "seed": 0,
                                      "python": "py", "max_num_seqs": 16, "gpu_memory_utilization": 0.9,
                                      "max_model_len": 512, "dtype": "float32"}, on.extra_args)
    assert cmd.index("--no-enable-prefix-caching") < cmd.index("--enable-prefix-caching") == len(cmd) - 1
    assert off.extra_args == ["--no-enable-prefix-caching"]
    assert [v.settings() for v in cfg.variant_list()] == [{"prefix_caching": False}, {"prefix_caching": True}]


def test_a_prefix_caching_that_is_not_a_boolean_is_refused(tmp_path):
    text = (REPO / "config" / "vllm-cpu-prefix-caching.yaml").read_text().replace(
        "prefix_caching: true", "prefix_caching: sometimes")
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(BatchmarkError, match=r"variants\.1\.prefix_caching|variants\[1\]\.prefix_caching") as e:
        load_config(tmp_path / "c.yaml")
    assert "\n" not in str(e.value)


def test_the_page_says_what_caching_the_prefix_saves():
    """By hand: a 192-token prefix before 64 of a request's own: 256 prompt tokens, of which a later request
    prefills 64; 192 / 256 = 75 % less prefill."""
    from pipeline.pages.tuning import explanations

    lines = explanations({"off": {"prefix_caching": False}, "on": {"prefix_caching": True}}, None, [(64, 32)],
                         prefix_len=192)
    assert lines == ["off: prefix caching off: every request prefills its whole prompt, the 192 shared tokens included",
                     "on: prefix caching on: the 192 shared tokens are prefilled once and their KV blocks reused, so a "
                     "later request prefills 64 of its 256 prompt tokens (75 % less prefill: TTFT falls most where "
                     "prefill is most of it)"]


def test_the_tuning_section_names_prefix_caching_and_what_it_bought(tmp_path, monkeypatch):
    """A tuning run whose second variant turns prefix caching on (tests/runbuilder: its TPOT × 0.7 from c = 4): the
    model page's tuning section explains the setting and says what it bought, as for any setting."""
    from pipeline.pages.render import render_site
    from tests import runbuilder

    monkeypatch.setitem(runbuilder.VARIANT_SETTINGS, "fp8-kv", {"prefix_caching": True})
    runbuilder.make_variant_run(tmp_path / "runs", "20261129T000000Z-testhost", concurrency=(1, 4))
    text = next(p for p in render_site(tmp_path / "pages", runs_dir=tmp_path / "runs")
                if p.name == "dense-a.md").read_text()
    section = text[text.index("### Tuning"):]
    assert "- fp8-kv: prefix caching on, but the workload shares no prefix: only repeated prompts gain." in section
    bought = next(line for line in section.splitlines() if line.startswith("- **fp8-kv**"))
    assert bought.startswith("- **fp8-kv**: +43 % peak output throughput at c = 4 (64/16)")  # 1 / 0.7 = 1.43
    assert "TTFT p50 −30 % at c = 4 (64/16)" in bought


def test_the_simulated_server_caches_the_prefix_of_the_variant_that_turns_it_on():
    """Fault kind: prefix caching said to be a setting the simulated server ignores, so a simulated tuning run shows
    the two variants alike.  By hand: config/vllm-cpu-prefix-caching.yaml's 192-token prefix is 12 full 16-token
    blocks, all 192 found cached with caching on, none off; run.json's variants[].simulated says it is modelled."""
    from pipeline.backends.simulated import SimulatedBackend
    from pipeline.config.sweepconfig import parse_config
    from pipeline.config.variants import simulated_statement

    data = {"name": "pc", "hardware": "dgx-spark", "backend": "simulated", "input_len": 64, "output_len": 32,
            "lengths": {"prefix_len": 192}, "concurrency": [1, 2], "models": [{"name": "m", "card": "gpt-oss-20b"}],
            "variants": [{"name": "off", "prefix_caching": False}, {"name": "on", "prefix_caching": True}]}
    cfg = parse_config(data)
    cached = []
    for v in cfg.variant_list():
        backend = SimulatedBackend(variant_config(cfg, v))
        backend.variant = v
        backend.load(cfg.models[0])
        cached.append(backend.server.cached_prefix_tokens)
    assert cached == [0, 192]
    assert "prefix_caching" in simulated_statement(cfg.variant_list()[1])["modelled"]
