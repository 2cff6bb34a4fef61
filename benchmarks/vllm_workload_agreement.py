"""batchmark beside ``vllm bench serve`` on workloads as users run them: drawn lengths, bursty arrivals, a prompt file.

One vLLM CPU server (``.venv-vllm``, the model and server of :mod:`benchmarks.vllm_agreement`) and two workloads,
each sent by both clients, open loop at ``rate`` requests/s with gamma gaps of shape ``burstiness`` (vLLM's
``--request-rate R --burstiness k``; batchmark's ``open_loop: {load: gamma, burstiness: k}``):

- ``random``: ``vllm bench serve --dataset-name random --random-input-len I --random-output-len O
  --random-range-ratio r`` against batchmark's ``lengths: {input/output: {distribution: uniform, range_ratio: r}}``.
  Both draw each request's lengths as integers uniform on [⌊L(1 − r)⌋, ⌈L(1 + r)⌉], inputs then outputs from one
  ``numpy.random.default_rng(seed)`` (vLLM 0.32: ``vllm/benchmarks/datasets/utils.py``, ``get_sampling_params``:
  ``input_low = math.floor(real_input_len * (1 - input_range_ratio))``, ``input_high = math.ceil(real_input_len *
  (1 + input_range_ratio))``, ``rng.integers(input_low, input_high + 1, size=num_requests)``, the same for the
  output with its low end at least 1; ``real_input_len`` is L less the tokenizer's special tokens, 0 for this word
  tokenizer).  vLLM is given the seed batchmark draws the point from (:func:`pipeline.backends.served.served_point_seed`),
  so the two clients send the same lengths, request for request;
- ``custom``: ``--dataset-name custom --dataset-path F --custom-output-len -1 --skip-chat-template`` against
  batchmark's ``lengths.prompt_file: F``, F = ``data/prompts/cpu-words.jsonl`` (each line's ``output_tokens`` and
  ``output_len`` the same number), every line sent once by each client (in each client's own shuffled order).

Like with like, as in :mod:`benchmarks.vllm_agreement`: greedy, ``ignore_eos``, usage on every chunk, vLLM's two
extra keys in batchmark's body; ``min_tokens`` left out of both (vLLM's client sends none, and a fixed one would
exceed a drawn ``max_tokens``).  The schedules are each client's own draw of the same gamma process (numpy's
legacy ``np.random.gamma`` seeded by ``--seed`` in vLLM, ``default_rng`` in batchmark, :mod:`pipeline.config.arrivals`),
so the clients' runs see different bursts: each round gives both clients a new seed, so that each client's A/A
spread holds the schedule's luck and the tolerance of :func:`benchmarks.vllm_agreement.compare` allows for it.
vLLM also rescales its gaps so that its N arrivals span exactly N / rate (``vllm/benchmarks/serve.py``,
``get_request``: "re-scale delay time"); batchmark keeps its draw, so its output throughput (tokens over the
window up to the last completion) carries the gaps' own spread, a coefficient of variation of 1 / √(k N) on the
span (derived: a sum of N gamma(k) gaps), 24 % at k = 0.7 and N = 24, 17 % at N = 48.  Output throughput is therefore printed, not
asserted; TTFT, TPOT and per-chunk ITL p50 are asserted (:data:`ASSERTED`), drift-corrected by the server's own
histograms, which share the run's bursts.  ``random`` sends 48 requests a run (12 s of arrivals): with 24, TTFT p50's
A/A σ was 16 % at load average 7 to 8, near the 20 % :func:`benchmarks.vllm_agreement.compare` refuses as too noisy
(a median of n requests varies as 1 / √n); ``custom`` sends each of the file's 24 lines once.

    PYTHONPATH=$PWD python benchmarks/vllm_workload_agreement.py [--rate 4] [--rounds 4] [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import vllm_agreement as va  # noqa: E402

#: The shipped prompt file the ``custom`` workload sends (``benchmarks/make_prompt_file.py`` wrote it).
PROMPT_FILE = ROOT / "data" / "prompts" / "cpu-words.jsonl"
INPUT_LEN, OUTPUT_LEN, RANGE_RATIO, BURSTINESS = 32, 32, 0.9, 0.7
#: The metrics asserted (module docstring: output throughput is printed beside).
ASSERTED = ("TTFT p50 (ms)", "TPOT p50 (ms)", "ITL p50 (ms, per chunk)")


def lengths_block(workload: str) -> dict[str, Any]:
    """batchmark's ``lengths:`` of a workload (``random`` or ``custom``)."""
    if workload == "custom":
        return {"prompt_file": str(PROMPT_FILE)}
    uniform = {"distribution": "uniform", "range_ratio": RANGE_RATIO}
    return {"input": uniform, "output": uniform}


