"""GGUF files of the random-weight model folders, for llama.cpp's ``llama-server``: written with ``gguf-py``, quantized with ``llama-quantize``.

llama.cpp's own ``convert_hf_to_gguf.py`` refuses the model folders' word-level tokenizer
(:func:`pipeline.machine.modelfolders.word_tokenizer`), so the GGUF is written here directly with the
``gguf`` package that llama.cpp vendors (``gguf-py``, copied into the llama.cpp environment by
:mod:`pipeline.machine.llamacppenv`):

- architecture ``llama``: the metadata keys and tensor names of llama.cpp's converter (``LlamaModel`` in
  ``convert_hf_to_gguf.py``: ``token_embd``, ``blk.N.attn_q`` …, ``output``), Q and K rows permuted as it
  permutes them (``LlamaModel.permute``: Hugging Face's rotary halves → llama.cpp's interleaved pairs);
  1-D norm weights in F32, the matrices in F16 or BF16 (the source folder's bfloat16 bits kept as they are);
- the tokenizer as llama.cpp's unigram one (``tokenizer.ggml.model = t5``, ``llm_tokenizer_ugm`` in
  ``src/llama-vocab.cpp``) with the folder's words, each with SentencePiece's word-start mark ``▁`` (``▁w00001`` …,
  ``<unk>`` at id 0): llama.cpp writes each space as ``▁`` (and one before the text) and segments it into whole
  vocabulary entries, so a prompt of N words is N tokens to the server as to the client's tokenizer, and each
  generated token's text is `` w00042`` (a space and the word); no BOS and no EOS are added (WordPiece, ``bert``,
  would add its CLS and SEP to every prompt whatever the file says), the EOS id is the unknown word, which the load
  generator's ``ignore_eos`` keeps from being sampled, so every request generates exactly ``max_tokens``;
- ``Q8_0`` and ``Q4_K_M`` files made from the F16 one by ``llama-quantize`` (its type names).

Files are made once beside the folder (``<folder>/<name>-<TYPE>.gguf``), through a temporary file renamed
into place.  :func:`gguf_bytes` counts a file's tensor bytes and its size on disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pipeline.core.errors import BatchmarkError

#: The GGUF types batchmark makes: written directly (F16, BF16) or quantized from F16 by llama-quantize.
WRITTEN = ("F16", "BF16")
QUANTIZED = ("Q8_0", "Q4_K_M")
GGUF_TYPES = WRITTEN + QUANTIZED
WORD_START = "\u2581"  # SentencePiece's word-start mark in llama.cpp's vocabularies


def _gguf_module(gguf_py: Path) -> Any:
    """The ``gguf`` package: installed, else the copy of llama.cpp's ``gguf-py`` at ``gguf_py``."""
    if str(gguf_py) not in sys.path and (gguf_py / "gguf").is_dir():
        sys.path.insert(0, str(gguf_py))
    try:
        import gguf
    except ImportError as exc:
        raise BatchmarkError(f"{gguf_py}: the gguf package does not import ({exc}); "
                             "make the llama.cpp environment: batchmark llamacpp-env") from None
    return gguf


