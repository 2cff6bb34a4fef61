"""batchmark's load generator beside ``vllm bench serve`` on one real vLLM server, by the same definitions.

One vLLM server (the CPU build in ``.venv-vllm``, made by ``batchmark server-env``) serves a small
random-weights Llama (a local folder, word-level tokenizer, no download).  At each concurrency c both
clients send the same workload to it: ``input_len`` tokens in, ``output_len`` out, ``max(2 c, 12)``
requests a run at ``c`` in flight, closed loop, ``/v1/completions``, no warm-up in either (a throwaway
``vllm bench serve`` point of 4 requests warms the server first).  Like with like:

- the same request body, key for key: batchmark's (greedy, ``ignore_eos``, ``min_tokens``, usage on every
  chunk) is given to ``vllm bench serve`` with ``--temperature 0 --extra-body``, and vLLM's two extra keys
  (``repetition_penalty`` 1.0, ``logprobs`` null) to batchmark's ``extra_body``; without that, vLLM's client
  samples at the server's default temperature (1.0: the folder's ``generation_config.json`` names none)
  and the server builds no per-chunk usage for it, so the two clients made the server do different work;
- the same definitions (docs/definitions.md): output throughput = output tokens / vLLM's ``duration``
  (batchmark's ``output_throughput_tok_s``), TTFT p50, TPOT p50 (vLLM's ``tpot``: batchmark's ``tpot_s``)
  and ITL p50 (vLLM's per-chunk ``itl``: batchmark's ``itl_chunk_s``);
- the same server state: at each concurrency the clients take turns, vLLM, batchmark, batchmark, vLLM, …
  (four ``rounds``, ABBA ABBA), point by point (one ``vllm bench serve`` process reads the points on stdin), so
  a change of the shared machine's load falls on both alike.  (Whole sweeps in turn, vLLM's c = 1, 4, 16 then
  batchmark's, left minutes between the clients' runs of a point: one such run differed by up to 48 % with
  each client's A/A spread under 10 %, the outside load having changed in between.)

A machine shared (the test failed two of three runs of the whole suite on this 2-core machine, other
sessions' tests and vLLM servers beside it, load average 4 to 12).  What makes the comparison hold there
(:func:`compare`):

- each client's figure is the **median of its runs**: a run whose streams burst (TPOT and ITL p50 of 0) or that
  ran beside a spike of other work is outvoted, never skipped;
- the **drift correction**: the load slows the server, and with it every figure of a run, by up to 50 % from one
  run to the next; the server's own histograms of the same quantities (``/metrics``: TTFT, TPOT and ITL, read
  before and after each run) slow as much, so each run's figure is taken relative to them (a latency ÷ the
  server's mean over the run, a throughput × its mean ITL) and the clients are compared on that.  It cut the
  run-to-run noise σ of the throughput from 16 % to 2.6 %, of TPOT p50 from 13 % to 7 % in two runs at load 9 to
  11.  It also removes what a client does to the server (its own CPU on a 2-core machine), and a mean is moved by a
  stall that a median ignores, so it cannot make a p50 exact: σ of the corrected ITL p50 per chunk stayed 6 % to
  23 % (a chunk's gap is the step or, when events arrive together, 0: its median flips).  The plain figures are
  printed beside;
- **tolerances the run's own A/A repeats justify**: σ of each metric from the spread of each client's runs
  (:func:`noise_sigma`, robust), a figure within max(3 %, e^(5 SE) − 1), a metric's mean over the
  concurrencies within max(3 %, e^(4 SE / √3) − 1) (a definition that differs shows at every c, so this one
  catches it at a third of the noise), SE of the log ratio of two medians (:func:`standard_error`); the
  multipliers are calibrated by simulation (``tests/unit/backends/test_vllm_agreement_stats.py``: agreeing clients fail
  under 1 % of runs, a 10 % disagreement is caught in 99 % at σ ≤ 2.5 %); each run prints the disagreement it
  catches 99 % of the time;
- **priority**: the server, ``vllm bench serve`` and the measuring thread run at nice −10 where allowed (root or
  CAP_SYS_NICE); it did not make this machine quiet (memory and cache are shared too), the correction did.

Why the first full run disagreed by −86 % to +236 % (found here): not a client, the server's
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

The one difference that was batchmark's (found here): its ``/metrics`` sampling.  Sampled every 0.25 s
during each run, each scrape held the server's streams while vLLM rendered the page (in the API server's event
loop; 6.4 ms for this 51 KiB page) and cost as much CPU again to parse on the 2-core machine.  TPOT and
throughput did not show it (a mean moves little), the median chunk gap did: on a quiet machine (load below 2)
batchmark's TPOT p50 was 7 to 14 % above its own ITL p50 at c = 1, vLLM's 1 to 2 %, and its ITL p50 6.3 % below
vLLM's (−4.3 % drift-corrected); the next run, with ``--no-scrape``, agreed within 1.1 % (drift-corrected) at
c = 1 and 4, batchmark's TPOT p50 2 to 3 % above its ITL p50.  The sampler now scrapes
about once a second, keeps its share of the server's time under 1 % and parses only the gauges it keeps
(``pipeline/backends/scrape.py``); with it, ITL p50 agreed within 1.4 % at c = 1 and 4 (drift-corrected) and
batchmark's TPOT p50 was 1 to 3 % above its ITL p50, as vLLM's.

Other differences checked, none of them batchmark's fault: both clients stream with aiohttp ``iter_any``;
batchmark stamps the events of one socket read with that read's time, vLLM each event after parsing the ones
before it (microseconds apart); vLLM's connector limits connections to ``c``, batchmark's does not (both keep
``c`` open).  batchmark's own difference by design stays:
its cool-down requests keep c in flight until the last measured request completes, vLLM lets its tail run
at a falling concurrency (with equal lengths both run in waves of c, so this is small).

    PYTHONPATH=$PWD python benchmarks/vllm_agreement.py [--concurrency 1 4 16] [--output-len 32] [--rounds 4]
        [--no-priority] [--no-scrape] [--json FILE]

Prints the side-by-side table and the verdict (:func:`report`); exits 1 when the clients disagree, 2 when the vLLM
environment is missing.
"""

