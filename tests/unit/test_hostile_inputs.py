"""Hostile inputs (items 7–14 and "Tracebacks and messages"): each case as the issue reproduced it.

Every test names the item it pins.  Expected outcomes are the issue's "what must hold": a one-line
:class:`BatchmarkError` naming the file or field (never a traceback, never a hang), or the run
built from what can be read with the rest named.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from pipeline import cli
from pipeline.analysis import stages
from pipeline.core import paths
from pipeline.store import pointfiles, runs
from pipeline.core.progress import Display
from pipeline.sweep import parts, point, ratewalk
from pipeline.config.sweepconfig import load_config, parse_config
from pipeline.config.options import RESERVED_BODY_KEYS
from pipeline.core.errors import BatchmarkError
from pipeline.importers import import_run, parse
from tests import runbuilder as rb
from tests.conftest import DATA, TINY_CONFIG

VLLM = DATA / "vllm-bench" / "llama-3.1-8b-c4.json"

#: A "billion laughs" YAML: 9 levels of 9 aliases each, 9^9 ≈ 3.9e8 nodes when expanded, 700 bytes as text.
BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9))


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg, msg
    return msg


def _vllm_doc(**changes) -> dict:
    doc = json.loads(VLLM.read_text())
    doc.update(changes)
    return doc


def _write_json(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc))
    return path


# -- unbounded memory and time --------------------------------------------------------------------

def test_yaml_alias_bomb_in_a_config_extra_body_is_refused_quickly(scratch_root, tmp_path):
    """Regression (fault kind: unbounded memory and time): the bomb in a config's ``extra_body`` passed validation, then ``cfg.digest()`` ran > 60 s to 2.9 GB."""
    cfg = yaml.safe_load(TINY_CONFIG.read_text())
    text = yaml.safe_dump(cfg) + "openai:\n  extra_body:\n" + "".join(
        "    " + line + "\n" for line in BOMB.splitlines())
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    start = time.monotonic()
    with pytest.raises(BatchmarkError) as exc:
        load_config(path)
    assert time.monotonic() - start < 5
    assert _one_line(exc).startswith(f"{path}:") and "alias" in str(exc.value)


@pytest.mark.parametrize("reader", ["config", "hardware profile", "model card", "guidellm yaml"])
def test_every_yaml_reader_refuses_an_alias_bomb(reader, scratch_root, tmp_path):
    """Regression (fault kind: unbounded memory and time): every YAML the project reads goes through the strict loader (a GuideLLM YAML bomb hung > 40 s)."""
    start = time.monotonic()
    with pytest.raises(BatchmarkError) as exc:
        if reader == "config":
            path = tmp_path / "c.yaml"
            path.write_text(BOMB)
            load_config(path)
        elif reader == "hardware profile":
            from pipeline.machine.hardware import load_profile

            path = paths.hardware_dir() / "bomb.yaml"
            path.write_text(BOMB)
            load_profile("bomb")
        elif reader == "model card":
            from pipeline.cards.registry import find_card_file

            path = paths.models_dir() / "bomb.yaml"
            path.write_text(BOMB)
            find_card_file("bomb")  # the card named (a broken card of another model is skipped, not raised)
        else:
            path = tmp_path / "benchmarks.yaml"
            path.write_text(BOMB)
            parse("guidellm", [path])
    assert time.monotonic() - start < 5
    assert _one_line(exc).startswith(str(path)) and "alias" in str(exc.value), str(exc.value)