def permute_rows(w: Any, n_head: int) -> Any:
    """Q or K rows reordered from Hugging Face's rotary halves to llama.cpp's pairs (``LlamaModel.permute``)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _tensors(folder: Path, n_head: int, n_kv: int, layers: int):
    """(GGUF name, torch tensor) of a llama folder's ``model.safetensors``, in llama.cpp's names and layouts."""
    from safetensors.torch import load_file

    sd = load_file(str(folder / "model.safetensors"))
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    yield "token_embd.weight", sd["model.embed_tokens.weight"]
    for i in range(layers):
        for hf, gg in names.items():
            t = sd[f"model.layers.{i}.{hf}.weight"]
            if gg in ("attn_q", "attn_k"):
                t = permute_rows(t, n_head if gg == "attn_q" else n_kv)
            yield f"blk.{i}.{gg}.weight", t
    yield "output_norm.weight", sd["model.norm.weight"]
    yield "output.weight", sd.get("lm_head.weight", sd["model.embed_tokens.weight"])


def write_gguf(folder: Path, dest: Path, gguf_type: str, gguf_py: Path) -> Path:
    """Write the llama model folder ``folder`` as a GGUF of ``gguf_type`` (F16 or BF16) at ``dest``.

    Raises:
        BatchmarkError: the folder is not a llama model or ``gguf_type`` is not written directly.
    """
    import numpy as np
    import torch

    gguf = _gguf_module(gguf_py)
    cfg = json.loads((folder / "config.json").read_text())
    if cfg.get("model_type") != "llama":
        raise BatchmarkError(f"{folder}: model_type {cfg.get('model_type')!r}: batchmark writes GGUFs of llama models only")
    if gguf_type not in WRITTEN:
        raise BatchmarkError(f"gguf type {gguf_type!r}: written directly are {', '.join(WRITTEN)}")
    n_head, layers = cfg["num_attention_heads"], cfg["num_hidden_layers"]
    n_kv = cfg.get("num_key_value_heads") or n_head
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // n_head
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name(folder.name)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(float(cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta") or 10000.0))
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    w.add_vocab_size(cfg["vocab_size"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if gguf_type == "F16" else gguf.LlamaFileType.MOSTLY_BF16)
    _add_tokenizer(w, gguf, folder, cfg["vocab_size"])
    for name, t in _tensors(folder, n_head, n_kv, layers):
        if t.ndim == 1:
            w.add_tensor(name, t.to(torch.float32).numpy())
        elif gguf_type == "F16":
            w.add_tensor(name, t.to(torch.float16).numpy())
        else:  # bfloat16's bits as they are (numpy has no bfloat16)
            w.add_tensor(name, t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16),
                         raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, dest)
    return dest


def _add_tokenizer(w: Any, gguf: Any, folder: Path, vocab_size: int) -> None:
    """The folder's word vocabulary as llama.cpp's unigram tokenizer (module docstring)."""
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    words = sorted(vocab, key=vocab.get)
    if len(words) != vocab_size or [vocab[t] for t in words] != list(range(vocab_size)):
        raise BatchmarkError(f"{folder / 'tokenizer.json'}: its vocabulary is not ids 0 … {vocab_size - 1}")
    w.add_tokenizer_model("t5")  # llama.cpp's unigram tokenizer: the best segmentation of each word into whole tokens
    w.add_token_list([t if i == 0 else WORD_START + t for i, t in enumerate(words)])
    w.add_token_scores([0.0] * vocab_size)
    w.add_token_types([gguf.TokenType.UNKNOWN] + [gguf.TokenType.NORMAL] * (vocab_size - 1))
    for add in (w.add_unk_token_id, w.add_eos_token_id, w.add_pad_token_id):
        add(0)  # the unknown word; the unigram defaults (EOS 1, unknown 2) would name words
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)  # "w00001 w00002" is read as "▁w00001▁w00002": two tokens
    w.add_remove_extra_whitespaces(True)


def quantize(src: Path, dest: Path, gguf_type: str, quantize_bin: Path, threads: int | None = None) -> Path:
    """``llama-quantize src dest gguf_type`` through a temporary file.

    Raises:
        BatchmarkError: the tool fails (its last line).
    """
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    cmd = [str(quantize_bin), str(src), str(tmp), gguf_type] + ([str(threads)] if threads else [])
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        tmp.unlink(missing_ok=True)
        last = ([ln for ln in (res.stderr + res.stdout).splitlines() if ln.strip()] or ["no output"])[-1]
        raise BatchmarkError(f"llama-quantize {gguf_type} of {src.name} failed: {last[:200]}")
    os.replace(tmp, dest)
    return dest


def gguf_file(folder: Path, name: str, gguf_type: str, env_dir: Path) -> Path:
    """The GGUF of model folder ``folder`` in ``gguf_type`` (made once; the quantized ones from the F16 file).

    ``env_dir``: the llama.cpp environment (its ``gguf-py/`` and ``bin/llama-quantize``).

    Raises:
        BatchmarkError: an unknown type, or writing or quantizing fails.
    """
    if gguf_type not in GGUF_TYPES:
        raise BatchmarkError(f"models.{name}.gguf_type: {gguf_type!r} is not one of {', '.join(GGUF_TYPES)}")
    dest = folder / f"{name}-{gguf_type}.gguf"
    if dest.exists():
        return dest
    if gguf_type in WRITTEN:
        return write_gguf(folder, dest, gguf_type, env_dir / "gguf-py")
    f16 = gguf_file(folder, name, "F16", env_dir)
    return quantize(f16, dest, gguf_type, env_dir / "bin" / "llama-quantize")


def gguf_bytes(path: Path, gguf_py: Path) -> dict[str, Any]:
    """A GGUF's ``tensor_bytes`` (the sum of its tensors' stored bytes, each in its own type), ``file_bytes``
    (its size on disk: tensors, metadata, tokenizer, alignment) and ``tensor_types`` ({GGML type: count})."""
    gguf = _gguf_module(gguf_py)
    reader = gguf.GGUFReader(str(path))
    types: dict[str, int] = {}
    for t in reader.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    return {"tensor_bytes": int(sum(int(t.n_bytes) for t in reader.tensors)), "file_bytes": path.stat().st_size,
            "tensor_types": dict(sorted(types.items()))}
