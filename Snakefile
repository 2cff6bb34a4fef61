# batchmark workflow: sweep -> records -> summaries -> analysis -> pages -> site.
#
#   snakemake --cores all                                   # measure config/vllm-cpu.yaml (real vLLM), build the site
#   snakemake --cores all --configfile config/transformers-cpu.yaml   # in-process static batches, no server
#   snakemake --cores all --configfile config/spark.yaml    # another sweep config
#   snakemake --cores all --configfile config/llamacpp-cpu.yaml   # llama.cpp's llama-server (built once), GGUFs
#   snakemake --cores 1 committed                           # site from the runs in data/runs/ alone, no measuring
#   snakemake --cores all --config fresh=1                  # measure again into a new run
#   snakemake --profile profiles/slurm --configfile …       # each model a Slurm job (README: "On a cluster")
#
# Rules stay thin: each calls one `batchmark` command.  The only logic here chooses targets:
# which run this checkout measures for the config (resumed if killed, reused once complete,
# a new one when the config's content changes), and which complete runs go on the site
# (every complete run; `committed` takes exactly those and measures nothing).  Complete runs
# already in data/runs/ are inputs as they are: immutable, with their summaries and analysis.
# The unit of measurement is one model of the sweep (`part`, one job each: on a cluster, one
# node each); `merge` assembles the parts into the run (pipeline/sweep/parts.py).  A run is published with its
# summaries and analysis (written by those stages at publish: `batchmark merge`, `sweep`, `import`), so the merge rule's
# outputs are all four files; the summaries and analysis rules only fill in a complete run published without them.

import os
import re
import shlex
import sys
from pathlib import Path

from pipeline.store import pointfiles, runs
from pipeline.sweep import parts
from pipeline.config.sweepconfig import load_config
from pipeline.core.errors import BatchmarkError
from pipeline.machine.hardware import load_profile
from pipeline.pages.render import page_templates
from pipeline.config.resources import part_resources, part_threads
from pipeline.core.texttable import printable

# The sweep config is the Snakemake configfile (--configfile); config/vllm-cpu.yaml (real vLLM, CPU build) without one.
CONFIG_PATH = str(workflow.configfiles[-1]) if workflow.configfiles else "config/vllm-cpu.yaml"
try:
    SWEEP = load_config(CONFIG_PATH)
except BatchmarkError as exc:  # one line naming the file and field, as the CLI prints it; nothing is touched
    sys.exit(f"batchmark: error: {printable(exc, one_line=True)}")
# A cluster job reads this Snakefile again on its node: it gets the run id of the invocation that
# submitted it through the environment (sbatch --export=ALL; `envvars` for Kubernetes).
# Run folder names arrive by `git pull`: every run id is checked (runs.is_run_id, a whole match) before it is used,
# and every value that reaches a shell command is quoted besides ({...:q}, shlex.quote).
try:
    RUN_ID = runs.check_run_id(str(config.get("run_id") or os.environ.get("BATCHMARK_RUN_ID")
                                   or parts.run_id_for_config(SWEEP.name, SWEEP.digest(), fresh=bool(config.get("fresh")))))
    COMPLETE = [p.name for p in runs.list_runs()]  # refuses a folder whose name is not a run id, naming it
except BatchmarkError as exc:
    sys.exit(f"batchmark: error: {printable(exc, one_line=True)}")
os.environ["BATCHMARK_RUN_ID"] = RUN_ID
# Snakemake's job banners share the terminal with a sweep's display: one line per point, never a bar they land on.
os.environ.setdefault("BATCHMARK_PROGRESS", "lines")
PARTS = {pointfiles.file_stem(name): name for name in parts.part_names(SWEEP)}  # a model, or model/variant
PART_RESOURCES = part_resources(SWEEP, load_profile(SWEEP.hardware))
OTHERS = [r for r in COMPLETE if r != RUN_ID]
PYTHON = shlex.quote(sys.executable)
BATCHMARK = f"{PYTHON} -m pipeline"
TEMPLATES = sorted(str(p) for p in Path("templates").rglob("*.j2"))
THEME = sorted(str(p) for p in Path("templates/theme").rglob("*.html"))  # mkdocs.yml: theme.custom_dir
PAGES = [f"data/pages/{p.removesuffix('.j2')}" for p in page_templates()]
MODEL_CARDS = sorted(str(p) for p in Path("data/models").glob("*.yaml"))
GUIDE = sorted(str(p) for p in Path("docs").rglob("*.md"))  # the Guide tab and the Methodology page's definitions
# The shared reference measurement beside the repository (never copied into it): an input of the
# explainers only when it exists, stored as a run under data/reference/ by the reference rule.
REFERENCE_SRC = "../shared/reference/llamacpp-dgx-spark-batched-bench.md"
REFERENCE = ["data/reference/reference-dgx-spark-llamacpp/analysis.json"] if Path(REFERENCE_SRC).is_file() else []
# A llamacpp sweep's parts need llama.cpp built once for this machine (`batchmark llamacpp-env`, minutes); others none.
LLAMACPP_ENV = [f"{SWEEP.llamacpp.build}/batchmark-env.json"] if SWEEP.backend == "llamacpp" else []
# A llamacpp config's GGUF files also go through llama-batched-bench (static batches at its shapes and concurrencies),
# imported as a run of their own beside the sweep; the tables file is the rule's output (the import claims its folder).
STATIC = [f"{RUN_ID}-bb"] if LLAMACPP_ENV else []
STATIC_TABLES = [f"data/batched-bench/{r}.txt" for r in STATIC]
REFERENCE_ARGS = " ".join(f"--reference {shlex.quote(str(Path(r).parent))}" for r in REFERENCE)

