"""batchmark's load generator beside ``vllm bench serve`` on one real vLLM server, by the same definitions (issue 23).

One vLLM server (the CPU build in ``.venv-vllm``, made by ``batchmark server-env``) serves a small
random-weights Llama (a local folder, word-level tokenizer, no download).  At each concurrency both
clients send the same workload to it: ``--random-input-len`` / ``input_len`` tokens in,
``--random-output-len`` / ``output_len`` out with ``ignore_eos``, ``max(4 c, 16)`` measured requests at
``c`` in flight, closed loop, ``/v1/completions``, no warm-up in either (one throwaway ``vllm bench serve``
of 4 requests warms the server first).  In the one full run made here, with ``--num-warmups c``, vLLM
0.32's client saw every chunk of a c = 1 request arrive at once (TTFT p50 130 ms, TPOT 0); a run without
it streamed as expected (TTFT p50 10 ms, TPOT p50 3.2 ms); the cause was not found:

- vLLM: ``vllm bench serve`` run from the same environment (``vllm.benchmarks.serve``'s own
  ``main``; the ``vllm`` console script of the CPU build looks for the distribution ``vllm``),
  ``--save-result``;
- batchmark: the ``openai`` engine's load generator (:class:`pipeline.engines.openai.OpenAIEngine`).

Compared by vLLM's definitions (docs/definitions.md): output throughput (tokens / vLLM's
duration: batchmark's ``output_throughput_tok_s``), TTFT p50, TPOT p50 (vLLM's ``tpot``:
batchmark's ``tpot_s``) and ITL p50 (vLLM's per-chunk ``itl``: batchmark's ``itl_chunk_s``).
One difference stays by design: batchmark keeps ``c`` requests in flight until the last measured
request completes (cool-down requests), vLLM lets its tail run at a falling concurrency.

    PYTHONPATH=$PWD python benchmarks/vllm_agreement.py [--concurrency 1 4 16] [--output-len 32] [--json FILE]

Prints the side-by-side table; exits 2 when the vLLM environment is missing.
"""

from __future__ import annotations

import argparse
import json
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

#: A small Llama for a CPU: 4 layers, head_dim 64 (vLLM's CPU attention kernels need 64 or more).
SMALL_LLAMA = {"model_type": "llama", "vocab_size": 4096, "hidden_size": 512, "intermediate_size": 1024,
               "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
               "max_position_embeddings": 512, "tie_word_embeddings": False}
SERVED = "agreement-llama"
#: The figures compared: (row name, vLLM result key, scale to s or tok/s, batchmark getter).
METRICS = (
    ("output throughput (tok/s)", "output_throughput", 1.0, lambda s: s.output_throughput_tok_s),
    ("TTFT p50 (ms)", "median_ttft_ms", 1.0, lambda s: s.ttft_s["p50"] * 1e3),
    ("TPOT p50 (ms)", "median_tpot_ms", 1.0, lambda s: s.tpot_s["p50"] * 1e3),
    ("ITL p50 (ms, per chunk)", "median_itl_ms", 1.0, lambda s: s.itl_chunk_s["p50"] * 1e3),
)
_BENCH = ("import sys\n"
          "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
          "from vllm.benchmarks.serve import add_cli_args, main\n"
          "p = FlexibleArgumentParser()\n"
          "add_cli_args(p)\n"
          "main(p.parse_args(sys.argv[1:]))\n")


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


