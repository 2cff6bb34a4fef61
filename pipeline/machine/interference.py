"""Load on the machine from outside the measuring processes, measured while a point runs.

The bandwidth probe catches a busy machine only at the start of a sweep; a load that starts later
(another job, a build, a second benchmark) slows the points it overlaps and nothing said so.  The
sweep therefore wraps every point in an :class:`InterferenceMeter`, which reads two CPU clocks at
the start and the end of the point:

- the machine's busy CPU time: every CPU's time not idle and not waiting for I/O, summed
  (``psutil.cpu_times()``, from ``/proc/stat`` on Linux);
- the measuring process tree's CPU time: this process (user + system, plus the children it has
  reaped) and every live descendant (a served backend's server and its workers), each counted
  from the first time the meter sees it.

Their difference is the CPU time of everyone else: ``outside_cpu_s``.  Divided by the point's wall
time it is the average number of CPUs the outside load kept busy (``outside_load_cpus``, like a load
average), and divided by the CPU count the share of the machine it took (``outside_share``).
The sweep adds ``server_outside_tree`` (true for the ``openai`` engine: an endpoint that was already
running is no descendant of the sweep, so a server on the same machine counts as outside load and
those points are not judged by it).
Derived: outside = machine busy − own; it slightly overcounts when a descendant starts and exits
between the two readings (its CPU time is then nobody's), which errs towards flagging.
"""

from __future__ import annotations

import math
import time
from typing import Any

#: A point during which outside processes kept more than this share of the machine's CPUs busy is
#: flagged (:mod:`pipeline.analysis.quality`).  A quarter of the machine: on the 2-core CI machine half a core;
#: an idle machine shows a few per cent (system daemons), a CPU hog per core close to 100 %.
OUTSIDE_SHARE_LIMIT = 0.25

#: A point shorter than this is not judged by its outside load: the kernel counts CPU time in ticks of
#: 10 ms per CPU (USER_HZ = 100), so over 0.5 s the share is known to about ±2 % per CPU, over 50 ms only
#: to ±20 %.
MIN_WALL_S = 0.5


def _machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine since boot (all CPUs: total − idle − iowait)."""
    import psutil

    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def _own_tree_s(seen: dict[int, float]) -> float:
    """CPU seconds of this process (with reaped children) plus every live descendant's growth since first seen.

    ``seen`` maps a descendant's pid to its CPU seconds when first seen (updated in place); a
    descendant first seen now counts from now.
    """
    import psutil

    me = psutil.Process()
    t = me.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in me.children(recursive=True):
        try:
            ct = child.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        now = ct.user + ct.system
        start = seen.setdefault(child.pid, now)
        total += now - start
    return total


class InterferenceMeter:
    """Measures the outside load over one interval: ``with InterferenceMeter() as m: …`` then ``m.result``.

    ``result`` (after the block): ``{"wall_s", "cpu_count", "machine_busy_cpu_s", "own_cpu_s",
    "outside_cpu_s", "outside_load_cpus", "outside_share"}`` (seconds of CPU time, CPUs, a share of
    the machine in [0, 1]; see the module docstring for the arithmetic).  Negative differences (clock
    granularity, a descendant seen only at the end) are clipped to 0.  None when the clocks cannot be
    read on this platform.
    """

    def __init__(self) -> None:
        self.result: dict[str, Any] | None = None
        self._seen: dict[int, float] = {}

    def __enter__(self) -> "InterferenceMeter":
        try:
            self._own0 = _own_tree_s(self._seen)
            self._busy0: float | None = _machine_busy_s()
        except (OSError, RuntimeError, AttributeError):
            self._busy0 = None
        self._t0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.monotonic() - self._t0
        if self._busy0 is None:
            return
        try:
            import psutil

            busy = _machine_busy_s() - self._busy0
            own = _own_tree_s(self._seen) - self._own0
            cpus = psutil.cpu_count() or 1
        except (OSError, RuntimeError, AttributeError):
            return
        self.result = outside_load(wall, busy, own, cpus)


def outside_load(wall_s: float, machine_busy_cpu_s: float, own_cpu_s: float, cpu_count: int) -> dict[str, Any] | None:
    """The outside-load record of an interval (pure; see :class:`InterferenceMeter` for the fields).

    Derived: ``outside_cpu_s = max(0, machine busy − own)``; ``outside_load_cpus = outside_cpu_s /
    wall_s``; ``outside_share = min(1, outside_load_cpus / cpu_count)``.  None when the wall time is
    not positive or a figure is not finite.
    """
    if not all(math.isfinite(x) for x in (wall_s, machine_busy_cpu_s, own_cpu_s)) or wall_s <= 0 or cpu_count < 1:
        return None
    outside = max(0.0, machine_busy_cpu_s - own_cpu_s)
    load = outside / wall_s
    return {"wall_s": wall_s, "cpu_count": cpu_count, "machine_busy_cpu_s": max(0.0, machine_busy_cpu_s),
            "own_cpu_s": max(0.0, own_cpu_s), "outside_cpu_s": outside, "outside_load_cpus": load,
            "outside_share": min(1.0, load / cpu_count)}