def make_engine(url: str, folder: Path, workload: str, rate: float, n: int):
    """batchmark's ``openai`` backend for ``workload``, open loop gamma at ``rate``, ``n`` measured requests a run,
    no warm-up, ``min_tokens`` off (module docstring)."""
    from pipeline.backends import get_backend
    from pipeline.config.sweepconfig import parse_config

    cfg = parse_config({"name": "workload-agreement", "hardware": "cpu", "backend": "openai", "input_len": INPUT_LEN,
                        "output_len": OUTPUT_LEN, "concurrency": [1], "repeats": 1, "lengths": lengths_block(workload),
                        "open_loop": {"load": "gamma", "burstiness": BURSTINESS, "rates": [rate]},
                        "openai": {"base_url": url + "/v1", "requests_per_point": n, "tokenizer": str(folder),
                                   "timeout_s": 600, "extra_body": dict(va.VLLM_CLIENT_KEYS)},
                        "models": [{"name": va.SERVED, "served_name": va.SERVED}]})
    engine = get_backend(cfg)
    engine.load(cfg.models[0])
    engine.features = dataclasses.replace(engine.features, min_tokens=False)
    return engine


def point_key(rate: float):
    """The open-loop point both clients measure."""
    from pipeline.core.records import PointKey

    return PointKey(va.SERVED, "openai", INPUT_LEN, OUTPUT_LEN, None, load="gamma", rate_rps=rate)


