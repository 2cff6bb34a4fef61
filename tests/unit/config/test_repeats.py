"""Default repeats of a sweep config: enough for a diff to decide.

Expected values: the diff tests one value per repeat with Welch's t (pipeline/diff/stats.py), which needs 2 or more
values a side and can then reach any p; 5 repeats (the default for any config that does not set repeats, and
config/transformers-cpu.yaml's) detect a 15 % change at one point 9 times in 10 at 2 % drift between repeats
(benchmarks/diff_power.py, docs/diff-statistics.md).  The rank test used before Welch's could not go below
2 / C(2n, n): 0.1 with 3 + 3 (kept as ``min_two_sided_p`` to document why it was replaced).
"""

from __future__ import annotations

from pipeline.config.sweepconfig import parse_config
from pipeline.diff.metrics import significance
from pipeline.diff.stats import min_two_sided_p


def test_default_repeats_let_a_diff_decide():
    cfg = parse_config({"name": "gpu", "hardware": "h200", "backend": "vllm",
                        "models": [{"name": "m", "served_name": "org/m"}]})
    assert cfg.repeats == 5
    # five repeats a side, B = A − 2 (A = 100 … 102 by 0.5: variance 0.625 each): t = 2 / sqrt(2 × 0.625 / 5) = 4.0 at
    # 8 df, p = 0.004 (t table: t_0.995,8 = 3.355): called; the rank test's floor 2 / 252 also was below 0.05
    a = [100.0, 100.5, 101.0, 101.5, 102.0]
    res = significance(a, [x - 2 for x in a], 0.05)
    assert res.significant and res.p_value < 0.01 and min_two_sided_p(cfg.repeats, cfg.repeats) <= 0.05


def test_cpu_default_configs_let_a_diff_decide():
    from pipeline.config.sweepconfig import load_config
    from tests.conftest import REPO

    for name in ("transformers-cpu.yaml", "vllm-cpu.yaml"):
        cfg = load_config(REPO / "config" / name)
        # the config's own repeats a side, A = 100, 101, … (spread 1 %) and B 20 % slower: Welch calls it at
        # n = 3 (t = 20 / 1 = 20 at 4 df: p < 0.001) but cannot at n = 1 (no variance) — the count is what decides
        a = [100.0 + i for i in range(cfg.repeats)]
        assert significance(a, [0.8 * x for x in a], 0.05).significant, name
    assert not significance([100.0], [80.0], 0.05).significant  # one repeat a side: nothing can be called


def test_configs_quote_what_repeats_detect():
    # repeats is chosen knowingly: every config says what its repeats can detect, next to `repeats:`
    from tests.conftest import REPO

    for path in sorted((REPO / "config").glob("*.yaml")):
        text = path.read_text()
        assert "diff_power.py" in text and "9 times in 10" in text, path.name
