"""The ``unit`` marker: every test of ``tests/unit`` that needs no process, server or browser (issue 25).

``python -m pytest -m unit`` is the developer's loop: it runs in seconds where the fast subset
(``-m 'not slow'``, which also starts CLI processes, a lock holder and HTTP servers) takes minutes.
A test of this folder is marked unless it starts something: it uses one of
:data:`PROCESS_FIXTURES`, or it is named in :data:`PROCESS_TESTS`, each with what it starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

#: Fixtures that start something, and what.
PROCESS_FIXTURES = {
    "server": "an HTTP server (test_preflight.py)",
    "holder": "a Python process holding a run's lock (test_run_lock.py)",
}

#: Tests of this folder that start a process themselves (module::test → what).
PROCESS_TESTS = {
    "test_calibrate.py::test_cli_predict_committed_run_json_and_bad_option": "`python -m pipeline predict`, three times",
    "test_derived_files.py::test_sweep_alone_leaves_the_derived_files_and_show_reads_them": "`python -m pipeline show`",
    "test_derived_files.py::test_complete_run_without_analysis_is_one_line_naming_the_command":
        "`python -m pipeline show`, twice",
    "test_diff_bandwidth.py::test_fail_above_refuses_runs_whose_bandwidths_differ_beyond_the_limit":
        "`python -m pipeline diff`",
    "test_hostile_inputs.py::test_claim_of_a_killed_import_does_not_block_its_id": "a Python process killed mid-import",
    "test_hostile_inputs.py::test_closed_pipe_ends_quietly": "`python -m pipeline` with its output pipe closed",
    "test_preflight.py::test_failed_sweep_leaves_no_run_folder": "`python -m pipeline sweep`",
}


def starts_something(item: pytest.Item) -> bool:
    """True when ``item`` uses a fixture of :data:`PROCESS_FIXTURES` or is named in :data:`PROCESS_TESTS`."""
    name = f"{Path(str(item.fspath)).name}::{getattr(item, 'originalname', item.name)}"
    callspec = getattr(item, "callspec", None)
    fixtures = set(getattr(item, "fixturenames", ())) - set(callspec.params if callspec else ())  # not a parameter
    return name in PROCESS_TESTS or bool(fixtures & set(PROCESS_FIXTURES))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test collected from this folder ``unit`` unless it starts a process or a server."""
    for item in items:
        if Path(str(item.fspath)).resolve().parent == HERE and not starts_something(item):
            item.add_marker(pytest.mark.unit)
