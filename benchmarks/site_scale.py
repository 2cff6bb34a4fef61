"""Benchmark: rebuilding the site for a lab's worth of runs.

    python benchmarks/site_scale.py [--sizes 5x1 5x10 50x10] [--profile FILE] [--keep DIR]

For each size ``MxR`` (M models, R runs: M × R model-runs) it generates a llama-batched-bench
Markdown file with M model sections (B = 1 … 64, one prompt / output length; each name resolves to
a model card, so the explainers draw every model too), imports it R times
into a scratch project root (``BATCHMARK_ROOT``, as ``tests/conftest.py``'s ``make_scratch_root``
builds it; never into data/runs/), each import's timings scaled by its own few per cent so that
the Changes page has real differences to show, and prints the wall time of ``batchmark pages``
(``render_site``, in this process) and of ``mkdocs build --strict`` (a subprocess), the number of
pages and the largest page (MB of HTML).  ``--profile FILE`` writes a cProfile of the largest
size's ``batchmark pages`` (read it with ``python -m pstats FILE``).  Figures, not assertions: the
machine is shared.  Goal: 50 models × 10 runs rebuild in under 60 s, every page under 2 MB.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BATCHES = [1, 2, 4, 8, 16, 32, 64]
PP, TG = 512, 128
HEADER = ("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |\n"
          "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|")


def row(b: int, step_s: float, scale: float) -> str:
    """One batched-bench table row at batch ``b`` with decode step ``step_s`` × ``scale``, consistent figures."""
    t_pp = round(PP * b / 3500.0 + 0.01, 3)
    t_tg = round(TG * step_s * scale, 3)
    s_pp, s_tg = PP * b / t_pp, b * TG / t_tg
    t = t_pp + t_tg
    return (f"| {PP:5d} | {TG:6d} | {b:4d} | {b * (PP + TG):6d} | {t_pp:8.3f} | {s_pp:8.2f} | {t_tg:8.3f} | "
            f"{s_tg:8.2f} | {t:8.3f} | {b * (PP + TG) / t:8.2f} |")


#: Model sections cycle over these (a model card matches each: dense and MoE, BF16 cards read as Q8_0 / MXFP4).
VARIANTS = ["Llama-3.1-8B-Instruct-Q8_0-GGUF", "Qwen2.5-7B-Instruct-Q8_0-GGUF", "gemma-3-4b-it-Q8_0-GGUF",
            "gpt-oss-20b-GGUF", "Qwen3-30B-A3B-Q8_0-GGUF"]
BANDWIDTH_GB_S = 273.0  # dgx-spark's spec sheet


def model_names(models: int) -> list[str]:
    """``lab<i>/<variant>``: distinct names (kept as given on import) that each resolve to a model card."""
    return [f"lab{i:03d}/{VARIANTS[i % len(VARIANTS)]}" for i in range(models)]


def markdown(models: int, scale: float) -> str:
    """A batched-bench Markdown output with ``models`` model sections.

    Each model reads its weights at 60 % of the DGX Spark's bandwidth (step(B) = weight bytes read per
    step at B, from its card, an MoE's growing with expert coverage, ÷ (0.6 × 273 GB/s)), plus 2, 4
    or 6 % of the B = 1 step per added sequence, times ``scale`` (the run's own few per cent).
    """
    from pipeline.importers.cardmatch import match_card
    from pipeline.cards.stepcost import weight_bytes_per_step

    out = ["# llama-batched-bench (generated)", "", "build: 6918 (2f68ce7cf)", ""]
    for i, name in enumerate(model_names(models)):
        card = match_card(name, None).card
        step1 = weight_bytes_per_step(card, 1) / (0.6 * BANDWIDTH_GB_S * 1e9)
        steps = {b: weight_bytes_per_step(card, b) / (0.6 * BANDWIDTH_GB_S * 1e9) + 0.02 * (1 + i % 3) * step1 * b
                 for b in BATCHES}
        out += [f"## {name}", "", f"{card.name} ({card.kind}), backend CUDA.", "",
                "main: n_kv_max = 1000000000, n_batch = 2048, n_ubatch = 2048, flash_attn = 1, is_pp_shared = 0, "
                "n_gpu_layers = -1, n_threads = 20, n_threads_batch = 20", "", HEADER]
        out += [row(b, steps[b], scale) for b in BATCHES]
        out.append("")
    return "\n".join(out) + "\n"


def page_sizes(site: Path) -> tuple[int, float, str]:
    """(HTML pages, largest page in MB, its path relative to ``site``)."""
    pages = list(site.rglob("*.html"))
    big = max(pages, key=lambda p: p.stat().st_size)
    return len(pages), big.stat().st_size / 1e6, str(big.relative_to(site))


def measure(tmp: Path, models: int, runs_n: int, profile: str | None) -> str:
    """Import ``runs_n`` runs of ``models`` models into a fresh scratch root, rebuild the site, return the result line."""
    from tests.conftest import make_scratch_root

    root = make_scratch_root(tmp / f"m{models}x{runs_n}")
    os.environ["BATCHMARK_ROOT"] = str(root)
    from pipeline.importers import import_run
    from pipeline.pages.render import render_site
    runs_dir = root / "data" / "runs"
    t0 = time.perf_counter()
    for r in range(runs_n):
        src = tmp / f"bench-{models}-{r}.md"
        src.write_text(markdown(models, 1.0 + 0.03 * ((r * 7) % 5 - 2)))
        import_run("llama-batched-bench", [src], "dgx-spark", run_id=f"202601{1 + r // 24:02d}T{r % 24:02d}0000Z-lab",
                   runs_dir=runs_dir)
    t_import = time.perf_counter() - t0
    prof = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    render_site(root / "data" / "pages", runs_dir=runs_dir, templates_dir=root / "templates")
    if prof:
        prof.disable()
        prof.dump_stats(profile)
    t_pages = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(root / "mkdocs.yml"),
                          "-d", str(root / "site")], capture_output=True, text=True,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    t_mkdocs = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"mkdocs build failed:\n{res.stderr[-3000:]}")
    n_pages, big_mb, big = page_sizes(root / "site")
    return (f"{models:6d} {runs_n:5d} {models * runs_n:10d} {t_import:9.1f} {t_pages:8.1f} {t_mkdocs:9.1f} "
            f"{t_pages + t_mkdocs:8.1f} {n_pages:6d} {big_mb:8.2f}  {big}")


def main() -> None:
    """Print import, pages and mkdocs wall times, page count and the largest page per size."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["5x1", "5x10", "50x10"], help="MODELSxRUNS, e.g. 50x10")
    ap.add_argument("--profile", help="write a cProfile of the largest size's `batchmark pages` here")
    ap.add_argument("--keep", help="build under this folder and keep it (default: a temporary folder, removed)")
    args = ap.parse_args()
    sizes = [tuple(int(x) for x in s.lower().split("x")) for s in args.sizes]
    print(f"{'models':>6} {'runs':>5} {'model-runs':>10} {'import s':>9} {'pages s':>8} {'mkdocs s':>9} "
          f"{'total s':>8} {'pages':>6} {'max MB':>8}  largest page", flush=True)
    largest = max(sizes, key=lambda s: s[0] * s[1])
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        for m, r in sizes:
            print(measure(base, m, r, args.profile if (m, r) == largest else None), flush=True)


if __name__ == "__main__":
    main()
