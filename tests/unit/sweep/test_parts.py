"""A run measured in parts (one model each) and merged: same files and numbers as one job, hosts kept, hardware checked.

Parts are written through the real run-folder code (``pipeline.store.runs``) with the hand-made records of
``tests/runbuilder.py``; the "other hosts" and "other hardware" of these tests are test doubles of
machines this test cannot have (a part's ``host``/``machine`` fields as another node would write them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.analysis import stages
from pipeline.core import paths
from pipeline.store import runs
from pipeline.sweep import parts
from pipeline.config.sweepconfig import parse_config
from pipeline.core.errors import BatchmarkError
from pipeline.config.resources import DEFAULT_MEM_MB, part_resources, part_threads
from pipeline.machine.hardware import load_profile
from tests import runbuilder as rb

CPU_MACHINE = {"profile": "cpu", "gpus": [], "cpu": "Test CPU 9000"}


def _cfg(**extra):
    return parse_config({"name": "test", "hardware": "cpu", "backend": "transformers",
                         "input_len": rb.INPUT_LEN, "output_len": rb.OUTPUT_LEN, "concurrency": [1, 2, 4],
                         "repeats": 5, "stop_after_weak_doublings": 0,
                         "models": [{"name": m, "architecture": {"model_type": "llama", "hidden_size": 64,
                                                                 "num_attention_heads": 4, "num_hidden_layers": 1,
                                                                 "intermediate_size": 128, "vocab_size": 256}}
                                    for m in rb.MODELS], **extra}, "test.yaml")


def _probe(bandwidth_gb_s: float, warning: str | None = None) -> dict:
    return {"device": "cpu", "dtype": "float32", "bandwidth_gb_s": bandwidth_gb_s, "peak_tflops": 0.5,
            "bandwidth_repeats_gb_s": [bandwidth_gb_s], "tflops_repeats": [0.5], "buffer_bytes": 1 << 30,
            "matmul_n": 1024, "threads": 2, "warning": warning}


def make_part(cfg, run_id: str, model: str, host: str = "node1", machine: dict | None = None,
              hardware: dict | None = None, complete: bool = True, bandwidth_gb_s: float = 200.0,
              warning: str | None = None, failures: dict | None = None, started: str = "2026-11-29T00:00:00+00:00",
              finished: str = "2026-11-29T00:10:00+00:00", probe_after_gb_s: float | None = None) -> Path:
    """One model's part as ``batchmark sweep --model`` writes it (provenance fields of pipeline.sweep.gridwalk)."""
    part = parts.part_dir(run_id, model)
    part.mkdir(parents=True)
    runs.create_run(part, {
        "source": "measured", "config_name": cfg.name, "config_digest": cfg.digest(), "config_path": "test.yaml",
        "config": cfg.model_dump(mode="json"), "hardware": hardware or rb.CPU_PROFILE, "host": host,
        "platform": "test", "started_at": started, "git_commit": None,
        "versions": {"python": "3.11.0", "batchmark": "0.1.0"}, "gpu_driver": None, "command": "test",
        "part_of": run_id, "models": [model], "machine": machine or CPU_MACHINE})
    runs.update_run_json(part, probe=_probe(bandwidth_gb_s, warning), server={"engine": "transformers"},
                         stopped={}, failures=failures or {"points": 3, "with_failures": 0, "empty": 0})
    runs.write_model_card(part, rb.card(model))
    for c in cfg.concurrency:
        runs.write_point(part, rb.point_records(model, c, rb.NOISE_A))
    if probe_after_gb_s is not None:
        runs.update_run_json(part, probe_after=_probe(probe_after_gb_s))
    if complete:
        runs.complete_run(part, finished_at=finished)
    return part


def _files(run_dir: Path) -> set[str]:
    return {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()}


def test_merged_run_equals_a_run_measured_in_one_job(scratch_root):
    cfg = _cfg()
    for model in rb.MODELS:
        make_part(cfg, "R1", model)
    merged = parts.merge_parts(cfg, "R1", derive=stages.write_derived)  # as `batchmark merge` publishes it
    single = rb.make_run(paths.runs_dir(), "single", concurrency=(1, 2, 4))
    assert runs.is_complete(merged)
    # run.json, points.json, points/<model>/<slug>.json, models/<model>.json, and the derived files, written by their
    # stages before the run was published
    assert _files(merged) == _files(single) and {"summaries.json", "analysis.json"} <= _files(merged)
    assert json.loads((merged / "points.json").read_text()) == json.loads((single / "points.json").read_text())
    a, b = stages.load_run(merged), stages.load_run(single)
    assert [s.as_dict() for s in a.summaries] == [s.as_dict() for s in b.summaries]
    # the same probe (200 GB/s) and cards: the same analysis, model by model
    assert a.analysis["models"] == b.analysis["models"]


