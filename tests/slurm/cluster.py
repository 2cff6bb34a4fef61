"""A real one-node Slurm cluster on this machine (munge + slurmctld + slurmd), for the Slurm workflow test.

Debian's ``slurm-wlm`` and ``munge`` packages (``apt-get install slurm-wlm munge``); root, because
slurmd runs jobs as their user.  :func:`start` fills ``tests/slurm/slurm.conf.in`` with this host's
name, CPUs and memory (as ``slurmd -C`` reports them) and free ports, puts every state file, log,
key and socket under one scratch folder, and starts the three daemons; the client commands
(``sbatch``, ``squeue``, ``scancel``) find the cluster through ``SLURM_CONF`` in :attr:`Cluster.env`.
Nothing is mocked: Snakemake's Slurm executor submits with the real ``sbatch``.

By hand (the README's "Slurm on one machine")::

    python -m tests.slurm.cluster start /tmp/slurm-test   # prints the SLURM_CONF to export
    python -m tests.slurm.cluster stop /tmp/slurm-test
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DAEMONS = ("munged", "slurmctld", "slurmd")
#: Where Slurm's commands look when ``SLURM_CONF`` is not set.  Snakemake's Slurm job step
#: (snakemake-executor-plugin-slurm-jobstep 0.6.1) drops ``SLURM_CONF`` from the environment of
#: the ``srun`` it runs inside the job, so the test cluster links its file here for the test's
#: duration (only where no Slurm is configured: a real cluster's file is never touched).
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")


class ClusterUnavailable(RuntimeError):
    """The cluster cannot be started here; the message says why (the test skips with it)."""


@dataclass
class Cluster:
    """A started cluster: its scratch folder, the environment its clients need, the daemons' pids."""

    base: Path
    env: dict[str, str]
    pids: dict[str, int] = field(default_factory=dict)

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of every daemon's log (for a failure message)."""
        out = []
        for name in ("munged.log", "slurmctld.log", "slurmd.log"):
            p = self.base / name
            if p.is_file():
                out.append(f"--- {name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(out)

    def stop(self) -> None:
        """Stop the daemons this cluster started (by their pids), newest first; remove the link it made."""
        for name in reversed(DAEMONS):
            pid = self.pids.get(name) or _pid_from_file(self.base / f"{name}.pid")
            if pid:
                _terminate(pid)
        if SYSTEM_CONF.is_symlink() and SYSTEM_CONF.resolve() == (self.base / "slurm.conf").resolve():
            SYSTEM_CONF.unlink()


def _pid_from_file(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _terminate(pid: int, grace_s: float = 10.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def why_unavailable() -> str | None:
    """Why a cluster cannot be started here (None when it can be tried)."""
    if sys.platform != "linux":
        return "Slurm test cluster: Linux only"
    if os.geteuid() != 0:
        return "Slurm test cluster: needs root (slurmd runs jobs as their user)"
    if SYSTEM_CONF.exists() and not SYSTEM_CONF.is_symlink():
        return f"Slurm test cluster: {SYSTEM_CONF} exists (this machine has a Slurm of its own; it is left alone)"
    missing = [b for b in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel") if shutil.which(b) is None]
    if missing:
        return f"Slurm test cluster: {', '.join(missing)} not installed (apt-get install slurm-wlm munge)"
    return None


def node_shape() -> tuple[str, int, int]:
    """This host's short name, CPUs and memory in MB, as ``slurmd -C`` reports them (what slurmd will register)."""
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"NodeName=(\S+) CPUs=(\d+).*RealMemory=(\d+)", out)
    if not m:
        raise ClusterUnavailable(f"Slurm test cluster: slurmd -C printed no node line ({out.strip()[:200]!r})")
    return m.group(1), int(m.group(2)), int(m.group(3))


def _wait(what: str, ok, timeout_s: float, cluster: Cluster) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.3)
    cluster.stop()
    raise ClusterUnavailable(f"Slurm test cluster: {what} within {timeout_s:.0f} s\n{cluster.log_tail()}")


def start(base: Path, timeout_s: float = 60.0) -> Cluster:
    """Start munge, slurmctld and slurmd with their files under ``base``; returns when the node is idle.

    Raises:
        ClusterUnavailable: not root, packages missing, or a daemon did not come up (its log tail).
    """
    why = why_unavailable()
    if why:
        raise ClusterUnavailable(why)
    base = Path(base).resolve()
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o700)  # munged refuses key and socket folders that others can write
    for sub in ("ctld", "slurmd"):
        (base / sub).mkdir(exist_ok=True)
    host, cpus, memory_mb = node_shape()
    key = base / "munge.key"
    key.write_bytes(secrets.token_bytes(128))
    os.chmod(key, 0o600)
    munge_socket = base / "munge.socket"
    conf = (HERE / "slurm.conf.in").read_text().format(
        host=host, cpus=cpus, memory_mb=memory_mb, state=base, munge_socket=munge_socket,
        ctld_port=_free_port(), slurmd_port=_free_port())
    (base / "slurm.conf").write_text(conf)
    if SYSTEM_CONF.is_symlink():  # left by a test cluster that was not stopped (its daemons are gone with its folder)
        SYSTEM_CONF.unlink()
    SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
    SYSTEM_CONF.symlink_to(base / "slurm.conf")
    env = {**os.environ, "SLURM_CONF": str(base / "slurm.conf")}
    cluster = Cluster(base, env)
    subprocess.run(["munged", "--force", f"--socket={munge_socket}", f"--key-file={key}",
                    f"--pid-file={base / 'munged.pid'}", f"--log-file={base / 'munged.log'}",
                    f"--seed-file={base / 'munged.seed'}"], check=False, timeout=30, capture_output=True)
    _wait("munged did not start", lambda: munge_socket.exists() and _pid_from_file(base / "munged.pid"), 15, cluster)
    cluster.pids["munged"] = _pid_from_file(base / "munged.pid") or 0
    for daemon in ("slurmctld", "slurmd"):
        # -i (slurmctld): ignore any saved state; each start is a fresh cluster
        args = [daemon, "-f", str(base / "slurm.conf")] + (["-i"] if daemon == "slurmctld" else [])
        res = subprocess.run(args, env=env, capture_output=True, text=True, timeout=30)
        if res.returncode != 0:
            cluster.stop()
            raise ClusterUnavailable(f"Slurm test cluster: {daemon} exited {res.returncode}: "
                                     f"{(res.stderr or res.stdout).strip()[:300]}\n{cluster.log_tail()}")
        _wait(f"{daemon} did not write its pid", lambda d=daemon: _pid_from_file(base / f"{d}.pid"), 15, cluster)
        cluster.pids[daemon] = _pid_from_file(base / f"{daemon}.pid") or 0

    def idle() -> bool:
        res = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True, timeout=30)
        return res.returncode == 0 and res.stdout.strip() in ("idle", "idle*") and "*" not in res.stdout
    _wait("the node did not become idle", idle, timeout_s, cluster)
    return cluster


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: python -m tests.slurm.cluster start|stop FOLDER", file=sys.stderr)
        return 2
    base = Path(argv[1])
    if argv[0] == "stop":
        Cluster(base.resolve(), {}).stop()
        return 0
    try:
        start(base)
    except ClusterUnavailable as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"export SLURM_CONF={base.resolve() / 'slurm.conf'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
