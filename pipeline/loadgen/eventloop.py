"""The event loop the load generator measures on: uvloop where it is installed, else asyncio's own.

Why: at a thousand streams one client core sets the figure, and a good part of that core goes to the event loop
itself — asyncio's selector loop runs a Python ``_read_ready`` and a ``sock.recv`` wrapper for every socket read
before the protocol's ``data_received`` sees a byte; uvloop (libuv, https://github.com/MagicStack/uvloop) does
that in C.  Measured with ``benchmarks/loadgen_overhead.py --transports raw --event-loops auto asyncio`` on 2 shared
cores (docs/reliability.md): the raw reader's client CPU per streamed token at c = 1,024 is 7.1–7.3 µs on uvloop
against 10.3–10.4 µs on asyncio's loop in the same two runs (−30 %), 4.2–4.7 against 7.1–8.2 at c = 64.  Nothing
else changes: the same protocol, the same stamps (``time.perf_counter`` inside ``data_received``), the same records.

``event_loop`` (a served backend's option): ``auto`` (uvloop where importable, else asyncio), ``uvloop`` (refused
in one line where it is not installed), ``asyncio``.  :func:`loop_name` says which one a choice gets, with its
version, for a point's meta (``event_loop``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Coroutine, Literal, TypeVar

from pipeline.core.errors import BatchmarkError

EventLoop = Literal["auto", "uvloop", "asyncio"]
T = TypeVar("T")


def _uvloop() -> Any:
    """The uvloop module, or None where it is not installed (Windows has no build)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop


def loop_name(choice: EventLoop = "auto") -> str:
    """The loop ``choice`` runs on: ``"uvloop <version>"`` or ``"asyncio"``.

    Raises:
        BatchmarkError: ``choice`` is ``uvloop`` and uvloop is not installed (the message names ``event_loop``).
    """
    if choice == "asyncio":
        return "asyncio"
    uv = _uvloop()
    if uv is None:
        if choice == "uvloop":
            raise BatchmarkError("event_loop: uvloop is not installed here (pip install uvloop), "
                                 "or set event_loop: asyncio")
        return "asyncio"
    return f"uvloop {uv.__version__}"


def run(main: Coroutine[Any, Any, T], choice: EventLoop = "auto") -> T:
    """Run ``main`` to its end on a new loop of ``choice`` (:func:`loop_name`), as :func:`asyncio.run` does.

    Its result passes through the loop's main task, whose repr Python 3.11's runner may format on exit
    (https://github.com/python/cpython/issues/112559): a caller with a large result keeps it aside instead (``ServedBackend.measure``).

    Raises:
        BatchmarkError: as :func:`loop_name`.
    """
    try:
        name = loop_name(choice)
    except BatchmarkError:
        main.close()  # never awaited: no "coroutine was never awaited" warning
        raise
    if name == "asyncio":
        return asyncio.run(main)
    uv = _uvloop()
    if hasattr(asyncio, "Runner"):  # Python 3.11+: the runner's own loop factory
        with asyncio.Runner(loop_factory=uv.new_event_loop) as runner:
            return runner.run(main)
    loop = uv.new_event_loop()  # Python 3.10: a loop of our own, closed as asyncio.run closes its own
    try:
        return loop.run_until_complete(main)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


async def sleep_until(due_s: float, clock: Callable[[], float]) -> None:
    """Sleep until ``clock()`` reaches ``due_s`` (s, the clock's own), yielding to the loop at least once.

    uvloop's timers may fire up to a millisecond early (libuv's clock counts whole milliseconds, asyncio's own loop
    never fires early), so what is left is slept again: an open-loop request is never sent before its scheduled time.
    """
    await asyncio.sleep(max(due_s - clock(), 0.0))
    while (early := due_s - clock()) > 0:
        await asyncio.sleep(early)