def test_parts_of_several_hosts_of_one_profile_merge_into_one_run_listing_the_hosts(scratch_root):
    cfg = _cfg()
    make_part(cfg, "R2", "dense-a", host="spark-2", bandwidth_gb_s=210.0, started="2026-11-29T01:00:00+00:00",
              finished="2026-11-29T01:10:00+00:00",
              failures={"points": 3, "with_failures": 1, "empty": 0})
    make_part(cfg, "R2", "moe-b", host="spark-1", bandwidth_gb_s=190.0, warning="noisy probe",
              started="2026-11-29T00:00:00+00:00", failures={"points": 3, "with_failures": 2, "empty": 1})
    meta = runs.read_run_json(parts.merge_parts(cfg, "R2", derive=stages.write_derived))
    assert meta["hosts"] == ["spark-1", "spark-2"] and meta["host"] == "spark-1, spark-2"
    assert [(p["model"], p["host"], p["probe"]["bandwidth_gb_s"]) for p in meta["parts"]] == [
        ("dense-a", "spark-2", 210.0), ("moe-b", "spark-1", 190.0)]
    assert meta["probe"]["bandwidth_gb_s"] == 210.0  # the first model's part, in config order
    assert meta["probe"]["warning"] == "moe-b: noisy probe"  # any part's warning flags the run
    assert meta["failures"] == {"points": 6, "with_failures": 3, "empty": 1}  # 3 + 3, 1 + 2, 0 + 1
    assert meta["started_at"] == "2026-11-29T00:00:00+00:00" and meta["finished_at"] == "2026-11-29T01:10:00+00:00"
    assert meta["config_digest"] == cfg.digest() and meta["status"] == "complete"
    # the Runs page lists the hosts and the models each measured
    from pipeline.pages.render import render_site

    render_site(scratch_root / "pages", runs=["R2"])
    pages = [p.read_text() for p in (scratch_root / "pages").rglob("*.md")]
    assert sum("| hosts | spark-1 (moe-b); spark-2 (dense-a) |" in text for text in pages) == 1  # the run's page


def test_a_part_whose_machine_changed_during_its_sweep_flags_the_merged_run(scratch_root):
    from pipeline.analysis.quality import run_quality

    cfg = _cfg()
    make_part(cfg, "R9", "dense-a", bandwidth_gb_s=200.0, probe_after_gb_s=198.0)  # -1 %: steady
    make_part(cfg, "R9", "moe-b", host="node2", bandwidth_gb_s=190.0, probe_after_gb_s=150.0)  # 150 / 190 - 1 = -21 %
    meta = runs.read_run_json(parts.merge_parts(cfg, "R9"))
    assert meta["probe_after"]["bandwidth_gb_s"] == 198.0  # the first part's pair, as the run-level probe
    assert meta["probe_after"]["warning"] == "moe-b: bandwidth after its sweep -21% from before it"
    assert [p["probe_after"]["bandwidth_gb_s"] for p in meta["parts"]] == [198.0, 150.0]
    verdict = run_quality(meta, [])
    assert verdict["verdict"] == "flagged" and any("-21%" in r for r in verdict["reasons"])


def test_parts_of_different_hardware_profiles_are_refused_in_one_line(scratch_root):
    cfg = _cfg()
    make_part(cfg, "R3", "dense-a", host="gpu-7", hardware=rb.H200_PROFILE,
              machine={"profile": "h200", "gpus": ["NVIDIA H200"], "cpu": "Xeon"})
    make_part(cfg, "R3", "moe-b", host="cpu-1")
    with pytest.raises(BatchmarkError) as exc:
        parts.merge_parts(cfg, "R3")
    msg = str(exc.value)
    assert "\n" not in msg and "run R3" in msg and "different hardware" in msg
    assert "dense-a on h200 (NVIDIA H200, host gpu-7)" in msg and "moe-b on cpu (Test CPU 9000, host cpu-1)" in msg
    assert not (paths.runs_dir() / "R3" / "run.json").exists()


def test_parts_of_one_profile_on_different_gpus_are_refused():
    metas = {"a": {"host": "n1", "machine": {"profile": "h100-sxm", "gpus": ["NVIDIA H100 80GB HBM3"]}},
             "b": {"host": "n2", "machine": {"profile": "h100-sxm", "gpus": ["NVIDIA H200"]}}}
    with pytest.raises(BatchmarkError, match="different hardware"):
        parts.check_same_hardware("R", metas)
    metas["b"]["machine"]["gpus"] = ["NVIDIA H100 80GB HBM3"]
    parts.check_same_hardware("R", metas)  # two hosts, one kind of machine: one run


def test_merge_names_every_part_not_measured_yet_and_writes_nothing(scratch_root):
    cfg = _cfg()
    make_part(cfg, "R4", "dense-a", complete=False)
    with pytest.raises(BatchmarkError) as exc:
        parts.merge_parts(cfg, "R4")
    assert "dense-a, moe-b" in str(exc.value) and "\n" not in str(exc.value)
    assert not (paths.runs_dir() / "R4").exists()


def test_merge_refuses_a_part_of_another_config(scratch_root):
    cfg = _cfg()
    make_part(cfg, "R5", "dense-a")
    make_part(_cfg(repeats=3), "R5", "moe-b")
    with pytest.raises(BatchmarkError, match="measured with another config"):
        parts.merge_parts(cfg, "R5")