def test_a_4_mib_string_aliased_50000_times_in_a_variant_is_refused(tmp_path):
    """Regression (fault kind: unbounded memory): 50,000 aliases are under the node limit (100,000), but each repeats
    a 4 MiB string: 50,000 × 4 MiB = 195 GiB of text to whatever copies the variant's ``args`` (validation, the
    config digest, ``run.json``).  The loader counts the characters aliases add, 50,000 × 4 × 2^20 =
    209,715,200,000, against the 16 MiB (16,777,216 characters) a file may hold, and refuses the config in one
    line naming the file; it held the one composed 4 MiB string, never the expansion."""
    from pipeline.core.textfiles import MAX_ALIAS_CHARS, expanded_size, load_yaml_text

    variant = ("variants:\n  - name: base\n  - name: wide\n    env: {BIG: &big " + "x" * 4 * 2**20 + "}\n"
               "    args: [" + ", ".join(["*big"] * 50_000) + "]\n")
    path = tmp_path / "wide.yaml"
    path.write_text(yaml.safe_dump(yaml.safe_load(TINY_CONFIG.read_text())) + variant)
    assert path.stat().st_size < 5 * 2**20  # a 4.3 MiB file: under the 16 MiB read limit
    with pytest.raises(BatchmarkError) as exc:
        load_config(path)
    msg = _one_line(exc)
    assert msg.startswith(f"{path}:") and "alias" in msg and "209,715,200,000 characters" in msg, msg
    assert f"{MAX_ALIAS_CHARS:,} allowed" in msg and MAX_ALIAS_CHARS == 16 * 2**20
    # worked by hand: "abcd" aliased 3 times adds 3 nodes and 12 characters; a map key's text counts too
    assert expanded_size(yaml.compose("s: &s abcd\nl: [*s, *s, *s]\n")) == (3, 12)
    assert expanded_size(yaml.compose("d: &d {ab: c}\ne: *d\n")) == (3, 3)
    # aliases that add at most 16 MiB still load as written: a 4 MiB string aliased 4 times adds exactly 16 MiB
    small = "y" * 4 * 2**20
    assert load_yaml_text("ok.yaml", f"a: &a {small}\nb: [*a, *a, *a, *a]\n")["b"] == [small] * 4


def test_aliases_that_repeat_a_block_a_few_times_still_load(tmp_path):
    """The alias limit leaves ordinary anchors alone: a block reused twice loads as written."""
    from pipeline.core.textfiles import load_yaml_text

    assert load_yaml_text("x.yaml", "d: &d {a: 1}\ne: [*d, *d]\n") == {"d": {"a": 1}, "e": [{"a": 1}, {"a": 1}]}
    with pytest.raises(BatchmarkError, match="recursive"):
        load_yaml_text("x.yaml", "&a [*a]\n")


def test_oversized_import_is_refused_before_it_is_read(scratch_root, tmp_path):
    """Regression (fault kind: unbounded memory and time): a 100 MB vllm-bench JSON took 72 s and 3.6 GB; a file above the cap is refused by its size."""
    from pipeline.importers.parsing import MAX_IMPORT_BYTES

    path = tmp_path / "huge.json"
    with path.open("wb") as fh:  # sparse: its size without writing 64 MiB to disk
        fh.truncate(MAX_IMPORT_BYTES + 1)
    start = time.monotonic()
    with pytest.raises(BatchmarkError) as exc:
        parse("vllm-bench", [path])
    assert time.monotonic() - start < 2
    assert _one_line(exc).startswith(str(path)) and "64 MiB" in str(exc.value)


def test_oversized_config_is_refused(tmp_path):
    from pipeline.core.textfiles import MAX_TEXT_BYTES

    path = tmp_path / "c.yaml"
    with path.open("wb") as fh:
        fh.truncate(MAX_TEXT_BYTES + 1)
    with pytest.raises(BatchmarkError, match="16 MiB"):
        load_config(path)


def test_per_request_list_longer_than_the_requests_is_refused(tmp_path):
    """Regression (fault kind: unbounded memory and time): 20 M ``ttfts`` for ``completed: 32``; the list must hold one entry per request (32 + 0 failed)."""
    path = _write_json(tmp_path / "r.json", _vllm_doc(ttfts=[0.3] * 5000))
    with pytest.raises(BatchmarkError) as exc:
        parse("vllm-bench", [path])
    assert "field ttfts" in _one_line(exc) and "5,000 entries for 32 request(s)" in str(exc.value)
    ok = _write_json(tmp_path / "ok.json", _vllm_doc(ttfts=[0.3] * 32))
    assert parse("vllm-bench", [ok]).summaries[0].ttft_s["p50"] == pytest.approx(0.3)


