"""Weight formats: bits stored per weight of each quantisation, and their canonical names.

What a card's bytes are counted in (:func:`pipeline.cards.modelarch.card_from_config`): ``bf16``,
``fp8``, ``nvfp4``, ``mxfp4``, the GGUF formats ``q8_0``, ``q4_0``, ``q4_k_m``; the names other
tools write (``BF16``, ``bfloat16``, ``Q4_K``) read as one of them (:func:`normalize_quant`).
"""

from __future__ import annotations

from pipeline.core.errors import BatchmarkError

#: Bits stored per weight, block scales included.  Sources:
#: - ``bf16``/``fp16``: 16 bits, no scales.  ``fp32``: 32.
#: - ``fp8`` (E4M3, per-tensor or per-channel scale as vLLM's FP8 checkpoints store it): 8 bits;
#:   one scale per row or tensor adds < 0.01 bit and is ignored.
#: - ``nvfp4``: 4-bit E2M1 values + one FP8 (E4M3) scale per block of 16 values:
#:   4 + 8/16 = 4.5 (NVIDIA, "Introducing NVFP4", 2025; the per-tensor FP32 scale is ignored).
#: - ``mxfp4``: 4-bit E2M1 values + one E8M0 scale per block of 32: 4 + 8/32 = 4.25
#:   (OCP Microscaling Formats (MX) v1.0 specification).
#: - GGUF ``q8_0``: blocks of 32 int8 + one fp16 scale: (32 × 8 + 16) / 32 = 8.5 (ggml
#:   ``block_q8_0``).  ``q4_0``: blocks of 32 4-bit + one fp16 scale: (32 × 4 + 16) / 32 = 4.5
#:   (ggml ``block_q4_0``).
#: - GGUF ``q4_k_m``: a mixture (Q4_K, 4.5 bits, for most matrices; Q6_K for some), so no one block
#:   size; taken as the file average llama.cpp states in ``tools/quantize/quantize.cpp``
#:   (``QUANT_OPTIONS``: "Q4_K_M 4.58G @ Llama-3-8B", G = GiB, as its "Q8_0 7.96G" shows:
#:   7.96 × 2^30 × 8 / 8.03e9 params = 8.52 ≈ 8.5): 4.58 × 2^30 × 8 / 8.03e9 = 4.90.
QUANT_BITS: dict[str, float] = {
    "fp32": 32.0, "bf16": 16.0, "fp16": 16.0, "fp8": 8.0, "nvfp4": 4.5, "mxfp4": 4.25,
    "q8_0": 8.5, "q4_0": 4.5, "q4_k_m": 4.9,
}

#: GGUF formats quantise the token embedding and output head as well (llama.cpp's
#: ``llama-quantize``); checkpoint formats (fp8, nvfp4, mxfp4) keep them in bf16.
GGUF_QUANTS = frozenset({"q8_0", "q4_0", "q4_k_m"})

_QUANT_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "f16": "fp16", "float32": "fp32", "f32": "fp32",
                  "fp8_e4m3": "fp8", "e4m3": "fp8", "q8": "q8_0", "q4": "q4_0", "mxfp4_moe": "mxfp4",
                  "q4_k": "q4_k_m"}  # llama.cpp's "Q4_K" is an alias of Q4_K_M

#: Bits of the small tensors (norms, biases, router, attention sinks) whatever the format.
SMALL_TENSOR_BITS = 16.0


def normalize_quant(name: str) -> str:
    """Canonical quantisation name (``BF16`` → ``bf16``, ``Q8_0`` → ``q8_0``).

    Raises:
        BatchmarkError: an unknown name (the message lists the known ones).
    """
    key = str(name).strip().lower().replace("-", "_")
    key = _QUANT_ALIASES.get(key, key)
    if key not in QUANT_BITS:
        raise BatchmarkError(f"quantization: unknown format {name!r} (known: {', '.join(sorted(QUANT_BITS))})")
    return key


def bits_per_weight(name: str) -> float:
    """Bits stored per weight of a quantisation, block scales included (see :data:`QUANT_BITS`)."""
    return QUANT_BITS[normalize_quant(name)]
