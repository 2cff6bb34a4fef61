"""Hand-made runs for tests: request records with known timings, written through the real run-folder code.

A run holds static-batch points (the transformers engine's shape) whose timings are set by
hand, so every expected number in a test can be worked out from the formulas here:

- decode step time at batch B: ``step_s(B) = BASE_STEP_S × (1 + B / 8) × m`` and prefill time
  ``prefill_s(B) = BASE_PREFILL_S × B × m``, where ``m`` is the repeat's noise multiplier
  (times a slow-down factor for a slowed point);
- every request of a repeat is sent at 0, gets its first token at the prefill end and one more
  token per step, so TTFT = prefill_s, TPOT = step_s and the repeat's output throughput is
  B × (L − 1) / ((L − 1) × step_s) = B / step_s (metrics.py, static batch).

Noise patterns (five repeats): run A uses ``NOISE_A`` = 0.98 … 1.02 and run B ``NOISE_B`` =
0.975 … 1.015, i.e. B's noise is A's shifted down by half a step (0.5 %), so the two sets of
repeats interleave in rank (B A B A …) and no test calls the difference significant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.analysis import stages
from pipeline.store import runs
from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord

BASE_STEP_S = 0.010
BASE_PREFILL_S = 0.002
NOISE_A = (0.98, 0.99, 1.00, 1.01, 1.02)
NOISE_B = (0.975, 0.985, 0.995, 1.005, 1.015)
MODELS = ("dense-a", "moe-b")
CONCURRENCY = (1, 2, 4, 8, 16)


# A small simulated sweep (Llama-3.1-8B on the dgx-spark profile, c = 1, 2, 4, two repeats): seconds of CPU.
SMALL_SIMULATED_CONFIG = """name: sim-small
hardware: dgx-spark
backend: simulated
input_len: 128
output_len: 16
concurrency: [1, 2, 4]
repeats: 2
stop_after_weak_doublings: 0
simulated:
  step_time_cv: 0.02
models:
  - name: llama-3.1-8b-instruct
    card: Llama-3.1-8B
