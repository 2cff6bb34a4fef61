"""Silent fallbacks made visible (issue 20, "One owner for a run's life").

- A served model whose card cannot be counted from its config: the reason is recorded (it becomes
  ``models_without_card`` in the engine's provenance, ``run.json``), not swallowed.
- The provenance says how the load generator sent: "closed loop", and the open loop where the
  config has one (it said "closed loop" for open-loop runs).
- The vLLM engine has no ``__del__``: the sweep stops its server explicitly.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pipeline.config import load_config
from pipeline.engines import served, vllm

REPO = Path(__file__).resolve().parents[2]


def test_a_card_that_cannot_be_counted_says_why(tmp_path: Path):
    reasons: dict[str, str] = {}
    missing = tmp_path / "no-such-model"
    missing.mkdir()  # a local folder without a config.json: transformers raises (ValueError today)
    assert served.card_from_config(str(missing), "m", reasons) is None
    assert set(reasons) == {"m"}
    assert str(missing) in reasons["m"] and "Error: " in reasons["m"] and "MBU" in reasons["m"]
    assert "\n" not in reasons["m"]


def test_the_provenance_names_the_open_loop():
    spark = load_config(REPO / "config" / "spark.yaml")  # a concurrency grid, then Poisson rates without a cap
    assert spark.open_loop is not None
    text = served.ServedEngine.client_description(SimpleNamespace(cfg=spark))
    assert text == "batchmark loadgen (aiohttp, orjson), closed loop, then open loop (poisson arrivals, no cap)"
    closed = load_config(REPO / "config" / "vllm-cpu.yaml")
    assert closed.open_loop is None
    assert served.ServedEngine.client_description(SimpleNamespace(cfg=closed)) == \
        "batchmark loadgen (aiohttp, orjson), closed loop"


def test_the_vllm_server_is_not_left_to_garbage_collection():
    assert "__del__" not in vars(vllm.VLLMEngine)
    src = (REPO / "pipeline" / "sweep.py").read_text(encoding="utf-8")
    finally_block = src[src.rindex("    finally:\n        bar.close()"):]
    assert "engine.unload()" in finally_block.split("\n    log(")[0]
