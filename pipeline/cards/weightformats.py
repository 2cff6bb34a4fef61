"""Weight formats: bits stored per weight of each quantisation, and their canonical names.

What a card's bytes are counted in (:func:`pipeline.cards.modelarch.card_from_config`): ``bf16``,
``fp8``, ``nvfp4``, ``mxfp4``, ``w4a16`` (int4 weight-only), the GGUF tensor types ``q8_0``, ``q6_k``, ``q4_k``,
``q4_0``, ``iq4_nl`` and the GGUF file types ``q4_k_m``, ``q4_k_xl`` (mixtures); the names other tools write
(``BF16``, ``bfloat16``, ``UD-Q4_K_XL``) read as one of them (:func:`normalize_quant`).
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
#: - GGUF tensor types (ggml ``ggml-common.h``): ``q4_k``: super-blocks of 256 weights, 128 bytes of 4-bit values
#:   + 12 bytes of 6-bit scales and mins + two fp16 (d, dmin) = 144 bytes: 144 × 8 / 256 = 4.5 (``block_q4_K``);
#:   ``q6_k``: 128 + 64 bytes of 6-bit values + 16 int8 scales + one fp16 = 210 bytes: 210 × 8 / 256 = 6.5625
#:   (``block_q6_K``); ``iq4_nl``: blocks of 32 4-bit indices into a non-linear table + one fp16 scale:
#:   (32 × 4 + 16) / 32 = 4.5 (``block_iq4_nl``).
#: - GGUF ``q4_k_xl`` (Unsloth's "dynamic" UD-Q4_K_XL): a mixture chosen per model, no one definition; it keeps
#:   more tensors above Q4_K than Q4_K_M does, so Q4_K_M's 4.9 is a lower figure: state the file's size
#:   (``file_gib``) for its real bytes.
#: - ``w4a16`` (int4 weights, 16-bit activations: GPTQ/AWQ checkpoints, compressed-tensors' W4A16 preset, served by
#:   vLLM's Marlin kernels): 4-bit values + one 16-bit scale per group of 128: 4 + 16/128 = 4.125 (llm-compressor
#:   ``W4A16`` scheme: num_bits 4, group_size 128, symmetric; an asymmetric AWQ zero point adds 4/128 and is ignored).
QUANT_BITS: dict[str, float] = {
    "fp32": 32.0, "bf16": 16.0, "fp16": 16.0, "fp8": 8.0, "nvfp4": 4.5, "mxfp4": 4.25, "w4a16": 4.125,
    "q8_0": 8.5, "q6_k": 6.5625, "q4_k": 4.5, "q4_0": 4.5, "iq4_nl": 4.5, "q4_k_m": 4.9, "q4_k_xl": 4.9,
}

#: GGUF formats quantise the token embedding and output head as well (llama.cpp's
#: ``llama-quantize``); checkpoint formats (fp8, nvfp4, mxfp4) keep them in bf16.
GGUF_QUANTS = frozenset({"q8_0", "q6_k", "q4_k", "q4_0", "iq4_nl", "q4_k_m", "q4_k_xl"})

_QUANT_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "f16": "fp16", "float32": "fp32", "f32": "fp32",
                  "fp8_e4m3": "fp8", "e4m3": "fp8", "q8": "q8_0", "q4": "q4_0", "mxfp4_moe": "mxfp4",
                  "ud_q4_k_xl": "q4_k_xl", "int4_w4a16": "w4a16"}

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
