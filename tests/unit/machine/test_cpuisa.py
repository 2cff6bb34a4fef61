"""A CPU run states its instruction set, serves a dtype the CPU runs natively, and a compute-bound curve says so.

Regression (fault kind: an emulated dtype explained as a busy machine): on an idle 2-core AMD EPYC with AVX2 only
(no AVX-512, no bfloat16 instructions) the default sweep served ``--dtype bfloat16``, which torch emulates there
(its bfloat16 matmul: 0.2 GFLOP/s against 65 GFLOP/s in float32 at n = 2048); every token cost about the same
45–70 ms, and the page said "past it the curve plateaus (busy machine: not attributed to batching)".  Flag names
are the Linux kernel's (arch/x86/include/asm/cpufeatures.h, arch/arm64/kernel/cpuinfo.c).
"""

from __future__ import annotations


from pipeline.machine.cpuisa import cpu_flags, instruction_sets, native_dtype

EPYC_AVX2 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B12\n"
             "flags\t\t: fpu vme sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 sha_ni\n")
SAPPHIRE = "flags\t\t: sse2 avx avx2 avx512f avx512bw avx512_bf16 amx_bf16 amx_tile amx_int8\n"
GRACE = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve sve2 bf16 i8mm\n"


def test_instruction_sets_from_given_flags():
    assert instruction_sets(cpu_flags(EPYC_AVX2)) == ["AVX2"]
    assert instruction_sets(cpu_flags(SAPPHIRE)) == ["AVX2", "AVX-512", "AVX512-BF16", "AMX-BF16"]
    assert instruction_sets(cpu_flags(GRACE)) == ["NEON", "SVE", "ARM-BF16"]


def test_native_dtype_is_float32_where_bfloat16_is_emulated():
    dtype, why = native_dtype(cpu_flags(EPYC_AVX2))
    assert dtype == "float32" and why.startswith("this CPU (AVX2) has no bfloat16 instructions")
    assert native_dtype(cpu_flags(SAPPHIRE)) == ("bfloat16", "this CPU runs bfloat16 natively (AVX512-BF16, AMX-BF16)")
    assert native_dtype(cpu_flags(GRACE))[0] == "bfloat16"


def test_the_default_config_serves_the_cpus_native_dtype(monkeypatch):
    """config/vllm-cpu.yaml fills --dtype {dtype} with the native dtype: float32 on the AVX2-only EPYC."""
    from pipeline.config.sweepconfig import load_config
    from pipeline.backends import vllm
    from tests.conftest import REPO

    cfg = load_config(REPO / "config" / "vllm-cpu.yaml")
    assert cfg.vllm.dtype == "native" and cfg.vllm.model_dtype == "native" and "--dtype {dtype}" in cfg.vllm.command
    monkeypatch.setattr("pipeline.machine.cpuisa.this_cpu", lambda: {
        "isa": ["AVX2"], **dict(zip(("native_dtype", "why"), native_dtype(cpu_flags(EPYC_AVX2))))})
    engine = vllm.VLLMBackend(cfg)
    words = engine.command_for(cfg.models[0], 8000)
    assert words[words.index("--dtype") + 1] == "float32"
    assert engine.provenance()["dtype_choice"].startswith("float32: this CPU (AVX2) has no bfloat16 instructions")


def test_the_vllm_agreement_test_serves_the_native_dtype_as_the_default_config_does():
    """Regression (fault kind: an emulated dtype in a test): the vLLM agreement test served bfloat16 and took ~29 min
    on an AVX2-only CPU.  It serves what the default config serves: float32 without bfloat16 instructions,
    bfloat16 with AVX512-BF16 or AMX-BF16 (the kernel's flags ``avx512_bf16``, ``amx_bf16``)."""
    from benchmarks.vllm_agreement import agreement_dtype
    from pipeline.config.sweepconfig import load_config
    from pipeline.machine.cpuisa import served_dtype
    from tests.conftest import REPO

    default = load_config(REPO / "config" / "vllm-cpu.yaml").vllm.dtype
    avx2 = cpu_flags(EPYC_AVX2)
    assert "avx512_bf16" not in avx2 and "amx_bf16" not in avx2
    assert agreement_dtype(avx2)[0] == served_dtype(default, avx2)[0] == "float32"
    for extra in ({"avx512f", "avx512_bf16"}, {"amx_bf16", "amx_tile"}):
        assert agreement_dtype(avx2 | extra)[0] == served_dtype(default, avx2 | extra)[0] == "bfloat16", extra


