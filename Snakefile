# batchmark workflow: sweep -> records -> summaries -> analysis -> pages -> site.
#
#   snakemake --cores all                                   # measure config/vllm-cpu.yaml (real vLLM), build the site
#   snakemake --cores all --configfile config/transformers-cpu.yaml   # in-process static batches, no server
#   snakemake --cores all --configfile config/spark.yaml    # another sweep config
#   snakemake --cores 1 committed                           # site from the runs in data/runs/ alone, no measuring
#   snakemake --cores all --config fresh=1                  # measure again into a new run
#
# Rules stay thin: each calls one `batchmark` command.  The only logic here chooses targets:
# which run this checkout measures for the config (resumed if killed, reused once complete,
# a new one when the config's content changes), and which complete runs go on the site
# (every complete run; `committed` takes exactly those and measures nothing).  Complete runs
# already in data/runs/ are inputs as they are: immutable, with their summaries and analysis.

import re
import sys
from pathlib import Path

from pipeline import runs
from pipeline.config import load_config
from pipeline.errors import BatchmarkError
from pipeline.pages.render import page_templates

# The sweep config is the Snakemake configfile (--configfile); config/vllm-cpu.yaml (real vLLM, CPU build) without one.
CONFIG_PATH = str(workflow.configfiles[-1]) if workflow.configfiles else "config/vllm-cpu.yaml"
try:
    SWEEP = load_config(CONFIG_PATH)
except BatchmarkError as exc:  # one line naming the file and field, as the CLI prints it; nothing is touched
    sys.exit(f"batchmark: error: {exc}")
RUN_ID = config.get("run_id") or runs.run_id_for_config(SWEEP.name, SWEEP.digest(), fresh=bool(config.get("fresh")))
COMPLETE = [p.name for p in runs.list_runs()]
OTHERS = [r for r in COMPLETE if r != RUN_ID]
BATCHMARK = f"{sys.executable} -m pipeline"
TEMPLATES = sorted(str(p) for p in Path("templates").rglob("*.j2"))
PAGES = [f"data/pages/{p.removesuffix('.j2')}" for p in page_templates()]
MODEL_CARDS = sorted(str(p) for p in Path("data/models").glob("*.yaml"))
# The shared reference measurement beside the repository (never copied into it): an input of the
# explainers only when it exists, stored as a run under data/reference/ by the reference rule.
REFERENCE_SRC = "../shared/reference/llamacpp-dgx-spark-batched-bench.md"
REFERENCE = ["data/reference/reference-dgx-spark-llamacpp/analysis.json"] if Path(REFERENCE_SRC).is_file() else []
REFERENCE_ARGS = " ".join(f"--reference {Path(r).parent}" for r in REFERENCE)

wildcard_constraints:
    run=re.escape(RUN_ID)


rule all:
    input: "site/index.html"


rule sweep:
    input: ancient(CONFIG_PATH)  # content, not mtime, decides: a changed config gets a new RUN_ID
    output: "data/runs/{run}/points.json"
    threads: workflow.cores  # the measurement owns the machine (Snakemake sets OMP_NUM_THREADS to this)
    shell: "{BATCHMARK} sweep --config {input} --run-id {wildcards.run} --pointer"


rule summaries:
    input: "data/runs/{run}/points.json"
    output: "data/runs/{run}/summaries.json"
    shell: "{BATCHMARK} summarize {wildcards.run}"


rule analysis:
    input: "data/runs/{run}/summaries.json"
    output: "data/runs/{run}/analysis.json"
    shell: "{BATCHMARK} analyze {wildcards.run}"


rule pages:
    input:
        f"data/runs/{RUN_ID}/analysis.json",
        [f"data/runs/{r}/run.json" for r in OTHERS],
        TEMPLATES,
        MODEL_CARDS,
        REFERENCE,
    output: PAGES
    params: runs=" ".join(OTHERS + [RUN_ID])
    shell: "{BATCHMARK} pages --out data/pages --runs {params.runs} {REFERENCE_ARGS}"


rule reference:
    input: REFERENCE_SRC
    output: "data/reference/reference-dgx-spark-llamacpp/analysis.json"
    shell: "{BATCHMARK} reference {input} --out data/reference/reference-dgx-spark-llamacpp"


rule site:
    input: PAGES, "mkdocs.yml"
    output: "site/index.html"
    shell: "{sys.executable} -m mkdocs build --strict --quiet"


rule committed:
    input: [f"data/runs/{r}/run.json" for r in COMPLETE], TEMPLATES, MODEL_CARDS, REFERENCE
    params: runs=" ".join(COMPLETE)
    shell: "{BATCHMARK} pages --out data/pages --runs {params.runs} {REFERENCE_ARGS} && {sys.executable} -m mkdocs build --strict --quiet"
