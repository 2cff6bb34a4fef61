"""Per-step cost of a model card: bytes read and FLOPs of one decode step at batch B (pure).

The roofline, the bandwidth ceiling, MBU and MFU (:mod:`pipeline.analysis.analyze`), the KV capacity
(:mod:`pipeline.analysis.capacity`) and the explainers all cost a decode step from the same card numbers
(:class:`pipeline.cards.modelcards.ModelCard`, bytes with any quantisation folded in).

Formulas (docs/definitions.md, "bytes per decode step"):
- expert coverage under uniform top-k routing of B tokens over E experts:
  ``1 - (1 - k/E)**B`` (the probability that a given expert is picked by at least one of B
  independent tokens, each picking k of E);
- weight bytes read per step = dense bytes + routed-expert bytes × coverage(B);
- KV bytes read per step = B × KV bytes of one sequence at the context; a sliding-window
  layer holds at most ``window`` tokens, so one sequence at context n holds per-layer bytes ×
  (full layers × n + sliding layers × min(n, window));
- FLOPs per step ≈ 2 × B × matmul params per token + attention 4 × B × context × layers ×
  heads × head_dim (QKᵀ and AV, 2 FLOPs per multiply-add each) — Kaplan et al. 2020,
  "Scaling Laws for Neural Language Models", table 1.
"""

from __future__ import annotations

from pipeline.cards.modelcards import ModelCard


