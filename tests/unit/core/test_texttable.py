"""Names never act on the terminal (fault kind: terminal escape sequences in a name).

Regression (fault kind: terminal escape injection): a model name ``"evil\\x1b[2J\\x1b]0;PWNED\\x07"`` cleared the
screen and set the window title through ``batchmark show``.  Names come from imported files, committed runs
and servers; every text the CLI prints now passes ``pipeline.core.texttable.printable``, so control characters show
escaped as ``repr`` writes them.  Each hostile name below is run through the real commands (import, show, diff
in every format, errors) and no output holds a raw control character.
"""

from __future__ import annotations

import json
import re


from pipeline.core import paths
from pipeline.cli import main
from pipeline.core.texttable import printable, text_table
from tests import runbuilder as rb
from tests.conftest import DATA

EVIL = "evil\x1b[2J\x1b]0;PWNED\x07"  # the example: clear screen, set the window title, bell
HOSTILE = [EVIL, "csi\x9b31mred", "over\rwrite", "rtl\u202etxt.exe", "two\nlines", "nul\x00del\x7f", "osc8\x1b]8;;http://x\x1b\\"]
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_printable_escapes_controls_as_repr_does():
    assert printable(EVIL) == "evil\\x1b[2J\\x1b]0;PWNED\\x07"
    assert printable("a\nb\tc") == "a\nb\tc" and printable("a\nb\tc", one_line=True) == "a\\nb\\tc"
    assert printable("x\ry\x9b\u202e") == "x\\ry\\x9b\\u202e"
    assert printable("ordinary name – µ ✓ 模型") == "ordinary name – µ ✓ 模型"
    assert text_table(["model"], [["two\nlines\x1b"]]) == ["model", "--------------", "two\\nlines\\x1b"]


def test_show_and_diff_print_hostile_model_names_escaped(scratch_root, capsys):
    runs_dir = paths.runs_dir()
    rb.make_run(runs_dir, "20261201T000000Z-a", models=tuple(HOSTILE), concurrency=(1, 2))
    rb.make_run(runs_dir, "20261201T000001Z-b", models=tuple(HOSTILE), concurrency=(1, 2), noise=rb.NOISE_B)
    outputs = []
    for argv in (["show", "20261201T000000Z-a"], ["show", "20261201T000000Z-a", "--json"],
                 ["diff", "20261201T000000Z-a", "20261201T000001Z-b"],
                 ["diff", "20261201T000000Z-a", "20261201T000001Z-b", "--markdown"],
                 ["diff", "20261201T000000Z-a", "20261201T000001Z-b", "--csv"],
                 ["diff", "20261201T000000Z-a", "20261201T000001Z-b", "--json"],
                 ["diff", "20261201T000000Z-a", "20261201T000001Z-b", "--fail-above", "0"]):
        code, out, err = _run(capsys, *argv)
        assert code in (0, 1), (argv, err)
        assert not RAW_CONTROL.search(out + err), (argv, RAW_CONTROL.search(out + err))
        outputs.append(out)
    show_text = outputs[0]
    assert "evil\\x1b[2J\\x1b]0;PWNED\\x07" in show_text and "two\\nlines" in show_text and "rtl\\u202etxt.exe" in show_text
    assert {p["model"] for p in json.loads(outputs[1])["points"]} == set(HOSTILE)  # JSON keeps the name exactly


def test_import_and_its_errors_print_hostile_names_escaped(scratch_root, tmp_path, capsys):
    doc = json.loads((DATA / "vllm-bench" / "llama-3.1-8b-c1.json").read_text())
    doc["model_id"] = EVIL
    src = tmp_path / "evil.json"
    src.write_text(json.dumps(doc))
    code, out, err = _run(capsys, "import", "vllm-bench", str(src), "--hardware", "dgx-spark")
    assert code == 0, err
    assert not RAW_CONTROL.search(out + err)
    run_id = out.strip().rsplit("/", 1)[-1]
    code, out, err = _run(capsys, "show", run_id)
    assert code == 0 and "evil\\x1b[2J\\x1b]0;PWNED\\x07" in out and not RAW_CONTROL.search(out + err)
    # errors: one line, the name escaped (an unknown run named with escapes; a hardware profile that does not exist)
    for argv in (["show", EVIL], ["import", "vllm-bench", str(src), "--hardware", EVIL], ["capacity", "--hardware",
                 "dgx-spark", "--model", EVIL]):
        code, out, err = _run(capsys, *argv)
        assert code == 2 and err.count("\n") == 1 and not RAW_CONTROL.search(out + err), (argv, err)
        assert "\\x1b" in err, err
