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
    est_ppt_s: float | None = None  # llama-benchy's est_ppt: ttfr less its one-token request's latency (s)
    est_ppt_sd_s: float | None = None  # its standard deviation over the runs (the file's ± figure, s)
    per_request_tok_s: float | None = None  # llama-benchy's t/s (req): the requests' mean decode rate (tokens/s)
    fit: bool = False  # a row of the new set that the terms are fitted to (:func:`_djangodevreng`), else only checked


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
    holdout: bool = False  # added after the engine terms were fitted: not fitted to, reported apart (out of sample)
    set_aside: list[tuple[Point, str]] = field(default_factory=list)  # one-off points (:func:`set_aside_one_offs`)
    ubatch: int | None = None  # tokens of one prefill pass where the source ran another than its engine's (-ub)
    new: bool = False  # the set handed for fitting after the terms were fitted (djangodevreng): reported apart
    per_request: bool = False  # a wave's figure is c × llama-benchy's t/s (req), not its t/s (total) (wave_metric)

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


#: djangodevreng's served formats (vLLM 0.26, each checkpoint as it is, FP8 KV): gpt-oss-20b MXFP4 experts with bf16
#: attention and head; Granite-4.1-8B bf16 throughout.
DJANGO_SERVED = {"attention": "bf16", "head": "bf16", "experts": "mxfp4", "kv_cache": "fp8"}
DJANGO_DENSE = {"attention": "bf16", "head": "bf16", "mlp": "bf16", "kv_cache": "fp8"}
DJANGO_URL = "djangodevreng/dgx-spark-benchmarks (../shared/reference)"
#: The file's served names: card, served format.  Ministral-3-8B is left out: no config of its text model at hand
#: (and its folder's "bf16" is most likely FP8: the file's own note), so no card.
DJANGO_MODELS = {"gpt-oss-20b-mxfp4": ("gpt-oss-20b", DJANGO_SERVED), "granite-4-1-8b-bf16": ("granite-4.1-8b", DJANGO_DENSE)}
#: The rows the vLLM terms are fitted to: every single stream (c = 1: the request latency, the prefill rates, the
#: bandwidth), and the dense model's first test (pp1024 tg1024, c 5 and 10: its matmuls' compute fraction).  The rest
#: (gpt-oss-20b's waves at c 5-20, Granite's pp256 tg4096 at c 5 and 10) are checked, never fitted.
DJANGO_FIT_BATCHED = {("granite-4.1-8b", 1024, 1024)}
#: Models whose waves are read as c × ``t/s (req)`` (``Curve.per_request``), not ``t/s (total)``: Granite-4.1-8B's
#: outputs stop at EOS before ``--tg`` and apart (pp256 tg4096 at c 5: ``peak t/s`` 70.0, all five decoding at about
#: their single stream's 13-14 tok/s, while ``t/s (total)`` is 30.3 over the longest one's window), so its total
#: counts tokens the file does not state; its per-request rate is the step time the requests saw.
DJANGO_PER_REQUEST = {"granite-4.1-8b"}


