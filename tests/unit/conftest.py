"""The ``unit`` marker: every test of ``tests/unit`` that needs no process, server, browser or project copy.

``python -m pytest -q -m unit`` is the developer's loop: it runs in seconds where the fast subset
(``-m 'not slow'``, which also starts CLI processes, a lock holder and HTTP servers, copies a scratch project per
test and simulates whole sweep configs) takes minutes.  A test of this folder is marked unless

- it is marked ``slow``;
- it uses a fixture of :data:`NOT_UNIT_FIXTURES` (directly or through another fixture): a server, a process, a
  copy of the project, a whole config simulated;
- it is named in :data:`NOT_UNIT_TESTS`, each with what it does.

The rule is enforced, not only written: while a ``unit`` test runs (its fixtures included, of any scope), starting a
process (:mod:`subprocess`, :func:`os.fork`, :func:`os.system`, ``posix_spawn``, multiprocessing) or copying the
project (:func:`tests.conftest.make_scratch_root`) fails it, naming this file.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

#: Fixtures (by name, of any module) that make a test no unit test, and why.
NOT_UNIT_FIXTURES = {
    "server": "an HTTP server (sweep/test_preflight.py)",
    "holder": "a Python process holding a run's lock (store/test_runlock.py)",
    "scratch_root": "a copy of the project's inputs for each test (tests/conftest.py)",
    "site": "a copy of the project with a rendered site (test_flagged_runs_mislead_nowhere.py)",
    "spark_plan": "`batchmark plan config/spark.yaml`: every point of the Spark config simulated, once per rung of "
                  "its budget's ladder (a minute; test_plan.py)",
    "spark_full_plan": "every point of config/spark.yaml simulated (seconds; test_plan.py)",
}

#: Tests of this folder that start a process or simulate a whole grid themselves (module::test → what).
NOT_UNIT_TESTS = {
    "predict/test_calibrate.py::test_cli_predict_committed_run_json_and_bad_option": "`python -m pipeline predict`, three times",
    "analysis/test_stages.py::test_sweep_alone_leaves_the_derived_files_and_show_reads_them": "`python -m pipeline show`",
    "analysis/test_stages.py::test_complete_run_without_analysis_is_one_line_naming_the_command":
        "`python -m pipeline show`, twice",
    "diff/test_comparability.py::test_fail_above_refuses_runs_whose_bandwidths_differ_beyond_the_limit":
        "`python -m pipeline diff`",
    "test_hostile_inputs.py::test_claim_of_a_killed_import_does_not_block_its_id": "a Python process killed mid-import",
    "test_hostile_inputs.py::test_closed_pipe_ends_quietly": "`python -m pipeline` with its output pipe closed",
    "sweep/test_preflight.py::test_failed_sweep_leaves_no_run_folder": "`python -m pipeline sweep`",
    "plan/test_estimate.py::test_budget_drops_grid_points_from_the_top_when_the_ladder_is_not_enough":
        "gpt-oss-20b's grid simulated once per rung of the budget's ladder (seconds)",
    "store/test_runids.py::test_committed_run_ids_still_validate": "`git ls-files` (tests.conftest.committed_runs)",
    "pages/test_reference.py::test_show_json_page_is_what_show_builds_from_the_committed_runs":
        "`git ls-files` (tests.conftest.committed_runs)",
}


def is_unit(item: pytest.Item) -> bool:
    """True when ``item`` is a test of this folder, not ``slow``, using no fixture of :data:`NOT_UNIT_FIXTURES`
    and not named in :data:`NOT_UNIT_TESTS`."""
    path = Path(str(item.fspath)).resolve()
    if HERE not in path.parents or item.get_closest_marker("slow") is not None:
        return False
    name = f"{path.relative_to(HERE).as_posix()}::{getattr(item, 'originalname', item.name)}"
    callspec = getattr(item, "callspec", None)
    fixtures = set(getattr(item, "fixturenames", ())) - set(callspec.params if callspec else ())  # not a parameter
    return name not in NOT_UNIT_TESTS and not fixtures & set(NOT_UNIT_FIXTURES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``unit`` every test collected from this folder that :func:`is_unit`."""
    for item in items:
        if is_unit(item):
            item.add_marker(pytest.mark.unit)


class _Refused(RuntimeError):
    """What a ``unit`` test gets when it starts a process or copies the project."""


def _refuser(item: pytest.Item, what: str):
    def refuse(*args: object, **kwargs: object) -> None:
        message = (f"{item.nodeid} is marked unit but {what}: name it in NOT_UNIT_TESTS of tests/unit/conftest.py "
                   f"(with what it does) or give it a fixture of NOT_UNIT_FIXTURES")
        item.stash.setdefault(_REFUSED, []).append(message)
        raise _Refused(message)
    return refuse


_REFUSED = pytest.StashKey[list]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """While a ``unit`` test runs (setup, call, teardown), refuse processes and project copies (module docstring)."""
    if item.get_closest_marker("unit") is None:
        return (yield)
    import _posixsubprocess
    import multiprocessing.util

    import tests.conftest

    mp = pytest.MonkeyPatch()
    starts = _refuser(item, "starts a process")
    for owner, name in ((subprocess, "_fork_exec"), (_posixsubprocess, "fork_exec"), (os, "fork"), (os, "system"),
                        (os, "posix_spawn"), (os, "posix_spawnp"), (multiprocessing.util, "spawnv_passfds")):
        if hasattr(owner, name):
            mp.setattr(owner, name, starts)
    mp.setattr(tests.conftest, "make_scratch_root", _refuser(item, "copies the project (make_scratch_root)"))
    try:
        return (yield)
    finally:
        mp.undo()


@pytest.fixture(autouse=True)
def _unit_started_nothing(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a ``unit`` test that started a process or copied the project, even where its code caught the refusal."""
    yield
    refused = request.node.stash.get(_REFUSED, [])
    if refused:
        pytest.fail(refused[0], pytrace=False)
