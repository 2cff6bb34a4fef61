"""Published DGX Spark curves for benchmarks/spark_truth.py: the ../shared/reference llama.cpp files and
data/published/dgx-spark.yaml, each as a :class:`Curve` (source, engine, harness, card as served, points)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BATCHMARK_SHARED", ROOT / ".." / "shared"))
REFERENCE = SHARED / "reference"
PUBLISHED = ROOT / "data" / "published" / "dgx-spark.yaml"

#: The reference files' models: card name, served format (GGUF: MXFP4 experts, Q8_0 elsewhere; Q8_0 dense).
REF_MODELS = {
    "ggml-org/gpt-oss-20b-GGUF": ("gpt-oss-20b", {"attention": "q8_0", "head": "q8_0", "experts": "mxfp4"}, 11.27),
    "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF": ("qwen2.5-7b", {"attention": "q8_0", "head": "q8_0"}, 7.54),
}


@dataclass
class Point:
    """One published figure set: ``concurrency``, ``depth`` (context before, tokens), and what was measured."""

    concurrency: int
    depth: int = 0
    decode_tok_s: float | None = None
    prefill_tok_s: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None


@dataclass
class Curve:
    """One published curve: over concurrency (``by_depth`` False) or over context depth at one stream."""

    source: str
    url: str
    engine: str
    harness: str  # static | wave | closed
    model: str
    served: dict | None
    file_gib: float | None
    input_len: int
    output_len: int
    points: list[Point] = field(default_factory=list)
    by_depth: bool = False

    @property
    def identical_routing(self) -> bool:
        """llama-bench / llama-batched-bench decode the same token ids in every sequence (coverage k/E)."""
        return self.harness == "static"


def _batched_bench(path: Path) -> list[Curve]:
    curves: dict[tuple[str, int], Curve] = {}
    model = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            model = line[3:].strip()
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if model and len(cells) == 10 and re.fullmatch(r"\d+", cells[0]):
            pp, tg, b = int(cells[0]), int(cells[1]), int(cells[2])
            name, served, gib = REF_MODELS[model]
            key = (model, pp)
            if key not in curves:
                curves[key] = Curve(f"llama.cpp batched-bench {name} pp{pp}", "ggml-org/llama.cpp benches/dgx-spark.md "
                                    "(../shared/reference)", "llama.cpp", "static", name, served, gib, pp, tg)
            t_pp, t_tg = float(cells[4]), float(cells[6])
            curves[key].points.append(Point(b, 0, decode_tok_s=float(cells[7]), prefill_tok_s=float(cells[5]),
                                             ttft_s=t_pp, tpot_s=t_tg / tg))
    return list(curves.values())


def _llama_bench(path: Path) -> list[Curve]:
    out: list[Curve] = []
    model = None
    rows: dict[int, Point] = {}

    def flush():
        if model and rows:
            name, served, gib = REF_MODELS[model]
            out.append(Curve(f"llama.cpp llama-bench {name} depth", "ggml-org/llama.cpp benches/dgx-spark.md "
                             "(../shared/reference)", "llama.cpp", "static", name, served, gib, 2048, 32,
                             [rows[d] for d in sorted(rows)], by_depth=True))

    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            flush()
            model, rows = line[3:].strip(), {}
        m = re.match(r"\|\s*(pp2048|tg32)(?:\s*@\s*d(\d+))?\s*\|\s*([\d.]+)", line)
        if m and model:
            d = int(m.group(2) or 0)
            p = rows.setdefault(d, Point(1, d))
            if m.group(1) == "tg32":
                p.decode_tok_s = float(m.group(3))
            else:
                p.prefill_tok_s = float(m.group(3))
    flush()
    return out


def _published(path: Path) -> list[Curve]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = []
    for s in doc["sources"]:
        pts = [Point(**p) for p in s["points"]]
        by_depth = len({p.depth for p in pts}) > 1
        out.append(Curve(s["id"], s["url"], s["engine"], s["harness"], s["model"], s.get("served"), s.get("file_gib"),
                         int(s["input_len"]), int(s["output_len"]), pts, by_depth))
    return out


def load_curves() -> tuple[list[Curve], str | None]:
    """Every curve, and a note when ../shared/reference is absent (its curves then left out)."""
    curves = _published(PUBLISHED)
    note = None
    bb, lb = REFERENCE / "llamacpp-dgx-spark-batched-bench.md", REFERENCE / "llamacpp-dgx-spark-llama-bench.md"
    if bb.is_file():
        curves = _batched_bench(bb) + curves
    else:
        note = f"reference absent: {REFERENCE} (set BATCHMARK_SHARED to the shared folder)"
    if lb.is_file():
        curves = _llama_bench(lb) + curves
    return curves, note
