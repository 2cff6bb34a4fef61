"""What the explainers cost a step with on the site's hardware profile, each figure with where it comes from (pure).

The explainers predict from the model cards with no run, and they predict what ``batchmark plan`` predicts:

- the cards **as served**: the format the plan's engine (:data:`PLAN_ENGINE`, vLLM: the plan's simulated server is
  a vLLM server) loads on the profile's hardware (:func:`pipeline.cards.servedformat.served_card`; gpt-oss on a DGX
  Spark: MXFP4 throughout with an fp8 KV cache, ``DEFAULTS``' source), else the checkpoint's (the card file);
- the step **as the plan costs it**: the profile's engine terms (``engines.vllm`` of ``data/hardware/<name>.yaml``,
  fitted to the published runs their ``source`` names) over the spec bandwidth and the measured compute peak
  (:func:`pipeline.cards.stepcost.engine_terms_s`, the function the simulated server's steps follow); where the
  profile states no terms, the roofline at the compute peak (measured where the profile states one, else spec);
- the **spec-sheet roof** only where it is labelled as the spec.

Crossover (derived): under the engine's terms a step is the *sum* of its reads and its matmuls (Vidur's operator sum,
:func:`pipeline.cards.stepcost.calibrated_step_s`), so "compute binds" from the smallest B at which the FLOP terms
(experts', other matmuls', attention) cost at least the read terms (weights, MoE kernel, KV); under the roofline
(docs/definitions.md) where FLOPs(B) / peak ≥ bytes(B) / bandwidth.
"""

from __future__ import annotations

from typing import Any

from pipeline.analysis.analyze import roofline_step_s
from pipeline.cards.modelcards import ModelCard
from pipeline.cards.servedformat import served_card
from pipeline.cards.stepcost import engine_terms_s
from pipeline.machine.engineterms import EngineTerms
from pipeline.machine.hardware import ENGINE_ALIASES

#: The engine whose served formats and step terms the explainers use: the plan's (its simulated server is vLLM).
PLAN_ENGINE = "vllm"
#: The terms of :func:`pipeline.cards.stepcost.engine_terms_s` that read memory (the rest are FLOPs or fixed).
READ_TERMS = ("dense", "experts", "moe_kernel", "kv")
FLOP_TERMS = ("expert_flops", "matmul_flops", "attn_flops")
#: The largest B a crossover is searched to (None beyond it).
CROSSOVER_MAX = 65536
#: Engines as the pages name them.
ENGINE_NAMES = {"vllm": "vLLM", "llama.cpp": "llama.cpp"}


def engine_terms_of(hardware: dict[str, Any], engine: str = PLAN_ENGINE) -> EngineTerms | None:
    """The profile's (a ``HardwareProfile`` dict) terms of ``engine`` (its own name or an alias), None when none."""
    engines = hardware.get("engines") or {}
    got = engines.get(engine) or engines.get(ENGINE_ALIASES.get(engine, engine))
    return EngineTerms.model_validate(got) if got else None


def step_basis(hardware: dict[str, Any], engine: str = PLAN_ENGINE) -> dict[str, Any]:
    """What a step is costed with on ``hardware`` (a ``HardwareProfile`` dict), each figure with its source.

    ``bandwidth_gb_s`` (spec), ``peak_tflops`` (the compute roof: measured where stated, else spec; its ``peak_basis``
    and ``peak_source``), ``spec_tflops`` / ``spec_source`` (the spec sheet's), ``engine`` and ``terms`` (None: the
    roofline), ``terms_source`` (the published runs they were fitted to)."""
    measured = hardware.get("peak_tflops_measured")
    spec = hardware.get("peak_tflops_spec")
    terms = engine_terms_of(hardware, engine)
    return {"bandwidth_gb_s": hardware.get("bandwidth_gb_s_spec"), "bandwidth_source": hardware.get("source"),
            "peak_tflops": measured or spec, "peak_basis": "measured" if measured else ("spec" if spec else None),
            "peak_source": hardware.get("peak_tflops_measured_source") if measured else hardware.get("source"),
            "spec_tflops": spec, "spec_source": hardware.get("source"),
            "engine": engine if terms is not None else None, "terms": terms,
            "terms_source": terms.source if terms is not None else None}


def served_cards(cards: list[ModelCard], hardware_name: str | None, engine: str = PLAN_ENGINE) -> list[ModelCard]:
    """Each card as ``engine`` serves it on ``hardware_name`` (:func:`served_card`; unchanged where no default applies)."""
    return [served_card(c, engine=engine, hardware=hardware_name) for c in cards]


def served_info(card: ModelCard, checkpoint: ModelCard) -> dict[str, Any]:
    """Where a served card's format comes from: ``format`` (its label), ``kv_cache`` (dtype), ``source``, and whether it is
    the checkpoint's own (``is_checkpoint``), with the checkpoint's ``checkpoint`` label and ``checkpoint_weight_bytes``."""
    fmt = (card.extra or {}).get("served_format") or {}
    own = card is checkpoint or not fmt
    return {"format": card.quantization, "kv_cache": fmt.get("kv_cache") or "bf16", "is_checkpoint": own,
            "source": "the checkpoint's format, as the card file states it" if own else fmt.get("source") or "",
            "checkpoint": checkpoint.quantization, "checkpoint_weight_bytes": checkpoint.weight_bytes,
            "checkpoint_kv_bytes_per_token": checkpoint.kv_bytes_per_token}