def test_a_merged_run_is_immutable_and_merging_again_changes_nothing(scratch_root):
    cfg = _cfg()
    for model in rb.MODELS:
        make_part(cfg, "R6", model)
    run_dir = parts.merge_parts(cfg, "R6")
    before = {f: (run_dir / f).read_bytes() for f in _files(run_dir)}
    assert parts.merge_parts(cfg, "R6") == run_dir
    assert {f: (run_dir / f).read_bytes() for f in _files(run_dir)} == before
    with pytest.raises(BatchmarkError, match="immutable"):
        runs.write_point(run_dir, rb.point_records("dense-a", 8, rb.NOISE_A))


def test_pointer_finds_a_run_being_measured_in_parts(scratch_root):
    cfg = _cfg()
    make_part(cfg, "20261129T000000Z-node1", "dense-a", complete=False)
    parts.write_pointer(cfg.name, "20261129T000000Z-node1")
    assert parts.run_id_for_config(cfg.name, cfg.digest()) == "20261129T000000Z-node1"
    assert parts.run_id_for_config(cfg.name, "another") != "20261129T000000Z-node1"


# -- resources of a measuring job -------------------------------------------------------------

def test_resources_from_the_cluster_section():
    cfg = _cfg(cluster={"gpus": 1, "gpu_model": "h100", "mem_mb": 64000, "runtime_min": 90,
                        "partition": "gpu", "constraint": "h100&nvlink", "cpus_per_task": 16})
    res = part_resources(cfg, load_profile("h200"))
    assert res == {"measure": 1, "mem_mb": 64000, "runtime": 90, "gpu": 1, "gpu_model": "h100",
                   "slurm_partition": "gpu", "constraint": "h100&nvlink", "cpus_per_task": 16,
                   "slurm_extra": "--exclusive"}
    assert part_threads(cfg, 2) == 16


def test_default_resources_from_the_hardware_profile():
    cfg = _cfg(cluster={"exclusive": False})
    # DGX Spark: unified memory 128 GB, runtime reserve 8 GB (data/hardware/dgx-spark.yaml): (128 - 8) x 1000 MB
    assert part_resources(cfg, load_profile("dgx-spark")) == {"measure": 1, "mem_mb": 120_000, "runtime": 240}
    # an H200's weights live in its own memory: the host gets the default
    assert part_resources(cfg, load_profile("h200"))["mem_mb"] == DEFAULT_MEM_MB
    assert part_threads(cfg, 8) == 8 and part_threads(cfg, None) == 1


@pytest.mark.parametrize("cluster, field", [
    ({"partition": "gpu; rm -rf /"}, "cluster.partition"),
    ({"gpus": -1}, "cluster.gpus"),
    ({"runtime_min": 0}, "cluster.runtime_min"),
    ({"retries": "2"}, "cluster.retries"),
    ({"nodes": 2}, "cluster.nodes"),
    ({"mem_mb": float("nan")}, "cluster.mem_mb"),
])
def test_a_bad_cluster_section_is_one_line_naming_the_field(cluster, field):
    with pytest.raises(BatchmarkError) as exc:
        _cfg(cluster=cluster)
    assert f"test.yaml: {field}:" in str(exc.value) and "\n" not in str(exc.value)


def test_the_cluster_section_leaves_the_config_digest_alone():
    # where jobs run is not what they measure: a run started before the section existed keeps its digest
    assert _cfg().digest() == _cfg(cluster={"partition": "gpu", "gpus": 2}).digest()
    assert _cfg().digest() != _cfg(repeats=3).digest()


# -- the command line --------------------------------------------------------------------------

def _cli(capsys, *argv: str) -> tuple[int, str]:
    from pipeline.cli import main

    code = main(list(argv))
    return code, capsys.readouterr().err


def test_sweep_of_a_model_not_in_the_config_is_one_line(scratch_root, capsys):
    code, err = _cli(capsys, "sweep", "--config", str(scratch_root / "config" / "tiny.yaml"), "--run-id", "R7",
                     "--model", "tiny-mistral")
    assert code == 2 and err.count("\n") == 1
    assert "--model 'tiny-mistral': not a model of config tiny-test (its models: tiny-llama, tiny-moe)" in err
    assert not (paths.runs_dir() / ".parts" / "R7").exists()


def test_sweep_of_one_model_needs_the_run_it_belongs_to(scratch_root, capsys):
    code, err = _cli(capsys, "sweep", "--config", str(scratch_root / "config" / "tiny.yaml"), "--model", "tiny-moe")
    assert code == 2 and "--model: give --run-id RUN" in err and err.count("\n") == 1


def test_merge_before_the_parts_are_measured_is_one_line(scratch_root, capsys):
    code, err = _cli(capsys, "merge", "--config", str(scratch_root / "config" / "tiny.yaml"), "--run-id", "R8")
    assert code == 2 and err.count("\n") == 1
    assert "run R8: part(s) not measured to the end yet: tiny-llama, tiny-moe" in err
    code, err = _cli(capsys, "merge", "--config", str(scratch_root / "config" / "tiny.yaml"), "--run-id", "../x")
    assert code == 2 and "not a valid run id" in err