def vllm_args(url: str, folder: Path, workload: str, rate: float, n: int, seed: int, out_dir: Path,
              name: str) -> list[str]:
    """``vllm bench serve`` options of one run of ``workload`` (module docstring)."""
    if workload == "custom":
        data = ["--dataset-name", "custom", "--dataset-path", str(PROMPT_FILE), "--custom-output-len", "-1",
                "--skip-chat-template"]
    else:
        data = ["--dataset-name", "random", "--random-input-len", str(INPUT_LEN), "--random-output-len",
                str(OUTPUT_LEN), "--random-range-ratio", str(RANGE_RATIO)]
    extra = {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    return ["--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions", "--model", va.SERVED,
            "--tokenizer", str(folder), *data, "--num-prompts", str(n), "--request-rate", str(rate),
            "--burstiness", str(BURSTINESS), "--ignore-eos", "--temperature", "0", "--extra-body", json.dumps(extra),
            "--seed", str(seed), "--disable-tqdm", "--save-result", "--save-detailed", "--result-dir", str(out_dir),
            "--result-filename", name, "--percentile-metrics", "ttft,tpot,itl,e2el"]


def batchmark_lengths(records) -> dict[str, list[int]]:
    """A batchmark run's per-request lengths: drawn (what its bodies asked) and served (the server's usage)."""
    reqs = [q for rep in records.repeats for q in rep.requests]
    return {"drawn_input": [q.drawn_input_len for q in reqs], "drawn_output": [q.drawn_output_len for q in reqs],
            "input": [q.input_tokens for q in reqs], "output": [q.output_tokens for q in reqs]}


def run_workload(bench, url: str, folder: Path, work: Path, workload: str, rate: float, n: int,
                 rounds: int) -> dict[str, Any]:
    """Both clients on one workload, ``rounds`` runs each (ABBA), round r at seed ``r`` for both."""
    from pipeline.backends.served import served_point_seed
    from pipeline.metrics.summarize import summarize_point

    engine = make_engine(url, folder, workload, rate, n)
    runs: dict[str, list[dict[str, Any]]] = {"vllm": [], "batchmark": []}
    raw: dict[str, list[Any]] = {"vllm": [], "batchmark": []}
    for r in range(rounds):
        seed = served_point_seed(point_key(rate), r)

        def vllm_turn() -> dict[str, Any]:
            name = f"{workload}-vllm-r{r}.json"
            res = bench.point(vllm_args(url, folder, workload, rate, n, seed, work, name), work / name)
            raw["vllm"].append(res)
            return va.figures(res)

        def batchmark_turn() -> dict[str, Any]:
            recs = engine.measure(point_key(rate), 1, False, r)
            assert recs.meta["seed"] == seed, (recs.meta["seed"], seed)
            summary = summarize_point(recs)
            raw["batchmark"].append({"summary": summary, "lengths": batchmark_lengths(recs)})
            return va.figures(summary)

        turns = [("vllm", vllm_turn), ("batchmark", batchmark_turn)]
        for client, turn in (turns if r % 2 == 0 else turns[::-1]):
            before = va.server_sums(url)
            figs = turn()
            runs[client].append({"figures": figs, "server": va.server_means(before, va.server_sums(url))})
    return {"runs": runs, "raw": raw}


def run(rate: float = 4.0, n: int = 48, rounds: int = va.ROUNDS, work: Path | None = None,
        workloads: tuple[str, ...] = ("random", "custom")) -> dict[str, Any]:
    """Both workloads on one server (started and stopped here); per workload :func:`benchmarks.vllm_agreement.compare`
    of the runs (``{"rows", "pooled", "sigma", "ok", "failures", …}``) with its ``runs`` and ``raw`` results, and
    ``"load"``, ``"seconds"``, ``"dtype"``, ``"n"``.  ``n``: requests a run of ``random`` (``custom`` sends every line
    of :data:`PROMPT_FILE` once).

    Raises:
        RuntimeError: no usable vLLM environment, or the server or ``vllm bench serve`` failed.
    """
    from pipeline.config.promptfile import read_prompt_file
    from pipeline.machine.modelfolders import build_model_folder

    python = va.vllm_python()
    if python is None:
        raise RuntimeError("no usable vLLM environment (.venv-vllm); make it with `batchmark server-env`")
    t_start, load_before = time.monotonic(), os.getloadavg()[0]
    work = work or Path(tempfile.mkdtemp(prefix="vllm-workload-agreement-"))
    work.mkdir(parents=True, exist_ok=True)
    dtype, _why = va.agreement_dtype()
    folder = build_model_folder("agreement-llama", va.SMALL_LLAMA, dtype)
    bench = va.VLLMBench(python, work / "vllm-bench.log")
    try:
        proc, url = va.start_server(python, folder, work / "server.log", 16, None, dtype)
    except BaseException:
        bench.close()
        raise
    out: dict[str, Any] = {}
    try:
        sizes = {"random": n, "custom": len(read_prompt_file(PROMPT_FILE))}
        bench.point(vllm_args(url, folder, "random", rate, 4, 0, work, "throwaway.json"), work / "throwaway.json")
        for w in workloads:
            got = run_workload(bench, url, folder, work, w, rate, sizes[w], rounds)
            cmp = va.compare({rate: got["runs"]})
            cmp["failures"] = [f for f in cmp["failures"] if any(f.find(m) >= 0 for m in ASSERTED)]
            cmp["ok"] = not cmp["failures"]
            out[w] = {**cmp, **got, "n": sizes[w]}
    finally:
        bench.close()
        va.stop_server(proc)
    out.update(load=(load_before, os.getloadavg()[0]), seconds=time.monotonic() - t_start, dtype=dtype)
    return out


def length_checks(res: dict[str, Any], workload: str) -> list[str]:
    """What is exact about one workload's lengths (``res``: :func:`run`'s result of that workload), each failure a line: every request served as it was drawn
    (batchmark's usage = its drawn lengths; vLLM's ``input_lens``/``output_lens``), inside vLLM's range for
    ``random``, and the same lengths from both clients (request for request for ``random``, as multisets for
    ``custom``)."""
    fails = []
    low_in, high_in = int(np.floor(INPUT_LEN * (1 - RANGE_RATIO))), int(np.ceil(INPUT_LEN * (1 + RANGE_RATIO)))
    low_out, high_out = max(int(np.floor(OUTPUT_LEN * (1 - RANGE_RATIO))), 1), int(np.ceil(OUTPUT_LEN * (1 + RANGE_RATIO)))
    for r, (v, b) in enumerate(zip(res["raw"]["vllm"], res["raw"]["batchmark"])):
        bl = b["lengths"]
        if (bl["input"], bl["output"]) != (bl["drawn_input"], bl["drawn_output"]):
            fails.append(f"{workload} round {r}: batchmark's served lengths are not its drawn ones")
        if v["completed"] != len(v["input_lens"]) or v.get("failed"):
            fails.append(f"{workload} round {r}: vLLM's requests failed")
        if workload == "random":
            for name, vals, lo, hi in (("input", v["input_lens"], low_in, high_in),
                                       ("output", v["output_lens"], low_out, high_out)):
                if min(vals) < lo or max(vals) > hi:
                    fails.append(f"{workload} round {r}: vLLM's {name} lengths outside [{lo}, {hi}]")
            same = (list(v["input_lens"]), list(v["output_lens"])) == (bl["drawn_input"], bl["drawn_output"])
        else:
            same = (sorted(v["input_lens"]), sorted(v["output_lens"])) == (sorted(bl["input"]), sorted(bl["output"]))
        if not same:
            fails.append(f"{workload} round {r}: the clients' per-request lengths differ")
    return fails


def report(res: dict[str, Any]) -> str:
    """Each workload's side-by-side table and verdict, then the load and the wall time."""
    lines = []
    for w in ("random", "custom"):
        if w not in res:
            continue
        r = res[w]
        ins = r["raw"]["vllm"][0]["input_lens"]
        outs = r["raw"]["vllm"][0]["output_lens"]
        lines += [f"== {w}: {r['n']} requests a run, gamma k = {BURSTINESS}; lengths in {min(ins)}..{max(ins)} "
                  f"(mean {np.mean(ins):.1f}), out {min(outs)}..{max(outs)} (mean {np.mean(outs):.1f})",
                  va.table(r["rows"]),
                  "σ: " + ", ".join(f"{m.split(' (')[0]} {'-' if s is None else f'{s:.1%}'}" for m, s in r["sigma"].items()),
                  "lengths: " + ("; ".join(length_checks(r, w)) or "identical, and as drawn"),
                  "agree (TTFT, TPOT, ITL p50)" if r["ok"] else "DISAGREE: " + "; ".join(r["failures"])]
    lines.append(f"served in {res['dtype']}; load average {res['load'][0]:.1f} before, {res['load'][1]:.1f} after; "
                 f"{res['seconds']:.0f} s, server start included")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run both workloads and print :func:`report`; exit 2 without ``.venv-vllm``, 1 on a disagreement."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=4.0)
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=va.ROUNDS)
    ap.add_argument("--json", help="write the rows as JSON to this file")
    args = ap.parse_args(argv)
    if va.vllm_python() is None:
        print("no usable vLLM environment (.venv-vllm); make it with `batchmark server-env`", file=sys.stderr)
        return 2
    res = run(args.rate, args.requests, args.rounds)
    if args.json:
        Path(args.json).write_text(json.dumps({w: {"rows": res[w]["rows"], "pooled": res[w]["pooled"],
                                                   "sigma": res[w]["sigma"], "runs": res[w]["runs"],
                                                   "vllm": res[w]["raw"]["vllm"],
                                                   "batchmark_lengths": [b["lengths"] for b in res[w]["raw"]["batchmark"]]}
                                               for w in ("random", "custom")}, indent=1, default=str) + "\n")
    print(report(res))
    ok = all(res[w]["ok"] and not length_checks(res[w], w) for w in ("random", "custom"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
