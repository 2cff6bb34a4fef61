"""Per point of every published DGX Spark decode figure: `plan`'s prediction beside the measurement, and each term's
share of the predicted step (benchmarks/spark_truth.py's curves and the profile's engine terms).

    BATCHMARK_SHARED=../shared python benchmarks/spark_points.py [--worst N] [--all]

Columns: model, harness, B, depth, predicted and measured step (ms), the error, then the step split into the terms
of :func:`pipeline.cards.stepcost.engine_terms_s` (overhead, dense weights, experts at B = 1's kernel, the batched
MoE kernel beyond that, KV read, matmul FLOPs, attention FLOPs), each as a share of the predicted step.  Default:
the held-out curves and the batched (B >= 2) points of every curve, worst first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from spark_truth import BW, HW, card_after, context, measured, plan_point  # noqa: E402
from sparkdata import load_curves  # noqa: E402
from pipeline.cards.stepcost import engine_terms_s  # noqa: E402


def rows(curves):
    """One row per decode point: (curve, point, predicted step s, measured step s, terms in s)."""
    out = []
    for c in curves:
        card, terms = card_after(c), HW.engine_terms(c.engine)
        for p in c.points:
            meas = measured(c, p)["tpot_s"]
            if not meas:
                continue
            got = plan_point(c, p, True)["tpot_s"]
            parts = engine_terms_s(card, p.concurrency, context(c, p.depth), BW, HW.compute_peak_tflops(), terms,
                                   c.identical_routing)
            out.append((c, p, got, meas, parts))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worst", type=int, default=25, help="rows to print, worst first")
    ap.add_argument("--all", action="store_true", help="every point, not only the held-out and batched ones")
    args = ap.parse_args()
    curves, _ = load_curves()
    got = [r for r in rows(curves) if args.all or r[0].holdout or r[1].concurrency >= 2]
    got.sort(key=lambda r: -abs(r[2] / r[3] - 1))
    names = list(got[0][4]) if got else []
    print(f"{'curve':38} {'held':4} {'B':>3} {'depth':>6} {'pred ms':>8} {'meas ms':>8} {'err':>7}  "
          + " ".join(f"{n:>8}" for n in names))
    for c, p, pred, meas, parts in got[:args.worst]:
        print(f"{c.source[:38]:38} {'yes' if c.holdout else '':4} {p.concurrency:3d} {p.depth:6d} {pred * 1e3:8.2f} "
              f"{meas * 1e3:8.2f} {pred / meas - 1:+7.1%}  " + " ".join(f"{v / pred:8.1%}" for v in parts.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
