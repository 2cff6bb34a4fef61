"""llama.cpp's own environment: its server and tools built from source on this machine, once.

llama.cpp's source comes from the package index only: the ``llama-cpp-python`` source distribution
(version pinned in ``config/llamacpp-cpu-requirements.txt``) vendors llama.cpp whole under
``vendor/llama.cpp`` (``tools/server``, ``tools/quantize``, ``tools/batched-bench``, ``tools/llama-bench``,
``gguf-py``).  :func:`create_llamacpp_env`:

1. ``pip download --no-deps --no-binary :all: llama-cpp-python==<pin>`` into a scratch folder, unpacked;
2. ``cmake -G Ninja`` with :data:`CMAKE_FLAGS` (no libcurl: nothing is downloaded at run time; ``GGML_NATIVE``:
   kernels for this CPU; static libraries: the binaries stand alone), then ``cmake --build -j<jobs>`` of
   :data:`TARGETS` (about 4.5 minutes on 2 cores, README);
3. the binaries into ``<dest>/bin/``, the vendored ``gguf-py`` into ``<dest>/gguf-py/`` (GGUF files are
   written with it: :mod:`pipeline.machine.ggufmodels`); the scratch folder is removed.

The outcome is ``<dest>/batchmark-env.json``: ``{"ok": true, "version" (the pin), "llama_cpp_build" (what
``llama-server --version`` prints), "cmake_flags", "targets", "build_s", "compiler", "jobs"}`` or ``{"ok": false,
"reason"}`` with why in one line (no cmake, no compiler, the build failed).  An environment already ``ok`` from the
same pin and flags is kept as it is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from pipeline.core.atomicfiles import atomic_write_json
from pipeline.core.errors import BatchmarkError
from pipeline.machine.serverenv import STATUS_FILE, _last_line, read_status, resolve

DEFAULT_DEST = ".venv-llamacpp"
DEFAULT_REQUIREMENTS = "config/llamacpp-cpu-requirements.txt"
DISTRIBUTION = "llama-cpp-python"
CMAKE_FLAGS = ("-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DGGML_NATIVE=ON",
               "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF")
TARGETS = ("llama-server", "llama-quantize", "llama-batched-bench", "llama-bench")


def pinned_version(requirements: str | Path) -> str:
    """The ``llama-cpp-python==X`` pin of the requirements file.

    Raises:
        BatchmarkError: the file is missing or pins no version of it.
    """
    path = resolve(requirements)
    try:
        lines = path.read_text().splitlines()
    except OSError:
        raise BatchmarkError(f"{requirements}: requirements file not found") from None
    for ln in lines:
        name, sep, version = ln.split("#")[0].strip().partition("==")
        if sep and name.strip().lower().replace("_", "-") == DISTRIBUTION and version.strip():
            return version.strip()
    raise BatchmarkError(f"{requirements}: no line {DISTRIBUTION}==<version> (the pinned llama.cpp source)")


def binary(dest: str | Path, name: str) -> Path:
    """The path of tool ``name`` (``llama-server`` …) in the environment at ``dest``."""
    return resolve(dest) / "bin" / name


def usable(dest: str | Path) -> tuple[bool, str]:
    """Whether the environment at ``dest`` was built and holds its tools; ``(ok, reason)``."""
    status = read_status(dest)
    if status is None:
        return False, f"{dest} was never made (make it: batchmark llamacpp-env)"
    if not status.get("ok"):
        return False, str(status.get("reason"))
    missing = [t for t in TARGETS if not binary(dest, t).exists()]
    if missing:
        return False, f"{dest}/bin lacks {', '.join(missing)} (make it again: batchmark llamacpp-env)"
    return True, ""


def _compiler() -> str | None:
    """The C++ compiler's first ``--version`` line (``c++``, as CMake finds it by default)."""
    for cxx in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if cxx and shutil.which(cxx):
            res = subprocess.run([cxx, "--version"], capture_output=True, text=True)
            return (res.stdout.splitlines() or [cxx])[0].strip()
    return None


def _write_status(dest: Path, doc: dict[str, Any]) -> dict[str, Any]:
    dest.mkdir(parents=True, exist_ok=True)
    atomic_write_json(dest / STATUS_FILE, doc)
    return doc


