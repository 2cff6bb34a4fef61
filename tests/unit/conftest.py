"""The ``unit`` marker: every test of ``tests/unit`` that needs no process, server, browser or project copy.

``python -m pytest -q -m unit`` is the developer's loop: it runs in seconds where the fast subset
(``-m 'not slow'``, which also starts CLI processes, a lock holder and HTTP servers, copies a scratch project per
test and simulates whole sweep configs) takes minutes.  A test of this folder is marked unless

- it is marked ``slow``;
- it uses a fixture of :data:`NOT_UNIT_FIXTURES` (directly or through another fixture): a server, a process, a
  copy of the project, a whole config simulated.

A test that starts a process itself belongs in ``tests/integration`` (at the same relative path), not here.

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



def is_unit(item: pytest.Item) -> bool:
    """True when ``item`` is a test of this folder, not ``slow`` and using no fixture of :data:`NOT_UNIT_FIXTURES`."""
    path = Path(str(item.fspath)).resolve()
    if HERE not in path.parents or item.get_closest_marker("slow") is not None:
        return False
    callspec = getattr(item, "callspec", None)
    fixtures = set(getattr(item, "fixturenames", ())) - set(callspec.params if callspec else ())  # not a parameter
    return not fixtures & set(NOT_UNIT_FIXTURES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``unit`` every test collected from this folder that :func:`is_unit`."""
    for item in items:
        if is_unit(item):
            item.add_marker(pytest.mark.unit)


class _Refused(RuntimeError):
    """What a ``unit`` test gets when it starts a process or copies the project."""


def _refuser(item: pytest.Item, what: str):
    def refuse(*args: object, **kwargs: object) -> None:
        message = (f"{item.nodeid} is marked unit but {what}: move it to tests/integration (same relative path) "
                   f"or give it a fixture of NOT_UNIT_FIXTURES of tests/unit/conftest.py")
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