envvars: "BATCHMARK_RUN_ID"

wildcard_constraints:
    run=re.escape(RUN_ID),
    part="|".join(re.escape(p) for p in PARTS)

# Only the measuring jobs go to a cluster; the rest are quick and run where Snakemake runs.
localrules: all, reference, pages, site, committed


# The config's run is a target of its own, not only an input of the pages: pages and a site made outside this
# workflow (`committed`, a manual `batchmark pages` + `mkdocs build`) carry no Snakemake record, and with them present
# Snakemake takes the run's missing files for intermediates it need not make.  A missing or incomplete run is thus
# always measured (then its newer analysis re-makes the pages); a complete one is present and plans nothing.
rule all:
    input: f"data/runs/{RUN_ID}/run.json", f"data/runs/{RUN_ID}/analysis.json", STATIC_TABLES, "site/index.html"


# The workflow ends with one line: the run, its verdict and main reason, how to see it, the site.
onsuccess:
    if Path(f"data/runs/{RUN_ID}/analysis.json").is_file() and Path("site/index.html").is_file():
        shell(f"{BATCHMARK} verdict {RUN_ID} --site site/index.html")


rule part:
    input: config=ancient(CONFIG_PATH), env=ancient(LLAMACPP_ENV)  # content, not mtime, decides: a changed config gets a new RUN_ID
    output: "data/runs/.parts/{run}/{part}/points.json"
    params: model=lambda w: PARTS[w.part]
    threads: part_threads(SWEEP, workflow.resource_settings.cores)  # locally the measurement owns the machine (and OMP_NUM_THREADS)
    resources: **PART_RESOURCES
    retries: SWEEP.cluster.retries  # a retry resumes the part's finished points
    shell: "{BATCHMARK} sweep --config {input.config:q} --run-id {wildcards.run:q} --model={params.model:q} --pointer"


if LLAMACPP_ENV:
    rule llamacpp_env:
        output: LLAMACPP_ENV[0]
        shell: "{BATCHMARK} llamacpp-env --out {SWEEP.llamacpp.build:q} --requirements {SWEEP.llamacpp.requirements:q}"

    rule batched_bench:
        input: config=ancient(CONFIG_PATH), env=ancient(LLAMACPP_ENV)
        output: STATIC_TABLES
        shell: "{BATCHMARK} batched-bench --config {input.config:q} --run-id {STATIC[0]:q}"


# Once complete, the run is an input as it is (no rule makes it, so nothing can re-make it), however
# it was measured: in parts, or in one job by an earlier batchmark.
if RUN_ID not in COMPLETE:
    localrules: merge

    # The merge publishes the run whole: points.json, its summaries and analysis (written by their stages before the
    # run says complete: pipeline/analysis/stages.py write_derived) and run.json.  Every file it writes is its output, so
    # no later rule writes them again (Snakemake's "output files ... were not present when the DAG was created").
    rule merge:
        input: config=ancient(CONFIG_PATH), parts=parts.part_targets(SWEEP, RUN_ID)
        output: "data/runs/{run}/points.json", "data/runs/{run}/summaries.json", "data/runs/{run}/analysis.json", "data/runs/{run}/run.json"
        shell: "{BATCHMARK} merge --config {input.config:q} --run-id {wildcards.run:q}"
else:
    localrules: summaries, analysis

    # A complete run published by an earlier batchmark without its derived files gets them from their stages
    # (as `batchmark upgrade` writes them).  Only the missing ones get a rule: a file the merge wrote is an input as it
    # is, so neither its mtime nor Snakemake's record of the rule that made it ("code has changed") re-makes it.
    if not Path(f"data/runs/{RUN_ID}/summaries.json").is_file():
        rule summaries:
            input: ancient("data/runs/{run}/points.json")
            output: "data/runs/{run}/summaries.json"
            shell: "{BATCHMARK} write-summaries {wildcards.run:q}"

    if not Path(f"data/runs/{RUN_ID}/analysis.json").is_file():
        rule analysis:
            input: ancient("data/runs/{run}/summaries.json")
            output: "data/runs/{run}/analysis.json"
            shell: "{BATCHMARK} analyze {wildcards.run:q}"


rule pages:
    input:
        f"data/runs/{RUN_ID}/analysis.json",
        [f"data/runs/{r}/run.json" for r in OTHERS],
        TEMPLATES,
        GUIDE,
        MODEL_CARDS,
        REFERENCE,
        STATIC_TABLES,
    output: PAGES
    params: runs=[r for r in OTHERS if r not in STATIC] + STATIC + [RUN_ID]
    shell: "{BATCHMARK} pages --out data/pages --runs {params.runs:q} {REFERENCE_ARGS}"


rule reference:
    input: REFERENCE_SRC
    output: "data/reference/reference-dgx-spark-llamacpp/analysis.json"
    shell: "{BATCHMARK} reference {input:q} --out data/reference/reference-dgx-spark-llamacpp"


rule site:
    input: PAGES, THEME, "mkdocs.yml"
    output: "site/index.html"
    shell: "NO_MKDOCS_2_WARNING=1 {PYTHON} -m mkdocs build --strict --quiet"  # no end-of-life banner over the last line


rule committed:
    input: [f"data/runs/{r}/run.json" for r in COMPLETE], TEMPLATES, GUIDE, THEME, MODEL_CARDS, REFERENCE
    params: runs=COMPLETE
    shell: "{BATCHMARK} pages --out data/pages --runs {params.runs:q} {REFERENCE_ARGS} && NO_MKDOCS_2_WARNING=1 {PYTHON} -m mkdocs build --strict --quiet"
