"""Credentials known by name or by value, for :mod:`pipeline.core.scrub`: which flag and variable names hold a secret,
a command line and an environment with those values redacted, and every spelling of a known secret a server can
echo back.

- By name (:func:`is_secret_name`): a flag or variable whose last word is ``key``, ``token``, ``secret``,
  ``password`` (``--api-key``, ``--hf-token``, ``VLLM_API_KEY``, ``HF_TOKEN``, ``HUGGING_FACE_HUB_TOKEN``,
  ``AWS_SECRET_ACCESS_KEY``), or any name holding ``password``/``passwd``/``secret``.  A tokenizer's
  ``eos_token`` and a count such as ``--max-num-batched-tokens`` are no credential.
- In structure (:func:`redact_argv`, :func:`redact_env`): the value after such a flag (``--api-key K``,
  ``--api-key=K``), of such a variable assigned in a command (``env VLLM_API_KEY=K …``) and such a variable's value
  become ``[redacted]``; :func:`argv_secrets` and :func:`env_secrets`
  give the values themselves, so that a log or an answer that repeats them elsewhere is redacted too.
- By value (:func:`known_spellings`, :func:`fragment_pattern`): a known secret as given, reversed, URL-encoded,
  JSON-escaped, hex-encoded and base64-encoded (standard and URL-safe alphabets, with or without padding, at each of the three
  byte alignments inside a longer base64 text), and any piece of one of those of at least :func:`fragment_chars`
  characters (a key split in two halves that appear apart).
"""

from __future__ import annotations

import base64
import functools
import json
import re
import urllib.parse
from typing import Iterable

REDACTED = "[redacted]"

#: Last words of a name that holds a credential (``--api-key``, ``HF_TOKEN``, ``DB_PASS``).
_SECRET_LAST = {"key", "apikey", "token", "secret", "password", "passwd", "pass", "pat", "credential",
                "credentials", "accesskey", "secretkey", "accesstoken", "authtoken", "apitoken", "authorization"}
#: Words before ``token``/``key`` that make the name no credential (a tokenizer's special tokens, a count's unit,
#: a public half of a key pair, a cache's key).
_NOT_SECRET_BEFORE = {"bos", "eos", "pad", "unk", "sep", "cls", "mask", "per", "start", "end", "image", "video",
                      "audio", "special", "public", "cache", "sort", "server", "primary", "foreign", "partition",
                      "eot", "eom", "eog", "boi", "eoi", "boa", "eoa", "fim", "prefix", "suffix", "middle", "stop",
                      "first", "last", "next", "input", "output", "prompt", "completion"}
_WORDS = re.compile(r"[^a-z0-9]+")


def is_secret_name(name: str) -> bool:
    """Whether a flag, variable or field named ``name`` holds a credential (``--api-key``, ``VLLM_API_KEY``,
    ``HF_TOKEN``, ``client_secret``, ``PGPASSWORD``); not ``--max-num-batched-tokens``, ``eos_token``, ``api_key_env``."""
    words = [w for w in _WORDS.split(name.lower()) if w]
    if not words:
        return False
    if any("password" in w or "passwd" in w or "secret" in w for w in words):
        return True
    last = words[-1]
    if last not in _SECRET_LAST:
        return False
    return not (len(words) > 1 and words[-2] in _NOT_SECRET_BEFORE)


def _flag_name(word: str) -> str | None:
    """The flag's name of a command-line word (``--api-key`` of ``--api-key=K``), None for a value."""
    if not word.startswith("-") or word.startswith("---") or len(word) < 2 or word[1:2].isdigit():
        return None
    return word.partition("=")[0]


#: An environment assignment as a command line's word: ``VLLM_API_KEY=K`` after ``env`` or ``docker run -e``.
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)
#: Lone words that name a credential only in a flag (``--key``), not as an assignment (``key=3`` is any setting's).
_LONE_WORDS = {"key", "pass", "pat", "credential", "credentials"}


def assigned_secret(word: str) -> str | None:
    """The value of a command line's word that assigns a credential-named variable (``VLLM_API_KEY=K``, ``HF_TOKEN=K``
    after ``env`` or ``docker run -e``), None for any other word (``MAX_JOBS=4``, ``eos_token=2``, ``key=3``)."""
    m = _ASSIGNMENT.fullmatch(word)
    if m is None or m.group(1).lower() in _LONE_WORDS or not is_secret_name(m.group(1)):
        return None
    return m.group(2)


def argv_secrets(words: Iterable[str]) -> list[str]:
    """The values of credential flags in a command line: ``K`` of ``--api-key K`` (and of each further value before the
    next flag, as vLLM's ``--api-key K1 K2``) and of ``--api-key=K``, and of credential assignments
    (:func:`assigned_secret`: ``env VLLM_API_KEY=K …``, ``docker run -e HF_TOKEN=K …``)."""
    out: list[str] = []
    taking = False
    for w in (str(x) for x in words):
        flag = _flag_name(w)
        if flag is None and not taking and (value := assigned_secret(w)) is not None:
            out.append(value)
        elif flag is not None:
            taking = False
            if is_secret_name(flag.lstrip("-")):
                if "=" in w:
                    out.append(w.partition("=")[2])
                else:
                    taking = True
        elif taking:
            out.append(w)
    return [v for v in out if v]