# -- merge validates every part file ---------------------------------------------------------------

def _parts_run(scratch_root):
    from tests.unit.sweep.test_parts import _cfg, make_part

    cfg = _cfg()
    for m in rb.MODELS:
        make_part(cfg, "R1", m)  # complete, as a finished ``sweep --model`` leaves it
    return cfg


def test_merge_refuses_a_truncated_part_point_file(scratch_root):
    """Regression (fault kind: a cut part merged unread): a part point file cut with ``head -c 1000`` was merged into a run marked complete that nothing read."""
    cfg = _parts_run(scratch_root)
    victim = sorted((parts.part_dir("R1", rb.MODELS[1]) / "points").glob("*/*.json"))[0]
    victim.write_bytes(victim.read_bytes()[:1000])
    with pytest.raises(BatchmarkError) as exc:
        parts.merge_parts(cfg, "R1")
    msg = _one_line(exc)
    assert msg.startswith(str(victim)) and "corrupt JSON" in msg and f"delete {parts.part_dir('R1', rb.MODELS[1])}" in msg
    assert not (paths.runs_dir() / "R1" / "run.json").exists()  # not published, never marked complete
    assert not [p for p in paths.runs_dir().iterdir() if p.name.endswith(".tmp")]


def test_merge_refuses_a_part_whose_index_misses_a_point(scratch_root):
    cfg = _parts_run(scratch_root)
    extra = parts.part_dir("R1", rb.MODELS[0]) / "points" / rb.MODELS[0] / "stray.json"
    extra.write_text(next(extra.parent.glob("*.json")).read_text())
    with pytest.raises(BatchmarkError, match="points.json: does not list"):
        parts.merge_parts(cfg, "R1")


def test_merge_of_a_part_with_a_corrupt_run_json_names_it_and_the_remedy(scratch_root):
    """Tracebacks list: the merge said "run the workflow again", which failed the same way."""
    cfg = _parts_run(scratch_root)
    meta = parts.part_dir("R1", rb.MODELS[0]) / "run.json"
    meta.write_bytes(meta.read_bytes()[:50])
    with pytest.raises(BatchmarkError) as exc:
        parts.merge_parts(cfg, "R1")
    msg = _one_line(exc)
    assert msg.startswith(str(meta)) and f"delete {meta.parent} and run the workflow again" in msg


# -- open_loop auto with nothing measured in one model ---------------------------------------------

def test_auto_rates_without_a_closed_loop_throughput_stop_that_model_only(tmp_path):
    """Regression (fault kind: one model's empty grid stopping the sweep): the first model's grid measured nothing; the sweep raised, never measured the next model, and every
    ``--resume`` raised the same.  Now the reason is recorded for that model and the sweep goes on."""
    cfg = parse_config({"name": "o", "hardware": "cpu", "backend": "openai", "concurrency": [1, 2],
                        "open_loop": {"rates": "auto"}, "models": [{"name": "m", "served_name": "m"}]})
    logged: list[str] = []
    sweep = point.SweepState(cfg, None, tmp_path, Display(0, enabled=False), logged.append)
    walk = point.ModelWalk(cfg.models[0])
    ratewalk.rate_walk(sweep, walk)
    assert walk.loaded is False and not logged  # the engine (None here) was never touched
    assert sweep.stops == {"m": "open loop not run: open_loop.rates: auto needs a closed-loop throughput, and no point "
                          "of the grid measured one"}


# -- requests_per_point below the concurrency ------------------------------------------------------

