"""An engine's terms on one hardware kind: what a step costs beyond the roofline, as published runs measured it.

A hardware profile (``data/hardware/<name>.yaml``) may carry ``engines: {name: EngineTerms}``; `plan` and the
simulated server cost a step with them (:func:`pipeline.cards.stepcost.engine_step_s`) instead of the bare
roofline, and a prompt at the engine's prefill rate for the served format.  Every number states where it comes
from (``source``): fitted to which published runs, or taken from which publication.  Terms (s, fractions, TFLOP/s):

- ``step_overhead_s``: fixed cost of a decode step (scheduling, launches, sampling);
- ``bandwidth_fraction``: the fraction of the spec bandwidth the weight and KV reads reach;
- ``compute_fraction``: the fraction of the hardware's measured peak the decode matmuls reach (the cost each
  further sequence adds) — of an MoE's routed experts where ``dense_compute_fraction`` is given, which then
  holds for every other matmul and the attention (dense GEMMs run at another efficiency than MoE kernels);
- ``expert_batched_fraction``: the fraction of the B = 1 expert read speed the MoE kernel keeps from B = 2 on
  (llama.cpp switches from its mat-vec to its batched MoE kernel; 1: no switch);
- ``expert_token_exponent``: p, from B = 2 on the MoE kernel spends ``t^p / e`` times the touched experts' B = 1
  read, t the tokens routed to each (:func:`pipeline.cards.stepcost.moe_kernel_factor`); None: 0 (the jump alone);
- ``attention_factor``: the cost of reading the KV cache relative to its bytes at that bandwidth (flash
  attention at long context costs more than its bytes);
- ``prefill_tflops``: the prefill FLOP rate per compute format (TFLOP/s): a prompt costs its matmul FLOPs at that
  rate, and its attention FLOPs too where ``prefill_attention_tflops`` states no rate; an ``moe`` entry holds for
  every MoE model whatever its experts' format (llama.cpp's routed-matmul kernel), ``default`` for a format unlisted;
- ``prefill_attention_tflops``: the rate (TFLOP/s) of a prompt's attention FLOPs (flash attention, its own kernel, not
  the weights' format) per head dimension: the growth of a prompt's time with the context before it;
- ``prefill_chunk_tokens``: the tokens of one prefill pass (llama.cpp's n_ubatch): an MoE reads its routed experts'
  weights once a pass (:func:`pipeline.cards.stepcost.prefill_expert_read_s`); None: that read not modelled;
- ``request_latency_s``: the fixed cost of one served request outside the GPU's passes (s): the HTTP request and
  response, tokenisation, the hand-off to the scheduler, detokenisation; per model card name (lower case) where a
  source measured that model, ``default`` for any other.  Fitted as a one-token request's time (llama-benchy's
  ``ttfr − est_ppt``: the latency it measures by generating one token) less that request's one pass
  (``step_overhead_s`` + the weights read at ``bandwidth_fraction``: :func:`pipeline.cards.stepcost.one_pass_s`), so a
  served TTFT = this + the passes of its prompt (:mod:`pipeline.simulation.harness`); a static batch (llama-bench,
  llama-batched-bench: no request) never pays it;
- ``routing_scale``: the routing locality prior of an MoE under distinct prompts: B tokens of one step touch
  experts as ``B_eff = 1 + (B − 1) / (1 + (B − 1) / routing_scale)`` independent tokens would
  (:func:`pipeline.cards.stepcost.effective_batch`); None: uniform routing;
- ``priors``: the terms above that no measurement of this engine fitted (a start value, or one carried from another
  model or format), named so every plan and prediction costed by them says which of its terms are priors.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


class EngineTerms(BaseModel):
    """One engine's step terms on one hardware kind (see the module docstring), each group with its source."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    step_overhead_s: float = Field(ge=0, le=10)
    bandwidth_fraction: float = Field(gt=0, le=1.5)
    compute_fraction: float = Field(gt=0, le=1.0)
    dense_compute_fraction: float | None = Field(default=None, gt=0, le=1.0)
    expert_batched_fraction: float = Field(default=1.0, gt=0, le=1.0)
    expert_token_exponent: float | None = Field(default=None, ge=0, le=1.5)
    attention_factor: float = Field(default=1.0, gt=0, le=10)
    prefill_tflops: dict[str, float] = Field(default_factory=dict)
    prefill_attention_tflops: dict[int, float] = Field(default_factory=dict)
    prefill_overhead_s: float = Field(default=0.0, ge=0, le=60)
    prefill_chunk_tokens: int | None = Field(default=None, ge=1)
    routing_scale: float | None = Field(default=None, gt=0)
    request_latency_s: dict[str, float] = Field(default_factory=dict)
    priors: tuple[str, ...] = ()
    source: str

    @field_validator("priors")
    @classmethod
    def _priors_are_terms(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [t for t in v if t not in cls.model_fields or t in ("priors", "source")]
        if unknown:
            raise ValueError(f"priors: {', '.join(map(repr, unknown))} not a term (terms: "
                             f"{', '.join(t for t in cls.model_fields if t not in ('priors', 'source'))})")
        return v

    @field_validator("request_latency_s")
    @classmethod
    def _latencies_are_times(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k, s in v.items() if not 0 <= s <= 60]
        if bad:
            raise ValueError(f"request_latency_s: {', '.join(map(repr, bad))} not a time of 0-60 s")
        return {k.lower(): float(s) for k, s in v.items()}

    def prefill_rate_tflops(self, fmt: str | None, peak_tflops: float | None, moe: bool = False) -> float | None:
        """The prefill rate (TFLOP/s) of compute format ``fmt``: an MoE model's the ``moe`` entry where stated (its
        routed matmuls' kernel, whatever the experts' format), else the format's own, else the ``default`` entry,
        else the peak."""
        rates = self.prefill_tflops
        return (rates.get("moe") if moe else None) or rates.get(fmt or "") or rates.get("default") or peak_tflops

    def request_fixed_s(self, model: str | None) -> float:
        """The fixed cost (s) of one served request of card ``model`` (:attr:`request_latency_s`): the model's own where
        stated, else the ``default`` entry, else 0."""
        rates = self.request_latency_s
        return rates.get((model or "").lower(), rates.get("default", 0.0))

    def prefill_attention_rate_tflops(self, head_dim: int | None, fmt: str | None, peak_tflops: float | None,
                                      moe: bool = False) -> float | None:
        """The rate (TFLOP/s) of a prompt's attention FLOPs at head dimension ``head_dim``: its own, else the matmul
        rate (:meth:`prefill_rate_tflops`)."""
        return self.prefill_attention_tflops.get(int(head_dim or 0)) or self.prefill_rate_tflops(fmt, peak_tflops, moe)
