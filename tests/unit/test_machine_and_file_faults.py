"""Faults of the machine and of input files: one line each, nothing partial left (fault kinds: OSError 28/30
tracebacks, UnicodeDecodeError traceback, hidden temp folders left forever by kill -9 of an import)."""

from __future__ import annotations

import errno
import os
import pathlib
import socket
import time


from pipeline.store import runs
from pipeline.cli import main
from tests.conftest import DATA


def _entries(runs_dir):
    return sorted(p.name for p in runs_dir.iterdir() if p.name != ".locks") if runs_dir.is_dir() else []


def test_full_disk_during_import_is_one_line_and_leaves_nothing(scratch_root, monkeypatch, capsys):
    runs_dir = scratch_root / "data" / "runs"
    runs_dir.mkdir()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)  # the write boundary of every atomic write
    assert main(["import", "vllm-bench", str(DATA / "vllm-bench"), "--hardware", "dgx-spark"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"batchmark: error: {runs_dir}/.")  # the file being written
    assert err[0].endswith("run.json: No space left on device (nothing partial was written)")
    assert _entries(runs_dir) == []


def test_read_only_data_folder_is_one_line(scratch_root, monkeypatch, capsys):
    runs_dir = scratch_root / "data" / "runs"
    real_mkdir = pathlib.Path.mkdir

    def read_only(self, *a, **kw):
        if str(self).startswith(str(runs_dir)):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *a, **kw)

    monkeypatch.setattr(pathlib.Path, "mkdir", read_only)
    assert main(["import", "vllm-bench", str(DATA / "vllm-bench"), "--hardware", "dgx-spark"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"batchmark: error: {runs_dir}: Read-only file system (nothing partial was written)"]


def test_binary_garbage_import_file_is_one_line(scratch_root, tmp_path, capsys):
    bad = tmp_path / "bench.json"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    assert main(["import", "vllm-bench", str(bad), "--hardware", "dgx-spark"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"batchmark: error: {bad}: not a UTF-8 text file")


def test_stale_import_temp_folders_are_cleaned_on_the_next_import(scratch_root):
    """kill -9 during an import leaves ``data/runs/.<id>.pid<pid>@<host>.<rand>.tmp``; the next import removes
    those whose owner on this host is gone at once (a kill -9 and a retry a minute later), and keeps a live owner's."""
    from pipeline.importers import import_run

    runs_dir = scratch_root / "data" / "runs"
    runs_dir.mkdir()
    host = runs.tmp_prefix("x").split("@")[1].rstrip(".")
    dead = runs_dir / f".20261101T000000Z-a.pid{2**22 + 12345}@{host}.k3j4.tmp"   # no such pid
    live = runs_dir / f".20261101T000000Z-b.pid{os.getpid()}@{host}.k3j5.tmp"     # this process
    fresh = runs_dir / f".20261101T000000Z-c.pid{2**22 + 12345}@{host}.k3j6.tmp"  # dead owner, 1 minute old: stale too
    for d, age in ((dead, 3600), (live, 3600), (fresh, 60)):
        (d / "models").mkdir(parents=True)
        os.utime(d, (time.time() - age, time.time() - age))
    run = import_run("vllm-bench", [DATA / "vllm-bench"], "dgx-spark", run_id="20261102T101500Z-vllm")
    assert not dead.exists() and live.exists() and not fresh.exists()
    assert _entries(runs_dir) == sorted([live.name, run.name])
    assert socket.gethostname()  # the owner's host is part of the name (a temp of another host goes by age only)