def step_s(card: ModelCard, batch: int, context: float, bandwidth_gb_s: float, peak_tflops: float | None,
           terms: EngineTerms | None = None) -> tuple[float, str]:
    """A decode step (s) and what sets it (``"memory"`` or ``"compute"``): under ``terms`` the sum of
    :func:`engine_terms_s` (compute where its FLOP terms cost at least its read terms), else the roofline
    (:func:`roofline_step_s`)."""
    if terms is None:
        return roofline_step_s(card, batch, context, bandwidth_gb_s, peak_tflops)
    parts = engine_terms_s(card, batch, context, bandwidth_gb_s, peak_tflops, terms)
    reads, flops = sum(parts[k] for k in READ_TERMS), sum(parts[k] for k in FLOP_TERMS)
    return sum(parts.values()), ("compute" if flops >= reads else "memory")


def crossover_batch(card: ModelCard, bandwidth_gb_s: float, peak_tflops: float | None, context: float = 0.0,
                    terms: EngineTerms | None = None) -> int | None:
    """Smallest B from which compute sets the step (:func:`step_s`: the engine's terms, else the roofline), found by
    doubling then bisection (the reads grow with B through KV and expert coverage, the FLOPs linearly).  None without a
    peak, or when compute never binds below B = :data:`CROSSOVER_MAX`."""
    if not peak_tflops:
        return None

    def _binds(b: int) -> bool:
        return step_s(card, b, context, bandwidth_gb_s, peak_tflops, terms)[1] == "compute"

    hi = 1
    while not _binds(hi):
        hi *= 2
        if hi > CROSSOVER_MAX:
            return None
    lo = hi // 2  # _binds(lo) is False (or lo = 0); bisect to the first B where it holds
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _binds(mid) else (mid, hi)
    return hi


def crossover_rows(cards: list[ModelCard], checkpoints: list[ModelCard], basis: dict[str, Any]) -> list[dict[str, Any]]:
    """Per served card (``checkpoints``: the same models as their card files state them): ``terms_b`` (compute sets the
    plan's step from this B: the engine's terms at the measured peak; None without terms), ``roofline_b`` (the roofline
    at the compute roof of :func:`step_basis`) and ``spec_b`` (the roofline of the *checkpoint* at the spec peak: the
    figure before served formats and fitted terms, labelled as the spec's), context 0."""
    bw, peak = basis["bandwidth_gb_s"], basis["peak_tflops"]
    rows = []
    for c, ck in zip(cards, checkpoints):
        rows.append({"model": c.name, "served": served_info(c, ck),
                     "terms_b": crossover_batch(c, bw, peak, terms=basis["terms"]) if basis["terms"] else None,
                     "roofline_b": crossover_batch(c, bw, peak), "spec_b": crossover_batch(ck, bw, basis["spec_tflops"])})
    return rows


def step_rows(cards: list[ModelCard], batches: list[int], basis: dict[str, Any]) -> list[dict[str, Any]]:
    """The model-card roofline chart's rows: per card and B, output tokens/s (B / step) and the step (ms), ``series``
    the plan's step (the engine's terms, else the roofline at the compute roof) and, dashed where it differs, the
    roofline at the spec-sheet peak (labelled as the spec)."""
    bw, peak, spec, terms = basis["bandwidth_gb_s"], basis["peak_tflops"], basis["spec_tflops"], basis["terms"]
    series = [(f"as plan costs it ({ENGINE_NAMES.get(basis['engine'], basis['engine'])}'s fitted terms, {peak:g} TFLOP/s {basis['peak_basis']})"
               if terms else f"roofline ({peak:g} TFLOP/s {basis['peak_basis']})", peak, terms)] if peak else \
        [("roofline (bandwidth only: no peak stated)", None, None)]
    if spec and (terms is not None or spec != peak):
        series.append((f"roofline at the spec sheet's {spec:g} TFLOP/s", spec, None))
    rows = []
    for c in cards:
        label = f"{c.name} ({c.kind}, {c.quantization})"
        for name, roof, t in series:
            for b in batches:
                s, bound = step_s(c, b, 0.0, bw, roof, t)
                base = {"concurrency": b, "model": label, "series": name, "bound": bound}
                rows.append({**base, "tok_s": b / s, "panel": "output throughput (tokens/s, all users)"})
                rows.append({**base, "tok_s": s * 1e3, "panel": "step time = per-token latency (ms)"})
    return rows


def single_stream_tok_s(card: ModelCard, basis: dict[str, Any], context: float = 0.0) -> float | None:
    """One stream's tokens/s as ``plan`` costs its step (:func:`step_s` at B = 1 under the engine's terms, else the
    roofline), a prediction: 1 / step.  None without a bandwidth figure."""
    if not basis.get("bandwidth_gb_s"):
        return None
    return 1.0 / step_s(card, 1, context, basis["bandwidth_gb_s"], basis["peak_tflops"], basis["terms"])[0]