def _djangodevreng(path: Path) -> list[Curve]:
    """The djangodevreng file (vLLM 0.26, llama-benchy 0.4.0 waves): a curve over c per (model, pp, tg) of tests 01,
    02, 03, 05, 06 (part 1, gpt-oss-20b) and 01, 03, 05 (part 2, Granite-4.1-8B), each point its tg row's ``t/s
    (total)`` (its ``t/s (req)`` kept apart: the requests' mean decode rate), its pp row's ``ttfr`` (TTFT, what vllm bench serve calls it) and ``est_ppt``; ``fit`` where
    :data:`DJANGO_FIT_BATCHED` or c = 1 says so.  Test 04 (depth semantics unclear, low trust), the open loops and
    Ministral-3-8B (:data:`DJANGO_MODELS`) are left out."""
    curves: dict[tuple[str, int, int], Curve] = {}
    pp: dict[tuple[str, int], tuple[int, float, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 9 or cells[0] not in DJANGO_MODELS or "@" in cells[1]:
            continue
        m = re.fullmatch(r"(pp|tg)(\d+) \(c(\d+)\)", cells[1])
        if not m:
            continue
        kind, n, c = m.group(1), int(m.group(2)), int(m.group(3))
        model, served = DJANGO_MODELS[cells[0]]
        mean = lambda cell: float(cell.split("±")[0])  # noqa: E731
        if kind == "pp":
            pp[(model, c)] = (n, mean(cells[6]) / 1000, mean(cells[7]) / 1000, float(cells[7].split("±")[1]) / 1000)
            continue
        prompt, ttfr, est, sd = pp[(model, c)]
        key = (model, prompt, n)
        curve = curves.setdefault(key, Curve(f"djangodevreng vllm {model} pp{prompt} tg{n}", DJANGO_URL, "vllm",
                                             "wave", model, served, None, prompt, n, new=True,
                                             per_request=model in DJANGO_PER_REQUEST))
        total = c * mean(cells[3]) if curve.per_request else mean(cells[2])
        curve.points.append(Point(c, 0, decode_tok_s=total, per_request_tok_s=mean(cells[3]), ttft_s=ttfr, est_ppt_s=est, est_ppt_sd_s=sd,
                                  fit=c == 1 or key in DJANGO_FIT_BATCHED))
    return list(curves.values())


def _published(path: Path) -> list[Curve]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = []
    for s in doc["sources"]:
        pts = [Point(**p) for p in s["points"]]
        by_depth = len({p.depth for p in pts}) > 1
        out.append(Curve(s["id"], s["url"], s["engine"], s["harness"], s["model"], s.get("served"), s.get("file_gib"),
                         int(s["input_len"]), int(s["output_len"]), pts, by_depth, bool(s.get("holdout", False)),
                         ubatch=int(s["ubatch"]) if s.get("ubatch") else None,
                         per_request=s.get("wave_metric") == "per_request"))
    return out


def decode_figure(c: Curve, got: dict[str, float], concurrency: int) -> dict[str, float]:
    """``got`` (:func:`pipeline.simulation.harness.predict`) with its decode figure as the curve's source gives it: a
    wave's ``t/s (total)`` (the harness's own), or c × its ``t/s (req)`` where the source states ``wave_metric:
    per_request``."""
    if c.harness == "wave" and c.per_request:
        return {**got, "decode_tok_s": got["per_request_tok_s"] * concurrency}
    return got


def set_aside_one_offs(c: Curve) -> Curve:
    """Move out of ``c.points`` each static-batch point whose prefill took longer than a larger batch's of the same
    prompt length in the same run (more tokens in less time: no steady-state cost model can give that), with why.

    Where it happens: llama-batched-bench times each row once, after a warm-up of one 16-token batch
    (ggml-org/llama.cpp tools/batched-bench/batched-bench.cpp, "warm up"), so its first row (PP 512, B 1) is the
    first prompt of more than 16 tokens and carries the one-off costs of that path; in benches/dgx-spark.md (build
    6918) every MoE model's first row is slower than its B = 2 row (gpt-oss-20b 0.390 s against 0.273 s for twice the
    tokens, gpt-oss-120b 0.605 against 0.585, Qwen3-Coder-30B-A3B 0.401 against 0.355), the dense Qwen2.5-Coder-7B's
    is not (0.215 against 0.424).  `plan` predicts the steady state; such a point is reported apart, not dropped."""
    if c.harness != "static" or c.by_depth:
        return c
    kept = []
    for p in c.points:
        later = [q for q in c.points if q.concurrency > p.concurrency and q.depth == p.depth and q.ttft_s]
        faster = min(later, key=lambda q: q.ttft_s) if later else None
        if p.ttft_s and faster is not None and faster.ttft_s < p.ttft_s:
            c.set_aside.append((p, f"TTFT {p.ttft_s:.3f} s above the {faster.ttft_s:.3f} s of B = {faster.concurrency} "
                                   "(more tokens): a one-off cost of the run's first timed row"))
        else:
            kept.append(p)
    c.points = kept
    return c


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
    dj = REFERENCE / "spark-published-djangodevreng.md"
    if dj.is_file():
        curves = curves + _djangodevreng(dj)
    return [set_aside_one_offs(c) for c in curves], note