def test_mfu_uses_the_roof_of_the_served_dtype():
    """A probe of 65 GFLOP/s in float32 and 0.2 GFLOP/s in bfloat16 (the EPYC's): a bfloat16 model's roof is 0.2."""
    from pipeline.analysis.analyze import roof_for_dtype

    probe = {"dtype": "float32", "peak_tflops": 0.065, "peak_tflops_by_dtype": {"float32": 0.065, "bfloat16": 0.0002}}
    hw = {"peak_tflops": 0.065, "peak_tflops_probed": 0.065}
    assert roof_for_dtype(probe, hw, "bf16") == (0.0002, "bfloat16")
    assert roof_for_dtype(probe, hw, "float32") == (0.065, "float32")
    assert roof_for_dtype({"dtype": "float32"}, hw, "bfloat16") == (0.065, "float32")  # an older probe: one roof


def test_a_compute_bound_curve_is_explained_as_compute_bound():
    from pipeline.analysis.regime import post_knee_cause
    from pipeline.pages.views import WorkloadView

    regimes = {c: "batching" for c in (1, 2, 4)}
    bounds = {1: "compute", 2: "compute", 4: "compute"}
    assert post_knee_cause(regimes, 1, "plateau", False, bounds) == "compute"
    assert post_knee_cause(regimes, 1, "plateau", False, {**bounds, 4: "memory"}) == "batching"
    assert post_knee_cause(regimes, 1, "plateau", True, bounds) == "interference"  # evidence of a load first
    w = WorkloadView(model={"model": "m", "input_len": 64, "output_len": 32, "post_knee_cause": "compute",
                        "compute_roof_tflops": 0.0002, "compute_roof_dtype": "bfloat16"}, points=[], analysis_points=[])
    text = w.post_knee_cause_text()
    assert text.startswith("every point past the knee is bound by the compute roof")
    assert text.endswith("(the roof it hit: 0.2 GFLOP/s in bfloat16)")


def test_a_noisy_probe_without_load_is_no_busy_machine():
    """The analysis calls a plateau "interference" on evidence of another load, not on a probe's spread alone."""
    from pipeline.analysis.quality import probe_saw_load as _probe_saw_load

    assert not _probe_saw_load({"warning": "noisy probe (…; no other load seen while probing): …", "load": {
        "outside_share": 0.02, "cpu_count": 2, "steal_share": 0.0, "loadavg_1m": 0.3}})
    assert _probe_saw_load({"warning": "probe under another load (…)", "load": {
        "outside_share": 0.8, "outside_load_cpus": 1.6, "cpu_count": 2}})
    assert _probe_saw_load({"warning": "noisy probe (bandwidth repeats spread 2.10x)"})  # older run: no load record


def test_the_run_page_names_the_instruction_set_and_the_model_page_the_roof_it_hit(scratch_root):
    """A hand-made run (tests/runbuilder.py) on the AVX2-only EPYC whose curve is flat past c = 1 (93.3 tok/s at every
    c ≥ 2 against 88.9 at c = 1: a 5 % gain, under the 15 % knee threshold) with a float32 roof of 0.11 TFLOP/s: a
    decode step of B sequences does 542.4 MFLOP per token (2 × 270 M non-embedding parameters + attention) and reads
    1.08 GB, so at c = 1 the compute roof needs 542.4 MFLOP / 110 GFLOP/s = 4.9 ms against 1.081 GB / 200 GB/s =
    5.4 ms of memory (memory-bound, as every single stream in a native dtype), at c = 2 9.9 ms against 5.4:
    compute-bound from c = 2 on, and MFU stays below 1 (93.3 × 542.4 MFLOP/s / 110 GFLOP/s = 0.46)."""
    from pipeline.pages.indexviews import run_page_path
    from pipeline.pages.render import render_site
    from tests.runbuilder import CONCURRENCY, NOISE_A, make_run, step_s

    t1 = 1 / step_s(1)
    flat = {("dense-a", c): (c / step_s(c)) / (t1 * 1.05) for c in CONCURRENCY if c > 1}
    dtype, why = native_dtype(cpu_flags(EPYC_AVX2))
    runs_dir = scratch_root / "data" / "runs"
    run = "20261201T120000Z-epyc"
    make_run(runs_dir, run, noise=NOISE_A, slow=flat, models=("dense-a",), probe_extra={
        "peak_tflops": 0.11, "peak_tflops_by_dtype": {"float32": 0.11},
        "cpu": {"isa": instruction_sets(cpu_flags(EPYC_AVX2)), "native_dtype": dtype, "why": why}})
    render_site(scratch_root / "data" / "pages", runs_dir=runs_dir)
    pages = scratch_root / "data" / "pages"
    page = (pages / run_page_path(run)).read_text()
    assert "| CPU instruction set | AVX2; native dtype float32: this CPU (AVX2) has no bfloat16 instructions" in page
    model = " ".join((pages / "models" / "dense-a.md").read_text().split())
    assert "Knee: **c = 1**" in model and "busy machine" not in model
    assert "every point past the knee is bound by the compute roof" in model
    assert "(the roof it hit: 110.0 GFLOP/s in float32)" in model


