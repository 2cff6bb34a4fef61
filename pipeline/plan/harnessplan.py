"""A plan's points as another harness would measure them: a static batch, one wave of c requests, or the closed loop.

`batchmark plan --harness static|wave|closed`: the closed loop is the plan's own simulated server
(:mod:`pipeline.plan.estimate`); a static batch (llama-batched-bench, the transformers backend) and a wave (llama-benchy:
c requests sent at once) are predicted by :mod:`pipeline.simulation.harness` from the hardware profile's engine terms,
so a published figure is compared with the harness that measured it, each throughput by that harness's own
definition (:data:`pipeline.simulation.harness.THROUGHPUT`: llama-benchy's ``t/s (total)`` over one window, not c × its
per-request rate).  Wall times stay the closed loop's (what the
sweep will run); only each closed-loop point's throughput, TTFT and TPOT are replaced.
"""

from __future__ import annotations

from dataclasses import replace

from pipeline.cards.servedformat import with_kv_cache
from pipeline.config.sweepconfig import SweepConfig
from pipeline.config.variants import kv_cache_name, variant_config
from pipeline.core.errors import BatchmarkError
from pipeline.simulation import harness as harnesses
from pipeline.machine.hardware import load_profile
from pipeline.plan.estimate import Plan, server_options


def with_harness(plan: Plan, cfg: SweepConfig, harness: str) -> Plan:
    """``plan`` with its closed-loop points predicted as ``harness`` measures them (``closed``: unchanged, the plan's
    simulated server costed by the stated engine's terms).

    Raises:
        BatchmarkError: an unknown harness, or a profile without terms for the stated engine (named, with the engines
            it has): a harness prices a figure with that engine's terms or not at all.
    """
    from pipeline.backends.simulated import resolve_card

    if harness not in harnesses.HARNESSES:
        raise BatchmarkError(f"--harness: unknown {harness!r} (known: {', '.join(harnesses.HARNESSES)})")
    hw = load_profile(cfg.hardware)
    # the serving engine: an endpoint's stated one (openai.engine; unstated, "openai" is costed as vLLM: ENGINE_ALIASES)
    engine = "vllm" if cfg.backend == "simulated" else cfg.stated_engine()
    terms = hw.engine_terms(engine)
    if terms is None:
        raise BatchmarkError(f"--harness {harness}: hardware profile {hw.name!r} states no engine terms for {engine} "
                             f"(engines: {', '.join(sorted(hw.engines)) or 'none'}, in data/hardware/{hw.name}.yaml); "
                             "plan without --harness costs its steps by the roofline and step_overhead_s")
    if harness == "closed":
        return plan  # the simulated server, its steps costed by the engine's terms (make_plan)
    specs = {m.name: m for m in cfg.models}
    variants = {v.name: v for v in cfg.variant_list()}
    models = []
    for m in plan.models:
        card = resolve_card(specs[m.model], hw.name, engine)
        v = variants.get(m.variant)
        if v is not None and kv_cache_name(v):  # the cell's own server: its KV cache dtype (an FP8 KV variant)
            card = with_kv_cache(card, kv_cache_name(v))
        # each cell at its own shape (a tuning plan's cells: model × variant × shape), the config's where unstated
        input_len, output_len = m.input_len or cfg.input_len, m.output_len or cfg.output_len
        # the cell's server's prefill chunk (vLLM's --max-num-batched-tokens): a wave's long prompt takes a pass a chunk
        budget = server_options(variant_config(cfg, v) if v is not None else cfg).max_num_batched_tokens
        points = []
        for p in m.points:
            if p.load == "closed" and p.runs and p.concurrency:
                costing = harnesses.Costing(card, terms, hw.bandwidth_gb_s_spec, hw.compute_peak_tflops())
                got = harnesses.predict(harness, costing, p.concurrency, input_len, output_len,
                                        max_num_batched_tokens=budget)
                p = replace(p, output_throughput_tok_s=got["decode_tok_s"], tpot_s=got["tpot_s"], ttft_s=got["ttft_s"])
            points.append(p)
        models.append(replace(m, points=points, note=f"throughput, TTFT and TPOT as a {harness} harness measures them: "
                                                      f"{harnesses.THROUGHPUT[harness]}"))
    return replace(plan, models=models)
