"""The committed runs' ids (``git ls-files``, a process) still validate.

The id rules are checked in tests/unit/store/test_runids.py.
"""

from __future__ import annotations

from pipeline.store import runs
from tests.conftest import committed_runs


def test_committed_run_ids_still_validate():
    committed = committed_runs()  # git ls-files: the user's own runs are no test's business
    assert committed
    assert all(runs.check_run_id(r) == r for r in committed)