def _fetch_source(version: str, work: Path, run: Callable[..., Any]) -> Path:
    """``vendor/llama.cpp`` of the pinned source distribution, downloaded and unpacked under ``work``."""
    res = run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
               "--no-binary", ":all:", f"{DISTRIBUTION}=={version}", "-d", str(work)], capture_output=True, text=True)
    if res.returncode != 0:
        raise BatchmarkError(f"pip download {DISTRIBUTION}=={version} failed: {_last_line(res.stderr or res.stdout)}")
    archives = sorted(work.glob("*.tar.gz"))
    if not archives:
        raise BatchmarkError(f"pip download {DISTRIBUTION}=={version} left no source archive")
    with tarfile.open(archives[0]) as tar:
        tar.extractall(work, filter="data")
    found = sorted(work.glob("*/vendor/llama.cpp/CMakeLists.txt"))
    if not found:
        raise BatchmarkError(f"{archives[0].name}: no vendor/llama.cpp in the source distribution")
    return found[0].parent


def _build(src: Path, build: Path, jobs: int, run: Callable[..., Any]) -> None:
    """Configure and build :data:`TARGETS`; raises with the build's last line where it fails."""
    res = run(["cmake", "-S", str(src), "-B", str(build), *CMAKE_FLAGS], capture_output=True, text=True)
    if res.returncode != 0:
        raise BatchmarkError(f"cmake configure failed: {_last_line(res.stderr or res.stdout)}")
    res = run(["cmake", "--build", str(build), f"-j{jobs}", "--target", *TARGETS], capture_output=True, text=True)
    if res.returncode != 0:
        errors = [ln for ln in (res.stdout + res.stderr).splitlines() if "error" in ln.lower()]
        raise BatchmarkError(f"cmake --build failed: {(errors or [_last_line(res.stdout + res.stderr)])[0][:300]}")


def create_llamacpp_env(dest: str | Path = DEFAULT_DEST, requirements: str | Path = DEFAULT_REQUIREMENTS,
                        jobs: int = 2, log: Callable[[str], None] | None = None,
                        run: Callable[..., Any] = subprocess.run) -> dict[str, Any]:
    """Make (or keep) the llama.cpp environment at ``dest``; return its status (module docstring).

    Never raises for a machine that cannot build it: the status says ``ok: false`` and why.

    Raises:
        BatchmarkError: ``requirements`` is missing or pins no version (a project file is wrong).
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    dest_p, version = resolve(dest), pinned_version(requirements)
    flags = list(CMAKE_FLAGS)
    status = read_status(dest_p)
    if status and status.get("ok") and status.get("version") == version and status.get("cmake_flags") == flags \
            and usable(dest_p)[0]:
        log(f"llama.cpp environment {dest}: llama-cpp-python {version}'s llama.cpp (already built)")
        return status
    missing = [t for t in ("cmake", "ninja") if shutil.which(t) is None]
    compiler = _compiler()
    if missing or compiler is None:
        why = f"no {', '.join(missing + ([] if compiler else ['C++ compiler']))} on this machine"
        log(f"llama.cpp environment {dest}: cannot be built here: {why}")
        return _write_status(dest_p, {"ok": False, "reason": why, "version": version})
    if dest_p.exists():
        shutil.rmtree(dest_p)
    log(f"llama.cpp environment {dest}: building llama-cpp-python {version}'s llama.cpp "
        f"({', '.join(TARGETS)}; -j{jobs}, minutes) …")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="batchmark-llamacpp-") as work:
        try:
            src = _fetch_source(version, Path(work), run)
            _build(src, Path(work) / "build", jobs, run)
        except BatchmarkError as exc:
            log(f"llama.cpp environment {dest}: cannot be built here: {exc}")
            return _write_status(dest_p, {"ok": False, "reason": str(exc), "version": version})
        (dest_p / "bin").mkdir(parents=True)
        for t in TARGETS:
            shutil.copy2(Path(work) / "build" / "bin" / t, dest_p / "bin" / t)
        shutil.copytree(src / "gguf-py", dest_p / "gguf-py")
    build_s = round(time.monotonic() - start, 1)
    res = run([str(dest_p / "bin" / "llama-server"), "--version"], capture_output=True, text=True)
    built = [ln.strip() for ln in (res.stdout + res.stderr).splitlines() if ln.startswith(("version", "built"))]
    doc = {"ok": True, "distribution": DISTRIBUTION, "version": version, "llama_cpp_build": "; ".join(built) or None,
           "cmake_flags": flags, "targets": list(TARGETS), "build_s": build_s, "compiler": compiler, "jobs": jobs,
           "requirements": str(requirements)}
    log(f"llama.cpp environment {dest}: built in {build_s:g} s ({doc['llama_cpp_build']})")
    return _write_status(dest_p, doc)