@pytest.mark.parametrize("engine", ["openai", "vllm"])
def test_requests_per_point_below_the_concurrency_is_refused(engine):
    """Regression (fault kind: too few requests to reach the concurrency): c = 32 with 4 requests per point showed 312 tok/s against 1685.8 measured properly."""
    model = {"name": "m", "served_name": "m"}
    with pytest.raises(BatchmarkError) as exc:
        parse_config({"name": "x", "hardware": "cpu", "engine": engine, "concurrency": [1, 32],
                      engine: {"requests_per_point": 4}, "models": [model]})
    assert f"{engine}.requests_per_point = 4 is below the largest concurrency 32" in _one_line(exc)
    cfg = parse_config({"name": "x", "hardware": "cpu", "engine": engine, "concurrency": [1, 32],
                        engine: {"requests_per_point": 32}, "models": [model]})
    assert cfg.model_dump()[engine]["requests_per_point"] == 32


# -- imported numbers range-checked -----------------------------------------------------------------

@pytest.mark.parametrize("field, value, named", [
    ("output_throughput", -52.8, "output_throughput_tok_s"),
    ("median_tpot_ms", -75.3, "field median_tpot_ms: -75.3 is a negative latency"),  # refused in the file's own field
    ("mean_ttft_ms", -1.0, "field mean_ttft_ms: -1 is a negative latency"),
    ("total_output_tokens", -8192, "output_len"),
    ("failed", -100, "failed count -100 is negative"),
    ("completed", -32, "completed count -32 is negative"),
    ("output_throughput", 10 ** 400, "out of range"),
    ("median_e2el_ms", 1e300, "e2el_s.p50"),
])
def test_vllm_bench_out_of_range_numbers_are_refused(field, value, named, tmp_path):
    """Regression (fault kind: imported numbers not range-checked): negative throughput, TPOT, TTFT, token counts and ``failed`` were stored (peak −52.8 tok/s)."""
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_vllm_doc(**{field: value})))
    with pytest.raises(BatchmarkError) as exc:
        parse("vllm-bench", [path])
    assert _one_line(exc).startswith(str(path)) and named in str(exc.value), str(exc.value)


