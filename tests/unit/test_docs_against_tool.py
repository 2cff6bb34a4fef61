"""What the Guide and the CLI's help say against what the tool does (fault kind: a document promising other than the
tool: ``diff --fail-above`` exits 2 for runs it will not compare where the Guide listed only bad ids; ``--no-progress``
said "hide the progress bar" and hid the per-point lines too)."""

from __future__ import annotations

import io

from pipeline.cli import build_parser
from pipeline.core.progress import Display
from tests.conftest import REPO


def _help(parser, command: str, flag: str) -> str:
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return next(a.help for a in sub._actions if flag in a.option_strings)


def test_no_progress_says_it_hides_the_point_lines_and_does():
    """``sweep --no-progress``: the display enabled=False prints no point line (a point begun and ended writes
    nothing) and a message still prints; the help and the CLI reference say both."""
    out = io.StringIO()
    d = Display(2, enabled=False, stream=out, mode="lines")
    d.begin_point("m · in 64 / out 16 · c=1", 1)
    d.end_point(12.5)
    assert out.getvalue() == ""
    d.write("warning: kept")
    assert out.getvalue() == "warning: kept\n"
    said = _help(build_parser(), "sweep", "--no-progress")
    assert "per-point lines" in said and "messages and warnings still print" in said
    assert said in (REPO / "docs" / "reference" / "cli.md").read_text()


def test_the_guide_says_fail_above_exits_2_for_runs_it_will_not_compare(tmp_path, capsys):
    """``diff --fail-above`` on two runs whose probed bandwidths are more than 10 % apart refuses to gate (one line,
    exit 2: :func:`pipeline.commands.diff.run`); the Guide's diff page and the statistics page say so beside the bad
    ids."""
    import pytest

    from pipeline.commands.diff import diff
    from pipeline.core.errors import BatchmarkError
    from tests import runbuilder as rb

    a = rb.make_run(tmp_path, "a", models=("dense-a",), concurrency=(1,), bandwidth_gb_s=200.0)
    b = rb.make_run(tmp_path, "b", models=("dense-a",), concurrency=(1,), bandwidth_gb_s=170.0)  # −15 %
    with pytest.raises(BatchmarkError, match="not comparable"):  # the CLI prints it in one line, exit 2
        diff(str(a), str(b), fail_above="10")
    assert "NOT COMPARABLE" in capsys.readouterr().out
    for page in ("diffs.md", "diff-statistics.md"):
        text = " ".join((REPO / "docs" / page).read_text().split())
        assert "NOT COMPARABLE" in text and "exit 2" in text.replace("exits 2", "exit 2"), page


def test_the_tuning_page_names_every_placeholder_and_vllm_dtype(monkeypatch):
    """``docs/tuning.md`` lists every placeholder the vllm command template fills (the ``values`` of
    :meth:`pipeline.backends.vllm.VLLMBackend.command_for`) and every ``vllm.dtype`` choice of the config's schema; it
    lacked ``{dtype}`` and ``vllm.dtype``."""
    import typing

    from pipeline.config.options import VLLMOptions
    from pipeline.config.sweepconfig import parse_config
    from pipeline.backends import vllm

    seen: dict = {}

    def record(template, values, extra):
        seen.update(values)
        return []
    cfg = parse_config({"name": "t", "hardware": "cpu", "backend": "vllm", "concurrency": [1], "input_len": 8,
                        "output_len": 4, "models": [{"name": "m", "path": "org/m"}]}, "c.yaml")
    monkeypatch.setattr(vllm, "format_command", record)
    vllm.VLLMBackend(cfg).command_for(cfg.models[0], 8000)
    assert "dtype" in seen
    text = (REPO / "docs" / "tuning.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `vllm.command`"))
    assert sorted(k for k in seen if f"`{{{k}}}`" not in row) == []
    dtype_row = next(line for line in text.splitlines() if line.startswith("| `vllm.dtype`"))
    choices = typing.get_args(VLLMOptions.model_fields["dtype"].annotation)
    assert all(f"`{c}`" in dtype_row for c in choices), choices
