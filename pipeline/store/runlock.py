"""The run lock: one live process measures (or upgrades, or merges) a run at a time.

An advisory ``flock`` beside the run (``<runs_dir>/.locks/<run_id>.lock``), released by the kernel
when its process dies; the holder is named in the refusal.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path

from pipeline.core.atomicfiles import atomic_write_json
from pipeline.core.errors import BatchmarkError


class RunLocked(BatchmarkError):
    """Another live process holds the run's lock (:func:`lock_run`); the message names it."""


def lock_path(run_dir: Path) -> Path:
    """Lock file of a run: ``<runs_dir>/.locks/<run_id>.lock`` (beside the run, so a committed run folder holds none)."""
    return run_dir.parent / ".locks" / f"{run_dir.name}.lock"


def _holder(lock: Path) -> str:
    """Who holds a run lock, from its owner file: ``pid 123 on host x since …`` (or why it is not known)."""
    try:
        owner = json.loads(lock.with_suffix(".owner.json").read_text())
        return f"pid {owner['pid']} on host {owner['host']} since {owner['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not written its owner file yet"


@contextlib.contextmanager
def lock_run(run_dir: Path):
    """Hold the run's lock while measuring it: a second sweep into the same run is refused, never merged.

    An advisory ``flock`` of :func:`lock_path` (the ``filelock`` package): the kernel releases
    it when its process dies, even by ``kill -9``, so a stale lock never blocks a resume.
    The holder's pid, host and start time are written beside it for the refusal message.

    Raises:
        RunLocked: another live process holds the lock (the message names it).
    """
    from filelock import FileLock, Timeout

    lock = lock_path(run_dir)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fl = FileLock(str(lock), timeout=0, thread_local=False, is_singleton=False)
    try:
        fl.acquire(timeout=0)
    except Timeout:
        raise RunLocked(f"run {run_dir.name} is being measured by {_holder(lock)}; "
                             "wait for it to finish, or stop it and resume") from None
    owner = lock.with_suffix(".owner.json")
    try:
        try:  # for the refusal message only (the flock is the lock): a full disk is reported by the first real write
            atomic_write_json(owner, {"pid": os.getpid(), "host": socket.gethostname(),
                                      "since": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        except OSError:
            pass
        yield
    finally:
        owner.unlink(missing_ok=True)
        fl.release()


def locked_run(fn):
    """Decorator: call ``fn(cfg, run_dir, …)`` holding :func:`lock_run` of ``run_dir``."""
    @functools.wraps(fn)
    def wrapper(cfg, run_dir, *args, **kwargs):
        with lock_run(Path(run_dir)):
            return fn(cfg, run_dir, *args, **kwargs)
    return wrapper