from __future__ import annotations

import argparse
import functools
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
from typing import Any, Iterable

import numpy as np

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
#: The served dtype, as a config's ``vllm.dtype`` (config/vllm-cpu.yaml's): the one this CPU runs natively
#: (:func:`pipeline.machine.cpuisa.served_dtype`): bfloat16 with AVX512-BF16, AMX or Arm BF16, float32 where torch
#: would emulate bfloat16 (an AVX2-only EPYC took ~29 min over this benchmark serving bfloat16).
DTYPE = "native"
#: The scheduling priority (nice) of the server, ``vllm bench serve`` and batchmark's measuring thread: above the
#: rest of a shared machine (module docstring); needs root or CAP_SYS_NICE, else the priority stays.
NICE = -10
#: Runs of each client per point (ABBA ABBA …): a median outvotes one odd run.
ROUNDS = 4
#: The figures compared: (row name, vLLM result key, scale, batchmark getter, the server's own histogram of the
#: same quantity, its power in the drift correction: a latency ÷ the server's mean, a throughput × its mean ITL).
METRICS = (
    ("output throughput (tok/s)", "output_throughput", 1.0, lambda s: s.output_throughput_tok_s,
     "vllm:inter_token_latency_seconds", 1),
    ("TTFT p50 (ms)", "median_ttft_ms", 1.0, lambda s: s.ttft_s["p50"] * 1e3, "vllm:time_to_first_token_seconds", -1),
    ("TPOT p50 (ms)", "median_tpot_ms", 1.0, lambda s: s.tpot_s["p50"] * 1e3,
     "vllm:request_time_per_output_token_seconds", -1),
    ("ITL p50 (ms, per chunk)", "median_itl_ms", 1.0, lambda s: s.itl_chunk_s["p50"] * 1e3,
     "vllm:inter_token_latency_seconds", -1),
)
SERVER_HISTOGRAMS = tuple(sorted({m[4] for m in METRICS}))


