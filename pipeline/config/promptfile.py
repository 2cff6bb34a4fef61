"""A prompt file (``lengths.prompt_file``): the user's own prompts as JSON Lines, read once, checked line by line.

One JSON object a line (https://jsonlines.org/); blank lines are skipped.  A line is either

- ``{"prompt": "…"}``, optionally with ``"output": "…"`` (a reference output: its length in tokens is the request's
  output length) or ``"output_len": N`` (tokens; ``"output_tokens": N`` too, as ``vllm bench serve --dataset-name
  custom`` reads the same file), or
- ShareGPT's ``{"conversations": [{"from": "human", "value": "…"}, {"from": "gpt", "value": "…"}, …]}``: the first
  human turn is the prompt and the turn after it, where a model (``gpt``) answered, the reference output (as vLLM's
  ``ShareGPTDataset`` reads the first two turns).

Nothing is fetched: the file is local.  Everything in it is untrusted: a line that is not a JSON object, a prompt
that is not a non-empty string, an ``output_len`` that is not a positive integer, or a file with no prompt at all is
one line naming the file and the line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.errors import BatchmarkError

#: Longest prompt file read (bytes): a prompt file is a workload, not a corpus.
MAX_PROMPT_FILE_BYTES = 256 * 2**20


@dataclass(frozen=True)
class PromptEntry:
    """One prompt of a file: its text, and the reference output's text or length (tokens) where the line gives one."""

    prompt: str
    output: str | None = None
    output_len: int | None = None


def _entry(obj: object, where: str) -> PromptEntry:
    """The entry of one parsed line (``where``: ``file line N``)."""
    if not isinstance(obj, dict):
        raise BatchmarkError(f"{where}: not a JSON object (a prompt file has one object a line)")
    if "conversations" in obj and "prompt" not in obj:
        turns = obj["conversations"]
        if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
            raise BatchmarkError(f"{where}: conversations: not a list of turns ({{from, value}})")
        human = next((i for i, t in enumerate(turns) if t.get("from") in ("human", "user")), None)
        if human is None:
            raise BatchmarkError(f"{where}: conversations: no human turn (the prompt)")
        prompt = turns[human].get("value")
        after = turns[human + 1] if human + 1 < len(turns) else None
        output = after.get("value") if after is not None and after.get("from") in ("gpt", "assistant") else None
        out_len = None
    else:
        prompt, output, out_len = obj.get("prompt"), obj.get("output"), obj.get("output_len", obj.get("output_tokens"))
    if not isinstance(prompt, str) or not prompt.strip():
        raise BatchmarkError(f"{where}: prompt: not a non-empty string")
    if output is not None and not isinstance(output, str):
        raise BatchmarkError(f"{where}: output: not a string")
    if out_len is not None and (isinstance(out_len, bool) or not isinstance(out_len, int) or not 0 < out_len <= 10_000_000):
        raise BatchmarkError(f"{where}: output_len: {out_len!r} is not a positive number of tokens")
    return PromptEntry(prompt, output or None, out_len)


def read_prompt_file(path: str | Path) -> list[PromptEntry]:
    """The prompts of a JSON Lines file, in file order.

    Raises:
        BatchmarkError: the file is missing, too large, not UTF-8, a line is not a JSON object or holds no prompt,
            or the file holds no prompt at all (one line naming the file, and the line where one is at fault).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_PROMPT_FILE_BYTES:
            raise BatchmarkError(f"{path}: {size} bytes; a prompt file holds at most {MAX_PROMPT_FILE_BYTES}")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BatchmarkError(f"{path}: prompt file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BatchmarkError(f"{path}: not a readable UTF-8 text file ({type(exc).__name__})") from None
    entries = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise BatchmarkError(f"{path} line {n}: not JSON (a prompt file is JSON Lines: one object a line)") from None
        entries.append(_entry(obj, f"{path} line {n}"))
    if not entries:
        raise BatchmarkError(f"{path}: holds no prompts (one JSON object a line, each with a prompt)")
    return entries
