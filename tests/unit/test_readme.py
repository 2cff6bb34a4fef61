"""The README against what it describes: at most 150 lines, its two commands the ones CI runs (``.ci/run``), and
every page it links to present.  The fault kind: a README that drifted from the code and from CI (it grew to 787
lines, its CLI block lacked options that exist).  Its cheap commands are run as written by
``tests/integration/test_readme_commands.py``."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def bash_blocks(text: str) -> list[str]:
    """The bodies of the ```` ```bash ```` blocks of a Markdown text, in order."""
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S)


def test_readme_is_read_in_two_minutes():
    assert len(README.splitlines()) <= 150


def test_the_two_commands_are_what_ci_runs():
    """.ci/run makes the venv, installs torch==2.13.0 then the package with its test extra, and runs
    ``. .venv/bin/activate`` then the tests in two passes (two processes beside each other, then the ``alone`` tests
    one at a time): the README's two commands must say the same steps."""
    ci = (REPO / ".ci" / "run").read_text()
    install, tests = bash_blocks(README)[:2]
    command = ('s=0; python -m pytest -q -n 2 --dist loadfile -m "not alone" || s=$?; '
               'python -m pytest -q -m alone && [ "$s" = 0 ]')
    assert tests.strip() == f". .venv/bin/activate && {command}"
    assert f". .venv/bin/activate\n{command}" in ci
    steps = [s.strip() for s in install.strip().split("&&")]
    assert steps[:2] == ["python3 -m venv .venv", ". .venv/bin/activate"]
    assert steps[2:4] == ["pip install torch==2.13.0", "pip install -e '.[test]'"]
    assert "python3 -m venv .venv" in ci
    for step in steps[2:4]:
        assert f".venv/bin/{step.replace('pip install', 'pip install -q')}" in ci, step
    assert steps[4] == "snakemake --cores all"


def test_every_page_the_readme_links_is_there():
    links = re.findall(r"\]\(((?!https?:)[^)#]+)", README)
    assert links, "the README links the guide"
    for link in links:
        assert (REPO / link).is_file(), link
