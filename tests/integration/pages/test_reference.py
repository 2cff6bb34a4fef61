"""docs/reference/show-json.md is what ``show --json`` builds from the committed runs (found by ``git ls-files``).

The other reference pages are checked in tests/unit/pages/test_reference.py
(regenerate all with ``python -m tests.unit.pages.test_reference``).
"""

from __future__ import annotations

from tests.unit.pages.test_reference import REFERENCE, generated


def test_show_json_page_is_what_show_builds_from_the_committed_runs():
    text = generated()["show-json.md"]
    assert (REFERENCE / "show-json.md").read_text() == text, (
        "docs/reference/show-json.md has drifted from `show --json`: run `python -m tests.unit.pages.test_reference`")