def server_sums(url: str) -> dict[str, tuple[float, float]]:
    """``{histogram: (sum, count)}`` of :data:`SERVER_HISTOGRAMS` on the server's ``/metrics`` now (summed over label
    sets; {} when unreachable): the server's own clock, read before and after each run."""
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
            text = resp.read().decode("utf-8", "replace")
    except OSError:
        return {}
    out: dict[str, list[float]] = {h: [0.0, 0.0] for h in SERVER_HISTOGRAMS}
    for line in text.splitlines():
        for h in SERVER_HISTOGRAMS:
            for i, suffix in enumerate(("_sum", "_count")):
                if line.startswith(h + suffix) and line[len(h + suffix)] in "{ ":
                    out[h][i] += float(line.rsplit(" ", 1)[1])
    return {h: (v[0], v[1]) for h, v in out.items()}


def server_means(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]) -> dict[str, float | None]:
    """The server's own mean of each histogram over one run (s): Δsum / Δcount between two :func:`server_sums`."""
    out: dict[str, float | None] = {}
    for h in SERVER_HISTOGRAMS:
        if h in before and h in after and after[h][1] > before[h][1]:
            out[h] = (after[h][0] - before[h][0]) / (after[h][1] - before[h][1])
        else:
            out[h] = None
    return out
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
    from pipeline.machine import serverenv

    status = serverenv.read_status(serverenv.resolve(serverenv.DEFAULT_DEST))
    return Path(status["python"]) if status and status.get("ok") and status.get("python") else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agreement_dtype(flags: Iterable[str] | None = None) -> tuple[str, str | None]:
    """``(dtype, why)`` the benchmark serves and saves the model folder in: :data:`DTYPE` resolved for this machine's
    CPU, or for a CPU of the given ``/proc/cpuinfo`` ``flags`` (:func:`pipeline.machine.cpuisa.served_dtype`)."""
    from pipeline.machine.cpuisa import served_dtype

    return served_dtype(DTYPE, flags)


def start_server(python: Path, folder: Path, log: Path, max_seqs: int,
                 nice: int | None = None, dtype: str = "float32") -> tuple[subprocess.Popen, str]:
    """Start ``vllm serve`` for ``folder`` on a free port (at priority ``nice`` when given) serving ``dtype``
    (:func:`agreement_dtype`); returns (process, base URL) once ``/health`` answers.

    Raises:
        RuntimeError: the server exited or did not become healthy in 600 s (the log's tail in the message).
    """
    port = _free_port()
    cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder),
           "--served-model-name", SERVED, "--host", "127.0.0.1", "--port", str(port), "--seed", "0",
           "--no-enable-prefix-caching", "--max-num-seqs", str(max_seqs), "--max-model-len", "512",
           "--dtype", dtype, "--enforce-eager"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                preexec_fn=(lambda: _raise_priority(nice)) if nice is not None else None)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, log)
    except RuntimeError:
        stop_server(proc)
        raise
    return proc, url