def run_vllm_bench(python: Path, url: str, folder: Path, c: int, n: int, input_len: int, output_len: int,
                   out_dir: Path) -> dict[str, Any]:
    """One ``vllm bench serve`` point (``n`` requests at ``c`` in flight, no warm-up); its saved result JSON."""
    name = f"vllm-c{c}.json"
    cmd = [str(python), "-c", _BENCH, "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
           "--model", SERVED, "--tokenizer", str(folder), "--dataset-name", "random",
           "--random-input-len", str(input_len), "--random-output-len", str(output_len), "--random-range-ratio", "0",
           "--num-prompts", str(n), "--max-concurrency", str(c), "--ignore-eos",
           "--seed", "0", "--disable-tqdm", "--save-result", "--result-dir", str(out_dir), "--result-filename", name,
           "--percentile-metrics", "ttft,tpot,itl,e2el"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise RuntimeError(f"vllm bench serve failed ({done.returncode}): {(done.stderr or done.stdout)[-1500:]}")
    return json.loads((out_dir / name).read_text())


def run_batchmark(url: str, folder: Path, c: int, n: int, input_len: int, output_len: int, repeats: int = 1):
    """One batchmark point (``n`` measured per repeat, no warm-up) through the ``openai`` engine; its summary."""
    from pipeline.config import parse_config
    from pipeline.engines import get_engine
    from pipeline.metrics import summarize_point
    from pipeline.records import PointKey

    cfg = parse_config({"name": "agreement", "hardware": "cpu", "engine": "openai", "input_len": input_len,
                        "output_len": output_len, "concurrency": [c], "repeats": repeats,
                        "openai": {"base_url": url + "/v1", "requests_per_point": n, "tokenizer": str(folder),
                                   "timeout_s": 600},
                        "models": [{"name": SERVED, "served_name": SERVED}]})
    engine = get_engine(cfg)
    engine.load(cfg.models[0])
    rec = engine.measure(PointKey(SERVED, "openai", input_len, output_len, c), repeats, False, 0)
    return summarize_point(rec)


def compare(c: int, vllm: dict[str, Any], summ: Any) -> list[dict[str, Any]]:
    """Rows ``{"concurrency", "metric", "vllm", "batchmark", "diff"}`` (diff = batchmark / vLLM − 1) of one point."""
    rows = []
    for name, key, scale, get in METRICS:
        v = vllm.get(key)
        b = get(summ)
        v = float(v) * scale if v is not None else None
        rows.append({"concurrency": c, "metric": name, "vllm": v, "batchmark": b,
                     "diff": (b / v - 1.0) if v and b is not None else None})
    return rows


def run(concurrencies: tuple[int, ...] = (1, 4, 16), input_len: int = 32, output_len: int = 32,
        per_slot: int = 4, minimum: int = 16, repeats: int = 1, work: Path | None = None) -> dict[str, Any]:
    """Both clients at every concurrency on one server; ``{"rows": [...], "summaries": {c: PointSummary}, "vllm": {c: dict}}``.

    Raises:
        RuntimeError: no usable vLLM environment, or the server or ``vllm bench serve`` failed.
    """
    from pipeline.modelfolders import build_model_folder

    python = vllm_python()
    if python is None:
        raise RuntimeError("no usable vLLM environment (.venv-vllm); make it with `batchmark server-env`")
    work = work or Path(tempfile.mkdtemp(prefix="vllm-agreement-"))
    work.mkdir(parents=True, exist_ok=True)
    folder = build_model_folder("agreement-llama", SMALL_LLAMA)
    proc, url = start_server(python, folder, work / "server.log", max(concurrencies))
    out: dict[str, Any] = {"rows": [], "summaries": {}, "vllm": {}}
    try:
        run_vllm_bench(python, url, folder, 1, 4, input_len, output_len, work)  # throwaway: warms the server
        for c in concurrencies:
            n = max(per_slot * c, minimum)
            vl = run_vllm_bench(python, url, folder, c, n, input_len, output_len, work)
            summ = run_batchmark(url, folder, c, n, input_len, output_len, repeats)
            out["vllm"][c], out["summaries"][c] = vl, summ
            out["rows"].extend(compare(c, vl, summ))
    finally:
        stop_server(proc)
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """The side-by-side table as text."""
    from pipeline.texttable import text_table

    def f(v: float | None, pct: bool = False) -> str:
        return "-" if v is None else (f"{v:+.1%}" if pct else f"{v:.2f}")

    return "\n".join(text_table(["c", "metric", "vllm bench serve", "batchmark", "batchmark / vLLM − 1"],
                                 [[r["concurrency"], r["metric"], f(r["vllm"]), f(r["batchmark"]), f(r["diff"], True)]
                                  for r in rows]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--json", help="write the rows as JSON to this file")
    args = ap.parse_args(argv)
    if vllm_python() is None:
        print("no usable vLLM environment (.venv-vllm); make it with `batchmark server-env`", file=sys.stderr)
        return 2
    res = run(tuple(args.concurrency), args.input_len, args.output_len)
    print(table(res["rows"]))
    if args.json:
        Path(args.json).write_text(json.dumps(res["rows"], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