"""
INPUT_LEN, OUTPUT_LEN = 64, 16

CPU_PROFILE = {"name": "cpu", "description": "test CPU", "bandwidth_gb_s_spec": None, "peak_tflops_spec": None,
               "memory_gb": None, "unified_memory": False, "gpu_memory_utilization": 0.9,
               "runtime_reserve_gb": 0.0, "source": "test"}
H200_PROFILE = {**CPU_PROFILE, "name": "h200", "description": "test H200", "bandwidth_gb_s_spec": 4800,
                "peak_tflops_spec": 989, "memory_gb": 141}


def step_s(concurrency: int, m: float = 1.0) -> float:
    """Decode step time (s) of a hand-made point: BASE_STEP_S × (1 + B / 8) × m."""
    return BASE_STEP_S * (1 + concurrency / 8) * m


def prefill_s(concurrency: int, m: float = 1.0) -> float:
    """Prefill time (s) of a hand-made point: BASE_PREFILL_S × B × m."""
    return BASE_PREFILL_S * concurrency * m


def card(name: str, quantization: str = "float32") -> dict[str, Any]:
    """A small model card (dense or MoE by name, served in ``quantization``) so that analysis can compute MBU."""
    moe = name.startswith("moe")
    return {"name": name, "kind": "moe" if moe else "dense", "total_params": 300_000_000,
            "active_params": 120_000_000 if moe else 300_000_000, "embedding_params": 30_000_000,
            "weight_bytes": 1_200_000_000, "dense_bytes": 400_000_000 if moe else 1_080_000_000,
            "expert_bytes": 680_000_000 if moe else 0, "num_layers": 8, "num_attention_heads": 16,
            "num_kv_heads": 4, "head_dim": 64, "kv_bytes_per_token": 16384,
            "num_experts": 32 if moe else None, "experts_per_token": 4 if moe else None,
            "quantization": quantization, "source": "hand-made for tests", "extra": {}}


def point_records(model: str, concurrency: int, multipliers: tuple[float, ...],
                  engine: str = "transformers", variant: str = "default") -> PointRecords:
    """Records of one static-batch point, one repeat per multiplier (see the module docstring); ``variant``: the
    server setting it was measured under (:attr:`pipeline.core.records.PointKey.variant`)."""
    key = PointKey(model, engine, INPUT_LEN, OUTPUT_LEN, concurrency, variant=variant)
    reps = []
    for i, m in enumerate(multipliers):
        pre, step = prefill_s(concurrency, m), step_s(concurrency, m)
        ends = [pre + k * step for k in range(OUTPUT_LEN)]
        reqs = [RequestRecord(request_id=j, queued_s=0.0, sent_s=0.0, first_token_s=ends[0], done_s=ends[-1],
                              chunks=[[t, 1] for t in ends], input_tokens=INPUT_LEN, output_tokens=OUTPUT_LEN)
                for j in range(concurrency)]
        reps.append(RepeatRecord(repeat=i, batching="static_batch", window_start_s=ends[0], window_end_s=ends[-1],
                                 requests=reqs, prefill_start_s=0.0, step_end_s=ends))
    return PointRecords(point=key, repeats=reps)


def served_point_records(model: str, concurrency: int, multipliers: tuple[float, ...], requests_per_repeat: int,
                         seed: int = 0, engine: str = "transformers", rate_rps: float | None = None,
                         variant: str = "default", input_len: int = INPUT_LEN) -> PointRecords:
    """Records of one served (continuous-batching) point: ``requests_per_repeat`` requests a repeat, in waves of
    ``concurrency`` sent back to back, one repeat per multiplier.

    Request j of wave w is sent at ``w × E2EL`` with TTFT ``prefill_s(1, m) × u`` and one token every
    ``step_s(concurrency, m) × u`` (``m`` the repeat's multiplier, ``u`` a per-request spread drawn uniformly from
    0.9 … 1.1 with ``random.Random(seed)``), so every request is distinct, like a real server's, and the point has
    exactly ``requests_per_repeat × len(multipliers)`` request samples (1,280 = 256 × 5: past the 515 a side where an exact binomial coefficient overflowed a float).
    With ``rate_rps`` the point is an open-loop (Poisson) point at that offered rate, uncapped (same timings).
    ``variant`` names the server setting it was measured under (``PointKey.variant``); ``input_len`` its prompt length.
    """
    import random

    rng = random.Random(seed)
    key = (PointKey(model, engine, input_len, OUTPUT_LEN, concurrency, variant=variant) if rate_rps is None else
           PointKey(model, engine, input_len, OUTPUT_LEN, None, "poisson", rate_rps, variant=variant))
    reps = []
    for i, m in enumerate(multipliers):
        wave_s = prefill_s(1, m) * 1.1 + (OUTPUT_LEN - 1) * step_s(concurrency, m) * 1.1
        reqs = []
        for j in range(requests_per_repeat):
            u = rng.uniform(0.9, 1.1)
            sent = (j // concurrency) * wave_s
            ends = [sent + prefill_s(1, m) * u + k * step_s(concurrency, m) * u for k in range(OUTPUT_LEN)]
            reqs.append(RequestRecord(request_id=j, queued_s=sent, sent_s=sent, first_token_s=ends[0], done_s=ends[-1],
                                      chunks=[[t, 1] for t in ends], input_tokens=input_len, output_tokens=OUTPUT_LEN))
        reps.append(RepeatRecord(repeat=i, batching="served", window_start_s=0.0,
                                 window_end_s=max(r.done_s for r in reqs), requests=reqs))
    return PointRecords(point=key, repeats=reps)


def make_run(runs_dir: Path, run_id: str, noise: tuple[float, ...] = NOISE_A,
             slow: dict[tuple[str, int], float] | None = None, hardware: dict[str, Any] | None = None,
             models: tuple[str, ...] = MODELS, concurrency: tuple[int, ...] = CONCURRENCY,
             bandwidth_gb_s: float = 200.0, complete: bool = True, derived: bool = True,
             transformers_version: str = "4.57.0", dtype: str = "float32", served_requests: int | None = None,
             seed: int = 0, open_loop_rates: tuple[float, ...] = (),
             busy: dict[tuple[str, int], float] | None = None, probe_warning: str | None = None,
             probe_extra: dict[str, Any] | None = None, quantization: str = "float32",
             probe_after: dict[str, Any] | None = None) -> Path:
    """Write a complete hand-made run under ``runs_dir/run_id`` and return its folder.

    Args:
        noise: one time multiplier per repeat (its length is the number of repeats).
        slow: ``{(model, concurrency): factor}``; that point's times are multiplied by the
            factor on top of the noise (1.25 makes output throughput 1 / 1.25 = 0.8×, i.e. −20 %).
        hardware: the hardware profile stored in run.json (default: a generic CPU).
        complete: False leaves the run incomplete (run.json status ``incomplete``).
        derived: publish with summaries.json and analysis.json written by their stages (only for complete runs);
            False: a run published without them (as an earlier batchmark's ``sweep`` alone left it), which
            ``load_run`` refuses, naming the commands that write them.
        served_requests: write served points (:func:`served_point_records`) with this many requests per repeat
            instead of static batches; ``seed`` seeds their per-request spread.
        open_loop_rates: also write one open-loop (Poisson, uncapped) served point per rate and model, with
            ``served_requests`` (default 32) requests per repeat in waves of 8; ``slow`` applies with key
            ``(model, -(rank + 1))`` for the rank-th rate (0 = lowest).
        busy: ``{(model, concurrency): outside share}``: that point's records carry the interference meter's
            result of a machine whose other processes kept that share of its 2 CPUs busy for 2 s
            (:mod:`pipeline.machine.interference`), as a sweep under a CPU hog records it.
        probe_warning: the probe's warning in run.json (None: a steady probe).
        probe_extra: fields of run.json's probe set over the defaults (its roofs by dtype, the CPU's instruction set).
        quantization: the dtype the models' cards say they were served in.
        probe_after: fields of the probe repeated after the sweep (run.json ``probe_after``) set over the probe's own;
            None: no second probe.
    """
    slow = slow or {}
    run_dir = runs_dir / run_id
    hw = hardware or CPU_PROFILE
    cfg = {"name": "test", "hardware": hw["name"], "backend": "transformers",
           "models": [{"name": m, "architecture": {"model_type": "llama"}, "path": None, "served_name": None,
                       "card": None} for m in models],
           "input_len": INPUT_LEN, "output_len": OUTPUT_LEN, "concurrency": list(concurrency),
           "repeats": len(noise), "warmup": True, "knee_threshold": 0.15, "stop_after_weak_doublings": 0,
           "seed": 0, "transformers": {"device": "cpu", "dtype": "auto", "memory_fraction": 0.8}}
    runs.create_run(run_dir, {
        "source": "measured", "config_name": "test", "config_digest": "testdigest", "config_path": None,
        "config": cfg, "hardware": hw, "host": "testhost", "platform": "test",
        "started_at": "2026-11-29T00:00:00+00:00", "git_commit": None,
        "versions": {"python": "3.11.0", "batchmark": "0.1.0", "torch": "2.13.0",
                     "transformers": transformers_version, "vllm": None, "numpy": "2.0.0"},
        "gpu_driver": None, "command": "test"})
    probe = {"device": "cpu", "dtype": "float32", "bandwidth_gb_s": bandwidth_gb_s, "peak_tflops": 0.5,
             "bandwidth_repeats_gb_s": [bandwidth_gb_s], "tflops_repeats": [0.5], "buffer_bytes": 1 << 30,
             "matmul_n": 1024, "threads": 2, "warning": probe_warning,
             **(probe_extra or {})}  # every field of ProbeResult, and the sweep's warning
    if probe_after is not None:
        runs.update_run_json(run_dir, probe_after={**probe, **probe_after})
    runs.update_run_json(run_dir, probe=probe, stopped={},
                         server={"engine": "transformers", "transformers_version": transformers_version,
                                 "torch_version": "2.13.0", "device": "cpu", "dtype": dtype, "torch_threads": 2,
                                 "cuda_device": None, "mode": "static batch"})
    for model in models:
        runs.write_model_card(run_dir, card(model, quantization))
        for c in concurrency:
            factor = slow.get((model, c), 1.0)
            mults = tuple(m * factor for m in noise)
            recs = (point_records(model, c, mults) if served_requests is None else
                    served_point_records(model, c, mults, served_requests, seed=seed + c))
            if (model, c) in (busy or {}):
                share = busy[(model, c)]
                recs.meta["interference"] = {"wall_s": 2.0, "cpu_count": 2, "outside_share": share,
                                             "outside_load_cpus": 2 * share, "server_outside_tree": False}
            runs.write_point(run_dir, recs)
        for rank, rate in enumerate(sorted(open_loop_rates)):
            mults = tuple(m * slow.get((model, -(rank + 1)), 1.0) for m in noise)
            runs.write_point(run_dir, served_point_records(model, 8, mults, served_requests or 32, seed=seed + rank,
                                                           rate_rps=rate))
    if complete:  # published as the sweep publishes: derived files written by their stages before the flip
        runs.complete_run(run_dir, derive=stages.write_derived if derived else None)
    return run_dir


def make_imported_run(runs_dir: Path, run_id: str, throughput_tok_s: dict[int, float],
                      samples_per_point: int = 0, fmt: str = "vllm-bench") -> Path:
    """An imported-style run: ``run.json`` (source ``imported:<fmt>``) and ``summaries.json`` only.

    Each point has output throughput ``throughput_tok_s[c]``, TPOT 1 / 50 s and TTFT 0.1 s;
    ``samples_per_point`` copies of the throughput are kept as samples (0: none, as an import
    of a summary block has).  No model cards, so MBU is null.
    """
    run_dir = runs_dir / run_id
    runs.create_run(run_dir, {"source": f"imported:{fmt}", "hardware": H200_PROFILE,
                              "versions": {"batchmark": "0.1.0"}, "server": {"engine": "vllm", "vllm_version": "0.11.0"}})
    runs.complete_run(run_dir)
    lat = lambda v: {"p50": v, "p90": v, "p99": v, "mean": v}  # noqa: E731
    points = [{"model": "served-m", "engine": "vllm", "input_len": 1024, "output_len": 128, "concurrency": c,
               "repeats": 1, "completed": 100, "failed": 0, "output_throughput_tok_s": t, "per_user_tok_s": 50.0,
               "ttft_s": lat(0.1), "ttft_with_queue_s": None, "tpot_s": lat(0.02), "itl_s": None, "e2el_s": None,
               "prefill_throughput_tok_s": None, "step_time_s": 0.02, "errors": [],
               "samples": {"output_throughput_tok_s": [t] * samples_per_point}} for c, t in sorted(throughput_tok_s.items())]
    runs.atomic_write_json(run_dir / "summaries.json", {"schema_version": 1, "run_id": run_id, "points": points})
    stages.write_analysis(run_dir)
    return run_dir


#: A tuning run's settings (:func:`make_variant_run`): each variant's step-time factor at c >= 4 (below: 1, the
#: same server), and each prompt length's factor on every time (a longer context reads more KV per step).
VARIANT_FACTORS = {"default": 1.0, "fp8-kv": 0.7}
#: The settings run.json names for each variant (what the page's arithmetic reads; vLLM's ``--kv-cache-dtype``).
VARIANT_SETTINGS = {"fp8-kv": {"kv_cache_dtype": "fp8"}}
SHAPE_FACTORS = {64: 1.0, 256: 1.2}
#: The tuning run's SLO: TPOT p99 at most 25 ms (step_s(8) = 20 ms × 1.1 spread = 22 ms meets it at the base
#: factors; step_s(16) = 30 ms × 1.1 does not, × 0.7 = 23.1 ms does).
VARIANT_SLO = {"tpot_p99_max_ms": 25.0}


def make_variant_run(runs_dir: Path, run_id: str, concurrency: tuple[int, ...] = (1, 2, 4, 8, 16),
                     variants: dict[str, float] | None = None, shapes: dict[int, float] | None = None,
                     noise: tuple[float, ...] = NOISE_A, requests: int = 32,
                     hardware: dict[str, Any] | None = None) -> Path:
    """A complete served run of one model (``dense-a``) under several variants and prompt lengths.

    Each point is :func:`served_point_records` with multipliers noise × the variant's factor (at c >= 4; 1 below)
    × the prompt length's factor, so a variant's TPOT at c is step_s(c) × those factors (± 10 %); run.json carries
    ``variants`` (the first the baseline, settings :data:`VARIANT_SETTINGS`) and the SLO :data:`VARIANT_SLO`;
    ``hardware`` is the profile stored (default the test H200: 141 GB, so the Capacity arithmetic has a memory).
    """
    hw = hardware or H200_PROFILE
    variants = variants or VARIANT_FACTORS
    shapes = shapes or SHAPE_FACTORS
    run_dir = runs_dir / run_id
    model = "dense-a"
    cfg = {"name": "tuning", "hardware": hw["name"], "backend": "vllm", "models": [{"name": model}],
           "input_len": min(shapes), "output_len": OUTPUT_LEN, "concurrency": list(concurrency),
           "repeats": len(noise), "slo": VARIANT_SLO}
    runs.create_run(run_dir, {
        "source": "measured", "config_name": "tuning", "config_digest": "testdigest", "config_path": None,
        "config": cfg, "hardware": hw, "host": "testhost", "platform": "test",
        "started_at": "2026-11-29T00:00:00+00:00", "git_commit": None,
        "variants": [{"name": v, "baseline": i == 0, "settings": VARIANT_SETTINGS.get(v, {})}
                     for i, v in enumerate(variants)],
        "versions": {"python": "3.11.0", "batchmark": "0.1.0", "vllm": "0.11.0", "numpy": "2.0.0"},
        "gpu_driver": None, "command": "test"})
    runs.update_run_json(run_dir, stopped={}, server={"engine": "vllm", "vllm_version": "0.11.0"})
    runs.write_model_card(run_dir, card(model))
    for v, vf in variants.items():
        for inp, sf in shapes.items():
            for c in concurrency:
                mults = tuple(m * (vf if c >= 4 else 1.0) * sf for m in noise)
                runs.write_point(run_dir, served_point_records(model, c, mults, requests, seed=c, engine="vllm",
                                                               variant=v, input_len=inp))
    runs.complete_run(run_dir, derive=stages.write_derived)
    return run_dir


def three_repeat_served_point(old: bool = False) -> PointRecords:
    """Three served repeats of one request each (c = 1), sent at 0, tokens at 0.1, 0.1 + g, 0.1 + 2g, 0.1 + 4g with g
    = 10, 20, 30 ms; each repeat's client block: 0.9, 1.0, 1.1 in flight, CPU 0.2, 0.3, 0.4, and 4, 5, 6 tokens
    delivered in its 0.5 s window (8, 10, 12 tok/s); ``old``: no client blocks (a point measured before they were
    kept, or by the in-process backend).  Per repeat the per-token ITLs are g, g, 2g (median g, mean 4g/3), E2EL
    0.1 + 4g, TTST g (tests/unit/metrics/test_summarize_per_repeat.py works the intervals by hand)."""
    reps, blocks = [], []
    for r, g in enumerate((0.01, 0.02, 0.03)):
        chunks = [[0.1, 1], [0.1 + g, 1], [0.1 + 2 * g, 1], [0.1 + 4 * g, 1]]
        req = RequestRecord(request_id=r, queued_s=0.0, sent_s=0.0, first_token_s=0.1, done_s=0.1 + 4 * g,
                            chunks=chunks, input_tokens=4, output_tokens=4)
        reps.append(RepeatRecord(repeat=r, batching="served", window_start_s=0.0, window_end_s=0.5, requests=[req]))
        blocks.append({"achieved_concurrency": 0.9 + 0.1 * r, "cpu_share": 0.2 + 0.1 * r, "delivered_tokens": 4 + r})
    return PointRecords(point=PointKey("m", "openai", 4, 4, 1), repeats=reps, meta={} if old else {"client": blocks})