def test_native_on_a_gpu_profile_is_the_gpus_dtype_never_the_host_cpus(monkeypatch):
    """Fault kind: a setting resolved from the wrong machine (``vllm.dtype: native`` with ``hardware: dgx-spark``
    read the planning host's AVX2 CPU and served float32 on a GPU).  On a GPU profile native is bfloat16 (NVIDIA
    tensor cores since Ampere) and this machine's CPU is never asked."""
    from pipeline.config.sweepconfig import parse_config
    from pipeline.backends import vllm
    from pipeline.machine.cpuisa import served_dtype

    def no_cpu():
        raise AssertionError("the host CPU was read for a GPU profile")
    monkeypatch.setattr("pipeline.machine.cpuisa.this_cpu", no_cpu)
    assert served_dtype("native", hardware="dgx-spark")[0] == "bfloat16"
    cfg = parse_config({"name": "t", "hardware": "dgx-spark", "backend": "vllm", "concurrency": [1],
                        "input_len": 64, "output_len": 16, "models": [{"name": "m", "path": "org/m"}],
                        "vllm": {"dtype": "native", "command": "vllm serve {model} --port {port} --dtype {dtype}"}},
                       "c.yaml")
    words = vllm.VLLMBackend(cfg).command_for(cfg.models[0], 8000)
    assert words[words.index("--dtype") + 1] == "bfloat16"


def test_the_card_counts_the_dtype_the_command_serves(monkeypatch):
    """Fault kind: the card counting a dtype the server does not run (``--dtype {dtype}`` serving float32 while the
    card counted bfloat16: half the bytes, MBU twice too high).  Worked: llama-3.1-8b's card in bf16, served as
    float32, reads 4 / 2 = twice its weight and KV bytes; ``--dtype auto`` leaves it as counted."""
    from pipeline.cards.registry import load_card
    from pipeline.config.sweepconfig import parse_config
    from pipeline.backends import vllm

    card = load_card("llama-3.1-8b").as_dict()
    assert card["quantization"] == "bf16"
    monkeypatch.setattr(vllm, "served_card", lambda *a, **k: dict(card))
    monkeypatch.setattr(vllm.VLLMBackend, "start", lambda self, spec: None)
    monkeypatch.setattr(vllm.VLLMBackend, "_prepare", lambda self, spec, kind: None)
    for dtype, factor in (("float32", 2), ("auto", 1), ("bfloat16", 1)):
        cfg = parse_config({"name": "t", "hardware": "cpu", "backend": "vllm", "concurrency": [1], "input_len": 64,
                            "output_len": 16, "models": [{"name": "m", "path": "org/m"}],
                            "vllm": {"dtype": dtype, "command": "vllm serve {model} --port {port} --dtype {dtype}"}},
                           "c.yaml")
        got = vllm.VLLMBackend(cfg).load(cfg.models[0])
        assert got["weight_bytes"] == card["weight_bytes"] * factor, dtype
        assert got["kv_bytes_per_token"] == card["kv_bytes_per_token"] * factor, dtype
        assert got["quantization"] == ("fp32" if factor == 2 else "bf16"), dtype
