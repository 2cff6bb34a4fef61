"""Default repeats of a sweep config: enough for a diff to decide (issue 4).

Expected values: with n + n repeats the smallest two-sided Mann-Whitney p is 2 / C(2n, n)
(pipeline/diff.py); 4 + 4 gives 0.029 and 5 + 5 gives 0.008, both below α = 0.05, and 5 is
the configured default for any config (hardware configs included) that does not set repeats.
config/transformers-cpu.yaml (the CPU default) sets 5 explicitly as well.
"""

from __future__ import annotations

from pipeline.config import parse_config
from pipeline.diff import min_two_sided_p


def test_default_repeats_let_a_diff_decide():
    cfg = parse_config({"name": "gpu", "hardware": "h200", "engine": "vllm",
                        "models": [{"name": "m", "served_name": "org/m"}]})
    assert cfg.repeats == 5
    assert min_two_sided_p(cfg.repeats, cfg.repeats) <= 0.05



def test_cpu_default_config_lets_a_diff_decide():
    from pipeline.config import load_config
    from tests.conftest import REPO

    cfg = load_config(REPO / "config" / "transformers-cpu.yaml")
    assert min_two_sided_p(cfg.repeats, cfg.repeats) <= 0.05
