"""The sweep's progress display: each phase with its elapsed time, the points' own ETA, messages above the bar.

A sweep spends minutes on things that are not points: creating the server's environment (pip, ~7 min on a
2-core VM), starting a server until it is healthy (~4 min), loading a model.  The display names each such
*phase* when it starts, says every :data:`HEARTBEAT_S` seconds that it is still running, and gives its
elapsed time when it ends.  The points have a bar of their own whose ETA counts only the time of the points
measured so far (median seconds per point × points left), so a server's start-up never inflates it (it
used to be counted as the first point: ``309.63s/point``, an ETA of 31 minutes).  A plan's estimate replaces
that ETA when one is given (:attr:`Display.estimate`); without a plan a closed-loop grid's ETA follows the
measured points' trend in concurrency (:func:`trend_eta_s`), since a point's time grows with it.

Every message goes through :meth:`Display.write`, above the bar (``tqdm.write``), never onto it.  Where the
display shares its terminal with another program's output (Snakemake's job banners, which this process
cannot route) or stderr is no terminal, the bar is replaced by one line per point (``lines`` mode):
``BATCHMARK_PROGRESS=lines`` (set by the Snakefile) or a non-TTY stream selects it; ``BATCHMARK_PROGRESS=bar``
forces the bar.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TextIO

from pipeline.core.texttable import printable

#: Seconds between "still running" lines of a long phase.
HEARTBEAT_S = 60.0


def fmt_duration(seconds: float) -> str:
    """A duration for people: ``"12.3 s"`` under a minute, ``"4 min 02 s"`` under an hour, ``"1 h 05 min"`` beyond."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        m, s = divmod(int(round(seconds)), 60)
        return f"{m} min {s:02d} s"
    h, m = divmod(int(round(seconds / 60)), 60)
    return f"{h} h {m:02d} min"


def points_eta_s(point_seconds: list[float], remaining: int) -> float | None:
    """Seconds left for ``remaining`` points: the median of the points measured so far × ``remaining``; None before any.

    Derived: each point of a sweep runs the same number of requests per repeat, so its cost varies less than its
    mean would suggest when one point stalled; the median ignores that one.  Start-up phases are no points.
    """
    if not point_seconds or remaining <= 0:
        return 0.0 if remaining <= 0 and point_seconds else None
    return statistics.median(point_seconds) * remaining


def trend_eta_s(measured: list[tuple[int, float]], left: list[int]) -> float | None:
    """Seconds left for the points at concurrencies ``left``, from the points measured so far ``(concurrency, s)``.

    A closed-loop point sends a few waves of ``concurrency`` requests (``max(requests_per_slot × c,
    min_requests)``: the same number of waves from c = 8 on), so its time grows with c as the end-to-end latency
    does; the median rule of :func:`points_eta_s` priced c = 64 at the median of c = 1 … 32 (new-user
    trial: "ETA 10.1 s", then 40.7 s).  Here a point's time at c is read off the measured ones in log-log space
    (the median of the points measured at one c, pooled over models): interpolated between measured
    concurrencies, the smallest one's time below them, and above them extrapolated along the slope of the two
    largest, clamped to [0, 1] (a point's time neither falls with c nor grows faster than c: a wave's latency is at
    most proportional to the batch it decodes).  None before any point.
    """
    by_c: dict[int, list[float]] = {}
    for c, sec in measured:
        if c and c > 0 and sec > 0:
            by_c.setdefault(c, []).append(sec)
    if not by_c:
        return None
    xs = sorted(by_c)
    ys = [math.log(statistics.median(by_c[c])) for c in xs]
    lx = [math.log(c) for c in xs]
    slope = 0.0 if len(xs) < 2 else min(1.0, max(0.0, (ys[-1] - ys[-2]) / (lx[-1] - lx[-2])))

    def at(c: int) -> float:
        x = math.log(max(c, 1))
        if x <= lx[0]:
            return math.exp(ys[0])
        if x >= lx[-1]:
            return math.exp(ys[-1] + slope * (x - lx[-1]))
        i = next(k for k in range(1, len(lx)) if x <= lx[k])
        w = (x - lx[i - 1]) / (lx[i] - lx[i - 1])
        return math.exp(ys[i - 1] + w * (ys[i] - ys[i - 1]))
    return float(sum(at(c) for c in left))