def expert_coverage(batch: int, experts_per_token: int | None, num_experts: int | None) -> float:
    """Expected fraction of a layer's routed experts touched by ``batch`` tokens: ``1 - (1 - k/E)**B``.

    Derived: under uniform routing one token misses a given expert with probability 1 - k/E;
    B independent tokens all miss it with probability (1 - k/E)**B.  Returns 1.0 for a dense
    model (no experts).  Raises ValueError for batch < 1 or k > E.
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if not num_experts or not experts_per_token:
        return 1.0
    if experts_per_token > num_experts:
        raise ValueError(f"experts_per_token {experts_per_token} > num_experts {num_experts}")
    return 1.0 - (1.0 - experts_per_token / num_experts) ** batch


def effective_batch(batch: float, routing_scale: float | None) -> float:
    """Independent tokens that touch as many experts as ``batch`` tokens of one step: ``1 + (B − 1) / (1 + (B − 1) / s)``.

    ``routing_scale`` s: None (or infinite) is uniform, independent routing (B_eff = B, the upper bound of
    coverage); 0 is identical routing (every sequence the same tokens, as llama-batched-bench decodes: B_eff = 1,
    coverage k/E, the lower bound); between, tokens of one step share experts more the larger the batch (their
    prompts alike, a topic's experts).  Fitted: a published vLLM gpt-oss-120b curve on a DGX Spark (llama-benchy,
    kubis.ai) follows uniform routing to c = 4 and about half the batch at c = 32, s ≈ 30 (data/hardware/dgx-spark.yaml).
    """
    if routing_scale is None or batch <= 1:
        return float(batch)
    extra = batch - 1.0
    return 1.0 + (extra / (1.0 + extra / routing_scale) if routing_scale > 0 else 0.0)


def coverage_at(batch: float, experts_per_token: int | None, num_experts: int | None,
                routing_scale: float | None = None) -> float:
    """Expert coverage at an effective batch (:func:`effective_batch`): ``1 − (1 − k/E)^B_eff`` (a real B_eff)."""
    if not num_experts or not experts_per_token:
        return 1.0
    return 1.0 - (1.0 - experts_per_token / num_experts) ** effective_batch(batch, routing_scale)


def weight_bytes_per_step(card: ModelCard, batch: int, routing_scale: float | None = None) -> float:
    """Weight bytes read by one decode step of ``batch`` sequences (bytes): dense + experts × coverage
    (uniform routing, or at the effective batch of ``routing_scale``: :func:`effective_batch`)."""
    if routing_scale is None:
        return card.dense_bytes + card.expert_bytes * expert_coverage(batch, card.experts_per_token, card.num_experts)
    return card.dense_bytes + card.expert_bytes * coverage_at(batch, card.experts_per_token, card.num_experts,
                                                              routing_scale)


def kv_bytes_per_sequence(card: ModelCard, context: float) -> float:
    """KV-cache bytes one sequence holds at ``context`` tokens (bytes).

    Derived: per-layer bytes per token = kv_bytes_per_token / layers; full-attention layers
    hold every token, sliding-window layers at most ``sliding_window`` of them:
    per-layer × (full layers × n + sliding layers × min(n, window)).
    """
    per_layer = card.kv_bytes_per_token / card.num_layers if card.num_layers else 0.0
    sliding = card.sliding_layers if card.sliding_window else 0
    full = card.num_layers - sliding
    window_ctx = min(context, card.sliding_window) if card.sliding_window else 0
    return per_layer * (full * context + sliding * window_ctx)


def kv_bytes_per_step(card: ModelCard, batch: int, context: float) -> float:
    """KV-cache bytes read by one decode step (bytes) = B × KV bytes of one sequence at ``context``."""
    return batch * kv_bytes_per_sequence(card, context)


def bytes_per_decode_step(card: ModelCard, batch: int, context: float, routing_scale: float | None = None) -> float:
    """Total bytes read by one decode step at batch B and mean context (tokens): weights + KV; an MoE's experts at
    uniform routing (``routing_scale`` None) or at the effective batch of ``routing_scale`` (0: identical, k/E)."""
    return weight_bytes_per_step(card, batch, routing_scale) + kv_bytes_per_step(card, batch, context)


def flops_per_decode_step(card: ModelCard, batch: int, context: float) -> float:
    """FLOPs of one decode step: 2 × B × (active − embedding) params + 4 × B × attended tokens × heads × head_dim.

    Attended tokens summed over layers = full layers × context + sliding layers × min(context,
    window) (Kaplan et al. 2020, table 1, with the window bounding what a layer attends to).
    """
    matmul_params = card.active_params - card.embedding_params
    sliding = card.sliding_layers if card.sliding_window else 0
    attended = (card.num_layers - sliding) * context + sliding * (min(context, card.sliding_window) if sliding else 0)
    attention = 4.0 * batch * attended * card.num_attention_heads * card.head_dim
    return 2.0 * batch * matmul_params + attention


def calibrated_step_s(memory_s, compute_s, overhead_s: float, bandwidth_fraction: float, compute_fraction: float):
    """The calibrated step time (s): ``overhead_s + memory_s / bandwidth_fraction + compute_s / compute_fraction``.

    ``memory_s``: the step's bytes ÷ bandwidth, ``compute_s``: its FLOPs ÷ peak (s at the full roofs; floats or
    numpy arrays alike).  The one place this formula is written: :func:`pipeline.predict.calibrate.step_time_s` (decode
    steps at the mean context, and the fit) and the simulated server driven by fitted terms
    (:class:`pipeline.simulation.simserver.ServerModel` with ``calibrated``) both call it.  Derived: the roofline's two
    roofs, each reached at a fitted fraction, *added* rather than maxed, plus a fixed cost per step (the reasons
    are in :mod:`pipeline.predict.calibrate`'s docstring; after Vidur, Agrawal et al., MLSys 2024, which sums operator costs).
    """
    return overhead_s + memory_s / bandwidth_fraction + compute_s / compute_fraction


def compute_format(card: ModelCard) -> str | None:
    """The format most of a token's matmul FLOPs run in: the experts' for an MoE, else the layers' (the prefill
    rate's key, :class:`pipeline.machine.engineterms.EngineTerms` ``prefill_tflops``)."""
    fmt = (card.extra or {}).get("served_format") or {}
    if card.expert_bytes and fmt.get("experts"):
        return fmt["experts"]
    if fmt.get("mlp") or fmt.get("attention"):  # a dense model's FLOPs are mostly its MLP's
        return fmt.get("mlp") or fmt["attention"]
    label = (card.quantization or "").partition("+experts:")
    return (label[2] if card.expert_bytes and label[2] else label[0]) or None


def engine_step_s(card: ModelCard, batch: int, context: float, bandwidth_gb_s: float, peak_tflops: float | None,
                  terms, identical_routing: bool = False) -> float:
    """A decode step (s) of ``batch`` sequences at mean ``context`` under an engine's terms
    (:class:`pipeline.machine.engineterms.EngineTerms`)::

        T = overhead + (dense + experts × coverage(B_eff) / e) / (f_bw × bw) + a × KV(B, n) / (f_bw × bw)
                     + FLOPs(B, n) / (f_c × peak)

    ``e``: ``expert_batched_fraction`` from B = 2 on (1 at B = 1); ``a``: ``attention_factor``; coverage at the
    effective batch of ``routing_scale`` (:func:`effective_batch`), or k/E when every sequence decodes the same tokens
    (``identical_routing``: llama-batched-bench).  The roofs added, as :func:`calibrated_step_s` (Vidur's operator sum);
    the sum of :func:`engine_terms_s`.
    """
    return sum(engine_terms_s(card, batch, context, bandwidth_gb_s, peak_tflops, terms, identical_routing).values())


def engine_terms_s(card: ModelCard, batch: int, context: float, bandwidth_gb_s: float, peak_tflops: float | None,
                   terms, identical_routing: bool = False) -> dict[str, float]:
    """The terms of :func:`engine_step_s` apart (s): ``overhead``, ``dense`` (non-expert weights), ``experts`` (the
    touched experts' bytes at the B = 1 kernel's speed), ``moe_kernel`` (what the batched MoE kernel adds from B = 2
    on: ``1 / e − 1`` more), ``kv`` (the KV read × ``attention_factor``), ``expert_flops``, ``matmul_flops`` (every
    other matmul) and ``attn_flops`` (QKᵀ and AV), each at its compute fraction of the peak."""
    scale = 0.0 if identical_routing else terms.routing_scale
    cover = coverage_at(batch, card.experts_per_token, card.num_experts, scale) if card.expert_bytes else 0.0
    read_s = terms.bandwidth_fraction * bandwidth_gb_s * 1e9
    experts = card.expert_bytes * cover / read_s
    kernel = experts * (moe_kernel_factor(card, batch, cover, terms) - 1.0)
    out = {"overhead": terms.step_overhead_s, "dense": card.dense_bytes / read_s, "experts": experts,
           "moe_kernel": kernel, "kv": terms.attention_factor * kv_bytes_per_step(card, batch, context) / read_s,
           "expert_flops": 0.0, "matmul_flops": 0.0, "attn_flops": 0.0}
    if not peak_tflops:
        return out
    flops = flops_per_decode_step(card, batch, context)
    attn = flops - 2.0 * batch * (card.active_params - card.embedding_params)
    expert_f = expert_flops_per_step(card, batch)
    dense_f = (terms.dense_compute_fraction or terms.compute_fraction) * peak_tflops * 1e12
    out["expert_flops"] = expert_f / (terms.compute_fraction * peak_tflops * 1e12)
    out["matmul_flops"] = (flops - attn - expert_f) / dense_f
    out["attn_flops"] = attn / dense_f
    return out


def moe_kernel_factor(card: ModelCard, batch: float, coverage: float, terms) -> float:
    """How many times its B = 1 read the batched MoE kernel spends on the touched experts' bytes: 1 at B = 1 (the
    mat-vec kernel), from B = 2 on ``t^p / e``, ``t`` the tokens routed to each touched expert (B × k / (E × coverage):
    B when every sequence decodes the same tokens), ``p`` the engine's ``expert_token_exponent`` (0 where it states
    none: the kernel's jump alone), ``e`` its ``expert_batched_fraction``.  Each further token routed to an expert
    costs a share of that expert's bytes again (the kernel dequantises the weight tiles per tile of tokens), less
    per token the more tokens share a tile (p < 1): so the cost scales with the bytes of the active experts
    (layers × k × expert size × bits), not with their FLOPs — llama.cpp on a DGX Spark (ggml-org/llama.cpp
    benches/dgx-spark.md, llama-batched-bench pp512): B = 2 → 32 adds 31 ms to gpt-oss-20b (1.27 GB of active MXFP4
    experts, 4.8 GFLOP a token), 69 ms to gpt-oss-120b (1.9 GB, 7.2 GFLOP) and 62 ms to Qwen3-Coder-30B-A3B
    (1.93 GB of Q8_0, 3.6 GFLOP)."""
    if batch < 2 or not card.expert_bytes or not card.num_experts or not card.experts_per_token or coverage <= 0:
        return 1.0
    exponent = getattr(terms, "expert_token_exponent", None) or 0.0
    tokens = batch * card.experts_per_token / (card.num_experts * coverage)
    return max(tokens, 1.0) ** exponent / terms.expert_batched_fraction


def expert_flops_per_step(card: ModelCard, batch: int) -> float:
    """The routed experts' share of a decode step's matmul FLOPs: 2 × B × expert params × k / E (0 for a dense card)."""
    params = (card.extra or {}).get("expert_params")
    if not params or not card.num_experts or not card.experts_per_token:
        return 0.0
    return 2.0 * batch * params * card.experts_per_token / card.num_experts


def prefill_attention_flops(card: ModelCard, tokens: int, context_before: float = 0.0) -> float:
    """The attention FLOPs of prefilling ``tokens`` prompt tokens after ``context_before``: 4 × heads × head_dim ×
    Σ attended (causal: token i attends to context_before + i tokens; a sliding layer at most its window)."""
    mid = context_before + tokens / 2.0  # the mean context a prompt token attends to (causal)
    sliding = card.sliding_layers if card.sliding_window else 0
    attended = (card.num_layers - sliding) * mid + sliding * (min(mid, card.sliding_window) if sliding else 0)
    return 4.0 * tokens * attended * card.num_attention_heads * card.head_dim


def prefill_flops(card: ModelCard, tokens: int, context_before: float = 0.0) -> float:
    """FLOPs of prefilling ``tokens`` prompt tokens after ``context_before`` tokens of context: 2 × tokens × matmul
    params + :func:`prefill_attention_flops` — Kaplan et al. 2020, table 1."""
    return 2.0 * tokens * (card.active_params - card.embedding_params) + prefill_attention_flops(card, tokens,
                                                                                                 context_before)


def prefill_compute_s(card: ModelCard, tokens: int, context_before: float, terms, peak_tflops: float | None) -> float:
    """Seconds of a prompt's FLOPs under an engine's terms: the matmuls (2 × tokens × params) at the rate of the card's
    compute format (an MoE's at the engine's ``moe`` rate where it states one), the attention (:func:`prefill_attention_flops`) at the engine's attention rate for the card's
    head dimension (``prefill_attention_tflops``, else the same rate); 0 without a rate."""
    fmt, moe = compute_format(card), bool(card.expert_bytes)
    rate = terms.prefill_rate_tflops(fmt, peak_tflops, moe)
    if not rate:
        return 0.0
    attn = prefill_attention_flops(card, tokens, context_before)
    attn_rate = terms.prefill_attention_rate_tflops(card.head_dim, fmt, peak_tflops, moe) or rate
    return (prefill_flops(card, tokens, context_before) - attn) / (rate * 1e12) + attn / (attn_rate * 1e12)


def prefill_weight_floor_s(card: ModelCard, tokens: int, terms, bandwidth_gb_s: float | None) -> float:
    """The least time (s) of one prefill pass of ``tokens`` prompt tokens: it reads the weights once, every non-expert
    matrix and the experts its tokens route to (uniform coverage), at the decode's bandwidth fraction.  A short
    prompt is bound by it, not by its FLOPs: Llama-3.1-8B in FP8 (8.0 GB) takes 54 ms to its first token of a
    29-token prompt under vLLM on a DGX Spark (manavsehgal.github.io ai-field-notes, "TensorRT-LLM on the Spark"),
    where its 0.5 TFLOP would take 5 ms.  0 without a bandwidth."""
    if not bandwidth_gb_s or tokens <= 0:
        return 0.0
    cover = expert_coverage(int(tokens), card.experts_per_token, card.num_experts) if card.expert_bytes else 0.0
    return (card.dense_bytes + card.expert_bytes * cover) / (terms.bandwidth_fraction * bandwidth_gb_s * 1e9)


def one_pass_s(card: ModelCard, tokens: int, terms, bandwidth_gb_s: float | None) -> float:
    """One forward pass's cost (s) beyond its FLOPs: the engine's ``step_overhead_s`` + the weights its ``tokens`` read
    (:func:`prefill_weight_floor_s`).  A served prompt's pass costs this *plus* its FLOPs (:func:`prefill_compute_s`),
    the roofs added as a decode step adds them (:func:`calibrated_step_s`): vLLM 0.26 on a DGX Spark prefills 256
    tokens of gpt-oss-20b in 20.0 ms more than a one-token request (llama-benchy ``est_ppt``,
    djangodevreng/dgx-spark-benchmarks), about their FLOPs alone, so the pass's read is paid once, by every request."""
    return terms.step_overhead_s + prefill_weight_floor_s(card, tokens, terms, bandwidth_gb_s)


def prefill_expert_read_s(card: ModelCard, tokens: int, terms, bandwidth_gb_s: float | None) -> float:
    """The routed experts' weight read of prefilling ``tokens`` prompt tokens (s), in passes of the engine's
    ``prefill_chunk_tokens`` (llama.cpp's n_ubatch)::

        ceil(tokens / chunk) × expert bytes × coverage(min(tokens, chunk)) / (bandwidth_fraction × bandwidth)

    Each pass reads every expert its tokens route to (uniform coverage, :func:`expert_coverage`: all of them for a
    pass of a few hundred tokens), added to the FLOP time as a decode step adds its roofs (:func:`calibrated_step_s`).
    A dense model's weight read is not added: it hides behind the matmuls, as llama.cpp's Qwen2.5-Coder-7B on a DGX
    Spark shows (prefill 2,380 tokens/s in one pass of 512 tokens, 2,356 in passes of 2,048: ggml-org/llama.cpp
    benches/dgx-spark.md); an MoE's does not: gpt-oss-20b prefills 1,024 tokens in one pass at 3,754 tokens/s,
    2,048 at 3,965 (the same file), and the 128-expert gpt-oss-120b at half the 32-expert 20b's rate for 1.4 × its
    FLOPs.  0 without experts, chunk or bandwidth (the engine states no pass size: the term not modelled)."""
    chunk = getattr(terms, "prefill_chunk_tokens", None)
    if not card.expert_bytes or not chunk or not bandwidth_gb_s or tokens <= 0:
        return 0.0
    passes = -(-int(tokens) // int(chunk))
    cover = expert_coverage(min(int(tokens), int(chunk)), card.experts_per_token, card.num_experts)
    return passes * card.expert_bytes * cover / (terms.bandwidth_fraction * bandwidth_gb_s * 1e9)


def prefill_s(card: ModelCard, tokens: int, context_before: float, terms, peak_tflops: float | None,
              bandwidth_gb_s: float | None = None) -> float:
    """Prefill time (s) of ``tokens`` prompt tokens after ``context_before`` under an engine's terms: its fixed
    ``prefill_overhead_s`` + :func:`prefill_compute_s` (the FLOPs at the engine's rates) + the experts'
    weight read per pass (:func:`prefill_expert_read_s`, where ``bandwidth_gb_s`` is given)."""
    return (terms.prefill_overhead_s + prefill_compute_s(card, tokens, context_before, terms, peak_tflops)
            + prefill_expert_read_s(card, tokens, terms, bandwidth_gb_s))
