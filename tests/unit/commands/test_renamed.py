"""Renamed commands (pipeline/commands/renamed.py): ``write-summaries`` (formerly ``summarize``) and ``verdict``
(formerly ``summary``).  The old names run the same command for one version, after one deprecation line on stderr.

The run is a small simulated sweep (tests/runbuilder.py SMALL_SIMULATED_CONFIG: virtual time, seconds here).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from pipeline import cli
from pipeline.commands.renamed import RENAMED
from tests.runbuilder import SMALL_SIMULATED_CONFIG

RUN = "20261201T000000Z-rn"


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(args))
    return rc, out.getvalue(), err.getvalue()


def _run(root: Path) -> Path:
    cfg = root / "config" / "sim-small.yaml"
    cfg.write_text(SMALL_SIMULATED_CONFIG)
    rc, _, err = run_cli("sweep", "--config", str(cfg), "--run-id", RUN, "--no-progress")
    assert rc == 0, err
    return root / "data" / "runs" / RUN


def test_old_and_new_names_do_the_same_and_only_the_old_one_says_it_is_deprecated(scratch_root: Path):
    run_dir = _run(scratch_root)
    stored = (run_dir / "summaries.json").read_bytes()
    for old, new in RENAMED.items():
        args = [str(run_dir)] + (["--site", "site/index.html"] if new == "verdict" else [])
        rc_new, out_new, err_new = run_cli(new, *args)
        rc_old, out_old, err_old = run_cli(old, *args)
        assert rc_new == rc_old == 0 and out_new == out_old and out_new.strip()
        assert err_new == ""
        assert err_old == f"batchmark: '{old}' is deprecated and goes in the next version; use 'batchmark {new}'\n"
    # write-summaries writes what the sweep's stage wrote (a deterministic function of the stored records)
    assert (run_dir / "summaries.json").read_bytes() == stored


def test_both_verdict_names_take_the_run_and_the_site_option():
    """The alias takes the new command's arguments (it was made by the same maker, pipeline/commands/renamed.py)."""
    parser = cli.build_parser()
    for name in ("verdict", "summary"):
        args = parser.parse_args([name, RUN, "--site", "x/index.html"])
        assert args.run == RUN and args.site == "x/index.html"
