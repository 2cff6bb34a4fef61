"""``batchmark llamacpp-env``: build llama.cpp's own environment (:mod:`pipeline.machine.llamacppenv`) and print its status."""

from __future__ import annotations

import json
from typing import Any

from pipeline.commands import print  # noqa: A004 (control characters escaped)


def llamacpp_env(out: str, requirements: str, jobs: int, allow_failure: bool) -> int:
    """Make (or keep) the environment at ``out``; print ``batchmark-env.json``; exit 1 where it cannot be built
    (the reason is in it, one line) unless ``allow_failure``."""
    from pipeline.machine import llamacppenv

    status = llamacppenv.create_llamacpp_env(out, requirements, jobs=jobs)
    print(json.dumps(status, indent=1, sort_keys=True))
    return 0 if status.get("ok") or allow_failure else 1


def add_parser(sub: Any) -> None:
    """The ``llamacpp-env`` subcommand on the CLI's subparsers ``sub``."""
    from pipeline.machine import llamacppenv as env

    s = sub.add_parser("llamacpp-env", help="build llama.cpp's server and tools for the llamacpp backend, once",
                       description="Download the pinned llama-cpp-python source distribution (config/llamacpp-cpu-"
                                   "requirements.txt), build llama.cpp's llama-server, llama-quantize, "
                                   "llama-batched-bench and llama-bench from its vendor/llama.cpp with CMake and Ninja "
                                   "for this CPU, copy them and gguf-py into <out>, and write <out>/batchmark-env.json "
                                   "(version, build flags, build time, compiler). An environment already built from "
                                   "the same pin and flags is kept. Exit 1 when it cannot be built here (the reason "
                                   "is printed), unless --allow-failure.")
    s.add_argument("--out", default=env.DEFAULT_DEST, help="folder of the environment (relative to the project root)")
    s.add_argument("--requirements", default=env.DEFAULT_REQUIREMENTS, help="file pinning llama-cpp-python==VERSION")
    s.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default: 2)")
    s.add_argument("--allow-failure", action="store_true", help="exit 0 when it cannot be built here")
    s.set_defaults(func=lambda a: llamacpp_env(a.out, a.requirements, a.jobs, a.allow_failure))
