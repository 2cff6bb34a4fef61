"""config/spark.yaml's server command lines parse with vLLM's own argument parser.

Each model's command is built by the vllm engine from the config's template (``VLLMBackend.command_for``,
exactly what the sweep would start), then handed to ``vllm serve``'s parser in the server's own
environment (``.venv-vllm``, vLLM's CPU build): the serve subcommand's ``make_arg_parser`` and its
``validate`` (``validate_parsed_serve_args``).  A flag vLLM renamed or dropped, or a value it refuses,
fails here instead of at the start of a night on the Spark.  Skipped, with the reason, where the
environment or its vLLM is absent.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from pipeline.config.sweepconfig import load_config
from tests.conftest import REPO

pytestmark = pytest.mark.slow

VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"

PARSE = r"""
import json, sys
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser

out = []
for words in json.loads(sys.stdin.read()):
    parser = FlexibleArgumentParser(prog="vllm")
    sub = ServeSubcommand()
    sub.subparser_init(parser.add_subparsers(dest="subparser"))
    args = parser.parse_args(words)   # argparse exits 2 on an unknown flag or a bad value
    sub.validate(args)
    out.append({k: getattr(args, k, None) for k in ("model_tag", "host", "port", "served_model_name", "seed",
                                                   "enable_prefix_caching", "max_num_seqs",
                                                   "gpu_memory_utilization", "max_model_len")})
print(json.dumps(out))
"""


def _vllm_or_skip() -> None:
    if not VLLM_PYTHON.exists():
        pytest.skip(f"{VLLM_PYTHON.relative_to(REPO)} is absent (make it with `batchmark server-env`)")
    res = subprocess.run([str(VLLM_PYTHON), "-c", "import vllm.entrypoints.cli.serve"], capture_output=True, text=True,
                         timeout=300)
    if res.returncode != 0:
        pytest.skip(f"vLLM's CLI does not import in .venv-vllm: {(res.stderr.strip().splitlines() or ['?'])[-1][:200]}")


def test_every_spark_server_command_parses_with_vllms_parser():
    from pipeline.backends.vllm import VLLMBackend

    _vllm_or_skip()
    cfg = load_config(REPO / "config" / "spark.yaml")
    engine = VLLMBackend(cfg)
    commands = [engine.command_for(spec, 8000) for spec in cfg.models]
    assert all(cmd[:2] == ["vllm", "serve"] for cmd in commands), commands
    res = subprocess.run([str(VLLM_PYTHON), "-c", PARSE], input=json.dumps([cmd[1:] for cmd in commands]),
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    parsed = json.loads(res.stdout.strip().splitlines()[-1])
    for spec, args in zip(cfg.models, parsed):
        assert args["model_tag"] == spec.path
        assert args["served_model_name"] == [spec.served_name]
        assert args["port"] == 8000 and args["seed"] == cfg.seed
        assert args["enable_prefix_caching"] is False
        assert args["max_num_seqs"] == max(cfg.concurrency)
        assert args["gpu_memory_utilization"] == 0.85  # the dgx-spark profile's
        assert args["max_model_len"] == cfg.input_len + cfg.output_len + 64
