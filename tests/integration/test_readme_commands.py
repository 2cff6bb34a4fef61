"""The README's cheap commands, run as written (``batchmark …`` lines of its "A few commands that measure nothing"
block), from the repository root, each in a few seconds: ``--help``, ``plan`` of the Spark's first-night config (the
simulated server: nothing measured) and ``capacity``.  The fault kind: a README command that no longer runs.

Expected figures are the README's own: ``capacity`` of Llama-3.1-8B at 8k on the DGX Spark gives 86 sequences
(docs/spark.md: "about 86 sequences of Llama-3.1-8B at 8k"), and ``plan`` names the config's model gpt-oss-20b.
The ``batchmark show RUN`` the README's example end line points to is a committed run: it runs as written too, and
as ``show RUN --json`` (the README's next sentence), each naming that run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_readme import README, bash_blocks

REPO = Path(__file__).resolve().parents[2]


def cheap_commands() -> list[str]:
    block = next(b for b in bash_blocks(README) if b.startswith("batchmark --help"))
    return [line for line in block.splitlines() if line.startswith("batchmark ")]


@pytest.mark.parametrize("command", cheap_commands())
def test_readme_command_runs_as_written(command):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    res = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    if command.startswith("batchmark capacity"):
        assert any(line.split()[:3] == ["8192", "1.07", "86"] for line in res.stdout.splitlines()), res.stdout
    elif command.startswith("batchmark plan"):
        assert "gpt-oss-20b" in res.stdout and "a prediction, not a measurement" in res.stdout
    else:
        assert "usage: batchmark" in res.stdout


def test_the_readme_has_cheap_commands():
    assert [c.split()[1] for c in cheap_commands()] == ["--help", "plan", "capacity"]


def show_commands() -> list[str]:
    """The README's ``batchmark show <run id>`` commands (its example end line), each with the run id it names."""
    return sorted(set(re.findall(r"batchmark show (\d{8}T\d{6}Z-[\w-]+)", README)))


@pytest.mark.parametrize("run_id", show_commands())
def test_readme_show_of_its_example_run_runs_as_written(run_id):
    assert (REPO / "data" / "runs" / run_id / "run.json").is_file(), f"the README's example run {run_id} is not committed"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for command in (f"batchmark show {run_id}", f"batchmark show {run_id} --json"):
        res = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
        assert res.returncode == 0, (command, res.stderr[-2000:])
        if command.endswith("--json"):
            assert json.loads(res.stdout)["run_id"] == run_id
        else:
            assert res.stdout.startswith(f"run {run_id} ("), res.stdout[:200]


def test_the_readme_names_a_run_to_show():
    assert show_commands() == ["20261130T010035Z-vm"]


@pytest.mark.parametrize("first, second, status", [(1, 0, 1), (0, 1, 1), (0, 0, 0), (1, 1, 1)])
@pytest.mark.parametrize("strict", ["", "set -euo pipefail; "])
def test_the_alone_tests_run_when_the_first_pass_fails_and_either_fails_the_command(first, second, status, strict):
    """Fault kind: a test pass skipped by the one before it (``a && b``: a failing first pass never ran the ``alone``
    tests).  The README's command, its ``python -m pytest`` a stub exiting as told, runs both passes whatever the
    first returns and exits non-zero when either fails, in an interactive shell and under ``.ci/run``'s ``set -e``."""
    tests = bash_blocks(README)[1].strip().removeprefix(". .venv/bin/activate && ")
    stub = (f'python() {{ case "$*" in *"not alone"*) echo first; return {first};; '
            f'*alone*) echo second; return {second};; esac; }}; ')
    done = subprocess.run(["bash", "-c", strict + stub + tests], capture_output=True, text=True, timeout=30)
    assert done.stdout.split() == ["first", "second"]
    assert (done.returncode != 0) == bool(status), done
