"""Checks a sweep can pass before its run folder exists: a failed start leaves no empty run behind.

Every ``batchmark sweep`` (a whole run, one model's part, a resume) runs :func:`preflight` before it claims
a run folder: the config is already valid (:func:`pipeline.config.sweepconfig.load_config`), and here

- the hardware profile loads;
- an ``openai`` endpoint answers at ``openai.base_url`` (a GET of ``<base_url>/models``, a few seconds at most):
  nothing listening, or a 401/403 (the server wants a key, or refused the one given), is an error that names
  the field and the variable; a missing ``api_key_env`` variable is *not* an error (the README: a key only if the
  server wants one), the request simply carries no key;
- every served model's tokenizer source (``<engine>.tokenizer``, else ``path``, else ``served_name``) is a local
  folder, or a hub id the hub can give: when the hub cannot be reached (no network, ``HF_HUB_OFFLINE``) and the
  tokenizer is not in the local cache, it fails at once in one line instead of retrying the hub for ~40 s.

What cannot be checked before measuring (the vLLM server's own start, a model that does not fit) still fails
inside the sweep; a run that then measured nothing is removed by the CLI (:func:`discard_if_empty`).
"""

from __future__ import annotations

import os
import shutil
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

from pipeline.config.sweepconfig import SweepConfig
from pipeline.core.errors import BatchmarkError

#: Seconds to wait for an endpoint's answer or the hub's TCP handshake: a reachable server answers in far less.
CONNECT_TIMEOUT_S = 3.0


def hub_reachable(timeout_s: float = CONNECT_TIMEOUT_S) -> tuple[bool, str]:
    """Whether the Hugging Face hub can be asked (``HF_HUB_OFFLINE`` unset and its host accepts a TCP connection).

    Returns ``(reachable, why not)``; the host is ``HF_ENDPOINT``'s (default ``https://huggingface.co``).
    """
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on") or \
            os.environ.get("TRANSFORMERS_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False, "HF_HUB_OFFLINE is set"
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True, ""
    except OSError as exc:
        return False, f"{host} cannot be reached ({exc.__class__.__name__}: {exc})"


def tokenizer_cached(repo_id: str) -> bool:
    """Whether the local Hugging Face cache holds a tokenizer file of ``repo_id`` (no network)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers brings huggingface_hub
        return False
    for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model"):
        try:
            hit = try_to_load_from_cache(repo_id, name)
        except Exception:  # an id that is no valid repo id (the hub library's own validation)
            return False
        if isinstance(hit, str):
            return True
    return False


def check_tokenizer(source: str, field: str, reachable: Callable[[], tuple[bool, str]] = hub_reachable) -> None:
    """Raise when the tokenizer at ``source`` cannot be had: not a local folder, and neither cached nor on a reachable hub.

    Args:
        source: a local folder or a hub id (``org/name``).
        field: the config field it came from, for the message.
        reachable: the hub check (:func:`hub_reachable`; a test passes its own).

    Raises:
        BatchmarkError: one line naming ``field`` and ``source``.
    """
    path = Path(source).expanduser()
    if path.is_dir():
        return
    if source.startswith(("/", "./", "../", "~")) or path.exists():
        raise BatchmarkError(f"{field}: {source!r} is no folder (a local tokenizer folder or a hub id such as org/name)")
    if tokenizer_cached(source):
        return
    ok, why = reachable()
    if not ok:
        raise BatchmarkError(f"{field}: tokenizer {source!r} is not a local folder, not in the Hugging Face cache, and the "
                             f"hub cannot be asked ({why}); give a local folder")


def check_endpoint(base_url: str, api_key_env: str | None, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise when nothing answers at an OpenAI-compatible ``base_url``, or it refuses for want of a key.

    A GET of ``<base_url>/models`` with the key (when ``api_key_env`` names a set variable); any HTTP answer but
    401/403 passes (a server without ``/models`` answers 404 and is there).

    Raises:
        BatchmarkError: no answer (connection refused, timeout, DNS), or 401/403.
    """
    key = os.environ.get(api_key_env) if api_key_env else None
    url = base_url.rstrip("/") + "/models"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s):
            return
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            if key:
                raise BatchmarkError(f"openai.base_url: {base_url} refused the key in {api_key_env} "
                                     f"(HTTP {exc.code})") from None
            hint = f"export {api_key_env}" if api_key_env else "set openai.api_key_env to the variable that holds it"
            raise BatchmarkError(f"openai.base_url: {base_url} wants an API key (HTTP {exc.code}); {hint}") from None
        return
    except (urllib.error.URLError, OSError, ValueError) as exc:
        why = getattr(exc, "reason", exc)
        raise BatchmarkError(f"openai.base_url: nothing answers at {base_url} ({why}); start the server "
                             "first, or correct the URL (up to and including /v1)") from None


