"""The simulated server's model: a continuous-batching server (vLLM's scheduling rules) of one model on one
machine, its KV cache and its roofline step times (the discrete-event loop that runs it is
:mod:`pipeline.simulation.simloop`, the engine that plugs it into the sweep :mod:`pipeline.backends.simulated`).

The server (:class:`ServerModel`, run by :func:`pipeline.simulation.simloop.simulate_repeat`), after vLLM V1's scheduler (``vllm/v1/core/sched/scheduler.py``):

- at most ``max_num_seqs`` requests run; each step has a token budget of
  ``max_num_batched_tokens``.  Running requests are scheduled first, in the order they were
  admitted: a decoding request takes 1 token, one still in prefill takes the rest of its prompt up
  to the budget left (chunked prefill).  Then, if no request was preempted in this step, waiting
  requests are admitted first come first served while a slot, budget and KV blocks are free;
- KV cache: blocks of ``block_size`` tokens; ``num_blocks`` = ⌊(memory × gpu_memory_utilization −
  weight bytes) / (KV bytes per token × block_size)⌋ (vLLM sizes its cache from what is left of
  ``--gpu-memory-utilization`` after the weights; derived, activations and graphs left out).  A
  request holds ⌈computed tokens / block_size⌉ blocks.  A waiting request is not admitted while
  its blocks are not free; when a running request needs a block and none is free, the request
  admitted last is preempted (vLLM's recompute: its blocks are freed, it goes to the front of the
  queue, and when admitted again it prefills its prompt and the tokens generated so far, then
  goes on generating);
- a step that completes a request's prefill, or decodes it, gives it one token at the step's end
  (every token is streamed as one chunk, as vLLM streams with ``stream_interval`` 1);
- step time = max(bytes ÷ bandwidth, FLOPs ÷ peak) + ``step_overhead_s`` (the roofline of
  :mod:`pipeline.cards.stepcost`, the same per-step bytes and FLOPs the analysis uses) with the
  batch's tokens: weight bytes at the step's token count (an MoE's expert coverage), KV bytes of
  every scheduled sequence at its context, FLOPs 2 × tokens × matmul params + attention
  (:meth:`ServerModel._time`).  Optional noise: every step time × a log-normal factor of mean 1 and
  coefficient of variation ``step_time_cv``, and every repeat × one of ``repeat_time_cv``;
- calibrated (``calibrated=True``: the served prediction of :mod:`pipeline.predict.servedsim`, driven by the terms
  :mod:`pipeline.predict.calibrate` fitted to measured points): the same bytes and FLOPs, combined by the calibrated
  step formula :func:`pipeline.cards.stepcost.calibrated_step_s` (overhead + bytes ÷ (bandwidth_fraction × bandwidth)
  + FLOPs ÷ (compute_fraction × peak)) instead of the roofline's max; with a fitted ``prefill_tok_s`` a step's
  prompt tokens cost tokens ÷ prefill_tok_s in place of their FLOPs (prefill kernels reach another fraction of
  the peak than decode's), and every request reaches the scheduler ``arrival_delay_s`` after it is sent (the
  fitted fixed TTFT cost: the API server's HTTP, tokenisation and queue hand-off, which run beside the steps);
- prefix caching (``cached_prefix_tokens``, :func:`cached_prefix`: a shared prefix's full blocks): once a request of
  the repeat has computed them, each request admitted after starts its prefill past them (vLLM's
  ``--enable-prefix-caching``); their blocks are still counted per request (vLLM shares them: the cache's room for
  more sequences is not modelled).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pipeline.cards.modelcards import ModelCard
from pipeline.machine.engineterms import EngineTerms
from pipeline.cards.stepcost import (calibrated_step_s, compute_format, coverage_at, expert_flops_per_step,
                                     moe_kernel_factor, weight_bytes_per_step)

#: vLLM's default KV block size (tokens per block) on CUDA.
BLOCK_SIZE = 16


# --------------------------------------------------------------------------------------------
# the server's arithmetic
# --------------------------------------------------------------------------------------------

def attended_tokens(card: ModelCard, context: np.ndarray | float) -> np.ndarray | float:
    """Tokens a sequence of ``context`` tokens holds over all layers, in layer-tokens: full layers × n + sliding × min(n, window).

    Derived from :func:`pipeline.cards.stepcost.kv_bytes_per_sequence` (KV bytes = per-layer bytes × this)
    and :func:`pipeline.cards.stepcost.flops_per_decode_step` (attention reads this many keys/values per
    head), vectorised over numpy arrays.
    """
    sliding = card.sliding_layers if card.sliding_window else 0
    full = card.num_layers - sliding
    if not sliding:
        return full * np.asarray(context, dtype=float) if isinstance(context, np.ndarray) else full * float(context)
    return full * context + sliding * np.minimum(context, card.sliding_window or 0)  # sliding layers: a window


def one_sequence_attended(card: ModelCard) -> Callable[[float], float]:
    """:func:`attended_tokens` of one sequence as a plain function of its context (the same arithmetic, without numpy's
    per-call cost: the event loop asks it per request per step)."""
    sliding = card.sliding_layers if card.sliding_window else 0
    full, window = card.num_layers - sliding, card.sliding_window or 0
    return (lambda ctx: float(full * ctx + sliding * min(ctx, window))) if sliding else (lambda ctx: float(full * ctx))


def kv_blocks(card: ModelCard, memory_gb: float, gpu_memory_utilization: float, block_size: int = BLOCK_SIZE) -> int:
    """KV blocks of the server: ⌊(memory_gb × 1e9 × utilisation − weight bytes) / (KV bytes per token × block size)⌋, ≥ 0.

    Derived: vLLM gives the KV cache what ``--gpu-memory-utilization`` of the device leaves after
    the weights (activation peaks and CUDA graphs, a few per cent, are left out here).  KV bytes
    per token count every layer as full attention (the card's figure), as vLLM's single-type cache does.
    """
    free = memory_gb * 1e9 * gpu_memory_utilization - card.weight_bytes
    per_block = card.kv_bytes_per_token * block_size
    return max(0, math.floor(free / per_block)) if per_block > 0 else 0


@dataclass
class ServerModel:
    """The simulated server of one model on one machine (see the module docstring for the rules).

    Attributes:
        card: the model; bandwidth_gb_s, peak_tflops: the machine (GB/s, TFLOP/s; None = no compute roof).
        step_overhead_s: fixed time added to every step (s).
        max_num_seqs, max_num_batched_tokens, max_model_len: vLLM's limits of the same names.
        num_blocks, block_size: the KV cache.
        step_time_cv, repeat_time_cv: noise (coefficients of variation; 0 = none).
        calibrated: step times by :func:`pipeline.cards.stepcost.calibrated_step_s` with ``bandwidth_fraction`` and
            ``compute_fraction`` (0–1), prompt tokens at ``prefill_tok_s`` (tokens/s; None: by their FLOPs) and
            ``arrival_delay_s`` (s) from send to the scheduler (module docstring); False: the roofline (max).
    """

    card: ModelCard
    bandwidth_gb_s: float
    peak_tflops: float | None
    step_overhead_s: float
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    num_blocks: int
    block_size: int = BLOCK_SIZE
    step_time_cv: float = 0.0
    repeat_time_cv: float = 0.0
    preemptions_total: int = 0
    calibrated: bool = False
    bandwidth_fraction: float = 1.0
    compute_fraction: float = 1.0
    prefill_tok_s: float | None = None
    arrival_delay_s: float = 0.0
    #: The MoE routing locality of a calibrated server (:func:`pipeline.cards.stepcost.effective_batch`'s s; None:
    #: uniform routing): the experts a step reads at its tokens' effective batch, as the plan's engine terms count them.
    routing_scale: float | None = None
    #: An engine's terms on this hardware (:class:`pipeline.machine.engineterms.EngineTerms`): steps costed by
    #: :meth:`_engine_time` (the plan's default where the profile states them), ``peak_tflops`` then the measured one.
    terms: EngineTerms | None = None
    #: Prefix caching (vLLM ``--enable-prefix-caching``): tokens at the start of every prompt whose KV a request finds
    #: cached once a request of the repeat has computed them (a shared prefix's full blocks); 0: no caching.
    cached_prefix_tokens: int = 0
    _per_layer: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        c = self.card
        self._per_layer = c.kv_bytes_per_token / c.num_layers if c.num_layers else 0.0
        self._mem_s = 1.0 / (self.bandwidth_gb_s * 1e9)
        self._comp_s = 1.0 / (self.peak_tflops * 1e12) if self.peak_tflops else 0.0
        self._matmul = 2.0 * (c.active_params - c.embedding_params)
        self._attn = 4.0 * c.num_attention_heads * c.head_dim
        self._wcache: dict[int, float] = {}

    def _weights(self, tokens: int) -> float:
        w = self._wcache.get(tokens)
        if w is None:
            w = self._wcache[tokens] = weight_bytes_per_step(self.card, max(tokens, 1),
                                                             self.routing_scale if self.calibrated else None)
        return w

    def _time(self, tokens: int, kv_lt: float, attn_lt: float, prefill_tokens: int = 0,
              prefill_attn_lt: float = 0.0) -> float:
        """One step of the server (s) = max(bytes / bandwidth, FLOPs / peak) + overhead (calibrated: :meth:`combine_s`).

        Args:
            tokens: tokens computed in the step (decoding sequences + prefill chunk tokens).
            kv_lt: Σ :func:`attended_tokens` of every scheduled sequence's context (its KV read), layer-tokens.
            attn_lt: Σ over computed tokens of the context each attends to, in layer-tokens (a decoding
                sequence: its :func:`attended_tokens`; a prefill chunk of n tokens from s: n × attended(s + n/2)).
            prefill_tokens, prefill_attn_lt: the part of ``tokens`` and ``attn_lt`` that is prompt (prefill chunks);
                used only by a calibrated server with a ``prefill_tok_s``.

        bytes = weight bytes at ``tokens`` (:func:`pipeline.cards.stepcost.weight_bytes_per_step`: experts by
        coverage) + KV bytes per layer-token × ``kv_lt``; FLOPs = 2 × tokens × (active − embedding) params +
        4 × heads × head_dim × ``attn_lt`` (Kaplan et al. 2020, table 1).  At B decoding sequences of context n
        this is exactly :func:`pipeline.analysis.analyze.roofline_step_s` (B, n) + overhead (:meth:`decode_step_s`), and
        calibrated exactly :func:`pipeline.predict.calibrate.step_time_s` at B and context n.
        """
        if self.terms is not None and not self.calibrated:
            return self._engine_time(tokens, kv_lt, attn_lt, prefill_tokens, prefill_attn_lt)
        mem = (self._weights(tokens) + self._per_layer * kv_lt) * self._mem_s
        if self.calibrated:
            if self.prefill_tok_s:
                comp = (self._matmul * (tokens - prefill_tokens) + self._attn * (attn_lt - prefill_attn_lt)) * self._comp_s
                return self.combine_s(mem, comp) + prefill_tokens / self.prefill_tok_s
            return self.combine_s(mem, self._comp_s * (self._matmul * tokens + self._attn * attn_lt))
        comp = (self._matmul * tokens + self._attn * attn_lt) * self._comp_s
        return (mem if mem >= comp else comp) + self.step_overhead_s

    def _engine_time(self, tokens: int, kv_lt: float, attn_lt: float, prefill_tokens: int,
                     prefill_attn_lt: float) -> float:
        """One step (s) under the engine's terms, as :func:`pipeline.cards.stepcost.engine_step_s` for the decoding
        sequences, plus the step's prompt tokens at the engine's prefill rates (:func:`pipeline.cards.stepcost.prefill_s`'s
        FLOPs: 2 × tokens × params at the format's rate, 4 × heads × head_dim × attended at the attention rate)."""
        t = self.terms
        assert t is not None  # the engine-terms path runs only where terms are set
        decode = self._engine_decode_s(tokens, kv_lt, self._matmul * (tokens - prefill_tokens)
                                       + self._attn * (attn_lt - prefill_attn_lt), tokens - prefill_tokens)
        fmt, moe = compute_format(self.card), bool(self.card.expert_bytes)
        rate = t.prefill_rate_tflops(fmt, self.peak_tflops, moe)
        if not (prefill_tokens and rate):
            return decode
        attn_rate = t.prefill_attention_rate_tflops(self.card.head_dim, fmt, self.peak_tflops, moe) or rate
        return decode + (self._matmul * prefill_tokens / rate + self._attn * prefill_attn_lt / attn_rate) / 1e12

    def _engine_decode_s(self, tokens: int, kv_lt, decode_flops, decode_tokens: int):
        """Overhead + bytes + decode FLOPs of a step under the engine's terms (floats or numpy arrays of ``kv_lt``)."""
        t, c = self.terms, self.card
        assert t is not None  # the engine-terms path runs only where terms are set
        cover = coverage_at(max(tokens, 1), c.experts_per_token, c.num_experts, t.routing_scale) if c.expert_bytes else 0.0
        experts = c.expert_bytes * cover * moe_kernel_factor(c, tokens, cover, t)
        mem = (c.dense_bytes + experts + t.attention_factor * self._per_layer * kv_lt) * self._mem_s / t.bandwidth_fraction
        experts = expert_flops_per_step(c, decode_tokens)
        dense_f = t.dense_compute_fraction or t.compute_fraction
        return t.step_overhead_s + mem + (experts / t.compute_fraction + (decode_flops - experts) / dense_f) * self._comp_s

    def decode_run_s(self, batch: int, kv_lt):
        """Step times (s) of ``batch`` sequences decoding, one per entry of ``kv_lt`` (their Σ attended tokens, a numpy
        array over consecutive steps): the simulated loop's fast path, the same cost as :meth:`_time` of each step."""
        flops = self._matmul * batch + self._attn * kv_lt
        if self.terms is not None and not self.calibrated:
            return self._engine_decode_s(batch, kv_lt, flops, batch)
        return self.combine_s((self._weights(batch) + self._per_layer * kv_lt) * self._mem_s, flops * self._comp_s)

    def combine_s(self, mem_s, comp_s):
        """A step's time (s) from its memory and compute seconds at the full roofs (floats or numpy arrays):
        the roofline's ``max(mem_s, comp_s) + step_overhead_s``, or calibrated
        :func:`pipeline.cards.stepcost.calibrated_step_s` (the roofs at the fitted fractions, added)."""
        if self.calibrated:
            return calibrated_step_s(mem_s, comp_s, self.step_overhead_s, self.bandwidth_fraction, self.compute_fraction)
        return np.maximum(mem_s, comp_s) + self.step_overhead_s

    def decode_step_s(self, batch: int, context: float) -> float:
        """Step time (s) of ``batch`` sequences decoding at ``context`` tokens each, no noise."""
        a = batch * float(attended_tokens(self.card, context))
        return self._time(batch, a, a)

    def fits_one(self, tokens: int) -> bool:
        """Whether one sequence of ``tokens`` tokens fits the KV cache at all."""
        return math.ceil(tokens / self.block_size) <= self.num_blocks



def refusal(server: ServerModel, input_len: int, output_len: int) -> str | None:
    """Why the server refuses every request of these lengths (None when it takes them): longer than
    ``max_model_len``, or one sequence needs more KV blocks than the cache has."""
    need = input_len + output_len
    if need > server.max_model_len:
        return f"server: {need} tokens per request exceed max_model_len {server.max_model_len}"
    if not server.fits_one(need):
        return (f"server: one sequence of {need} tokens needs {math.ceil(need / server.block_size)} KV blocks, "
                f"the cache has {server.num_blocks}")
    return None


def noise(rng: np.random.Generator | None, cv: float, n: int) -> np.ndarray | None:
    """``n`` log-normal factors of mean 1 and coefficient of variation ``cv`` (None when no noise): σ² = ln(1 + cv²),
    μ = −σ²/2 (the log-normal's mean e^(μ + σ²/2) = 1, its CV √(e^(σ²) − 1) = cv)."""
    if rng is None or cv <= 0:
        return None
    sigma = math.sqrt(math.log1p(cv * cv))
    return rng.lognormal(-sigma * sigma / 2, sigma, n)


def cached_prefix(prefix_len: int, block_size: int, caching: bool) -> int:
    """Tokens of a shared prefix of ``prefix_len`` a later request finds cached: its full blocks, ⌊prefix / block⌋ ×
    block (vLLM caches and reuses whole KV blocks only, by the hash of the block's tokens and of those before it:
    https://docs.vllm.ai/en/latest/design/prefix_caching.html); 0 with caching off."""
    return (prefix_len // block_size) * block_size if caching and prefix_len > 0 else 0