class Display:
    """One sweep's display on ``stream`` (stderr): phases, a bar (or a line) per point, messages above it.

    Args:
        total_points: points the sweep plans (the bar's total).
        enabled: False prints messages only (``--no-progress``), no bar, no point lines, no heartbeats.
        stream: where everything goes (default stderr).
        mode: ``"bar"`` or ``"lines"``; default from ``BATCHMARK_PROGRESS``, else ``bar`` on a terminal.
        heartbeat_s: seconds between "still running" lines of a phase.
    """

    def __init__(self, total_points: int, enabled: bool = True, stream: TextIO | None = None,
                 mode: str | None = None, heartbeat_s: float = HEARTBEAT_S):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.total = total_points
        env = os.environ.get("BATCHMARK_PROGRESS", "").strip().lower()
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.mode = mode or (env if env in ("bar", "lines") else ("bar" if tty else "lines"))
        self.heartbeat_s = heartbeat_s
        self.point_s: list[float] = []
        self.done = 0
        #: A plan's estimate of the seconds left, given the points done (``sim``'s ``batchmark plan``); None: the median rule.
        self.estimate: Callable[[int], float | None] | None = None
        #: ``(concurrency, seconds)`` of every point measured with a concurrency (:meth:`begin_point`), for :func:`trend_eta_s`.
        self.measured: list[tuple[int, float]] = []
        self._c: int | None = None
        self.bar: Any = None
        self._label = ""
        self._t0: float | None = None
        self._lock = threading.Lock()

    # -- messages ---------------------------------------------------------------------------
    def write(self, msg: str) -> None:
        """Print one message above the bar (never onto it), its control characters escaped (:func:`printable`)."""
        msg = printable(msg)
        with self._lock:
            if self.bar is not None:
                self.bar.write(msg, file=self.stream)
            else:
                print(msg, file=self.stream, flush=True)

    @contextmanager
    def phase(self, what: str) -> Iterator[None]:
        """A phase that is no point: ``what …`` when it starts, ``… still, 2 min 00 s`` every :attr:`heartbeat_s`,
        ``what: done in 4 min 02 s`` (or ``failed after``) when it ends."""
        t0 = time.monotonic()
        self.write(f"{what} …")
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.heartbeat_s):
                self.write(f"  … {what}: still running, {fmt_duration(time.monotonic() - t0)}")

        ticker = threading.Thread(target=beat, daemon=True) if self.enabled else None
        if ticker:
            ticker.start()
        try:
            yield
        except BaseException:
            stop.set()
            self.write(f"{what}: failed after {fmt_duration(time.monotonic() - t0)}")
            raise
        finally:
            stop.set()
            if ticker:
                ticker.join(timeout=1)
        self.write(f"{what}: done in {fmt_duration(time.monotonic() - t0)}")

    # -- points -----------------------------------------------------------------------------
    def start(self) -> None:
        """Open the points' bar (``bar`` mode, enabled)."""
        if self.enabled and self.mode == "bar" and self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, file=self.stream, unit="point", dynamic_ncols=True,
                            bar_format="{desc} {n_fmt}/{total_fmt} points |{bar}| {postfix}")

    def begin_point(self, label: str, concurrency: int | None = None) -> None:
        """A point starts being measured (its label, e.g. ``dense c=4``; its closed-loop concurrency when it has one)."""
        self._label, self._t0, self._c = printable(label, one_line=True), time.monotonic(), concurrency
        if self.bar is not None:
            self.bar.set_description(self._label)
            self.bar.set_postfix_str(self._eta_text())

    def end_point(self, throughput_tok_s: float | None = None, measured: bool = True) -> None:
        """The point begun last is done: its time counts toward the ETA when ``measured`` (not read back on resume)."""
        dt = time.monotonic() - self._t0 if self._t0 is not None else 0.0
        if measured:
            self.point_s.append(dt)
            if self._c:
                self.measured.append((self._c, dt))
        self.done += 1
        tput = f"{throughput_tok_s:.1f} tok/s" if throughput_tok_s else "no throughput"
        text = f"{tput}, {fmt_duration(dt)}" if measured else "already measured"
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix_str(f"{text} · {self._eta_text()}")
        elif self.enabled:
            self.write(f"{self._label}: {text} ({self.done}/{self.total} points; {self._eta_text()})")
        self._t0 = None

    def skip(self, n: int) -> None:
        """``n`` planned points will not be measured (a model stopped escalating)."""
        if n <= 0:
            return
        self.done += n
        if self.bar is not None:
            self.bar.update(n)

    def eta_s(self) -> float | None:
        """Seconds left for the points (the plan's estimate when given, else :func:`points_eta_s`)."""
        if self.estimate is not None:
            est = self.estimate(self.done)
            if est is not None:
                return est
        return points_eta_s(self.point_s, self.total - self.done)

    def _eta_text(self) -> str:
        eta = self.eta_s()
        return "ETA after the first point" if eta is None else f"ETA {fmt_duration(eta)}"

    def close(self) -> None:
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def quiet_library_bars() -> None:
    """Keep the Hugging Face libraries' own bars (checkpoint shards, downloads) off the sweep's display."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when huggingface_hub is imported
    if "huggingface_hub" in sys.modules:  # imported already: switch its bars off directly
        try:
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
        except Exception:  # pragma: no cover - an old huggingface_hub without it
            pass
    if "transformers" in sys.modules:
        try:
            from transformers.utils import logging as tlog

            tlog.disable_progress_bar()
        except Exception:  # pragma: no cover - an old transformers without it
            pass