def redact_argv(words: Iterable[str]) -> list[str]:
    """``words`` (a command line, or flags to append to one) with each credential flag's values and each credential
    assignment's value replaced by ``[redacted]`` (:func:`argv_secrets`); every other word unchanged."""
    out: list[str] = []
    taking = False
    for w in (str(x) for x in words):
        flag = _flag_name(w)
        if flag is None and not taking and assigned_secret(w):
            w = f"{w.partition('=')[0]}={REDACTED}"
        elif flag is not None:
            taking = False
            if is_secret_name(flag.lstrip("-")):
                if "=" in w:
                    w = f"{flag}={REDACTED}"
                else:
                    taking = True
        elif taking:
            w = REDACTED
        out.append(w)
    return out


def env_secrets(env: dict[str, object]) -> list[str]:
    """The values of credential-named variables (:func:`is_secret_name`) of an environment mapping."""
    return [str(v) for k, v in env.items() if is_secret_name(str(k)) and v not in (None, "")]


def redact_env(env: dict[str, object]) -> dict[str, object]:
    """``env`` with each credential-named variable's value replaced by ``[redacted]``; the names kept."""
    return {k: (REDACTED if is_secret_name(str(k)) and v not in (None, "") else v) for k, v in env.items()}


def fragment_chars(secret: str) -> int | None:
    """The shortest piece of ``secret`` redacted on its own: half its length, at most 8 characters; None (only whole
    spellings) for a secret shorter than 12 characters, whose halves (a word such as ``test``) could be any text."""
    half = len(secret) // 2
    return min(8, half) if half >= 6 else None


def _base64_cores(raw: bytes) -> set[str]:
    """The base64 text (both alphabets) that encodes ``raw`` wherever it starts in a longer encoded text: for each byte
    alignment (0, 1, 2 bytes before it), the characters that depend on ``raw`` alone.  Derived: a base64 character
    encodes 6 bits; bytes ``o`` … ``o+n`` of a text encode wholly in characters ⌈8o/6⌉ … ⌊8(o+n)/6⌋ − 1."""
    cores: set[str] = set()
    for offset in range(3):
        text = base64.b64encode(b"\0" * offset + raw).decode()
        first, last = -(-8 * offset // 6), (8 * (offset + len(raw))) // 6
        core = text[first:last]
        cores.update({core, core.replace("+", "-").replace("/", "_")})
    return {c for c in cores if c}


def known_spellings(secret: str) -> list[str]:
    """``secret`` as a server can send it back, longest first: as given, reversed, URL-encoded (``%2F``, ``+`` for a
    space), JSON-escaped (``\\"``, ``\\/``, ``\\u00e9``), its UTF-8 bytes in hex (lower and upper case), and base64 (std and URL-safe, padded and not, and the core
    of it inside a longer base64 text, :func:`_base64_cores`)."""
    forms = {secret, secret[::-1]}
    for s in (secret, secret[::-1]):
        json_form = json.dumps(s)[1:-1]
        forms.update({urllib.parse.quote(s, safe=""), urllib.parse.quote_plus(s), json_form,
                      json_form.replace("/", "\\/"), json.dumps(s, ensure_ascii=False)[1:-1]})
    raw = secret.encode("utf-8")
    forms.update({raw.hex(), raw.hex().upper()})
    for enc in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
        forms.update({enc, enc.rstrip("=")})
    forms.update(_base64_cores(raw))
    return sorted((f for f in forms if f), key=len, reverse=True)


@functools.lru_cache(maxsize=64)
def fragment_pattern(secrets: tuple[str, ...]) -> tuple[re.Pattern[str] | None, tuple[str, ...]]:
    """(a pattern of every piece of :func:`fragment_chars` characters of every spelling of ``secrets``, the spellings
    whose pieces it finds); (None, ()) when no secret is long enough to be found in pieces."""
    grams: set[str] = set()
    spelled: list[str] = []
    for secret in secrets:
        n = fragment_chars(secret)
        if n is None:
            continue
        for form in known_spellings(secret):
            if len(form) >= n:
                spelled.append(form)
                grams.update(form[i:i + n] for i in range(len(form) - n + 1))
    if not grams:
        return None, ()
    alternatives = "|".join(re.escape(g) for g in sorted(grams, key=len, reverse=True))
    return re.compile(alternatives), tuple(spelled)


def redact_fragments(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every run of characters that is a piece (at least :func:`fragment_chars` long) of a spelling of one
    of ``secrets`` replaced by ``[redacted]``: each piece found is grown to the right while it stays a piece."""
    pattern, spelled = fragment_pattern(secrets)
    if pattern is None:
        return text
    out: list[str] = []
    pos = 0
    while (m := pattern.search(text, pos)) is not None:
        end = m.end()
        while end < len(text) and any(text[m.start():end + 1] in form for form in spelled):
            end += 1
        out += [text[pos:m.start()], REDACTED]
        pos = end
    out.append(text[pos:])
    return "".join(out)
