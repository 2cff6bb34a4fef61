"""The compute roof is timed over operations of tens of milliseconds, and the roof is the best repeat.

Regression (fault kind: a probe operation shorter than a scheduler slice reads the machine's load, not its roof):
the probe timed one bfloat16 product at n = 512 (2·512³ = 268.4 MFLOP, about 0.3 ms at the roof this 2-core
machine reaches idle), three repeats, their median; with another process on one core each timed product waited
out a scheduler slice for its second thread, and the run drew every point against a roof 4–50× too low.  Here a
fake clock charges each product 0.32 ms (268.4e6 / 0.32 ms = 0.8389 TFLOP/s, the roof) and the first product after
each wait (a sync: the threads went idle) one 4 ms slice; the old probe read 268.4e6 / 4.32 ms = 0.0621 TFLOP/s.
"""

from __future__ import annotations

import types

import pytest

from pipeline.machine import roofprobe

PRODUCT_S, SLICE_S = 0.00032, 0.004
FLOPS_512 = 2 * 512**3  # 268,435,456
SHAPE_512 = ("prefill", 512, 512, 512)


class _Clock:
    """A fake ``time`` and device: products advance the clock; after each sync, whose number is in ``stalls``
    (0: the warm-up's, before the calibration; 1 + r: before repeat r), the next product first waits a slice."""

    def __init__(self, stalls: set[int]):
        self.now, self.syncs, self.stalls, self.armed = 0.0, 0, stalls, False

    def perf_counter(self) -> float:
        return self.now

    def sync(self, device: str) -> None:
        self.armed = self.syncs in self.stalls
        self.syncs += 1

    def product(self) -> None:
        self.now += PRODUCT_S + (SLICE_S if self.armed else 0.0)
        self.armed = False


class _Mat:
    def __init__(self, clock: _Clock):
        self.clock = clock

    def to(self, dtype):
        return self

    def __matmul__(self, other):
        self.clock.product()
        return self


def _timed(monkeypatch, stalls: set[int], shape=SHAPE_512, repeats: int = 3) -> dict:
    clock = _Clock(stalls)
    monkeypatch.setattr(roofprobe, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    torch = types.SimpleNamespace(randn=lambda *a, **k: _Mat(clock))
    return roofprobe.time_gemm(torch, "cpu", "torch.bfloat16", shape, repeats, clock.sync)


def test_best_repeat_is_the_roof():
    """Reads of 100 products of 268.4 MFLOP in 30, 34 and 60 ms: 0.8948, 0.7895, 0.4474 TFLOP/s; the roof is the
    maximum (noise only slows a probe), not the median 0.7895."""
    roof, reads = roofprobe.best_rate(FLOPS_512, 100, [0.030, 0.034, 0.060])
    assert reads == pytest.approx([0.89478, 0.78951, 0.44739], rel=1e-4)
    assert roof == pytest.approx(0.89478, rel=1e-4)


def test_a_slice_per_operation_cannot_dominate_the_roof(monkeypatch):
    """Every wait stalled.  Calibration: 4.32 ms + 0.32 ms × k ≥ 30 ms at k = 81, so 82 products a repeat; each
    repeat 82 × 0.32 + 4 = 30.24 ms: 82 × 268.4e6 / 30.24 ms = 0.7279 TFLOP/s, 87 % of the roof (old: 7.4 %)."""
    got = _timed(monkeypatch, stalls={0, 1, 2, 3})
    assert got["loops"] == 82 and got["dtype"] == "bfloat16"
    assert got["tflops"] == pytest.approx(82 * FLOPS_512 / 0.03024 / 1e12, rel=1e-6)
    assert got["tflops"] > 0.85 * FLOPS_512 / PRODUCT_S / 1e12


def test_one_idle_repeat_reads_the_roof(monkeypatch):
    """An idle calibration: ⌈30 / 0.32⌉ = 94 products (30.08 ms); repeats 0 and 2 stalled (34.08 ms), repeat 1
    idle: the roof is repeat 1's 94 × 268.4e6 / 30.08 ms = 0.8389 TFLOP/s, the machine's own."""
    got = _timed(monkeypatch, stalls={1, 3})
    assert got["loops"] == 94
    assert got["tflops_repeats"] == pytest.approx([94 * FLOPS_512 / t / 1e12 for t in (0.03408, 0.03008, 0.03408)])
    assert got["tflops"] == pytest.approx(FLOPS_512 / PRODUCT_S / 1e12, rel=1e-9)
    assert got["op_s"] == pytest.approx(0.03008)


def test_both_shapes_timed_and_recorded(monkeypatch):
    """A CPU times a decode GEMM 16 × 4096 × 4096 (2·16·4096² = 536.9 MFLOP, 1.678 TFLOP/s at 0.32 ms a product) and
    a prefill 1024³ (2.147 GFLOP, 6.711 TFLOP/s); the dtype's roof is the better shape's, each shape's read kept."""
    clock = _Clock(set())
    monkeypatch.setattr(roofprobe, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    torch = types.SimpleNamespace(randn=lambda *a, **k: _Mat(clock))
    roofs, shapes = roofprobe.compute_roofs(torch, "cpu", ["torch.bfloat16"], 3, clock.sync)
    assert [(s["shape"], s["m"], s["k"], s["n"]) for s in shapes] == [("decode", 16, 4096, 4096),
                                                                      ("prefill", 1024, 1024, 1024)]
    assert [s["tflops"] for s in shapes] == pytest.approx([1.67772, 6.71089], rel=1e-4)
    assert roofs == {"bfloat16": pytest.approx(6.71089, rel=1e-4)}


def test_the_run_page_says_which_shapes_were_timed_and_what_each_read(scratch_root):
    """The provenance of a roof on the run page: each GEMM shape, its read, its repeats and loops; a stored string is
    escaped where it lands (a ``|`` would split the table row), a damaged entry is left out, never a crash."""
    from pipeline.pages.indexviews import run_page_path
    from pipeline.pages.render import render_site
    from tests.runbuilder import make_run

    shapes = [{"dtype": "bfloat16", "shape": "decode", "m": 16, "k": 4096, "n": 4096, "loops": 60, "op_s": 0.031,
               "tflops": 0.0325, "tflops_repeats": [0.03, 0.0325, 0.031]},
              {"dtype": "bfloat16", "shape": "pre|fill", "m": 1024, "k": 1024, "n": 1024, "loops": 28, "op_s": 0.030,
               "tflops": 0.8012, "tflops_repeats": [0.8, 0.8012, 0.79]}, "damaged"]
    runs_dir = scratch_root / "data" / "runs"
    make_run(runs_dir, "20261203T130000Z-shapes", models=("dense-a",), concurrency=(1, 2),
             probe_extra={"compute_shapes": shapes})
    render_site(scratch_root / "data" / "pages", runs_dir=runs_dir)
    page = (scratch_root / "data" / "pages" / run_page_path("20261203T130000Z-shapes")).read_text()
    row = next(line for line in page.splitlines() if line.startswith("| matmul shapes timed |"))
    assert "bfloat16 decode 16×4096×4096: 0.0325 TFLOP/s, best of 3 repeats of 60 products" in row
    assert "pre&#124;fill 1024×1024×1024: 0.8012 TFLOP/s, best of 3 repeats of 28 products" in row
    assert row.count(" | ") == 1 and "damaged" not in row
