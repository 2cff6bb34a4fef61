"""Local model folders for servers: random weights and a tokenizer built from an ``architecture:``.

A server (vLLM, ``transformers serve``) loads a model from a path; nothing may be downloaded,
so a config's ``architecture:`` (Hugging Face config keys) is turned into a folder:

- ``config.json`` + ``model.safetensors``: ``AutoModelForCausalLM.from_config`` with weights
  drawn from ``torch.manual_seed(seed)``, saved in ``dtype`` (bfloat16 by default, what a
  served model reads per decode step);
- a word-level tokenizer whose vocabulary is exactly the architecture's ``vocab_size``
  (``w00001`` … plus ``<unk>`` at id 0) split on whitespace, so every generated token decodes
  to visible text and a decode → encode round trip of a prompt is exact;
- no EOS token (``eos_token_id`` None), so generation always runs to ``max_tokens``.

Random weights cost exactly what trained weights cost at fixed lengths (derived: the bytes and FLOPs of a
decode step depend on shapes and dtype, not values; docs/definitions.md, "bytes per decode step"), so the
bytes read per decode step are real.  Folders live under ``data/model-folders/<name>-<digest>/``
(git-ignored); the digest covers architecture, dtype and seed, so a changed architecture gets
a new folder and an unchanged one is reused.  The folder is built in a temporary sibling and
renamed into place, so a killed build never leaves a half folder behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pipeline.core import paths
from pipeline.core.errors import BatchmarkError

UNK = "<unk>"
DONE_MARK = "batchmark-model-folder.json"


def folder_digest(architecture: dict[str, Any], dtype: str, seed: int) -> str:
    """12 hex chars of SHA-256 over the architecture keys, the dtype and the seed."""
    blob = json.dumps({"architecture": architecture, "dtype": dtype, "seed": seed}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def folders_root() -> Path:
    """``data/model-folders/`` of this checkout (override with ``BATCHMARK_MODEL_FOLDERS``)."""
    return Path(os.environ.get("BATCHMARK_MODEL_FOLDERS") or paths.root() / "data" / "model-folders")


def word_tokenizer(vocab_size: int) -> Any:
    """A ``PreTrainedTokenizerFast`` with ``vocab_size`` whitespace-separated words, id 0 = ``<unk>``.

    Raises:
        BatchmarkError: ``vocab_size`` < 2.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 2:
        raise BatchmarkError(f"architecture.vocab_size = {vocab_size}: a tokenizer needs at least 2 ids")
    width = len(str(vocab_size))
    vocab = {UNK: 0, **{f"w{i:0{width}d}": i for i in range(1, vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with single spaces
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=UNK, model_max_length=1 << 20)


def build_model_folder(name: str, architecture: dict[str, Any], dtype: str = "bfloat16", seed: int = 0,
                       root: Path | None = None) -> Path:
    """The folder of ``name`` built from ``architecture`` (reused when it already exists).

    Returns the folder path.  Weights: random from ``seed``, saved in ``dtype``.

    Raises:
        BatchmarkError: the architecture cannot be built (the message names ``models.<name>``).
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    root = root or folders_root()
    dest = root / f"{name}-{folder_digest(architecture, dtype, seed)}"
    if (dest / DONE_MARK).exists():
        return dest
    root.mkdir(parents=True, exist_ok=True)
    arch = dict(architecture)
    model_type = arch.pop("model_type")
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        try:
            config = AutoConfig.for_model(model_type, **arch)
            config.eos_token_id = None
            config.bos_token_id = None
            torch_dtype = getattr(torch, dtype)
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BatchmarkError(f"models.{name}.architecture: cannot build the model "
                                 f"({str(exc).splitlines()[0][:200]})") from None
        model.generation_config.eos_token_id = None
        model.generation_config.bos_token_id = None
        model.save_pretrained(tmp)
        vocab = config.get_text_config().vocab_size
        word_tokenizer(vocab).save_pretrained(tmp)
        (tmp / DONE_MARK).write_text(json.dumps({"name": name, "architecture": architecture, "dtype": dtype,
                                                 "seed": seed}, indent=1, sort_keys=True) + "\n")
        del model
        try:
            os.rename(tmp, dest)
        except OSError:  # another process built it first
            if not (dest / DONE_MARK).exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest
