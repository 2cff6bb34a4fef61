"""One broken model card breaks only the configs that name it, and the error names the broken file.

Fault kind: a registry that parses every entry to find one (one invalid card in ``data/models/`` made every
config's ``plan`` and ``sweep`` fail, blamed on the config's own model).  Right values: a config naming
Llama-3.1-8B plans its 3 points with a broken ``zz-broken.yaml`` beside it; a config naming the broken card is
refused naming ``zz-broken.yaml``; a card lookup that finds nothing names the skipped file.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from pipeline import cli
from pipeline.cards.registry import load_card
from pipeline.core import paths
from pipeline.core.errors import BatchmarkError
from tests.runbuilder import SMALL_SIMULATED_CONFIG

BROKEN = "name: zz-broken\nsource: hand\nconfig:\n  num_hidden_layers: -3\n"


def _plan(cfg_text: str, root) -> tuple[int, str, str]:
    cfg = root / "config" / "c.yaml"
    cfg.write_text(cfg_text)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["plan", "--config", str(cfg)])
    return rc, out.getvalue(), err.getvalue()


def test_a_broken_card_beside_does_not_break_a_config_that_does_not_name_it(scratch_root):
    (paths.models_dir() / "zz-broken.yaml").write_text(BROKEN)
    rc, out, err = _plan(SMALL_SIMULATED_CONFIG, scratch_root)
    assert rc == 0, err
    assert load_card("Llama-3.1-8B").name
    with pytest.raises(BatchmarkError, match="zz-broken.yaml"):
        load_card("zz-broken")
    with pytest.raises(BatchmarkError, match=r"no card for 'nonesuch'.*unreadable card file\(s\) skipped: .*zz-broken.yaml"):
        load_card("nonesuch")


def test_a_config_naming_the_broken_card_names_its_file(scratch_root):
    (paths.models_dir() / "zz-broken.yaml").write_text(BROKEN)
    rc, out, err = _plan(SMALL_SIMULATED_CONFIG.replace("card: Llama-3.1-8B", "card: zz-broken"), scratch_root)
    assert rc != 0 and "zz-broken.yaml" in err


@pytest.mark.parametrize("kv", [64, 5])
def test_more_kv_heads_than_attention_heads_is_refused(kv):
    """Grouped-query attention (Ainslie et al. 2023, https://arxiv.org/abs/2305.13245): H query heads in G groups,
    one KV head a group, so 1 <= G <= H and G divides H (vLLM checks ``num_heads % num_kv_heads == 0``).  32 heads
    with 64 or 5 KV heads is no model; 32 with 8 is Llama-3.1-8B's."""
    from pipeline.cards.modelarch import check_arch_numbers

    with pytest.raises(BatchmarkError, match=f"card.yaml: config: num_key_value_heads: {kv} does not divide the 32"):
        check_arch_numbers({"num_attention_heads": 32, "num_key_value_heads": kv}, "card.yaml: config")
    check_arch_numbers({"num_attention_heads": 32, "num_key_value_heads": 8}, "card.yaml: config")


def test_a_broken_card_named_by_its_name_not_its_file_gives_its_own_error(scratch_root):
    """A card file ``other.yaml`` whose ``name`` is the model asked for, with 0 heads: its own error, naming it."""
    card = paths.models_dir() / "other.yaml"
    card.write_text("name: Broken-1B\nsource: t\nconfig:\n  num_attention_heads: 0\n")
    with pytest.raises(BatchmarkError, match=r"other.yaml: config: num_attention_heads: Input should be greater"):
        load_card("Broken-1B")
