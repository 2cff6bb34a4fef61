"""``vllm bench sweep serve`` over ``--serve-params`` → one run whose servers are variants
(:mod:`pipeline.importers.vllm_sweep`).

The fixture ``tests/data/vllm-bench-sweep/20261202_100000/`` follows vLLM's ``vllm/benchmarks/sweep/serve.py`` layout
(``tests/data/README.md``): serve params ``[{max_num_seqs: 2}, {max_num_seqs: 4}]`` × bench params ``max_concurrency``
1, 4 × ``random_input_len`` 32, 128 (output 32), two runs each; its numbers are invented, chosen to be worked by hand.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.core.errors import BatchmarkError
from pipeline.importers import parse
from pipeline.importers.vllm_sweep import folder_parts, pairs, variant_name

from tests.conftest import DATA

EXPERIMENT = DATA / "vllm-bench-sweep" / "20261202_100000"


def comb(seqs: int, c: int, isl: int) -> str:
    return f"SERVE--max_num_seqs={seqs}-BENCH--max_concurrency={c}-random_input_len={isl}"


def test_folder_names_as_vllm_builds_them():
    """"-".join(["SERVE-", serve.name, "BENCH-", bench.name]) (serve.py ``_get_comb_base_path``), a name being
    ``as_text(sep="-")`` (param_sweep.py) or ``_benchmark_name``."""
    assert folder_parts(comb(2, 4, 32)) == ("max_num_seqs=2", "max_concurrency=4-random_input_len=32")
    assert folder_parts("BENCH--max_concurrency=1") == (None, "max_concurrency=1")
    assert folder_parts("SERVE--fp8-kv") == ("fp8-kv", None)
    assert pairs("kv_cache_dtype=fp8-e4m3-max_num_seqs=2") == [("kv_cache_dtype", "fp8-e4m3"), ("max_num_seqs", "2")]
    assert pairs("fp8-kv") is None
    assert variant_name("max_num_seqs=2-kv_cache_dtype=fp8", "f") == "max_num_seqs_2-kv_cache_dtype_fp8"


def test_sweep_imports_as_one_run_of_variants_shapes_and_repeats():
    """8 points = 2 variants × 2 shapes × 2 concurrencies, each of 2 repeats.  By hand from the fixture's run files:
    max_num_seqs 2, in 32, c 4: output_throughput 70 and 74 → median 72.0; max_num_seqs 4 there: 120, 124 → 122.0;
    TPOT p50 32 ms → per-user 1 / 0.032 = 31.25 tok/s.  The baseline is the server that ran first (its dates are the
    earlier ones), max_num_seqs 2, as vLLM runs the --serve-params list in order."""
    res = parse("vllm-bench", [EXPERIMENT])
    assert res.variants == [{"name": "max_num_seqs_2", "baseline": True, "settings": {"max_num_seqs": 2}},
                            {"name": "max_num_seqs_4", "baseline": False, "settings": {"max_num_seqs": 4}}]
    pts = {(p.variant, p.input_len, p.output_len, p.concurrency): p for p in res.summaries}
    assert len(pts) == 8 and {p.repeats for p in res.summaries} == {2}
    assert {(i, o) for _, i, o, _ in pts} == {(32, 32), (128, 32)}
    assert pts["max_num_seqs_2", 32, 32, 4].output_throughput_tok_s == 72.0
    assert pts["max_num_seqs_2", 32, 32, 4].samples["output_throughput_tok_s"] == [70.0, 74.0]
    p = pts["max_num_seqs_4", 32, 32, 4]
    assert p.output_throughput_tok_s == 122.0 and p.per_user_tok_s == pytest.approx(31.25)


def test_imported_sweep_shows_its_tuning_block_and_builds_its_pages(scratch_root, capsys):
    """The imported run flows through show and the model page's tuning section (what the pages render of variants;
    the whole site's render is the pages tests' job, 13 s here) unchanged.  What max_num_seqs 4 bought, by hand: peak output
    throughput 122 / 72 − 1 = +69 % (in 32) and 102 / 61 − 1 = +67 % (in 128), both at c = 4."""
    from pipeline.analysis.stages import load_run
    from pipeline.core import paths
    from pipeline.pages.tuning import tuning_section
    from pipeline.pages.views import view_of

    assert main(["import", "vllm-bench", str(EXPERIMENT), "--hardware", "cpu", "--run-id", "20261202T100000Z-sw"]) == 0
    run = json.loads((paths.runs_dir() / "20261202T100000Z-sw" / "run.json").read_text())
    assert [v["name"] for v in run["variants"]] == ["max_num_seqs_2", "max_num_seqs_4"]
    capsys.readouterr()
    assert main(["show", "20261202T100000Z-sw", "--json"]) == 0
    tuning = json.loads(capsys.readouterr().out)["tuning"]
    assert tuning["variants"] == ["max_num_seqs_2", "max_num_seqs_4"]
    assert {(f["input_len"], f["output_len"]) for f in tuning["frontiers"]} == {(32, 32), (128, 32)}
    assert main(["show", "20261202T100000Z-sw"]) == 0
    text = capsys.readouterr().out
    assert "what each setting bought (against max_num_seqs_2" in text
    assert "max_num_seqs_4: +69 % peak output throughput at c = 4 (32/32); +67 % peak output throughput at c = 4 " \
           "(128/32)" in text
    section = tuning_section(view_of(load_run(paths.runs_dir() / "20261202T100000Z-sw")), "agreement-llama")
    assert section["variants"] == ["max_num_seqs_2", "max_num_seqs_4"] and len(section["frontiers"]) == 2
    assert section["bought"][0]["lines"][0] == "+69 % peak output throughput at c = 4 (32/32)"
    assert all(f["chart"]["layer"] for f in section["frontiers"]) and len(section["curves"]) == 2


def _copy(tmp_path: Path, *names: str) -> Path:
    out = tmp_path / "exp"
    for n in names:
        shutil.copytree(EXPERIMENT / n, out / n)
    return out


def _edit(path: Path, **changes) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def test_named_combinations_take_their_name_and_settings_from_the_run(tmp_path):
    """Dict-form --serve-params ({"small": {...}, "big": {...}}) and --bench-params ({"short": …, "long": …}) name
    each combination (_benchmark_name, which the sweep writes into the folder name and the run, the bench one last):
    the variant is the server's name; its settings are the run's keys that are no result field and that all its runs
    state alike (random_input_len, 32 and 128, is the bench combinations')."""
    exp = tmp_path / "exp"
    for seqs, name in ((2, "small"), (4, "big")):
        for isl, bench in ((32, "short"), (128, "long")):
            dest = exp / f"SERVE--{name}-BENCH--{bench}"
            shutil.copytree(EXPERIMENT / comb(seqs, 4, isl), dest)
            for f in dest.glob("run=*.json"):
                _edit(f, _benchmark_name=bench)
    res = parse("vllm-bench", [exp])
    assert res.variants == [{"name": "small", "baseline": True, "settings": {"max_num_seqs": 2}},
                            {"name": "big", "baseline": False, "settings": {"max_num_seqs": 4}}]


def test_a_combination_that_names_no_variant_is_refused_naming_the_folder(tmp_path, scratch_root, capsys):
    """A served model name with a space gives no variant name (letters, digits, . _ - only): one line naming the
    folder, and nothing is written."""
    from pipeline.core import paths

    exp = tmp_path / "exp"
    dest = exp / "SERVE--served_model_name=my model-BENCH--max_concurrency=1-random_input_len=32"
    shutil.copytree(EXPERIMENT / comb(2, 1, 32), dest)
    for f in dest.glob("run=*.json"):
        _edit(f, served_model_name="my model")
    assert main(["import", "vllm-bench", str(exp), "--hardware", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{dest}: server combination: 'served_model_name=my model' gives no variant " \
                                    "name" in err
    assert not paths.runs_dir().exists() or not any(paths.runs_dir().iterdir())


def test_a_run_of_another_server_in_a_folder_is_refused_naming_file_and_field(tmp_path):
    """run=1.json carrying max_num_seqs 4 in the max_num_seqs=2 folder: a mixed-up folder, or a repeat with other
    settings; refused naming the file and the field."""
    exp = _copy(tmp_path, comb(2, 4, 32))
    bad = exp / comb(2, 4, 32) / "run=1.json"
    _edit(bad, max_num_seqs=4)
    with pytest.raises(BatchmarkError, match=rf"^{bad}: field max_num_seqs: 4, but its folder {comb(2, 4, 32)} "
                                             r"says 2: a run of another combination"):
        parse("vllm-bench", [exp])


def test_a_named_repeat_with_other_settings_is_refused(tmp_path):
    """A named combination's runs must state one setting: run=1.json with max_num_seqs 4 beside run=0.json's 2."""
    exp = tmp_path / "exp"
    dest = exp / "SERVE--small-BENCH--max_concurrency=4-random_input_len=32"
    shutil.copytree(EXPERIMENT / comb(2, 4, 32), dest)
    _edit(dest / "run=1.json", max_num_seqs=4)
    with pytest.raises(BatchmarkError, match=r"run=1.json: field max_num_seqs: 4, but .*run=0.json of the same server "
                                             r"combination \(small\) says 2: a repeat with other settings"):
        parse("vllm-bench", [exp])


def test_two_combinations_of_one_variant_name_are_refused(tmp_path):
    """max_num_seqs=2 and a combination named max_num_seqs_2 would be one variant: refused, naming both."""
    exp = _copy(tmp_path, comb(2, 1, 32))
    shutil.copytree(EXPERIMENT / comb(4, 1, 32), exp / "SERVE--max_num_seqs_2-BENCH--max_concurrency=1-random_input_len=32")
    with pytest.raises(BatchmarkError, match=r"are both named variant 'max_num_seqs_2'"):
        parse("vllm-bench", [exp])


def test_sweep_results_mixed_with_a_plain_result_are_refused(tmp_path):
    """A plain vllm bench serve result (no server combination) beside SERVE-… folders: a mixed-up folder."""
    exp = _copy(tmp_path, comb(2, 1, 32))
    shutil.copy(DATA / "vllm-bench" / "llama-3.1-8b-c4.json", exp / "c4.json")
    with pytest.raises(BatchmarkError, match=r"c4.json: a result of no --serve-params server combination imported "
                                             r"with results of server combinations"):
        parse("vllm-bench", [exp])


def test_a_server_combination_that_failed_is_named_in_the_run(tmp_path):
    """With --continue-on-error a server that never started leaves SERVE-<name>-failure.json in the experiment folder
    (serve.py run_combs: error_type, error, serve_overrides): it measured nothing, so it is no variant; the run names
    it (source_details), and alone it is refused."""
    exp = _copy(tmp_path, comb(2, 1, 32))
    record = {"error_type": "TimeoutError", "error": "server not ready", "serve_overrides": {"max_num_seqs": 512}}
    (exp / "SERVE-max_num_seqs=512-failure.json").write_text(json.dumps(record))
    res = parse("vllm-bench", [exp])
    assert [v["name"] for v in res.variants] == ["max_num_seqs_2"]
    assert res.details == {"server_combinations_failed": [{"file": "SERVE-max_num_seqs=512-failure.json",
                                                           "combination": {"max_num_seqs": 512},
                                                           "error_type": "TimeoutError"}]}
    with pytest.raises(BatchmarkError, match=r"SERVE-max_num_seqs=512-failure.json: vllm bench sweep's record of a "
                                             r"server combination that failed"):
        parse("vllm-bench", [exp / "SERVE-max_num_seqs=512-failure.json"])


def test_keys_and_values_with_dashes_split_as_the_run_states_them(tmp_path):
    """vLLM's CLI takes --serve-params keys with - as well as _ (param_sweep.py _iter_param_key_candidates), and a
    value may hold a - (kv_cache_dtype fp8-e4m3 is no real dtype; the split is what is tested): the folder name
    max-num-seqs=2-kv_cache_dtype=fp8-e4m3 is read with the run's keys, never split at a wrong -."""
    exp = tmp_path / "exp"
    dest = exp / "SERVE--max-num-seqs=2-kv_cache_dtype=fp8-e4m3-BENCH--max_concurrency=1-random_input_len=32"
    shutil.copytree(EXPERIMENT / comb(2, 1, 32), dest)
    for f in dest.glob("run=*.json"):
        d = json.loads(f.read_text())
        del d["max_num_seqs"]
        f.write_text(json.dumps({**d, "max-num-seqs": 2, "kv_cache_dtype": "fp8-e4m3"}))
    res = parse("vllm-bench", [exp])
    assert res.variants == [{"name": "max-num-seqs_2-kv_cache_dtype_fp8-e4m3", "baseline": True,
                             "settings": {"max-num-seqs": 2, "kv_cache_dtype": "fp8-e4m3"}}]
