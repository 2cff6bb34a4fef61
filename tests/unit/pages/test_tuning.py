"""A model page's tuning section (pipeline.pages.tuning): the arithmetic it explains with, and escaping."""

from __future__ import annotations

from pipeline.pages.tuning import explanations, frontier_chart


def test_explanations_work_the_arithmetic():
    # KV 16,384 B per token (tests/runbuilder.card): fp8 stores 1 byte a value for bf16's 2, so 8,192 B;
    # decode context in + out / 2: 64 + 8 = 72 tokens × 16,384 B = 1.18 MB, 256 + 8 = 264 × 16,384 B = 4.33 MB, 3.7×
    lines = explanations({"fp8-kv": {"kv_cache_dtype": "fp8"}, "cap": {"max_num_seqs": 64}},
                         {"kv_bytes_per_token": 16384}, [(64, 16), (256, 16)])
    assert lines[0].startswith("fp8-kv: kv_cache_dtype fp8 stores each KV value in 1 byte instead of a 16-bit cache's "
                               "2, so a token's KV takes 8,192 bytes instead of 16,384")
    assert lines[1].startswith("cap: max_num_seqs 64 caps the batch: past c = 64")
    assert "72 tokens × 16,384 B = 1.18 MB at 64 in against 264 × 16,384 B = 4.33 MB at 256 in (3.7×)" in lines[2]
    assert explanations({}, None, [(64, 16)]) == []


def test_frontier_chart_leaves_excluded_points_out_and_starts_at_zero():
    f = {"model": "m", "input_len": 64, "output_len": 16,
         "points": [{"variant": "a", "concurrency": 1, "per_user_tok_s": 50.0, "output_tok_s": 50.0, "excluded_reason": None},
                    {"variant": "a", "concurrency": 8, "per_user_tok_s": 99.0, "output_tok_s": 999.0,
                     "excluded_reason": "6 of 10 requests failed"}],
         "frontier": [{"variant": "a", "concurrency": 1, "per_user_tok_s": 50.0, "output_tok_s": 50.0}]}
    spec = frontier_chart(f)
    rows = [r for layer in spec["layer"] for r in (layer.get("data") or {}).get("values", [])]
    assert {r["concurrency"] for r in rows} == {1}
    assert all(layer["encoding"]["y"]["scale"] == {"zero": True} for layer in spec["layer"])
    assert [layer["data"]["values"] for layer in spec["layer"]][-1] == []  # no SLO: no ring


def test_hostile_variant_names_are_escaped_on_the_page(tmp_path):
    """A variant name is the config's text: Markdown and HTML signs in it are shown, never obeyed (pages/escape.py)."""
    from pipeline.pages.render import render_site
    from tests.runbuilder import make_variant_run

    make_variant_run(tmp_path / "runs", "20261129T000000Z-testhost", concurrency=(1, 4),
                     variants={"base": 1.0, "<b>x</b>|y": 0.7})
    text = next(p for p in render_site(tmp_path / "pages", runs_dir=tmp_path / "runs")
                if p.name == "dense-a.md").read_text()
    section = text[text.index("### Tuning"):]
    assert "<b>" not in section and "**&#60;b>x&#60;/b>&#124;y**: +43 % peak output throughput" in section


def test_kv_rows_measured_beside_capacity_prediction():
    """By hand (tests/runbuilder: card weight 1.2 GB, 16,384 KV bytes per token; the test H200 141 GB × 0.9 =
    126.9 GB usable, below 141 − 0 reserve): free 125.7 GB; 64 + 16 = 80 tokens × 16,384 B = 1,310,720 B a sequence,
    125.7e9 / 1,310,720 = 95,901.49 → 95,901 fit; fp8 KV at 655,360 B: 191,802.98 → 191,802.  Measured: the first point whose
    regime says it queued or filled its KV cache (c = 8 kv_cache_full; c = 4 was batching)."""
    from types import SimpleNamespace

    from pipeline.pages.tuning import kv_rows
    from tests.runbuilder import H200_PROFILE, card

    aps = [{"concurrency": 4, "regime": "batching"}, {"concurrency": 8, "regime": "kv_cache_full"},
           {"concurrency": 16, "regime": "queueing"}]
    ws = [SimpleNamespace(model={"variant": v, "input_len": 64, "output_len": 16, "knee_concurrency": 4},
                          analysis_points=aps if v == "default" else aps[:1]) for v in ("default", "fp8-kv")]
    rows = kv_rows(ws, card("dense-a"), H200_PROFILE, {"fp8-kv": {"kv_cache_dtype": "fp8"}})
    assert [(r["measured_concurrency"], r["measured_regime"], r["predicted_sequences"]) for r in rows] == [
        (8, "kv_cache_full", 95901), (None, None, 191802)]


def test_the_run_page_names_the_variant_in_every_row_of_its_model_table(tmp_path):
    """The run page's model table gave one row per model × variant × shape but named no variant, so two rows of the
    same model and shape looked alike (fault kind: rows of a table indistinguishable by what they show).  With more
    than one variant each row says its own, the baseline's too (`default`)."""
    from pipeline.pages.render import render_site
    from tests.runbuilder import make_variant_run

    make_variant_run(tmp_path / "runs", "20261129T000000Z-testhost", concurrency=(1, 4),
                     variants={"default": 1.0, "fp8-kv": 0.7}, shapes={64: 1.0})
    pages = render_site(tmp_path / "pages", runs_dir=tmp_path / "runs")
    text = next(p for p in pages if p.parent.name == "runs" and "testhost" in p.name).read_text()
    table = text[text.index("## Models"):].split("\n\n")[2].splitlines()
    assert table[0].startswith("| model | variant | kind |")
    rows = [r.split(" | ") for r in table[2:]]
    assert len(rows) == 2 and sorted(r[1] for r in rows) == ["default", "fp8-kv"]


def test_the_runs_table_counts_models_not_workloads(tmp_path):
    """Fault kind: a count of one thing labelled as another (the runs table's "models" column counted model ×
    variant × shape: a tuning run of one model under two variants at two prompt lengths said 4 models).  Worked:
    dense-a alone is 1 model; the run page still says its 4 workloads."""
    from pipeline.pages.render import render_site
    from tests.runbuilder import make_variant_run

    run_id = "20261129T000000Z-testhost"
    make_variant_run(tmp_path / "runs", run_id, concurrency=(1, 4), variants={"base": 1.0, "fp8-kv": 0.7},
                     shapes={64: 1.0, 256: 1.5})
    pages = {p.name: p for p in render_site(tmp_path / "pages", runs_dir=tmp_path / "runs")}
    run_page = next(p for p in pages.values() if p.parent.name == "runs" and p.stem == run_id.lower())
    header, _, row = (line for line in pages["runs.md"].read_text().splitlines()
                      if line.startswith("| run |") or line.startswith("| ---") or run_id in line)
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")]))
    assert cells["models"] == "1"
    assert "4 workload(s) of 1 model(s)" in run_page.read_text()
