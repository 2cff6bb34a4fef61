"""A prompt file (``lengths.prompt_file``): JSON Lines in batchmark's and ShareGPT's formats, and the one-line
refusals of a file that is not JSON Lines, holds no prompts, or comes with what contradicts it."""

from __future__ import annotations

import pytest

from pipeline.config.promptfile import PromptEntry, read_prompt_file
from pipeline.config.sweepconfig import parse_config
from pipeline.config.workload import point_lengths
from pipeline.core.errors import BatchmarkError
from tests.conftest import REPO

CHAT = REPO / "tests" / "data" / "prompts" / "chat.jsonl"
BASE = {"name": "p", "hardware": "cpu", "backend": "openai", "models": [{"name": "m", "served_name": "m"}]}


def test_both_formats_read_in_file_order():
    """Fault kind: a ShareGPT line read as no prompt (or its answer as the prompt), a reference output lost.

    tests/data/prompts/chat.jsonl by hand: four prompts (the blank line skipped), ShareGPT's first human turn the
    prompt and the gpt turn after it the reference output."""
    assert read_prompt_file(CHAT) == [
        PromptEntry("t001 t002 t003 t004 t005", "t010 t011"), PromptEntry("t001 t002 t003", None, 6),
        PromptEntry("t020 t021 t022 t023", "t030 t031 t032"), PromptEntry("t040 t041 t042 t043 t044 t045 t046")]


@pytest.mark.parametrize("text,line", [
    ('{"prompt": "a"}\nnot json\n', "line 2: not JSON (a prompt file is JSON Lines"),
    ('[{"prompt": "a"}]\n', "line 1: not a JSON object"),
    ("\n\n", "holds no prompts"),
    ('{"text": "a"}\n', "line 1: prompt: not a non-empty string"),
    ('{"prompt": "a", "output_len": 0}\n', "line 1: output_len: 0 is not a positive number of tokens"),
    ('{"prompt": "a", "output_len": NaN}\n', "line 1: output_len: nan is not a positive number of tokens"),
    ('{"conversations": [{"from": "gpt", "value": "a"}]}\n', "line 1: conversations: no human turn"),
])
def test_a_bad_prompt_file_is_one_line_naming_file_and_line(tmp_path, text, line):
    """Fault kind: an untrusted prompt file reaching the sweep (a traceback, or prompts silently missing)."""
    path = tmp_path / "p.jsonl"
    path.write_text(text)
    with pytest.raises(BatchmarkError) as err:
        parse_config({**BASE, "lengths": {"prompt_file": str(path)}}, "c.yaml")
    msg = str(err.value)
    assert msg.startswith("c.yaml: lengths: prompt_file: ") and line in msg and "\n" not in msg


def test_a_prompt_file_with_a_drawn_input_or_the_simulated_server_is_refused():
    """Fault kind: two sources of one length (a prompt file and an input distribution or a prefix), or a simulation
    that would quietly send the nominal lengths in place of the file's (it has no tokenizer to count them)."""
    with pytest.raises(BatchmarkError, match="prompt_file: its prompts are the inputs"):
        parse_config({**BASE, "lengths": {"prompt_file": str(CHAT), "prefix_len": 4}})
    cfg = parse_config({**BASE, "lengths": {"prompt_file": str(CHAT)}})
    with pytest.raises(BatchmarkError, match="lengths.prompt_file: .*only a served backend counts"):
        point_lengths(cfg, 64, 8, 4, 0)