def wait_healthy(proc: subprocess.Popen, url: str, log: Path, timeout_s: float = 600) -> None:
    """Poll ``url``/health once a second until it answers 200.

    Raises:
        RuntimeError: the server exited or did not become healthy in ``timeout_s`` (the log's tail in the message).
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM exited with {proc.returncode}: {log.read_text(errors='replace')[-1500:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError(f"vLLM not healthy after {timeout_s:.0f} s: {log.read_text(errors='replace')[-1500:]}")


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

    def __init__(self, python: Path, log: Path, nice: int | None = None):
        self.log = log
        self._err = open(log, "wb")
        self.proc = subprocess.Popen([str(python), "-c", _BENCH], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True,
                                     preexec_fn=(lambda: _raise_priority(nice)) if nice is not None else None)

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


#: The issue's goal: the clients agree within 3 % on each figure.
GOAL = 0.03
#: A figure fails when |ln(batchmark / vLLM)| exceeds K_ROW standard errors of that log ratio (and the goal); the
#: mean over the concurrencies of a metric when it exceeds K_POOLED of its own.  Calibrated by simulation
#: (``tests/unit/backends/test_vllm_agreement_stats.py``): with σ estimated from the runs themselves the ratio's tails are
#: wider than normal (5 standard errors are passed by noise alone about 0.04 % of the time, not 6e-5 %), so that
#: agreeing clients fail the 12 + 4 checks of a run under 1 % of the time.
K_ROW = 5.0
K_POOLED = 4.0
#: A run noisier than this (σ of one run's figure) cannot tell the clients apart at all: it fails saying so.
MAX_SIGMA = 0.20
#: One-sided 99 % normal quantile: a difference this many standard errors beyond the tolerance is caught 99 % of
#: the time (the ``detectable`` disagreement :func:`compare` reports).
Z99 = 2.326


@functools.lru_cache(maxsize=None)
def median_factors(rounds: int) -> tuple[float, float]:
    """``(pair_scale, median_sd)`` for ``rounds`` runs of normal noise N(0, σ²) per client, by simulation (seeded).

    - ``pair_scale``: σ = ``pair_scale`` × the median of |ln x_i − ln x_j| over every pair of a client's runs (pooled
      over clients and concurrencies): √2 × 1.4826 = 0.954 for many runs, a little different for few;
    - ``median_sd``: the standard deviation of the median of ``rounds`` runs, in units of σ (1.2533 / √rounds for
      many runs; 0.547 for 4, the mean of the middle two).

    200,000 draws (seed 0): both within 0.5 %.
    """
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200_000, rounds))
    i, j = np.triu_indices(rounds, 1)
    return float(1.0 / np.median(np.abs(x[:, i] - x[:, j]))), float(np.median(x, axis=1).std())


def _log(values: list[float | None]) -> np.ndarray:
    """ln of each per-run figure; a figure of 0 (a stream that arrived in one burst: TPOT and ITL 0) is −inf, a
    missing one NaN."""
    with np.errstate(divide="ignore"):
        return np.log(np.array([np.nan if v is None else max(float(v), 0.0) for v in values], dtype=float))


def noise_sigma(runs: list[list[float | None]], rounds: int) -> float | None:
    """Run-to-run noise σ of one figure (relative: 0.05 = 5 %), from the A/A spread of each client's runs.

    ``runs``: per-run values of one metric, one list per (concurrency, client).  Robust: the ln
    differences of every pair of runs in a list, pooled, σ = :func:`median_factors`' ``pair_scale`` × their
    median, so a run beside a spike of outside load weighs no more than any pair beyond the median; a run that burst
    (figure 0) has no finite logarithm and gives no pair.  None when no list has two finite runs.
    """
    diffs = []
    for vals in runs:
        lv = _log(vals)
        lv = lv[np.isfinite(lv)]
        i, j = np.triu_indices(len(lv), 1)
        diffs.extend(np.abs(lv[i] - lv[j]).tolist())
    return median_factors(rounds)[0] * float(np.median(diffs)) if diffs else None


def tolerance(sigma: float, rounds: int, k: float = K_ROW, n: int = 1) -> float:
    """The widest |batchmark / vLLM − 1| that noise alone explains: max(GOAL, e^(k × SE) − 1).

    SE = σ × √2 × ``median_sd`` / √n: the log ratio of two clients' medians of ``rounds`` runs each, each median
    ``median_sd`` σ wide (:func:`median_factors`), the clients' noise independent and equal (their A/A); ``n`` such
    ratios averaged (a metric over ``n`` concurrencies).
    """
    return max(GOAL, math.exp(k * standard_error(sigma, rounds, n)) - 1.0)


def standard_error(sigma: float, rounds: int, n: int = 1) -> float:
    """Standard error of ln(batchmark / vLLM) of medians of ``rounds`` runs each, averaged over ``n`` points."""
    return sigma * math.sqrt(2.0) * median_factors(rounds)[1] / math.sqrt(n)


def relative(run: dict[str, Any], metric: str) -> float | None:
    """One run's figure relative to the server's own figure of that run (``run``: ``{"figures", "server"}``): a latency
    ÷ the server's mean of it, a throughput × the server's mean ITL (:data:`METRICS`); the plain figure where the run
    has no server means (``"server"`` None)."""
    value = run["figures"].get(metric)
    if run.get("server") is None or value is None:
        return value
    hist, power = next((m[4], m[5]) for m in METRICS if m[0] == metric)
    ref = run["server"].get(hist)
    return value * ref ** power if ref else None


def compare(runs: dict[int, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """Compare the clients' runs: the comparison the agreement test asserts.

    ``runs``: ``{concurrency: {"vllm": [run, …], "batchmark": [run, …]}}``, a run ``{"figures": {metric name of
    METRICS: value}, "server": {histogram: the server's own mean over that run, s} or None}``.

    - Each client's figure is the median of its runs, so a run that burst or ran beside a spike of outside load is
      outvoted, never skipped; ``diff`` = batchmark / vLLM − 1 of those medians.
    - ``drift_corrected``: the same of the runs' figures relative to the server's own (:func:`relative`): the
      machine's load slows the server and so every figure of a run, the server's own histograms as much, so the
      ratio keeps what the client measured and drops what the machine did (a run without server means: the plain
      figures).  This is the difference asserted.
    - The noise σ of a metric is pooled over concurrencies and both clients from the A/A spread of the compared
      values (:func:`noise_sigma`); a row agrees when |ln(1 + drift_corrected)| ≤ ln(1 + tol), tol =
      :func:`tolerance` (K_ROW standard errors).
    - Per metric over all concurrencies (``pooled``): a client's definition that differs from vLLM's shows at every
      concurrency, so the mean of the rows' ln(1 + drift_corrected) is held to the tolerance of its standard error,
      SE / √(concurrencies), K_POOLED of them; ``detectable`` is the smallest such disagreement this run catches 99 % of the time,
      e^(ln(1 + tol) + 2.326 SE) − 1.
    - A metric with σ > MAX_SIGMA fails: too noisy to tell the clients apart.

    Returns ``{"rows": [{"concurrency", "metric", "vllm", "batchmark", "diff", "drift_corrected", "tol", "sigma", "ok",
    "vllm_runs", "batchmark_runs", "aa_vllm", "aa_batchmark"}], "pooled": [{"metric", "drift_corrected", "tol",
    "detectable", "ok"}], "rounds", "sigma": {metric: σ}, "ok", "failures": [text]}``; ``*_runs`` the plain per-run
    figures, ``aa_*`` a client's A/A spread (max / min − 1 of its compared values).
    """
    rounds = min(len(v) for per in runs.values() for v in per.values())
    rel = {c: {k: {m: [relative(r, m) for r in per[k][:rounds]] for m, *_ in METRICS} for k in ("vllm", "batchmark")}
           for c, per in runs.items()}
    sigma = {m: noise_sigma([rel[c][k][m] for c in runs for k in ("vllm", "batchmark")], rounds) for m, *_ in METRICS}
    rows, pooled, failures = [], [], []
    for m, *_ in METRICS:
        s = sigma[m]
        if s is None or s > MAX_SIGMA:
            failures.append(f"{m}: too noisy to tell the clients apart (A/A σ {'-' if s is None else f'{s:.1%}'} > "
                            f"{MAX_SIGMA:.0%})")
    for c, per in runs.items():
        for m, *_ in METRICS:
            v = [r["figures"].get(m) for r in per["vllm"][:rounds]]
            b = [r["figures"].get(m) for r in per["batchmark"][:rounds]]
            vm, bm = _median(v), _median(b)
            rv, rb = _median(rel[c]["vllm"][m]), _median(rel[c]["batchmark"][m])
            s = sigma[m]
            tol = tolerance(s, rounds) if s is not None else None
            corrected = rb / rv - 1.0 if rv and rb else None
            ok = corrected is not None and tol is not None and abs(math.log1p(corrected)) <= math.log1p(tol)
            rows.append({"concurrency": c, "metric": m, "vllm": vm, "batchmark": bm,
                         "diff": bm / vm - 1.0 if vm and bm else None, "drift_corrected": corrected, "tol": tol,
                         "sigma": s, "ok": ok, "vllm_runs": v, "batchmark_runs": b,
                         "aa_vllm": _aa(rel[c]["vllm"][m]), "aa_batchmark": _aa(rel[c]["batchmark"][m])})
            if not ok:
                failures.append(f"c = {c} {m}: " + ("no figure (a median of 0: most runs burst)" if corrected is None
                                                    or tol is None else f"batchmark / vLLM − 1 = {corrected:+.1%} "
                                                    f"beyond ±{tol:.1%} (σ {s:.1%})"))
    for m, *_ in METRICS:
        logs = [math.log1p(r["drift_corrected"]) for r in rows if r["metric"] == m and r["drift_corrected"] is not None
                and r["drift_corrected"] > -1]
        s = sigma[m]
        if s is None or len(logs) < len(runs):
            pooled.append({"metric": m, "drift_corrected": None, "tol": None, "detectable": None, "ok": False})
            continue
        se = standard_error(s, rounds, len(logs))
        tol = tolerance(s, rounds, K_POOLED, len(logs))
        mean = sum(logs) / len(logs)
        ok = abs(mean) <= math.log1p(tol)
        pooled.append({"metric": m, "drift_corrected": math.expm1(mean), "tol": tol,
                       "detectable": math.exp(math.log1p(tol) + Z99 * se) - 1.0, "ok": ok})
        if not ok:
            failures.append(f"{m} over c = {', '.join(map(str, runs))}: batchmark / vLLM − 1 = {math.expm1(mean):+.1%} "
                            f"beyond ±{tol:.1%}")
    return {"rows": rows, "pooled": pooled, "rounds": rounds, "sigma": sigma, "ok": not failures,
            "failures": failures}


def _median(values: list[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return float(np.median(vals)) if vals else None


def _aa(values: list[float | None]) -> float | None:
    """A/A spread of one client's runs: largest / smallest − 1 over its positive runs (None with fewer than two)."""
    vals = [v for v in values if v is not None and v > 0]
    return max(vals) / min(vals) - 1.0 if len(vals) >= 2 else None


def figures(res: dict[str, Any] | Any) -> dict[str, float | None]:
    """One run's figures ``{metric name: value}``: from a ``vllm bench serve`` result dict or a batchmark summary."""
    if isinstance(res, dict):
        return {m[0]: (float(res[m[1]]) * m[2] if res.get(m[1]) is not None else None) for m in METRICS}
    return {m[0]: m[3](res) for m in METRICS}


def make_engine(url: str, folder: Path, concurrencies: tuple[int, ...], input_len: int, output_len: int,
                per_slot: int, minimum: int):
    """batchmark's ``openai`` engine for the served model, loaded once (tokenizer, feature probe) for every point:
    ``max(per_slot × c, minimum)`` measured requests a run, no warm-up, vLLM's two extra body keys."""
    from pipeline.config.sweepconfig import parse_config
    from pipeline.backends import get_backend

    cfg = parse_config({"name": "agreement", "hardware": "cpu", "backend": "openai", "input_len": input_len,
                        "output_len": output_len, "concurrency": list(concurrencies), "repeats": 1,
                        "openai": {"base_url": url + "/v1", "requests_per_slot": per_slot, "min_requests": minimum,
                                   "tokenizer": str(folder), "timeout_s": 600, "extra_body": dict(VLLM_CLIENT_KEYS)},
                        "models": [{"name": SERVED, "served_name": SERVED}]})
    engine = get_backend(cfg)
    engine.load(cfg.models[0])
    return engine


def run_batchmark(engine, c: int, input_len: int, output_len: int):
    """One batchmark run of a point (one repeat, no warm-up) through ``engine`` (:func:`make_engine`); its summary."""
    from pipeline.metrics.summarize import summarize_point
    from pipeline.core.records import PointKey

    return summarize_point(engine.measure(PointKey(SERVED, "openai", input_len, output_len, c), 1, False, 0))


def _raise_priority(nice: int | None) -> None:
    """``preexec_fn`` of the server and ``vllm bench serve``: start at ``nice`` (their threads and children inherit it)."""
    if nice is not None:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except OSError:
            pass


def priority_allowed(nice: int | None) -> bool:
    """Whether this process may run at ``nice`` (a negative one needs root or CAP_SYS_NICE); tried and undone."""
    if nice is None:
        return False
    was = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:
        return False
    os.setpriority(os.PRIO_PROCESS, 0, was)
    return True


def run(concurrencies: tuple[int, ...] = (1, 4, 16), input_len: int = 32, output_len: int = 32,
        per_slot: int = 2, minimum: int = 12, rounds: int = ROUNDS, work: Path | None = None,
        nice: int | None = NICE, scrape: bool = True) -> dict[str, Any]:
    """Both clients at every concurrency on one server, ``rounds`` runs each, taking turns (ABBA: vLLM first in
    even rounds), compared by :func:`compare`.

    ``nice``: the scheduling priority of the server, ``vllm bench serve`` and this process's measuring thread
    while it runs (module docstring, "a machine shared"); None, or where not permitted, the priority stays.

    Returns :func:`compare`'s dict plus ``"vllm": {c: [result dict per round]}``, ``"summaries": {c: [PointSummary
    per round]}``, ``"runs"`` (the per-run figures compared), ``"nice"`` (the priority used, None when none),
    ``"load"`` (the 1-minute load average before and after), ``"seconds"`` (wall time, server start included) and
    ``"dtype"`` (the dtype served, :func:`agreement_dtype`).

    Raises:
        RuntimeError: no usable vLLM environment, or the server or ``vllm bench serve`` failed.
    """
    from pipeline.machine.modelfolders import build_model_folder

    python = vllm_python()
    if python is None:
        raise RuntimeError("no usable vLLM environment (.venv-vllm); make it with `batchmark server-env`")
    t_start = time.monotonic()
    load_before = os.getloadavg()[0]
    work = work or Path(tempfile.mkdtemp(prefix="vllm-agreement-"))
    work.mkdir(parents=True, exist_ok=True)
    nice = nice if priority_allowed(nice) else None
    was = os.getpriority(os.PRIO_PROCESS, 0)
    dtype, _why = agreement_dtype()
    folder = build_model_folder("agreement-llama", SMALL_LLAMA, dtype)
    bench = VLLMBench(python, work / "vllm-bench.log", nice)  # imports vLLM while the server starts
    try:
        proc, url = start_server(python, folder, work / "server.log", max(concurrencies), nice, dtype)
    except BaseException:
        bench.close()
        raise
    vllm: dict[int, list[dict[str, Any]]] = {c: [] for c in concurrencies}
    summaries: dict[int, list[Any]] = {c: [] for c in concurrencies}
    server: dict[int, dict[str, list[dict[str, float | None]]]] = {c: {"vllm": [], "batchmark": []} for c in concurrencies}
    try:
        _raise_priority(nice)  # this thread: batchmark's load generator runs in it (its event loop)
        sizes = {c: max(per_slot * c, minimum) for c in concurrencies}
        bench.point(vllm_bench_args(url, folder, 1, 4, input_len, output_len, work, "throwaway.json"),
                    work / "throwaway.json")  # warms the server
        engine = make_engine(url, folder, concurrencies, input_len, output_len, per_slot, minimum)
        if not scrape:
            engine._murl = None  # a diagnosis: batchmark without its /metrics sampling process
        for c in concurrencies:
            for r in range(rounds):
                def vllm_turn() -> None:
                    name = f"vllm-c{c}-r{r}.json"
                    vllm[c].append(bench.point(
                        vllm_bench_args(url, folder, c, sizes[c], input_len, output_len, work, name), work / name))

                def batchmark_turn() -> None:
                    summaries[c].append(run_batchmark(engine, c, input_len, output_len))

                for client, turn in ((("vllm", vllm_turn), ("batchmark", batchmark_turn)) if r % 2 == 0 else
                                     (("batchmark", batchmark_turn), ("vllm", vllm_turn))):
                    before = server_sums(url)
                    turn()
                    server[c][client].append(server_means(before, server_sums(url)))
    finally:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, was)  # lowering is always allowed
        except OSError:
            pass
        bench.close()
        stop_server(proc)
    runs = {c: {"vllm": [{"figures": figures(v), "server": m} for v, m in zip(vllm[c], server[c]["vllm"])],
                "batchmark": [{"figures": figures(s), "server": m} for s, m in zip(summaries[c], server[c]["batchmark"])]}
            for c in concurrencies}
    out = compare(runs)
    out.update(vllm=vllm, summaries=summaries, runs=runs, nice=nice, load=(load_before, os.getloadavg()[0]),
               seconds=time.monotonic() - t_start, dtype=dtype)
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """The side-by-side table as text: each client's median of its runs, their difference, the tolerance the A/A
    noise justifies (:func:`tolerance`), each client's A/A spread (max / min − 1 of its runs)."""
    from pipeline.core.texttable import text_table

    def f(v: float | None, pct: bool = False) -> str:
        return "-" if v is None else (f"{v:+.1%}" if pct else f"{v:.2f}")

    return "\n".join(text_table(["c", "metric", "vllm bench serve", "batchmark", "batchmark / vLLM − 1",
                                  "drift-corrected", "tolerance", "A/A vLLM", "A/A batchmark"],
                                 [[r["concurrency"], r["metric"], f(r["vllm"]), f(r["batchmark"]), f(r["diff"], True),
                                   f(r.get("drift_corrected"), True),
                                   "-" if r.get("tol") is None else f"±{r['tol']:.1%}" + ("" if r.get("ok") else " ✗"),
                                   f(r.get("aa_vllm"), True), f(r.get("aa_batchmark"), True)] for r in rows]))


def report(res: dict[str, Any]) -> str:
    """:func:`table` and the lines under it: the noise σ of each metric, the rounds, the priority, the machine's
    load average and the wall time, then the verdict (``agree`` or each failure)."""
    sig = ", ".join(f"{m.split(' (')[0]} {'-' if s is None else f'{s:.1%}'}" for m, s in res["sigma"].items())
    pooled = "; ".join(f"{p['metric'].split(' (')[0]} {p['drift_corrected']:+.1%} (±{p['tol']:.1%}, catches "
                       f"≥ {p['detectable']:.0%})" if p["tol"] is not None else f"{p['metric']} -" for p in res["pooled"])
    lines = [table(res["rows"]),
             f"A/A noise σ of one run (robust, pooled over c and clients): {sig}",
             f"over all c (drift-corrected, tolerance, the disagreement caught 99 % of the time): {pooled}",
             f"{res['rounds']} runs per client per point (ABBA); served in {res.get('dtype', '?')}; priority "
             f"{'nice ' + str(res['nice']) if res.get('nice') is not None else 'unchanged'}; load average "
             f"{res['load'][0]:.1f} before, {res['load'][1]:.1f} after; {res['seconds']:.0f} s, server start included",
             "agree: every figure within its tolerance" if res["ok"] else "DISAGREE: " + "; ".join(res["failures"])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run both clients on one vLLM CPU server and print the side-by-side table; exit 2 without ``.venv-vllm``, 1
    when they disagree."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="runs of each client per point (ABBA; at least 3)")
    ap.add_argument("--no-priority", action="store_true", help="leave the processes at their normal priority")
    ap.add_argument("--no-scrape", action="store_true", help="batchmark without its /metrics sampling (a diagnosis)")
    ap.add_argument("--json", help="write the rows as JSON to this file")
    args = ap.parse_args(argv)
    if vllm_python() is None:
        print("no usable vLLM environment (.venv-vllm); make it with `batchmark server-env`", file=sys.stderr)
        return 2
    res = run(tuple(args.concurrency), args.input_len, args.output_len, rounds=args.rounds,
              nice=None if args.no_priority else NICE, scrape=not args.no_scrape)
    print(report(res))
    if args.json:
        Path(args.json).write_text(json.dumps({k: res[k] for k in ("rows", "pooled", "sigma", "rounds", "nice", "load",
                                                                   "seconds", "ok", "failures", "runs")}, indent=1) + "\n")
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
