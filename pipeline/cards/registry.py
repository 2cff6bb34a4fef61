"""Where cards come from: the card files of ``data/models/`` (names, aliases), a local ``config.json``, the
Hugging Face cache; :func:`load_card` and :func:`resolve_card` look a model up in them.

A card file ``data/models/<name>.yaml`` holds the config.json numbers of a model batchmark never
loads, with their source (:class:`CardFile`); each is read once per file version
(:func:`read_card_file`).  The arithmetic from numbers to a card is :mod:`pipeline.cards.modelarch`.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError

from pipeline.core import paths
from pipeline.core.errors import BatchmarkError
from pipeline.cards.modelarch import card_from_config, check_arch_numbers, text_config, validation_message
from pipeline.cards.modelcards import ModelCard
from pipeline.core.textfiles import MAX_TEXT_BYTES, load_yaml_text, read_limited, read_text_file


def card_from_config_file(path: str | Path, name: str | None = None, quant: str = "bf16",
                          expert_quant: str | None = None, kv_bytes_per_element: float = 2.0) -> ModelCard:
    """A card from a local Hugging Face ``config.json`` (a file, or a folder holding one).

    Raises:
        BatchmarkError: missing or corrupt file, missing config numbers.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:  # bounded: a config.json is a few kB
        config = json.loads(read_limited(path, MAX_TEXT_BYTES, "Hugging Face config.json").decode("utf-8"))
    except FileNotFoundError:
        raise BatchmarkError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise BatchmarkError(f"{path}: not a UTF-8 text file (byte {exc.start})") from None
    except OSError as exc:
        raise BatchmarkError(f"{path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise BatchmarkError(f"{path}: corrupt JSON at line {exc.lineno} ({exc.msg})") from None
    except RecursionError:
        raise BatchmarkError(f"{path}: JSON nested too deeply") from None
    except ValueError as exc:  # an integer of more than 4,300 digits (Python's int_max_str_digits)
        raise BatchmarkError(f"{path}: corrupt JSON ({' '.join(str(exc).split())[:120]})") from None
    if not isinstance(config, dict):
        raise BatchmarkError(f"{path}: not a config object")
    return card_from_config(name or path.parent.name, config, quant, expert_quant, kv_bytes_per_element,
                            source=f"arithmetic from {path}", where=str(path))


class CardFile(BaseModel):
    """A card file of ``data/models/``: its keys and their types (``config`` is checked by
    :class:`~pipeline.cards.modelarch.ArchNumbers`)."""

    model_config = ConfigDict(extra="allow")

    name: StrictStr | None = None
    aliases: list[StrictStr] = Field(default_factory=list)
    source: StrictStr = Field(min_length=1)
    native_quant: StrictStr | dict[StrictStr, StrictStr] | None = None
    published: dict[StrictStr, Any] | None = None
    kv_bytes_per_element: StrictInt | StrictFloat | None = Field(default=None, gt=0, le=8)
    config: dict[StrictStr, Any]


def read_card_file(path: Path) -> dict[str, Any]:
    """A card file, parsed and checked (one line naming the file and field on any fault).

    Parsed once per file version (path, modification time, size): a site of 50 models looks
    cards up hundreds of times, and each lookup read every card file.  The caller gets its own copy.

    Raises:
        BatchmarkError: unreadable, not YAML, a key of the wrong type, an architecture number out of range.
    """
    try:
        st = path.stat()
    except OSError:
        st = None  # unreadable: the read below says so in one line
    if st is None:
        return _read_card_file_cached.__wrapped__(str(path), 0, 0)
    return copy.deepcopy(_read_card_file_cached(str(path), st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=512)
def _read_card_file_cached(path_text: str, mtime_ns: int, size: int) -> dict[str, Any]:
    """:func:`read_card_file` of one version of a file (the cache key); see there."""
    path = Path(path_text)
    data = load_yaml_text(path, read_text_file(path, "model card"))
    if not isinstance(data, dict):
        raise BatchmarkError(f"{path}: a card file needs name, source and config")
    try:
        CardFile.model_validate(data)
    except ValidationError as err:
        raise BatchmarkError(validation_message(str(path), err)) from None
    check_arch_numbers(text_config(data["config"]), f"{path}: config")
    return data


def card_files(folder: Path | None = None) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every card file of ``folder`` (default ``data/models/``), read (:func:`read_card_file`), in file name order."""
    for p in sorted((folder or paths.models_dir()).glob("*.yaml")):
        yield p, read_card_file(p)


def card_names(path: Path, data: dict[str, Any]) -> list[str]:
    """The names a card file answers to: its ``name`` (else the file stem), the file stem, its ``aliases``."""
    return [str(n) for n in (data.get("name", path.stem), path.stem, *(data.get("aliases") or []))]


def _norm_name(name: str) -> str:
    return name.strip().lower().split("/")[-1]


def list_card_files(folder: Path | None = None) -> dict[str, Path]:
    """Card files by model name (``data/models/*.yaml``)."""
    return {data.get("name", p.stem): p for p, data in card_files(folder)}


def _scan_cards(name: str, folder: Path | None = None) -> tuple[tuple[Path, dict[str, Any]] | None, list[str]]:
    """(the card file answering to ``name``, or None; the errors of the card files skipped on the way).

    The file named like the model (``<name>.yaml``, any case) is read first, and alone when it answers: a config
    reads only the cards it names, so one broken card of ``data/models/`` breaks only the configs naming it.  A
    bad file named like the model is its error (raised); any other bad file is skipped and its error kept.
    """
    want = _norm_name(name)
    files = sorted((folder or paths.models_dir()).glob("*.yaml"), key=lambda p: (p.stem.lower() != want, p.name))
    bad: list[str] = []
    for p in files:
        try:
            data = read_card_file(p)
        except BatchmarkError as exc:
            if p.stem.lower() == want or want in _raw_names(p):  # the named card is the broken one: its error
                raise
            bad.append(str(exc))
            continue
        if want in {_norm_name(n) for n in card_names(p, data)}:
            return (p, data), bad
    return None, bad


def _raw_names(path: Path) -> set[str]:
    """The normalised names a card file that failed its check says it answers to (empty when its YAML is unreadable)."""
    try:
        data = load_yaml_text(path, read_text_file(path, "model card"))
    except BatchmarkError:
        return set()
    if not isinstance(data, dict):
        return set()
    aliases = data.get("aliases")
    names = [data.get("name", path.stem), *(aliases if isinstance(aliases, list) else [])]
    return {_norm_name(str(n)) for n in names}


def find_card_file(name: str, folder: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The card file whose ``name`` or one of whose ``aliases`` is ``name`` (case-insensitive, org prefix ignored);
    an unreadable card file of another model is skipped (:func:`_scan_cards`)."""
    return _scan_cards(name, folder)[0]


def load_card(name: str, quant: str | None = None, expert_quant: str | None = None,
              kv_bytes_per_element: float | None = None, folder: Path | None = None,
              card_name: str | None = None) -> ModelCard:
    """A card from ``data/models/`` by model name or alias, in ``quant`` (default: the file's native format).

    A card file holds ``name``, ``aliases``, ``source`` (where the numbers come from),
    ``config`` (config.json numbers), ``native_quant`` (``bf16`` or ``{weights, experts}``)
    and ``published`` params for a check.  ``quant`` given without ``expert_quant`` applies to
    every weight.

    Raises:
        BatchmarkError: no card of that name (lists the known ones), a bad card file.
    """
    folder = folder or paths.models_dir()
    found, bad = _scan_cards(name, folder)
    if found is None:
        known = []
        for p in sorted(folder.glob("*.yaml")):
            try:
                known.append(str(read_card_file(p).get("name", p.stem)))
            except BatchmarkError:
                pass  # named below
        skipped = (f"; unreadable card file(s) skipped: {bad[0]}" + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else "")
                   if bad else "")
        raise BatchmarkError(f"model: no card for {name!r} in {folder} (known: {', '.join(sorted(known)) or 'none'})"
                             + skipped)
    path, data = found
    native = data.get("native_quant") or "bf16"
    if isinstance(native, dict):
        native_w, native_e = native.get("weights", "bf16"), native.get("experts")
    else:
        native_w, native_e = native, None
    if quant is None:
        quant, expert_quant = native_w, expert_quant or native_e
    kv_elem = kv_bytes_per_element if kv_bytes_per_element is not None else float(data.get("kv_bytes_per_element", 2))
    card = card_from_config(card_name or data.get("name", path.stem), data["config"], quant, expert_quant, kv_elem,
                            source=f"{data['source']} (card file {path.name})", where=str(path))
    return replace(card, extra={**card.extra, "card_file": path.name, "published": data.get("published") or {}})


def cached_config(repo_id: str) -> Path | None:
    """``config.json`` of ``repo_id`` in the local Hugging Face cache (``HF_HOME``/``HF_HUB_CACHE``), or None; never downloads."""
    if "/" not in repo_id:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers depends on it
        return None
    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except ValueError:  # not a valid repo id
        return None
    return Path(found) if isinstance(found, str) else None


def resolve_card(name: str, quant: str | None = None, expert_quant: str | None = None) -> ModelCard:
    """A card for ``name``: a card file of ``data/models/`` (name or alias), else a local
    ``config.json`` (file or folder), else ``config.json`` of that repo id in the Hugging Face cache.

    Raises:
        BatchmarkError: none of the three knows the model (the message lists the card names).
    """
    if find_card_file(name) is not None:
        return load_card(name, quant=quant, expert_quant=expert_quant)
    if Path(name).exists():
        return card_from_config_file(name, quant=quant or "bf16", expert_quant=expert_quant)
    cfg = cached_config(name)
    if cfg is not None:
        card = card_from_config_file(cfg, name=name.split("/")[-1], quant=quant or "bf16", expert_quant=expert_quant)
        return replace(card, source=f"arithmetic from {name} config.json in the Hugging Face cache ({cfg})")
    return load_card(name)  # raises, naming the known cards
