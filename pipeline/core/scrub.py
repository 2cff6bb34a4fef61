"""What a stored run may not carry: secrets and the measuring machine's paths, removed from text before it is written.

Runs are committed and published, so text that comes from outside the measurement (a server's
error answer, a stream's error event, an exception's message, a server's log) is scrubbed at the
place it enters a record or a run folder:

- :func:`redact`: API keys and tokens.  The key the client sent is removed wherever it appears, in every spelling
  a server can echo (reversed, URL- and JSON-escaped, hex, base64, and in pieces: :mod:`pipeline.core.credentials`),
  and so is anything shaped like a credential: ``Bearer …``, the value of an ``Authorization``/``api_key``/
  ``x-api-key``/``token``/``password``/``secret`` field, a credential flag's or variable's value (``--api-key K``,
  ``--hf-token=K``, ``VLLM_API_KEY=K``, ``export HF_TOKEN=K``), the well-known key shapes (OpenAI
  ``sk-…``, Hugging Face ``hf_…``, GitHub ``ghp_…``, Slack ``xox?-…``, AWS ``AKIA…``, JWTs) and
  the ``user:password@`` part of a URL.  Each becomes ``[redacted]``; redacting twice changes nothing more.
- :func:`scrub_paths`: absolute paths of the machine.  The repository becomes ``<repo>``, the
  Python environment ``<venv>``, the temporary folder ``<tmp>``, a home folder ``~``.
- :func:`scrub`: both, the one call for text a server sends back before it is stored.
- :func:`scrub_tree`: a JSON-like provenance (``run.json``): credentials redacted by name in its structure (an
  ``env`` mapping's ``HF_TOKEN``, a flag list's ``--api-key K``) and by value elsewhere, then every string scrubbed.

Redact before cutting a text short: a key cut in half no longer matches its own value.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable

from pipeline.core import credentials
from pipeline.core.credentials import REDACTED


def _text_secret_name(name: str) -> bool:
    """A credential's name in running text (:func:`pipeline.core.credentials.is_secret_name`), but not a lone common word
    (``key: …``, ``pass=3``) that text uses for other things, nor ``Authorization`` (its scheme word, ``Bearer``, is
    no value: the first pattern redacts what follows it)."""
    return credentials.is_secret_name(name) and not name.lower().endswith("authorization") and \
        name.lower() not in {"key", "pass", "pat", "credential", "credentials"}


#: A number a field named ``…token`` holds that is no credential: a token id or count (``EOS token = 2``,
#: ``eot_token: 128009``, ``first_token=2.1``); a longer run of digits may be one.
_TOKEN_NUMBER = re.compile(r"\d{1,15}(?:\.\d+)?")


def _kept(name: str, value: str) -> bool:
    """Whether ``value`` of a credential-named ``name`` is no credential: a number of a name ending in ``token``."""
    return name.lower().rstrip("s").endswith("token") and _TOKEN_NUMBER.fullmatch(value) is not None


# a token's characters: base64/base64url, hex, JWT dots and the separators key formats use
_TOKEN = r"[A-Za-z0-9._~+/=:-]+"
# a credential's value: up to a space, quote, escape or separator; never a value already redacted (idempotent)
_VALUE = r"(?!\[?redacted\])([^\s\"'\\,;&}\[\])]+)"
_PATTERNS: list[tuple[re.Pattern[str], Any]] = [
    # the value of a header or field named like a credential: "Authorization: Bearer x", "api_key": "x", token=x
    (re.compile(r"(?i)(?<![A-Za-z0-9_-])((?:proxy-)?authorization|x-api-key|api[-_ ]?key|access[-_]?token|"
                r"refresh[-_]?token|auth[-_]?token|client[-_]?secret|secret|password|passwd|token)"
                r"(\\?[\"']?\s*[:=]\s*\[?\s*\\?[\"']?)(?!(?:bearer|basic|token)\s+\[redacted\])(?:(bearer|basic|token)\s+)?"
                + _VALUE),
     lambda m: m.group(0) if _kept(m.group(1), m.group(4)) else
     f"{m.group(1)}{m.group(2)}{m.group(3) + ' ' if m.group(3) else ''}{REDACTED}"),
    # a flag named like a credential and its value: "--api-key K", "--hf-token=K", "'--api-key', 'K'" (an argv list)
    (re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)(=|\\?[\"']?(?:\s*,\s*|\s+)\\?[\"']?)(?!-)" + _VALUE),
     lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}" if credentials.is_secret_name(m.group(1))
     and not _kept(m.group(1), m.group(3)) else m.group(0)),
    # a variable or field named like a credential: "VLLM_API_KEY=K", "export HF_TOKEN=K", "'api_key': ['K']"
    (re.compile(r"(?<![\w$-])([A-Za-z_][\w-]*)(\\?[\"']?\s*[:=]\s*\[?\s*\\?[\"']?)" + _VALUE),
     lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}" if _text_secret_name(m.group(1))
     and not _kept(m.group(1), m.group(3)) else m.group(0)),
    # a key in a URL's query: Google's "?key=K", an Azure shared access signature's "&sig=K"
    (re.compile(r"([?&](?:key|sig|signature)=)" + _VALUE), lambda m: f"{m.group(1)}{REDACTED}"),
    # a bearer token anywhere: "Bearer sk-…" (also URL-encoded: "Bearer%20…")
    (re.compile(r"(?i)\b(bearer)(\s+|%20|\+)(?!\[redacted\])" + _TOKEN), lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}"),
    # well-known key shapes, wherever they stand: OpenAI (sk-, sk-proj-…), Stripe-like, Hugging Face, GitHub,
    # GitLab, Slack, NVIDIA, AWS access key ids, JWTs
    (re.compile(r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{8,}[A-Za-z0-9_-]*"), lambda m: REDACTED),
    (re.compile(r"\b(?:[sr]k_(?:live|test)_[A-Za-z0-9]{8,}|hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|"
                r"github_pat_[A-Za-z0-9_]{40,}|glpat-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|"
                r"nvapi-[A-Za-z0-9_-]{20,})"), lambda m: REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), lambda m: REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+"), lambda m: REDACTED),
    # credentials in a URL: scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@:]+:[^\s/@]+@"), lambda m: f"{m.group(1)}{REDACTED}@"),
]


def redact(text: str | None, secrets: Iterable[str | None] = (), *, pieces: bool = True) -> str | None:
    """``text`` with every secret in ``secrets`` and every credential-shaped token replaced by ``[redacted]``.

    Args:
        text: text that came from outside (a server's answer, an exception's message); None passes through.
        secrets: values known to be secret (the API key the client sent); empty and None entries are skipped.
            A secret shorter than 4 characters is still removed (it is what the client sent).  Each is found in
            every spelling of :func:`pipeline.core.credentials.known_spellings` (as sent, reversed, URL-encoded,
            JSON-escaped, base64).
        pieces: also redact every piece of a spelling of at least
            :func:`pipeline.core.credentials.fragment_chars` characters (a key echoed in two halves apart); off
            for text that no server wrote (a run's own provenance), where a piece of a chosen key could be a name.

    Returns:
        The text with the secrets removed; the rest unchanged.
    """
    if not text:
        return text
    known = tuple(dict.fromkeys(str(s) for s in secrets if s))
    for secret in known:
        for form in credentials.known_spellings(secret):
            text = text.replace(form, REDACTED)
    if pieces:
        text = credentials.redact_fragments(text, known)
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def _machine_prefixes(root: Path | None = None) -> list[tuple[str, str]]:
    """(absolute folder, its stand-in) of this machine, longest first: repository, environment, temp, home."""
    from pipeline.core import paths

    pairs: list[tuple[str, str]] = []

    def add(path: str | Path | None, name: str) -> None:
        if not path:
            return
        for p in {str(path), os.path.realpath(str(path))}:
            p = p.rstrip("/")
            if len(p) > 1:
                pairs.append((p, name))

    add(root or paths.root(), "<repo>")
    add(Path(__file__).resolve().parents[2], "<repo>")  # the checkout that runs, when BATCHMARK_ROOT points elsewhere
    add(sys.prefix, "<venv>")
    add(os.environ.get("VIRTUAL_ENV"), "<venv>")
    add(tempfile.gettempdir(), "<tmp>")
    add(os.environ.get("TMPDIR"), "<tmp>")
    add(os.path.expanduser("~"), "~")
    return sorted(set(pairs), key=lambda p: len(p[0]), reverse=True)


# any home or temporary folder, also of another machine or user: /home/<user>, /Users/<user>, /root, /tmp/<…>
# (a user name with spaces, "/home/Jane Doe/…", is one folder when a "/" follows it)
_HOME_RE = re.compile(r"(?<![\w./-])(?:(?:/home/|/Users/)(?:[^/\s\"':]+(?: [^/\s\"':]+)+(?=/)|[^/\s\"':]+)|/root)"
                      r"(?=/|\b|$)")
_TMP_RE = re.compile(r"(?<![\w./-])(?:/private)?(?:/tmp|/var/tmp|/var/folders/[^\s\"':]+?/T)(?=/|\b|$)")


def scrub_paths(text: str | None, root: Path | None = None) -> str | None:
    """``text`` with this machine's absolute paths replaced by stand-ins: the repository ``root`` → ``<repo>``, the
    Python environment → ``<venv>``, the temporary folder → ``<tmp>``, the home folder → ``~``; any other home
    (``/home/<user>``, ``/Users/<user>``, ``/root``) → ``~`` and ``/tmp``, ``/var/tmp`` → ``<tmp>``.

    Only the folder part is replaced: ``/home/me/models/llama`` → ``~/models/llama``.  None passes through.
    """
    if not text:
        return text
    for prefix, name in _machine_prefixes(root):
        text = re.sub(r"(?<![\w./~-])" + re.escape(prefix) + r"(?=/|\b|$)", lambda m: name, text)
    text = _HOME_RE.sub("~", text)
    return _TMP_RE.sub("<tmp>", text)


#: Any absolute path of two or more folders left after :func:`scrub_paths` (``/scratch/<user>/models/llama``), also each
#: folder of a ``:``-separated list (``PYTHONPATH``, ``LD_LIBRARY_PATH``): not a URL's path (a ``/`` after a host, or
#: the ``//`` of ``scheme://``, is none), nor a stand-in's rest (``<repo>/…``, ``~/…``).
_ABS_RE = re.compile(r"(?<![\w.~>/@%-])(?<!://)/(?!/)(?:[^\s/\"'<>:;,()\[\]{}|=]+/)+([^\s/\"'<>:;,()\[\]{}|=]*)")
#: The stand-in of a folder of the machine that is no home, temporary folder, repository or environment.
ABS = "<abs>"


def scrub_abs(text: str | None) -> str | None:
    """``text`` with each absolute path :func:`scrub_paths` left (``/scratch/u/models/llama``) replaced by
    ``<abs>/`` and its last part (``<abs>/llama``): the name says what it was, the machine's folders are gone."""
    if not text:
        return text
    return _ABS_RE.sub(lambda m: f"{ABS}/{m.group(1)}", text)


#: A key of a tree that names a field, a variable or a flag (``api_key``, ``VLLM_API_KEY``, ``--hf-token``): a name
#: made of a word's characters, not free text used as a key (a model named ``../../etc/passwd`` keys its entry).
_KEY_NAME = re.compile(r"-{0,2}[A-Za-z_][A-Za-z0-9_.-]{0,63}")


def _secret_key(key: Any) -> bool:
    """Whether a tree's key names a credential (:func:`pipeline.core.credentials.is_secret_name`) and is shaped as a
    name (:data:`_KEY_NAME`)."""
    return _KEY_NAME.fullmatch(str(key)) is not None and credentials.is_secret_name(str(key))


def tree_secrets(obj: Any) -> list[str]:
    """The credentials a JSON-like tree names in structure: the string values of credential-named keys (an
    environment's ``VLLM_API_KEY``, a field ``api_key``) and the values of credential flags in its lists of words
    (``["--api-key", K]``), :mod:`pipeline.core.credentials`."""
    found: list[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if _secret_key(k) and isinstance(v, (str, list, tuple)):
                found += [v] if isinstance(v, str) else [x for x in v if isinstance(x, str)]
            else:
                found += tree_secrets(v)
    elif isinstance(obj, (list, tuple)):
        found += credentials.argv_secrets(v for v in obj if isinstance(v, str))
        for v in obj:
            found += tree_secrets(v)
    return [s for s in found if s and s != REDACTED]


def _redact_structure(obj: Any) -> Any:
    """``obj`` with credential-named keys' string values and credential flags' values (:func:`tree_secrets`) replaced
    by ``[redacted]``."""
    if isinstance(obj, dict):
        return {k: ((REDACTED if isinstance(v, str) else [REDACTED if isinstance(x, str) else x for x in v])
                    if _secret_key(k) and isinstance(v, (str, list, tuple)) and v
                    else _redact_structure(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        words = credentials.redact_argv(obj) if all(isinstance(v, str) for v in obj) else list(obj)
        return [_redact_structure(v) for v in words]
    return obj


def _scrub_strings(obj: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(obj, str):
        return scrub_abs(scrub(obj, secrets, pieces=False)) or obj
    if isinstance(obj, dict):
        return {k: _scrub_strings(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_scrub_strings(v, secrets) for v in obj]
    return obj


#: Shortest value of a credential-named key that :func:`scrub_tree` also redacts wherever else the tree repeats it
#: (a shorter one, ``test``, would be found in other words and names; it is redacted where it is named).
TREE_SECRET_CHARS = 8


def scrub_tree(obj: Any, secrets: Iterable[str | None] = ()) -> Any:
    """``obj`` (JSON-like: dicts, lists, strings, numbers) with every string scrubbed for publishing: the value of a
    credential-named key (``env: {VLLM_API_KEY: …}``) and of a credential flag in a list of words
    (``args: ["--api-key", …]``) redacted by name, then those values (of :data:`TREE_SECRET_CHARS` or more), ``secrets``
    and key-shaped text redacted wherever they appear, whole in each spelling (no pieces: this text is the run's own), and the machine's paths replaced (:func:`scrub`, then :func:`scrub_abs`); keys and numbers
    unchanged."""
    named = [s for s in tree_secrets(obj) if len(s) >= TREE_SECRET_CHARS]  # a shorter one only where it is named
    known = tuple(dict.fromkeys([*(str(s) for s in secrets if s), *named]))
    return _scrub_strings(_redact_structure(obj), known)


def redact_tree(obj: Any) -> Any:
    """``obj`` (JSON-like) with credentials redacted as :func:`scrub_tree` redacts them (by name in its structure, then
    those values and key-shaped text in every string), and nothing else changed (no path replaced): the content a
    config's digest is taken of, so that a published digest is no oracle for guessing a key."""
    named = tuple(dict.fromkeys(s for s in tree_secrets(obj) if len(s) >= TREE_SECRET_CHARS))

    def strings(o: Any) -> Any:
        if isinstance(o, str):
            return redact(o, named, pieces=False) or o
        if isinstance(o, dict):
            return {k: strings(v) for k, v in o.items()}
        return [strings(v) for v in o] if isinstance(o, (list, tuple)) else o
    return strings(_redact_structure(obj))


def scrub(text: str | None, secrets: Iterable[str | None] = (), root: Path | None = None, *,
          pieces: bool = True) -> str | None:
    """``text`` with secrets redacted (:func:`redact`, ``pieces`` as there) and machine paths replaced
    (:func:`scrub_paths`)."""
    return scrub_paths(redact(text, secrets, pieces=pieces), root)


def relative_path(value: str, root: Path | None = None) -> str:
    """A path as stored in a run: relative to the repository when it is inside it (``data/models/x``), else with the
    machine's folders replaced (:func:`scrub_paths`); a name that is not an absolute path (a hub id) as given.

    The path is compared as written first, then with its links resolved (a repository reached through a link).
    """
    from pipeline.core import paths

    if not value or not os.path.isabs(value):
        return value
    base = root or paths.root()
    bases = [base, base.resolve(), Path(__file__).resolve().parents[2]]
    for candidate in (os.path.normpath(value), os.path.realpath(value)):
        for b in bases:
            try:
                rel = Path(candidate).relative_to(b).as_posix()
            except ValueError:
                continue
            return rel if rel != "." else "."
    return scrub_abs(scrub_paths(value, root)) or value
