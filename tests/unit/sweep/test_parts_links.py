"""Merge copies only regular files of a part, never what a link points to (fault kind: a symbolic link followed out of the run).

Regression (fault kind: merge follows symbolic links): a part's ``servers/m1.log`` replaced by a
symbolic link to the system's password-hash file, then ``batchmark merge``: the merged run's
``servers/m1.log`` held that file's contents, and server logs are committed with runs.  Every kind of
entry that is not a plain folder or a regular file (a link to a file, to a folder, the part folder
itself a link, a named pipe) is refused in one line naming it, before anything is written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.core import paths
from pipeline.sweep import parts
from pipeline.core.errors import BatchmarkError
from tests import runbuilder as rb
from tests.unit.sweep.test_parts import _cfg, make_part

SECRET = "root:$6$not-a-real-hash:19000:0:99999:7:::\n"


def _secret_file(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "shadow"  # stands in for /etc/shadow: a file outside the project
    target.parent.mkdir()
    target.write_text(SECRET)
    return target


def _merge_cli(scratch_root, capsys, run_id: str) -> tuple[int, str]:
    from pipeline.cli import main

    cfg_path = scratch_root / "config" / "parts-test.yaml"
    cfg_path.write_text(_cfg().model_dump_json())  # JSON is YAML: the config the parts were measured with
    code = main(["merge", "--config", str(cfg_path), "--run-id", run_id])
    return code, capsys.readouterr().err


def _parts(run_id: str) -> list[Path]:
    cfg = _cfg()
    return [make_part(cfg, run_id, m) for m in rb.MODELS]


def _nothing_written(run_id: str, tmp_path: Path) -> None:
    assert not (paths.runs_dir() / run_id).exists()
    assert not [p for p in paths.runs_dir().iterdir() if p.name.endswith(".tmp")]
    for p in paths.runs_dir().rglob("*"):
        if p.is_file() and not p.is_symlink():
            assert SECRET not in p.read_text(errors="replace"), p


@pytest.mark.parametrize("kind", ["log", "point", "folder", "hidden", "dangling"])
def test_a_link_in_a_part_is_refused_naming_it(scratch_root, tmp_path, capsys, kind):
    secret = _secret_file(tmp_path)
    part = _parts("L1")[0]
    (part / "servers").mkdir(exist_ok=True)
    link = {"log": part / "servers" / "m1.log", "folder": part / "servers" / "logs", "hidden": part / ".notes",
            "dangling": part / "servers" / "gone.log",
            "point": next((part / "points").glob("*/*.json"))}[kind]
    if link.exists():
        link.unlink()
    target = {"folder": secret.parent, "dangling": tmp_path / "nowhere"}.get(kind, secret)
    link.symlink_to(target)
    code, err = _merge_cli(scratch_root, capsys, "L1")
    assert code == 2 and err.count("\n") == 1, err
    assert str(link) in err and "symbolic link" in err
    _nothing_written("L1", tmp_path)


def test_a_part_folder_that_is_a_link_is_refused(scratch_root, tmp_path, capsys):
    a, b = _parts("L2")
    moved = tmp_path / "elsewhere"
    a.rename(moved)
    a.symlink_to(moved, target_is_directory=True)
    code, err = _merge_cli(scratch_root, capsys, "L2")
    assert code == 2 and err.count("\n") == 1 and str(a) in err and "symbolic link" in err
    _nothing_written("L2", tmp_path)


def test_a_named_pipe_in_a_part_is_refused_without_blocking(scratch_root, tmp_path, capsys):
    part = _parts("L3")[1]
    (part / "servers").mkdir(exist_ok=True)
    fifo = part / "servers" / "m1.log"
    os.mkfifo(fifo)  # opening it for reading would block forever
    code, err = _merge_cli(scratch_root, capsys, "L3")
    assert code == 2 and err.count("\n") == 1 and str(fifo) in err and "not a regular file" in err
    _nothing_written("L3", tmp_path)


def test_the_copy_itself_never_follows_a_link(tmp_path):
    # a file swapped for a link after the check: the copy opens with O_NOFOLLOW and refuses it
    secret = _secret_file(tmp_path)
    link = tmp_path / "m1.log"
    link.symlink_to(secret)
    with pytest.raises(BatchmarkError, match="symbolic link"):
        parts._copy_regular(link, tmp_path / "copy.log")
    assert not (tmp_path / "copy.log").exists()


def test_plain_parts_still_merge_with_their_server_logs(scratch_root):
    made = _parts("L4")
    (made[0] / "servers").mkdir(exist_ok=True)
    (made[0] / "servers" / "m1.log").write_text("server log\n")
    run_dir = parts.merge_parts(_cfg(), "L4")
    assert (run_dir / "servers" / "m1.log").read_text() == "server log\n"


def test_a_hard_link_in_a_part_is_refused_naming_it(scratch_root, tmp_path, capsys):
    # A hard link is a regular file to lstat; only its link count (2: the part's name and the outside one) shows
    # that its content is a file from outside the run.  tmp_path and the scratch root share one file system here.
    secret = _secret_file(tmp_path)
    part = _parts("L4")[0]
    (part / "servers").mkdir(exist_ok=True)
    log = part / "servers" / "m1.log"
    try:
        os.link(secret, log)
    except OSError as exc:  # another file system, or links not allowed: the case cannot be built here
        pytest.skip(f"cannot make a hard link here ({exc})")
    code, err = _merge_cli(scratch_root, capsys, "L4")
    assert code == 2 and err.count("\n") == 1, err
    assert str(log) in err and "hard link" in err
    assert not (paths.runs_dir() / "L4").exists()  # the part itself still holds the link: nothing else was written
    assert not [p for p in paths.runs_dir().iterdir() if p.name.endswith(".tmp")]
