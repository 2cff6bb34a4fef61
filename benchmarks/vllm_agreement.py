"""batchmark's load generator beside ``vllm bench serve`` on one real vLLM server, by the same definitions (issue 23).

One vLLM server (the CPU build in ``.venv-vllm``, made by ``batchmark server-env``) serves a small
random-weights Llama (a local folder, word-level tokenizer, no download).  At each concurrency c both
clients send the same workload to it: ``input_len`` tokens in, ``output_len`` out, ``max(4 c, 16)``
requests at ``c`` in flight, closed loop, ``/v1/completions``, no warm-up in either (a throwaway
``vllm bench serve`` point of 4 requests warms the server first).  Like with like:

- the same request body, key for key: batchmark's (greedy, ``ignore_eos``, ``min_tokens``, usage on every
  chunk) is given to ``vllm bench serve`` with ``--temperature 0 --extra-body``, and vLLM's two extra keys
  (``repetition_penalty`` 1.0, ``logprobs`` null) to batchmark's ``extra_body``; without that, vLLM's client
  samples at the server's default temperature (1.0: the folder's ``generation_config.json`` names none)
  and the server builds no per-chunk usage for it, so the two clients made the server do different work;
- the same definitions (docs/definitions.md): output throughput = output tokens / vLLM's ``duration``
  (batchmark's ``output_throughput_tok_s``), TTFT p50, TPOT p50 (vLLM's ``tpot``: batchmark's ``tpot_s``)
  and ITL p50 (vLLM's per-chunk ``itl``: batchmark's ``itl_chunk_s``);
- the same server state: at each concurrency the clients take turns in the order vLLM, batchmark,
  batchmark, vLLM (two ``rounds``, ABBA), point by point (one ``vllm bench serve`` process reads the points
  on stdin), so a change of the shared machine's load falls on both alike; each figure is the mean of a
  client's two runs, and the two runs of one client give its A/A spread, the noise a difference between the
  clients has to stand out from.  (Whole sweeps in turn, vLLM's c = 1, 4, 16 then batchmark's, left minutes
  between the clients' runs of a point: on this machine, shared by several sessions, one such run differed
  by up to 48 % with each client's A/A spread under 10 %, the outside load having changed in between.)

Why the first full run disagreed by −86 % to +236 % (found here, issue 23): not a client, the server's
delivery.  With the 4-layer, 512-wide model first used (a decode step of ~3 ms) vLLM's CPU build on this
2-core machine often wrote all of a request's SSE events in one burst at its end: a plain aiohttp client
(no vLLM, no batchmark code) read all 34 events of a c = 1 stream in one socket read (TTFT ≈ E2EL ≈ 90 ms,
TPOT 0), whichever client had asked, in some runs and not in others.  The cause is CPU: vLLM pins its
worker's OpenMP threads to one core and its engine core busy-polls the worker on the other
(``vllm/utils/ompmultiprocessing.py``: "TODO: make scheduler proc sleep when idle"), so the API-server
process that turns outputs into events waits for a core; setting the engine core's threads to nice 19
brought back token-by-token events in most requests (gaps ≈ the 3 ms step).  A client run in the bursting
state beside one in the streaming state gave the spread seen (the ``--num-warmups`` difference was a coincidence).  With a
step of ~12 ms (:data:`SMALL_LLAMA` now) the stream arrives token by token at every concurrency, without
touching the server's priorities; the test checks that it did (TPOT and ITL above 0 in every run).

Other differences checked, none of them batchmark's fault: both clients stream with aiohttp ``iter_any``
and timestamp each SSE event as it is parsed; vLLM's connector limits connections to ``c``, batchmark's does
not (both keep ``c`` open); batchmark samples ``/metrics`` every 0.25 s in a separate process (~6 ms of CPU
a scrape for vLLM's 55 KB page here, and as much in the server).  At c = 1 (16 requests a run, the
server's own mean ITL from ``vllm:inter_token_latency_seconds`` around each run in brackets) vLLM's client
measured TPOT p50 12.91 (13.26) and 12.16 (12.51) ms, batchmark 12.42 (12.93) and 11.59 (11.66) ms with its
``/metrics`` sampling, 12.40 (13.10) and 12.51 (12.66) ms without: each client follows the server within
0.5 ms and neither disturbs it beyond the run-to-run noise.  batchmark's own difference by design stays:
its cool-down requests keep c in flight until the last measured request completes, vLLM lets its tail run
at a falling concurrency (with equal lengths both run in waves of c, so this is small).

    PYTHONPATH=$PWD python benchmarks/vllm_agreement.py [--concurrency 1 4 16] [--output-len 32] [--json FILE]

Prints the side-by-side table; exits 2 when the vLLM environment is missing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: A Llama of ~130 M parameters (test_real_vllm_cpu.py's): a decode step of ~12 ms at c = 1 on one core of
#: the 2-core machine, long beside the API server's wait for CPU (module docstring); head_dim 64 (vLLM's
#: CPU attention kernels need 64 or more).  The 4-layer, 512-wide one used first stepped in ~3 ms and burst.
SMALL_LLAMA = {"model_type": "llama", "vocab_size": 4096, "hidden_size": 1024, "intermediate_size": 4096,
               "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
               "max_position_embeddings": 512, "tie_word_embeddings": False}
SERVED = "agreement-llama"
#: The figures compared: (row name, vLLM result key, scale to s or tok/s, batchmark getter).
METRICS = (
    ("output throughput (tok/s)", "output_throughput", 1.0, lambda s: s.output_throughput_tok_s),
    ("TTFT p50 (ms)", "median_ttft_ms", 1.0, lambda s: s.ttft_s["p50"] * 1e3),
    ("TPOT p50 (ms)", "median_tpot_ms", 1.0, lambda s: s.tpot_s["p50"] * 1e3),
    ("ITL p50 (ms, per chunk)", "median_itl_ms", 1.0, lambda s: s.itl_chunk_s["p50"] * 1e3),
)
#: ``vllm bench serve`` from the same environment (``vllm.benchmarks.serve``'s own ``main``; the ``vllm``
#: console script of the CPU build looks for the distribution ``vllm``): one process that runs a point for each
#: JSON option list it reads on stdin and then prints :data:`DONE` (vLLM is imported once, and the clients
#: can take turns point by point).
DONE = "@@vllm-agreement-point-done@@"
_BENCH = ("import json, sys\n"
          "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
          "from vllm.benchmarks.serve import add_cli_args, main\n"
          "for line in sys.stdin:\n"
          "    p = FlexibleArgumentParser()\n"
          "    add_cli_args(p)\n"
          "    main(p.parse_args(json.loads(line)))\n"
          f"    print({DONE!r}, flush=True)\n")


def vllm_python() -> Path | None:
    """The interpreter of the usable vLLM environment (``.venv-vllm``), None when there is none."""
    from pipeline import serverenv

    status = serverenv.read_status(serverenv.resolve(serverenv.DEFAULT_DEST))
    return Path(status["python"]) if status and status.get("ok") and status.get("python") else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(python: Path, folder: Path, log: Path, max_seqs: int) -> tuple[subprocess.Popen, str]:
    """Start ``vllm serve`` for ``folder`` on a free port; returns (process, base URL) once ``/health`` answers.

    Raises:
        RuntimeError: the server exited or did not become healthy in 600 s (the log's tail in the message).
    """
    port = _free_port()
    cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder),
           "--served-model-name", SERVED, "--host", "127.0.0.1", "--port", str(port), "--seed", "0",
           "--no-enable-prefix-caching", "--max-num-seqs", str(max_seqs), "--max-model-len", "512",
           "--dtype", "bfloat16", "--enforce-eager"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM exited with {proc.returncode}: {log.read_text(errors='replace')[-1500:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return proc, url
        except OSError:
            pass
        time.sleep(1)
    stop_server(proc)
    raise RuntimeError(f"vLLM not healthy after 600 s: {log.read_text(errors='replace')[-1500:]}")


def stop_server(proc: subprocess.Popen) -> None:
    """Stop the server's process group (SIGTERM, then SIGKILL after 30 s)."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


def same_body_args(output_len: int) -> list[str]:
    """``vllm bench serve`` options that make its request body batchmark's (module docstring, "like with like")."""
    extra = {"min_tokens": output_len, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    return ["--temperature", "0", "--extra-body", json.dumps(extra)]


#: batchmark's ``extra_body``: the two keys vLLM's client always sends (``endpoint_request_func.py``).
VLLM_CLIENT_KEYS = {"repetition_penalty": 1.0, "logprobs": None}


def vllm_bench_args(url: str, folder: Path, c: int, n: int, input_len: int, output_len: int, out_dir: Path,
                    name: str) -> list[str]:
    """The ``vllm bench serve`` options of one point (``n`` requests at ``c`` in flight, no warm-up)."""
    return ["--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
            "--model", SERVED, "--tokenizer", str(folder), "--dataset-name", "random",
            "--random-input-len", str(input_len), "--random-output-len", str(output_len), "--random-range-ratio", "0",
            "--num-prompts", str(n), "--max-concurrency", str(c), "--ignore-eos", *same_body_args(output_len),
            "--seed", "0", "--disable-tqdm", "--save-result", "--result-dir", str(out_dir), "--result-filename", name,
            "--percentile-metrics", "ttft,tpot,itl,e2el"]


class VLLMBench:
    """A ``vllm bench serve`` process (:data:`_BENCH`) that runs one point per :meth:`point` call."""

    def __init__(self, python: Path, log: Path):
        self.log = log
        self._err = open(log, "wb")
        self.proc = subprocess.Popen([str(python), "-c", _BENCH], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True)

    def point(self, args: list[str], result: Path, timeout_s: float = 600) -> dict[str, Any]:
        """Run one point (its options; ``--save-result`` to ``result``) and return the saved result JSON.

        Raises:
            RuntimeError: the process ended, ran past ``timeout_s`` (then it is killed) or saved no result (the
                tail of its log in the message).
        """
        import threading

        assert self.proc.stdin is not None and self.proc.stdout is not None
        watchdog = threading.Timer(timeout_s, self.proc.kill)  # a hung point ends the process: stdout closes
        watchdog.start()
        try:
            self.proc.stdin.write(json.dumps(args) + "\n")
            self.proc.stdin.flush()
            for line in self.proc.stdout:  # drains vLLM's printout until the point is done
                if line.strip() == DONE:
                    break
        except OSError:
            pass
        finally:
            watchdog.cancel()
        if not result.exists():
            self._err.flush()
            raise RuntimeError(f"vllm bench serve failed: {self.log.read_text(errors='replace')[-1500:]}")
        return json.loads(result.read_text())

    def close(self) -> None:
        """End the process (closing its stdin ends its loop)."""
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._err.close()


def run_batchmark(url: str, folder: Path, c: int, n: int, input_len: int, output_len: int, repeats: int = 1):
    """One batchmark point (``n`` measured per repeat, no warm-up) through the ``openai`` engine; its summary."""
    from pipeline.config import parse_config
    from pipeline.engines import get_engine
    from pipeline.metrics import summarize_point
    from pipeline.records import PointKey

    cfg = parse_config({"name": "agreement", "hardware": "cpu", "engine": "openai", "input_len": input_len,
                        "output_len": output_len, "concurrency": [c], "repeats": repeats,
                        "openai": {"base_url": url + "/v1", "requests_per_point": n, "tokenizer": str(folder),
                                   "timeout_s": 600, "extra_body": dict(VLLM_CLIENT_KEYS)},
                        "models": [{"name": SERVED, "served_name": SERVED}]})
    engine = get_engine(cfg)
    engine.load(cfg.models[0])
    rec = engine.measure(PointKey(SERVED, "openai", input_len, output_len, c), repeats, False, 0)
    return summarize_point(rec)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values and all(v is not None for v in values) else None


def _aa(values: list[float]) -> float | None:
    """A/A spread of one client's runs: largest / smallest − 1 (None with fewer than two)."""
    vals = [v for v in values if v is not None]
    return max(vals) / min(vals) - 1.0 if len(vals) >= 2 and min(vals) > 0 else None


def compare(c: int, vllm: list[dict[str, Any]], summs: list[Any]) -> list[dict[str, Any]]:
    """Rows of one point: ``{"concurrency", "metric", "vllm", "batchmark", "diff", "aa_vllm", "aa_batchmark",
    "vllm_runs", "batchmark_runs"}``; ``vllm`` / ``batchmark`` are the means of the runs, diff = batchmark / vLLM − 1,
    ``aa_*`` each client's A/A spread (:func:`_aa`)."""
    rows = []
    for name, key, scale, get in METRICS:
        v = [float(r[key]) * scale if r.get(key) is not None else None for r in vllm]
        b = [get(s) for s in summs]
        vm, bm = _mean(v), _mean(b)
        rows.append({"concurrency": c, "metric": name, "vllm": vm, "batchmark": bm,
                     "diff": (bm / vm - 1.0) if vm and bm is not None else None,
                     "aa_vllm": _aa(v), "aa_batchmark": _aa(b), "vllm_runs": v, "batchmark_runs": b})
    return rows


def aa_sigma(rows: list[dict[str, Any]]) -> float | None:
    """Run-to-run noise of one client's run, pooled over every row and both clients (relative, e.g. 0.05 = 5 %).

    Derived: with each run's figure = truth × exp(ε), ε ~ N(0, σ²), the log ratio of a client's two runs
    has variance 2σ², so σ̂² = mean(ln(x₁ / x₂)²) / 2 over all pairs (12 rows × 2 clients at c = 1, 4, 16).
    The difference of the two clients' means of two runs each, ln(b̄ / v̄), then has a standard deviation of
    about σ (σ² / 2 + σ² / 2) when the clients agree.  None when no row has two positive runs.
    """
    logs = [math.log(runs[0] / runs[1]) for r in rows for runs in (r["vllm_runs"], r["batchmark_runs"])
            if len(runs) >= 2 and all(v is not None and v > 0 for v in runs[:2])]
    return math.sqrt(sum(x * x for x in logs) / len(logs) / 2) if logs else None


def run(concurrencies: tuple[int, ...] = (1, 4, 16), input_len: int = 32, output_len: int = 32,
        per_slot: int = 4, minimum: int = 16, rounds: int = 2, work: Path | None = None) -> dict[str, Any]:
    """Both clients at every concurrency on one server, ``rounds`` turns each per point (vLLM first in even rounds).

    Returns ``{"rows": [...] (:func:`compare`), "summaries": {c: [PointSummary per round]}, "vllm": {c: [result
    dict per round]}, "sigma": :func:`aa_sigma`, "seconds": wall time, server start included}``.

    Raises:
        RuntimeError: no usable vLLM environment, or the server or ``vllm bench serve`` failed.
    """
    from pipeline.modelfolders import build_model_folder

    python = vllm_python()
    if python is None:
        raise RuntimeError("no usable vLLM environment (.venv-vllm); make it with `batchmark server-env`")
    t_start = time.monotonic()
    work = work or Path(tempfile.mkdtemp(prefix="vllm-agreement-"))
    work.mkdir(parents=True, exist_ok=True)
    folder = build_model_folder("agreement-llama", SMALL_LLAMA)
    proc, url = start_server(python, folder, work / "server.log", max(concurrencies))
    out: dict[str, Any] = {"rows": [], "summaries": {c: [] for c in concurrencies},
                           "vllm": {c: [] for c in concurrencies}}
    bench = None
    try:
        sizes = {c: max(per_slot * c, minimum) for c in concurrencies}
        bench = VLLMBench(python, work / "vllm-bench.log")
        bench.point(vllm_bench_args(url, folder, 1, 4, input_len, output_len, work, "throwaway.json"),
                    work / "throwaway.json")  # warms the server
        for c in concurrencies:
            for r in range(rounds):
                def vllm_turn() -> None:
                    name = f"vllm-c{c}-r{r}.json"
                    out["vllm"][c].append(bench.point(
                        vllm_bench_args(url, folder, c, sizes[c], input_len, output_len, work, name), work / name))

                def batchmark_turn() -> None:
                    out["summaries"][c].append(run_batchmark(url, folder, c, sizes[c], input_len, output_len))

                for turn in ((vllm_turn, batchmark_turn) if r % 2 == 0 else (batchmark_turn, vllm_turn)):
                    turn()
    finally:
        if bench is not None:
            bench.close()
        stop_server(proc)
    for c in concurrencies:
        out["rows"].extend(compare(c, out["vllm"][c], out["summaries"][c]))
    out["sigma"] = aa_sigma(out["rows"])
    out["seconds"] = time.monotonic() - t_start
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """The side-by-side table as text: each client's mean of its runs, their difference, each client's A/A spread."""
    from pipeline.texttable import text_table

    def f(v: float | None, pct: bool = False) -> str:
        return "-" if v is None else (f"{v:+.1%}" if pct else f"{v:.2f}")

    return "\n".join(text_table(["c", "metric", "vllm bench serve", "batchmark", "batchmark / vLLM − 1",
                                  "A/A vLLM", "A/A batchmark"],
                                 [[r["concurrency"], r["metric"], f(r["vllm"]), f(r["batchmark"]), f(r["diff"], True),
                                   f(r.get("aa_vllm"), True), f(r.get("aa_batchmark"), True)] for r in rows]))


def main(argv: list[str] | None = None) -> int:
    """Run both clients on one vLLM CPU server and print the side-by-side table; exit 2 without ``.venv-vllm``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2, help="turns of each client (A/A spread from two or more)")
    ap.add_argument("--json", help="write the rows as JSON to this file")
    args = ap.parse_args(argv)
    if vllm_python() is None:
        print("no usable vLLM environment (.venv-vllm); make it with `batchmark server-env`", file=sys.stderr)
        return 2
    res = run(tuple(args.concurrency), args.input_len, args.output_len, rounds=args.rounds)
    print(table(res["rows"]))
    sigma = res["sigma"]
    print(f"A/A noise of one run (pooled, aa_sigma): {'-' if sigma is None else f'{sigma:.1%}'}; "
          f"{res['seconds']:.0f} s, server start included")
    if args.json:
        Path(args.json).write_text(json.dumps(res["rows"], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
