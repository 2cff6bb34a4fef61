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
    ('{"prompt": "a", "output_tokens": -3}\n', "line 1: output_len: -3 is not a positive number of tokens"),
    ('[{"prompt": "a"},\n {"prompt": "b"}]\n', "line 1: not JSON (a prompt file is JSON Lines"),  # a JSON array
    ('{"prompt": "a"}\n{"prompt": "b"\n', "line 2: not JSON (a prompt file is JSON Lines"),
    ("prompt,output\nhello,world\n", "line 1: not JSON (a prompt file is JSON Lines"),  # a CSV
    ('{"prompt": "   "}\n', "line 1: prompt: not a non-empty string"),
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
    """Fault kind: two sources of one length (a prompt file and an input distribution), or a simulation
    that would quietly send the nominal lengths in place of the file's (it has no tokenizer to count them).  A
    shared prefix before the file's prompts is one length added, not a second source: accepted."""
    with pytest.raises(BatchmarkError, match="prompt_file: its prompts are the inputs"):
        parse_config({**BASE, "lengths": {"prompt_file": str(CHAT), "input": {"distribution": "uniform",
                                                                              "range_ratio": 0.5}}})
    assert parse_config({**BASE, "lengths": {"prompt_file": str(CHAT), "prefix_len": 4}}).lengths.prefix_len == 4
    cfg = parse_config({**BASE, "lengths": {"prompt_file": str(CHAT)}})
    with pytest.raises(BatchmarkError, match="lengths.prompt_file: .*only a served backend counts"):
        point_lengths(cfg, 64, 8, 4, 0)


def test_vllms_custom_output_tokens_read_as_the_output_len(tmp_path):
    """Fault kind: a file written for ``vllm bench serve --dataset-name custom`` (its ``output_tokens``, vLLM's
    ``CustomDataset``) read without its output lengths, so the two clients ask for different outputs.  The shipped
    data/prompts/cpu-words.jsonl states both keys, equal: its first line asks for 33 tokens and holds 40 words."""
    path = tmp_path / "v.jsonl"
    path.write_text('{"prompt": "a b", "output_tokens": 7}\n{"prompt": "c", "output_len": 3, "output_tokens": 9}\n')
    assert read_prompt_file(path) == [PromptEntry("a b", None, 7), PromptEntry("c", None, 3)]  # output_len first
    shipped = read_prompt_file(REPO / "data" / "prompts" / "cpu-words.jsonl")
    assert len(shipped) == 24 and shipped[0].output_len == 33 and len(shipped[0].prompt.split()) == 40
