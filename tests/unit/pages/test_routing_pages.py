"""An import of llama-batched-bench's gpt-oss-20b rows on the run and model pages: the coverage caveat, the MBU at
identical routing, and a clean line that claims only the checks an import allows.

Regression (fault kind: impossible figure shown as a result): the published file (ggml-org/llama.cpp
``benches/dgx-spark.md``, build 6918, the gpt-oss-20b table's pp 512 rows B = 1, 8, 16, quoted below) showed MBU 1.02
at B = 8 and 16 with no mark, and its run page said "clean: probe steady, repeats agree within 1.5×, machine not busy
while points ran" of a file with no probe, one repeat and no machine data.  The card the importer builds from the
file (11.27 GiB, 20.91 B params: 12,101,070,356 B, 10,155,870,720 of them experts at MXFP4, so 1,945,199,636 other)
reads at B = 8, identical routing: 1,945,199,636 + 10,155,870,720 / 8 + 8 × 16,121,856 (KV at context 528) =
3,343,658,324 B in 1.008 / 32 s: 106.15 GB/s of 273, MBU 0.39; B = 16: 3,472,633,172 B in 1.277 / 32 s, MBU 0.32.
"""

from __future__ import annotations

from pipeline.importers import import_run
from pipeline.pages.indexviews import run_page_path
from pipeline.pages.render import render_site

TABLE = """# llama-batched-bench on NVIDIA DGX Spark (GB10)

## ggml-org/gpt-oss-20b-GGUF

gpt-oss 20B MXFP4 MoE, 11.27 GiB, 20.91 B params, backend CUDA.

main: n_kv_max = 270336, n_batch = 2048, n_ubatch = 2048, flash_attn = 1, is_pp_shared = 0, n_gpu_layers = -1, n_threads = 20, n_threads_batch = 20

|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|
|   512 |     32 |    1 |    544 |    0.390 |  1311.72 |    0.395 |    81.11 |    0.785 |   693.12 |
|   512 |     32 |    8 |   4352 |    1.025 |  3994.63 |    1.008 |   254.09 |    2.033 |  2140.79 |
|   512 |     32 |   16 |   8704 |    2.054 |  3988.71 |    1.277 |   400.94 |    3.331 |  2613.19 |
"""
RUN = "20251102T000000Z-dgx-spark-import"


def test_import_pages_show_identical_routing_and_the_checks_an_import_allows(scratch_root):
    src = scratch_root / "dgx-spark.md"
    src.write_text(TABLE, encoding="utf-8")
    runs_dir = scratch_root / "data" / "runs"
    import_run("llama-batched-bench", [src], "dgx-spark", run_id=RUN, runs_dir=runs_dir)
    pages = scratch_root / "data" / "pages"
    render_site(pages, runs_dir=runs_dir)
    run_page = (pages / run_page_path(RUN)).read_text()
    assert ("| run quality | clean: numbers plausible; not checked (not possible for an import): no probe, one repeat, "
            "no machine data |") in run_page
    assert "probe steady" not in run_page
    assert "expert coverage not measured (one prompt repeated: MBU, roofline at k/E)" in run_page
    model_page = next(p for p in (pages / "models").glob("*.md") if "gpt-oss-20b" in p.read_text())
    text = model_page.read_text()
    assert '!!! note "Expert coverage not measured: MBU and roofline counted at identical routing (k/E)"' in text
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ") and "tok/s" not in line}
    assert "| 0.39 |" in rows["8"] and "| 0.32 |" in rows["16"] and "1.02" not in rows["8"]
