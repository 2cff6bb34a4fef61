"""A served backend's server process, apart from its life cycle: a free port, the command line formatted from its
template, the environment it gets, its log's tail for an error line and the log and command scrubbed of the
machine's paths and secrets before they are stored with a run."""

from __future__ import annotations

import os
import shlex
import socket
from pathlib import Path
from typing import Any, Iterable

from pipeline.core import credentials, scrub
from pipeline.core.atomicfiles import atomic_write_text
from pipeline.core.errors import BatchmarkError

LOG_TAIL_LINES = 15


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, max_chars: int = 1500, secrets: Iterable[str] = ()) -> str:
    """Last ``lines`` non-empty lines of a log file joined with `` | `` (one line, ≤ ``max_chars``), scrubbed of
    ``secrets`` (the server's own keys), key-shaped text and the machine's paths."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    tail = " | ".join([ln.strip() for ln in (scrub.scrub(text, secrets) or "").splitlines() if ln.strip()][-lines:])
    return tail[-max_chars:] or "(empty log)"


def format_command(template: str, values: dict[str, Any], extra_args: list[str], field: str = "vllm.command") -> list[str]:
    """Split ``template`` like a shell would, fill each word's ``{placeholders}``, append ``extra_args``.

    Raises:
        BatchmarkError: an unknown placeholder (named in the message).
    """
    try:
        words = [w.format(**values) for w in shlex.split(template)]
    except KeyError as exc:
        raise BatchmarkError(f"{field}: unknown placeholder {{{exc.args[0]}}} "
                             f"(known: {', '.join(sorted(values))})") from None
    except ValueError as exc:
        raise BatchmarkError(f"{field}: cannot parse the template ({exc})") from None
    return words + list(extra_args)


def dtype_flag(words: list[str]) -> str | None:
    """The value of a server command's last ``--dtype X`` or ``--dtype=X`` (vLLM's weight dtype; the last given
    wins, as argparse reads it), None when it has none."""
    found = None
    for i, w in enumerate(words):
        if w == "--dtype" and i + 1 < len(words):
            found = words[i + 1]
        elif w.startswith("--dtype="):
            found = w.partition("=")[2]
    return found


# Thread caps a workflow sets for the measuring process (Snakemake sets these from a rule's
# ``threads``); the server is its own program and sizes its own thread pools.
THREAD_CAPS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def server_environment(parent: dict[str, str] | Any, extra: dict[str, str]) -> dict[str, str]:
    """The server's environment: the caller's, without its thread caps (:data:`THREAD_CAPS`), plus ``extra``.

    Found measuring vLLM's CPU build under Snakemake: with the ``OMP_NUM_THREADS`` = cores that
    Snakemake gives the sweep rule, the server's worker ran its OpenMP threads on every core,
    beside the engine core's busy loop, and decoded 1.5 tok/s instead of 38.  A cap the user
    wants for the server goes in ``vllm.env`` and is kept.
    """
    env = {k: v for k, v in dict(parent).items() if k not in THREAD_CAPS}
    env.update(extra)
    return env


def repo_relative(words: list[str]) -> list[str]:
    """``words`` with paths inside the project made relative to it and every other machine folder (home, temporary,
    environment) replaced by its stand-in (:mod:`pipeline.core.scrub`), so a recorded command names no machine's folders."""
    return [scrub.relative_path(w) if os.path.isabs(w) else (scrub.scrub_paths(w) or w) for w in words]


def server_secrets(cmd: list[str], env: dict[str, str], inherited: dict[str, str] | None = None) -> tuple[str, ...]:
    """The credentials a server is started with: the values of its credential flags (``--api-key K``, ``--hf-token=K``),
    of its configured credential-named variables ``env`` (``VLLM_API_KEY``, ``HF_TOKEN``; :mod:`pipeline.core.credentials`)
    and of those it inherits (``inherited``, the whole environment it gets) of :data:`INHERITED_SECRET_CHARS` or more."""
    found = [*credentials.argv_secrets(cmd), *credentials.env_secrets(env)]
    found += [s for s in credentials.env_secrets(inherited or {}) if len(s) >= INHERITED_SECRET_CHARS]
    return tuple(dict.fromkeys(found))


#: Shortest inherited credential-named value redacted from a server's log (a shorter one, ``GIT_ASKPASS_TOKEN=1``,
#: would take every ``1`` of the log with it; one the config gives is redacted whatever its length).
INHERITED_SECRET_CHARS = 8


def server_api_key(cmd: list[str], env: dict[str, str]) -> str | None:
    """The API key a vLLM server started this way asks of its clients: the first value of its ``--api-key`` flag, else
    its ``VLLM_API_KEY`` variable as the command assigns it (``env VLLM_API_KEY=K …``, ``docker run -e VLLM_API_KEY=K``),
    else as the environment gives it (vLLM's ``serve --api-key``: https://docs.vllm.ai/en/latest/cli/serve.html); None."""
    for i, w in enumerate(cmd):
        if w.startswith("--api-key="):
            return w.partition("=")[2] or None
        if w == "--api-key" and i + 1 < len(cmd) and not cmd[i + 1].startswith("-"):
            return cmd[i + 1]
    assigned = [w.partition("=")[2] for w in cmd if w.startswith("VLLM_API_KEY=")]
    return (assigned[-1] if assigned else env.get("VLLM_API_KEY")) or None


def scrub_log(path: Path, secrets: Iterable[str] = ()) -> None:
    """Rewrite a server log with the machine's paths and any secrets removed (:func:`pipeline.core.scrub.scrub`: the
    server's own ``secrets`` in every spelling, and key-shaped text); logs are committed with runs.  Atomic (a
    temporary file in the same folder, then a rename); a missing log is left alone."""
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return
    clean = scrub.scrub(text, secrets) or ""
    if clean == text:
        return
    atomic_write_text(path, clean)  # the store's atomic writer: no engine renames a run's files