def test_failed_minus_100_is_refused_not_printed(scratch_root, tmp_path, capsys):
    """Tracebacks list: ``failed: -100`` printed "-100 of -68 requests failed (147 %)"."""
    path = _write_json(tmp_path / "r.json", _vllm_doc(failed=-100))
    rc = cli.main(["import", "vllm-bench", str(path), "--hardware", "dgx-spark", "--run-id", "neg"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].endswith("field completed: failed count -100 is negative")


def test_guidellm_negative_ttft_is_refused(tmp_path):
    doc = json.loads((DATA / "guidellm" / "benchmarks.json").read_text())
    doc["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["median"] = -5.0
    doc["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"].setdefault("percentiles", {})["p50"] = -5.0
    with pytest.raises(BatchmarkError) as exc:
        parse("guidellm", [_write_json(tmp_path / "b.json", doc)])
    # refused where the file says it, naming the file's field (any negative latency, read or not)
    assert "time_to_first_token_ms.successful" in _one_line(exc) and "negative latency" in str(exc.value)


# -- extra_body keys the load generator owns -------------------------------------------------------

@pytest.mark.parametrize("key", sorted(RESERVED_BODY_KEYS))
def test_extra_body_may_not_set_what_is_measured(key):
    """Regression (fault kind: extra_body setting what is measured): ``extra_body: {max_tokens: 2, model: other}`` measured 2 tokens of another model."""
    with pytest.raises(BatchmarkError) as exc:
        parse_config({"name": "x", "hardware": "cpu", "backend": "openai", "concurrency": [1],
                      "openai": {"extra_body": {key: 2, "top_k": 5}}, "models": [{"name": "m", "served_name": "m"}]})
    assert "openai.extra_body" in _one_line(exc) and key in str(exc.value)


def test_extra_body_keys_the_client_sets_are_all_reserved():
    """The reserved set covers every key ``loadgen/client.build_body`` writes (every optional feature on)."""
    from pipeline.loadgen import client, streamrecord

    for endpoint in ("chat", "completions"):
        target = client.Target(base_url="http://127.0.0.1:1/v1", model="m", endpoint=endpoint)
        body = json.loads(client.build_body(target, streamrecord.Features(), "hi", 8))
        assert set(body) <= RESERVED_BODY_KEYS, set(body) - RESERVED_BODY_KEYS


# -- unreadable runs are named ---------------------------------------------------------------------

def test_site_builds_from_readable_runs_and_names_each_unreadable_one(scratch_root):
    """Regression (fault kind: an unreadable run dropped without a word): a truncated run.json and a schema 99 run.json dropped off the site without a word; a future-version
    point file stopped all of ``pages``.  One rule: built from the readable runs, each other one named."""
    from pipeline.pages.render import render_site

    rd = paths.runs_dir()
    rb.make_run(rd, "A-good")
    cut = rb.make_run(rd, "B-cut")
    (cut / "run.json").write_bytes((cut / "run.json").read_bytes()[:200])
    future = rb.make_run(rd, "C-schema99")
    meta = json.loads((future / "run.json").read_text())
    (future / "run.json").write_text(json.dumps({**meta, "schema_version": 99}))
    newer_point = rb.make_run(rd, "D-point")  # a derived file of a newer batchmark: the site reads it, never the points
    victim = newer_point / "summaries.json"
    (victim).write_text(json.dumps({**json.loads(victim.read_text()), "schema_version": 99}))
    binary = rb.make_run(rd, "E-binary")
    (binary / "run.json").write_bytes(bytes(range(256)))
    headless = rb.make_run(rd, "F-no-run-json")
    (headless / "run.json").unlink()
    (rd / "G-claim").mkdir()  # an empty folder is a claim being filled, not a run
    logged: list[str] = []
    render_site(scratch_root / "site-pages", log=logged.append)
    assert [line.split()[2] for line in logged] == ["B-cut", "C-schema99", "D-point", "E-binary", "F-no-run-json"]
    assert "F-no-run-json: holds files but no run.json" in logged[4]
    assert "B-cut/run.json: corrupt JSON" in logged[0] and "C-schema99/run.json: schema_version 99" in logged[1]
    assert f"D-point/{victim.relative_to(newer_point)}: schema_version 99" in logged[2]
    assert "E-binary/run.json: corrupt: not UTF-8" in logged[3]
    page = (scratch_root / "site-pages" / "runs.md").read_text()
    assert "A-good" in page.split("## Runs that could not be read")[0]
    unread = page.split("## Runs that could not be read")[1]
    for name in ("B-cut", "C-schema99", "D-point", "E-binary", "F-no-run-json"):
        assert f"| {name} |" in unread
    assert "G-claim" not in page
    assert str(rd) not in page  # the machine's path stays off the site
    # the workflow names the runs it lists (``--runs``); the rule is the same
    logged.clear()
    render_site(scratch_root / "site-pages", runs=["A-good", "D-point"], log=logged.append)
    assert [line.split()[2] for line in logged] == ["B-cut", "C-schema99", "D-point", "E-binary", "F-no-run-json"]


def test_pages_cli_names_unreadable_runs_in_its_output(scratch_root, capsys):
    rd = paths.runs_dir()
    rb.make_run(rd, "A-good")
    bad = rb.make_run(rd, "B-deep")
    (bad / "run.json").write_text("[" * 100_000 + "]" * 100_000)  # 100k deep: RecursionError once
    assert cli.main(["pages", "--out", str(scratch_root / "site-pages")]) == 0
    err = capsys.readouterr().err
    assert "warning: run B-deep is not on the site: B-deep/run.json: corrupt JSON (nested too deeply)" in err


# -- a claim whose import was killed ---------------------------------------------------------------

def test_a_live_claim_still_blocks_its_id(tmp_path):
    first = runs.claim_run_dir(tmp_path, run_id="L1")  # this process: alive
    with pytest.raises(BatchmarkError, match="already exists"):
        runs.claim_run_dir(tmp_path, run_id="L1")
    assert first.is_dir()


def test_old_empty_claims_without_a_known_claimer_are_cleaned(tmp_path):
    (tmp_path / "OLD").mkdir()
    (tmp_path / "NEW").mkdir()
    old = time.time() - 2 * runs.STALE_TMP_S
    os.utime(tmp_path / "OLD", (old, old))
    assert runs.clean_stale_claims(tmp_path) == [tmp_path / "OLD"]
    assert (tmp_path / "NEW").is_dir()


# -- tracebacks and messages -----------------------------------------------------------------------

def test_a_5000_character_model_name_imports_and_builds_pages(scratch_root, tmp_path):
    """Tracebacks list: a 5,000-character model name was imported, then ``pages`` died with ENAMETOOLONG."""
    from pipeline.pages.render import render_site

    path = _write_json(tmp_path / "r.json", _vllm_doc(model_id="M" * 5000))
    import_run("vllm-bench", [path], "dgx-spark", run_id="long")
    written = render_site(scratch_root / "site-pages", log=lambda m: None)
    assert all(len(p.name) <= 255 for p in written)
    assert any(p.parent.name == "models" for p in written)


@pytest.mark.parametrize("field", ["name", "models.0.name"])
def test_a_300_character_name_in_a_config_is_refused(field):
    """Tracebacks list: a 300-character config ``name:`` hit ENAMETOOLONG in ``.pointers/`` (a model name of the
    config names its point files, server log and model folder)."""
    data = {"name": "c", "hardware": "cpu", "models": [{"name": "m", "architecture": {"model_type": "llama"}}]}
    if field == "name":
        data["name"] = "c" * 300
    else:
        data["models"][0]["name"] = "m" * 300
    with pytest.raises(BatchmarkError) as exc:
        parse_config(data, "c.yaml")
    assert _one_line(exc).startswith(f"c.yaml: {field}: String should have at most 128 characters")


def test_a_long_config_name_still_has_a_pointer_file(scratch_root):
    """The pointer's file name is bounded whatever reaches it (``pointfiles.file_stem``)."""
    name = "c" * 300
    from pipeline.sweep import parts

    parts.write_pointer(name, "R-ptr")
    assert len(parts.pointer_path(name).name) <= 255
    assert json.loads(parts.pointer_path(name).read_text()) == {"run_id": "R-ptr"}


@pytest.mark.parametrize("content, reason", [
    (bytes(range(256)) * 4, "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"schema_version": 1, "n": ' + b"7" * 5000 + b"}", "corrupt JSON"),
    (b'{"schema_version": 1, "status": "complete", "n": ' + b"7" * 400 + b"}", "beyond 64 bits"),
])
def test_unreadable_run_json_is_one_line_in_show_and_upgrade(content, reason, scratch_root, capsys):
    """Tracebacks list: ``run.json`` of binary bytes gave UnicodeDecodeError, 100k deep a RecursionError."""
    run = rb.make_run(paths.runs_dir(), "BAD")
    (run / "run.json").write_bytes(content)
    for argv in (["show", "BAD"], ["upgrade", "BAD"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "run.json" in err[0] and reason in err[0], err


def test_upgrade_all_upgrades_the_readable_runs_and_names_the_others(scratch_root, capsys):
    """The unreadable-run rule for ``upgrade --all``: it stopped at the first unreadable run."""
    rd = paths.runs_dir()
    rb.make_run(rd, "U1")
    (rb.make_run(rd, "U2") / "run.json").write_bytes(b"\xff\xfe")
    rb.make_run(rd, "U3")
    assert cli.main(["upgrade", "--all"]) == 2
    out, err = capsys.readouterr()
    assert "run U1:" in out and "run U3:" in out and "U2" not in out
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("batchmark: run U2 not upgraded: ") and "not UTF-8" in lines[0]
    assert lines[1] == "batchmark: error: upgrade --all: 1 run(s) could not be read (named above); nothing was written into them"


@pytest.mark.parametrize("run_id", ["nl-run\n", "a\nb", "x\r", "tab\t", "../up", ".hidden", "a" * 129])
def test_run_ids_are_matched_whole(run_id):
    """Tracebacks list: ``--run-id $'nl-run\\n'`` made a folder with a newline (``re.match`` with ``$``)."""
    with pytest.raises(BatchmarkError, match="not a valid run id"):
        runs.check_run_id(run_id)


def test_newline_run_id_refused_by_import(scratch_root, capsys):
    assert cli.main(["import", "vllm-bench", str(VLLM), "--hardware", "dgx-spark", "--run-id", "nl-run\n"]) == 2
    assert not [p for p in paths.runs_dir().iterdir() if "\n" in p.name] if paths.runs_dir().is_dir() else True


def test_full_disk_names_the_file_of_every_writer(scratch_root, monkeypatch):
    """Tracebacks list: a full disk said "No space left on device" without the file's name (the README promises
    it; the import's own writes were covered by ``test_faults.py``).  Here: a sweep's point file (exclusive create)
    and the site's records download.  The kernel's ENOSPC names no file; it is raised where each write hits the disk."""
    import errno
    import zipfile

    from pipeline.pages.render import render_site

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    rd = paths.runs_dir()
    run = rb.make_run(rd, "FULL", complete=False)
    records = rb.point_records(rb.MODELS[0], 32, rb.NOISE_A)
    with monkeypatch.context() as m:
        m.setattr(os, "fsync", full)
        with pytest.raises(OSError) as exc:
            runs.write_point(run, records)
    assert exc.value.filename == str(pointfiles.point_path(run, records.point)) and exc.value.errno == errno.ENOSPC
    runs.complete_run(run, derive=stages.write_derived)  # published as the sweep publishes it
    monkeypatch.setattr(zipfile.ZipFile, "writestr", full)
    with pytest.raises(OSError) as exc:
        render_site(scratch_root / "site-pages", log=lambda m: None)
    assert exc.value.filename == str(scratch_root / "site-pages" / "downloads" / "FULL" / "records.zip")


def test_model_with_every_point_failed_shows_no_peak():
    """Tracebacks list: a model whose every point failed showed "peak 0.0 tok/s"."""
    from pipeline.views.show import format_table

    doc = {"run_id": "r", "source": "measured", "hardware": {"name": "cpu"}, "points": [],
           "models": [{"model": "m", "kind": "dense", "input_len": 8, "output_len": 4, "ceiling_tok_s": None,
                       "knee_concurrency": None, "post_knee": "not_reached", "peak_output_throughput_tok_s": None}]}
    text = format_table(doc)
    assert "peak – (no point measured a throughput)" in text and "0.0 tok/s" not in text


@pytest.mark.parametrize("fmt", ["vllm-bench", "guidellm", "aiperf", "llama-benchy", "llama-batched-bench"])
def test_an_empty_file_says_it_is_empty(fmt, tmp_path):
    """Tracebacks list: an empty vllm-bench file said "pass --model"."""
    for content in ("", "  \n\n"):
        path = tmp_path / "empty.json"
        path.write_text(content)
        with pytest.raises(BatchmarkError) as exc:
            parse(fmt, [path], model="m")
        assert _one_line(exc) == f"{path}: empty file; nothing to import"


@pytest.mark.parametrize("how", ["model_id", "--model", "error text"])
def test_a_lone_surrogate_in_a_name_is_refused_at_import(how, scratch_root, tmp_path, capsys):
    """The same class as the issue's binary run.json: a JSON ``"\\ud800"`` (or an undecodable ``--model`` byte,
    which Python's argv holds as ``\\udcff``) was imported, then ``show`` died with UnicodeEncodeError."""
    doc = _vllm_doc()
    argv = []
    if how == "model_id":
        doc["model_id"] = "bad\ud800name"
    elif how == "--model":
        argv = ["--model", "bad\udcffname"]
    else:
        doc["errors"] = ["boom\udfff"] + [""] * 31
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))  # json.dumps writes the lone surrogate as an escape, as a hostile file would
    rc = cli.main(["import", "vllm-bench", str(path), "--hardware", "dgx-spark", "--run-id", "SG", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "not Unicode text" in err[0] and err[0].startswith(f"batchmark: error: {path}")
    assert not (paths.runs_dir() / "SG").exists()


def test_emoji_names_still_import_and_show(scratch_root, tmp_path, capsys):
    """Surrogate pairs (how ``json.dumps`` writes an emoji) are text: only lone ones are refused."""
    path = _write_json(tmp_path / "r.json", _vllm_doc(model_id="llama-\U0001F999"))
    import_run("vllm-bench", [path], "dgx-spark", run_id="EMO")
    assert cli.main(["show", "EMO"]) == 0 and "llama-\U0001F999" in capsys.readouterr().out


def test_a_stored_lone_surrogate_makes_a_run_unreadable_not_a_traceback(scratch_root, capsys):
    run = rb.make_run(paths.runs_dir(), "SUR")
    meta = (run / "run.json").read_text().replace('"testhost"', '"test\\ud800host"')
    (run / "run.json").write_text(meta)
    assert cli.main(["show", "SUR"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run.json: corrupt: a string that is not Unicode text" in err[0]


def test_a_lone_surrogate_in_a_config_is_refused(scratch_root, tmp_path):
    """A config's ``served_name: "\\ud800"`` would reach the request body (orjson refuses it mid-sweep)."""
    path = tmp_path / "c.yaml"
    path.write_text(TINY_CONFIG.read_text() + 'openai:\n  tokenizer: "tok\\ud800"\n')
    with pytest.raises(BatchmarkError) as exc:
        load_config(path)
    assert _one_line(exc) == f"{path}: 'tok\\ud800' is not Unicode text (a lone surrogate escape)"


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_file_that_never_ends_is_read_with_a_bound(scratch_root):
    """The cap by size alone missed a device (``/dev/zero`` has size 0 and never ends): reads are bounded."""
    start = time.monotonic()
    with pytest.raises(BatchmarkError, match="/dev/zero: a device, not a result file"):  # import: no regular file
        parse("vllm-bench", ["/dev/zero"])
    with pytest.raises(BatchmarkError, match="more than the 16 MiB"):
        load_config("/dev/zero")
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("field, value", [("hidden_size", 10 ** 400), ("num_hidden_layers", 10 ** 30),
                                          ("vocab_size", 10 ** 20), ("num_attention_heads", -5)])
def test_capacity_config_json_numbers_are_range_checked(field, value, scratch_root, tmp_path, capsys):
    """The same class for ``capacity --model config.json``: a 400-digit ``hidden_size`` ended in OverflowError and
    10^30 layers in a loop that never ended."""
    card = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
            "max_position_embeddings": 131072, field: value}
    path = _write_json(tmp_path / "config.json", card)
    start = time.monotonic()
    assert cli.main(["capacity", "--hardware", "dgx-spark", "--model", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0] and time.monotonic() - start < 5


@pytest.mark.parametrize("context", ["1" + "0" * 400, "0", "-4096"])
def test_capacity_context_is_range_checked(context, scratch_root, capsys):
    assert cli.main(["capacity", "--hardware", "dgx-spark", "--model", "Llama-3.1-8B", "--context", context]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("batchmark: error: --context: ") and "is not a context length" in err[0]


@pytest.mark.parametrize("value", [".inf", ".nan", "1e400"])
def test_a_hardware_profile_with_a_non_finite_figure_is_refused(value, scratch_root):
    from pipeline.machine.hardware import load_profile

    text = (paths.hardware_dir() / "dgx-spark.yaml").read_text()
    assert "bandwidth_gb_s_spec:" in text
    lines = [f"bandwidth_gb_s_spec: {value}" if line.startswith("bandwidth_gb_s_spec:") else line
             for line in text.splitlines()]
    (paths.hardware_dir() / "weird.yaml").write_text("\n".join(lines) + "\n")
    with pytest.raises(BatchmarkError) as exc:
        load_profile("weird")
    assert _one_line(exc).startswith(str(paths.hardware_dir() / "weird.yaml")) and "bandwidth_gb_s_spec" in str(exc.value)
