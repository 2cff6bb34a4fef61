"""Benchmark: how often ``batchmark diff`` calls a change that is not there, and how often it finds one that is.

    python benchmarks/diff_power.py [--pairs 100] [--repeats 3 5 10] [--changes 5 10 30] [--drift 0.02]
                                    [--spread 0.10] [--min-effect 5] [--seed 0]
    (defaults: 100 pairs, repeats 3 5 10, changes 5 10 30 %, drift 0.02)

A/A pairs: two synthetic runs of the same system.  A/B pairs: B's tokens come X % slower (every
inter-token gap × (1 + X / 100); prefill unchanged), for each X of ``--changes``.  Each run is one model
served at concurrencies 1, 4 and 16, ``--requests`` requests a repeat in waves of c (the load generator's
closed loop), 64 output tokens each, with realistic noise:

- per-repeat drift: each repeat's times × exp(N(0, drift)) (``--drift``, default 2 %: repeats of one point
  within about ±4 % of each other; the issue's CPU example drifted 3 %, try ``--drift 0.03``);
- per-request spread: each request's times × exp(N(0, spread)) (``--spread``, default 10 %).

The records go through the real summaries (``metrics.summarize_point``) and the real diff
(``diff.diff_runs`` with its default α and ``--min-effect``); MBU and MFU are not compared (no model card).

Printed per repeats count: the A/A false-call rate (called metric-points / tested metric-points; goal ≤ 5 %),
the 95th percentile of the A/A |relative change| over every tested metric-point (noise alone moves a metric
this far 1 time in 20: what the default minimum effect is chosen from),
and for each change the detection rate of the metrics it moves (output throughput, per-user throughput,
TPOT p50, TPOT p99: the share of their A/B metric-points called worse), the output throughput's own rate, the
share of pairs whose diff finds the change (output throughput called worse at one point or more, better at none),
and the smallest change of ``--changes`` whose output throughput is detected 9 times in 10 (the figure the
README and the configs' ``repeats:`` comments quote).  ``--server-pairs N`` adds N A/A and N A/B pairs of real sweeps
(the load generator against ``tests/integration/fake_stream_server.py`` at 10 ms a token; B's server at 11 ms:
10 % slower tokens; a bare ``--repeats`` skips the synthetic pairs).  Figures, not assertions.  Goal: A/A calls ≤ 5 %
of metric-points; a 10 % change detected ≥ 9 times in 10 with 5 repeats.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CONCURRENCY = (1, 4, 16)
INPUT_LEN, OUTPUT_LEN = 256, 64
PREFILL_S = 0.02  # per request at c = 1; × (1 + c / 8) under load
STEP_S = 0.01  # per token at c = 1; × (1 + c / 16) under load
MOVED = ("output_throughput_tok_s", "per_user_tok_s", "tpot_p50_s", "tpot_p99_s")


@dataclass
class SyntheticRun:
    """What :func:`pipeline.diff.rundiff.diff_runs` reads of a run (:class:`pipeline.diff.comparability.RunData`), built in memory."""

    run_id: str
    meta: dict[str, Any]
    summaries: list[Any]
    analysis: dict[str, Any] = field(default_factory=dict)


def point(rng: random.Random, c: int, repeats: int, requests: int, drift: float, spread: float, slower: float) -> Any:
    """Summary of one served point: ``repeats`` repeats of ``requests`` requests in waves of ``c`` (module docstring)."""
    from pipeline.metrics.summarize import summarize_point
    from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord

    reps = []
    for r in range(repeats):
        m = math.exp(rng.gauss(0.0, drift))
        prefill, step = PREFILL_S * (1 + c / 8) * m, STEP_S * (1 + c / 16) * m * (1 + slower)
        reqs, t_wave, done = [], 0.0, 0.0
        for j in range(requests):
            if j and j % c == 0:
                t_wave = done
            u = math.exp(rng.gauss(0.0, spread))
            first = t_wave + prefill * u
            ends = [first + k * step * u for k in range(OUTPUT_LEN)]
            done = max(done, ends[-1])
            reqs.append(RequestRecord(request_id=j, queued_s=t_wave, sent_s=t_wave, first_token_s=first, done_s=ends[-1],
                                      chunks=[[t, 1] for t in ends], input_tokens=INPUT_LEN, output_tokens=OUTPUT_LEN))
        reps.append(RepeatRecord(repeat=r, batching="served", window_start_s=0.0, window_end_s=done, requests=reqs))
    return summarize_point(PointRecords(point=PointKey("m", "openai", INPUT_LEN, OUTPUT_LEN, c), repeats=reps))


def run(rng: random.Random, run_id: str, meta: dict[str, Any], repeats: int, requests: int, drift: float, spread: float,
        slower: float = 0.0) -> SyntheticRun:
    """One synthetic run: one point per concurrency of :data:`CONCURRENCY`."""
    return SyntheticRun(run_id, meta, [point(rng, c, repeats, requests, drift, spread, slower) for c in CONCURRENCY])


def base_meta() -> dict[str, Any]:
    """A real ``run.json`` (tests/runbuilder.py's), shared by both runs of a pair so that they are comparable."""
    from pipeline.analysis import stages
    from tests.runbuilder import make_run

    with tempfile.TemporaryDirectory() as tmp:
        return stages.load_run(make_run(Path(tmp), "20261129T000000Z-m", models=("dense-a",), concurrency=(1,))).meta


def rates(pairs: int, repeats: int, change: float, args: argparse.Namespace, rng: random.Random,
          meta: dict[str, Any], sizes: list[float] | None = None) -> tuple[float, float, float]:
    """(share of tested metric-points called — worse for a change, either way for A/A —, output throughput's share,
    share of pairs whose diff calls output throughput worse at one point or more and better at none);
    ``sizes`` collects every tested |relative change| (the A/A spread the minimum effect is chosen from)."""
    from pipeline.diff.rundiff import diff_runs

    called = tested = thr_called = thr_tested = pairs_found = 0
    for i in range(pairs):
        a = run(rng, f"a{i}", meta, repeats, args.requests, args.drift, args.spread)
        b = run(rng, f"b{i}", meta, repeats, args.requests, args.drift, args.spread, slower=change)
        d = diff_runs(a, b, min_effect=args.min_effect / 100)
        verdicts = {c.verdict for c in d.changes if c.metric == "output_throughput_tok_s"}
        pairs_found += "worse" in verdicts and "better" not in verdicts
        for c in d.changes:
            if c.p_value is None or (change and c.metric not in MOVED):
                continue
            if sizes is not None and c.effect is not None:
                sizes.append(abs(c.effect))
            hit = c.significant and (not change or c.verdict == "worse")
            tested += 1
            called += hit
            if c.metric == "output_throughput_tok_s":
                thr_tested += 1
                thr_called += hit
    return called / max(tested, 1), thr_called / max(thr_tested, 1), pairs_found / pairs


def server_rates(args: argparse.Namespace, meta: dict[str, Any]) -> None:
    """A/A and A/B pairs of real sweeps: the load generator against ``tests/integration/fake_stream_server.py``.

    A and the A/A partner measure a server with ``--token-ms 10``; B measures one with ``--token-ms 11`` (10 %
    slower tokens).  Each run: c = 4 and 16, ``args.server_requests`` measured requests a repeat, 16 tokens, warm-up
    on, through the openai backend (the real client and scheduler), then the real summaries and diff.
    """
    import subprocess

    from pipeline.config.sweepconfig import parse_config
    from pipeline.diff.rundiff import diff_runs
    from pipeline.backends import get_backend
    from pipeline.metrics.summarize import summarize_point
    from pipeline.core.records import PointKey
    from tests.integration.served_helpers import build_tokenizer, free_port, wait_healthy

    here = REPO / "tests" / "integration"
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        build_tokenizer(tmp / "tok")
        servers = {}
        try:
            for token_ms in (10.0, 11.0):
                port = free_port()
                log = tmp / f"server-{token_ms:g}.log"
                with open(log, "wb") as fh:
                    proc = subprocess.Popen([sys.executable, str(here / "fake_stream_server.py"), "--port", str(port),
                                             "--token-ms", str(token_ms)], stdout=fh, stderr=subprocess.STDOUT)
                servers[token_ms] = proc
                wait_healthy(f"http://127.0.0.1:{port}/health", proc, 30, log)
                servers[token_ms].url = f"http://127.0.0.1:{port}/v1"  # type: ignore[attr-defined]

            def sweep(token_ms: float, rid: str, seed: int) -> SyntheticRun:
                cfg = parse_config({"name": "t", "hardware": "cpu", "backend": "openai", "input_len": 8,
                                    "output_len": 16, "concurrency": [4, 16], "repeats": args.server_repeats,
                                    "openai": {"base_url": servers[token_ms].url,  # type: ignore[attr-defined]
                                               "requests_per_point": args.server_requests,
                                               "tokenizer": str(tmp / "tok"), "timeout_s": 10},
                                    "models": [{"name": "m", "served_name": "m"}]})
                engine = get_backend(cfg)
                engine.load(cfg.models[0])
                pts = [summarize_point(engine.measure(PointKey("m", "openai", 8, 16, c), args.server_repeats, True, seed))
                       for c in (4, 16)]
                return SyntheticRun(rid, meta, pts)

            for label, token_b in (("A/A", 10.0), ("A/B 10 % slower tokens", 11.0)):
                called = tested = found = 0
                for i in range(args.server_pairs):
                    d = diff_runs(sweep(10.0, f"a{i}", 2 * i), sweep(token_b, f"b{i}", 2 * i + 1),
                                  min_effect=args.min_effect / 100)
                    rows = [c for c in d.changes if c.p_value is not None
                            and (token_b == 10.0 or c.metric in MOVED)]
                    tested += len(rows)
                    called += sum(c.significant and (token_b == 10.0 or c.verdict == "worse") for c in rows)
                    found += any(c.metric == "output_throughput_tok_s" and c.verdict == "worse" for c in rows)
                print(f"test server, {args.server_repeats} repeats, {label}: {called} of {tested} metric-points called "
                      f"({called / max(tested, 1):.1%}); {found} of {args.server_pairs} diffs call output throughput worse",
                      flush=True)
        finally:
            for proc in servers.values():
                proc.terminate()
                proc.wait(timeout=10)


def main() -> None:
    """Print the A/A false-call rate and the A/B detection rates per repeats count."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=100, help="pairs per setting (default 100)")
    ap.add_argument("--repeats", type=int, nargs="*", default=[3, 5, 10], help="repeats counts (none: skip the synthetic pairs)")
    ap.add_argument("--changes", type=float, nargs="+", default=[5, 10, 30], help="percent slower tokens")
    ap.add_argument("--requests", type=int, default=32, help="measured requests per repeat (default 32)")
    ap.add_argument("--drift", type=float, default=0.02, help="per-repeat drift, sd of log time (default 0.02)")
    ap.add_argument("--spread", type=float, default=0.10, help="per-request spread, sd of log time (default 0.10)")
    ap.add_argument("--min-effect", type=float, default=None, help="percent (default: the diff's MIN_EFFECT)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--server-pairs", type=int, default=0,
                    help="also this many A/A and A/B pairs of real sweeps of the test server (default 0)")
    ap.add_argument("--server-repeats", type=int, default=5)
    ap.add_argument("--server-requests", type=int, default=16, help="measured requests per repeat (default 16)")
    args = ap.parse_args()
    from pipeline.diff.stats import MIN_EFFECT

    if args.min_effect is None:
        args.min_effect = MIN_EFFECT * 100
    rng = random.Random(args.seed)
    meta = base_meta()
    print(f"{args.pairs} pairs per setting; drift {args.drift:.0%} per repeat, spread {args.spread:.0%} per request, "
          f"{args.requests} requests a repeat, c = {', '.join(map(str, CONCURRENCY))}; min effect {args.min_effect:g} %, "
          "alpha 0.05 (Benjamini-Hochberg)")
    head = "".join(f"  {x:g}% slower: all / thr / pair" for x in args.changes)
    print(f"{'repeats':>7}  {'A/A calls':>9}  {'A/A |change| p95':>16}{head}  {'detected 9 in 10 (thr)':>22}  {'s':>5}",
          flush=True)
    for n in args.repeats:
        t0 = time.perf_counter()
        sizes: list[float] = []
        aa, _, _ = rates(args.pairs, n, 0.0, args, rng, meta, sizes)
        p95 = sorted(sizes)[int(0.95 * (len(sizes) - 1))] if sizes else float("nan")
        cells, smallest = [], None
        for x in args.changes:
            allr, thr, pair = rates(args.pairs, n, x / 100, args, rng, meta)
            cells.append(f"  {allr:>12.0%} / {thr:>4.0%} / {pair:>4.0%}")
            if thr >= 0.9 and smallest is None:
                smallest = x
        found = f"{smallest:g} %" if smallest is not None else f"> {max(args.changes):g} %"
        print(f"{n:>7}  {aa:>9.1%}  {p95:>16.1%}{''.join(cells)}  {found:>22}  {time.perf_counter() - t0:5.0f}", flush=True)
    if args.server_pairs:
        server_rates(args, meta)


if __name__ == "__main__":
    main()