def tokenizer_sources(cfg: SweepConfig, models: list[str] | None = None) -> list[tuple[str, str]]:
    """``[(source, config field)]`` of the served models' tokenizers that are set in the config.

    A ``vllm`` model given only by ``architecture`` gets a local folder built at load time and is skipped.
    """
    if cfg.backend not in ("openai", "vllm"):
        return []
    opts = cfg.openai if cfg.backend == "openai" else cfg.vllm
    out = []
    for spec in cfg.models:
        if models is not None and spec.name not in models:
            continue
        if cfg.backend == "vllm" and spec.architecture is not None and spec.path is None:
            continue
        tok = getattr(opts, "tokenizer", None)
        source = tok or spec.path or spec.served_name
        if source:
            field = f"{cfg.backend}.tokenizer" if tok else f"models.{spec.name}: {'path' if spec.path else 'served_name'}"
            out.append((source, field))
    return out


def load_note(load_1min: float, cores: int) -> str | None:
    """One line before measuring where the 1-minute load average is above the cores (more runnable processes than
    CPUs: a point measured now shares the machine, and its verdict may be flagged busy), else None."""
    if cores <= 0 or load_1min <= cores:
        return None
    return (f"note: the load average is {load_1min:.2f} on {cores} core(s): other work is running; the points "
            "measured now share the machine (their verdict says so if it shows) — measure on a quiet machine")


def load_note_now(cfg: SweepConfig) -> str | None:
    """:func:`load_note` of this machine now, for a sweep that measures in real time (a simulated run's time is
    virtual: None); said once measuring starts, after every check passed, so a refused sweep says only its error."""
    if cfg.backend == "simulated" or not hasattr(os, "getloadavg"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)
    return load_note(os.getloadavg()[0], cores)


def preflight(cfg: SweepConfig, models: list[str] | None = None, log: Callable[[str], None] | None = None) -> None:
    """Everything about a sweep that can be checked before a run folder is made (module docstring).

    Args:
        cfg: the loaded sweep config.
        models: the models this sweep measures (a part's one model), None for all.
        log: where a note goes (a key variable that is not set).

    Raises:
        BatchmarkError: the first check that fails, in one line.
    """
    from pipeline.machine.hardware import load_profile

    load_profile(cfg.hardware)
    if cfg.backend == "openai":
        env = cfg.openai.api_key_env
        if env and not os.environ.get(env) and log:
            log(f"note: {env} (openai.api_key_env) is not set: requests carry no API key")
        check_endpoint(cfg.openai.base_url, env)
    reach: dict[str, Any] = {}

    def reachable() -> tuple[bool, str]:  # asked once per sweep, not once per model
        if "r" not in reach:
            reach["r"] = hub_reachable()
        return reach["r"]

    for source, field in tokenizer_sources(cfg, models):
        check_tokenizer(source, field, reachable)


def discard_if_empty(run_dir: Path) -> bool:
    """Remove a run folder the sweep created and measured nothing into (no point, no server log); True if removed.

    A failed ``batchmark sweep`` used to leave an empty "incomplete" run behind.  A folder with a
    server log is kept: the log says why the server did not start.  The folder is judged and removed holding the
    run's lock (:func:`pipeline.store.runs.lock_run`): a sweep refused because another process measures into the
    same run (two ``sweep --run-id R`` started together) finds the lock held and removes nothing, whatever the
    folder holds at that moment (the holder may not have written its first point yet).
    """
    from pipeline.store import runs

    if not run_dir.is_dir():
        return False
    try:
        with runs.lock_run(run_dir):
            return _discard_unlocked(run_dir)
    except runs.RunLocked:
        return False  # another live process measures into it: never the refused sweep's to remove


def _discard_unlocked(run_dir: Path) -> bool:
    """:func:`discard_if_empty`'s judgement and removal, under the run's lock."""
    from pipeline.store import runs

    if not run_dir.is_dir():
        return False
    if not (run_dir / "run.json").is_file():
        if any(run_dir.iterdir()):
            return False
        run_dir.rmdir()  # the bare claim of a fresh id
        return True
    if runs.read_run_json(run_dir).get("status") == "complete":
        return False
    if any((run_dir / "points").rglob("*")) if (run_dir / "points").is_dir() else False:
        return False
    if (run_dir / "servers").is_dir() and any((run_dir / "servers").iterdir()):
        return False
    shutil.rmtree(run_dir)
    return True
