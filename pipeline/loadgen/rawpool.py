"""The raw reader's keep-alive connections and one request sent and read through them (plain ``http://``).

:class:`Pool` keeps the connections per (host, port), the last one released the first handed out again (so a
closed-loop slot keeps reusing its own); :func:`exchange` sends one POST and waits, once, for the stream's end,
which :class:`pipeline.loadgen.rawhttp.Conn` reads in its ``data_received`` callback.  A request is sent again only
when a reused connection was closed before any byte of its answer (the server's keep-alive timeout: the request
never reached it).  HTTP phases for the client meter: ``connect_s`` (``loop.create_connection``) for a request that
opened a connection, ``first_byte_s`` from the request's start (the connection's acquisition included, as
aiohttp's ``on_request_start`` counts it) to its complete header section.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable
from urllib.parse import urlsplit

from pipeline.loadgen.rawhttp import END, Conn, Exchange, Stale
from pipeline.loadgen.streamcaps import stream_bytes_max

#: How long a stream that ended at ``[DONE]`` waits for the rest of its body (the terminating chunk) before its
#: connection is closed rather than reused (s); it delays that slot's next send only, never a timestamp.
DRAIN_S = 0.1


class Pool:
    """Keep-alive connections per (host, port): the last one released is the first handed out again."""

    def __init__(self, phases: Callable[[], Any] | None = None) -> None:
        self.phases = phases  # the client meter now measuring (None: none), told each request's HTTP phases
        self._idle: dict[tuple[str, int], list[Conn]] = {}
        self._all: set[Conn] = set()
        self._routes: dict[str, tuple[tuple[str, int], bytes]] = {}

    def route(self, url: str) -> tuple[tuple[str, int], bytes]:
        """``((host, port), b"POST <path> HTTP/1.1\\r\\nHost: …\\r\\n")`` of a plain ``http://`` URL (cached)."""
        got = self._routes.get(url)
        if got is None:
            u = urlsplit(url)
            if u.scheme != "http" or not u.hostname:
                raise ValueError(f"{url}: the raw reader speaks plain http:// only")
            port = u.port or 80
            host = u.hostname if ":" not in u.hostname else f"[{u.hostname}]"
            target = (u.path or "/") + (f"?{u.query}" if u.query else "")
            netloc = host if port == 80 else f"{host}:{port}"
            got = self._routes[url] = ((u.hostname, port),
                                       f"POST {target} HTTP/1.1\r\nHost: {netloc}\r\n".encode("latin-1"))
        return got

    async def acquire(self, key: tuple[str, int]) -> tuple[Conn, float | None]:
        """An idle connection to ``key`` (and None), else a new one (and the seconds it took to open)."""
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if not conn.closed and not conn.transport.is_closing():
                conn.reused = True
                return conn, None
            self._all.discard(conn)
        t = time.perf_counter()
        try:
            _, conn = await asyncio.get_running_loop().create_connection(lambda: Conn(key), key[0], key[1])
        except OSError as exc:
            said = f"cannot connect to {key[0]}:{key[1]}: {exc.strerror or exc}"
            raise (OSError(exc.errno, said) if exc.errno is not None else OSError(said)) from None
        self._all.add(conn)
        return conn, time.perf_counter() - t

    def release(self, conn: Conn) -> None:
        """Hand a connection back: kept for the next request if its answer was read whole and may be reused."""
        if conn.closed or not conn.reusable or conn.state != END:
            conn.close()
            self._all.discard(conn)
            return
        conn.ex = None
        self._idle.setdefault(conn.key, []).append(conn)

    def close(self) -> None:
        """Close every connection."""
        for conn in list(self._all):
            conn.close()
        self._all.clear()
        self._idle.clear()


async def exchange(pool: Pool, url: str, headers: dict[str, str], body: bytes, raw: Any, t0: float,
                   said_max: int, max_tokens: int | None = None) -> Exchange:
    """POST ``body`` to ``url`` and read the answer into ``raw`` (times s since ``t0``; a refusal's first
    ``said_max`` bytes into the exchange's ``said``); returns the :class:`Exchange` once the stream is over.  The
    caller applies the timeout: a cancellation closes the connection.  ``max_tokens``: what the request asked for,
    which bounds the bytes kept (:func:`pipeline.loadgen.streamcaps.stream_bytes_max`; past it the exchange raises
    :class:`~pipeline.loadgen.streamcaps.StreamTooLong`)."""
    key, line = pool.route(url)
    start = time.perf_counter()
    head = line + "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1")
    request = head + b"User-Agent: batchmark\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    meter = pool.phases() if pool.phases is not None else None
    cap = stream_bytes_max(max_tokens)
    for attempt in (0, 1):
        conn, connect_s = await pool.acquire(key)
        if connect_s is not None and meter is not None:
            meter.connect_s.append(connect_s)
        ex = Exchange(raw, t0, said_max, cap, max_tokens)
        try:
            conn.send(request, ex)
            await ex.done
            if ex.finished and not ex.ended:  # over at [DONE] before the body's end: wait briefly for it
                ex.end_wait = asyncio.get_running_loop().create_future()
                try:
                    await asyncio.wait_for(ex.end_wait, DRAIN_S)
                except TimeoutError:
                    conn.close()  # a server holding its body open: the connection is not reused
        except Stale:
            pool.release(conn)
            if attempt:
                raise
            continue
        except BaseException:  # cancelled (a timeout, the repeat's end) or a fault: the connection is not reused
            if not ex.done.done():
                ex.done.cancel()  # nobody waits on it any more (its close must not leave an unread exception)
            conn.close()
            pool.release(conn)
            raise
        if meter is not None and ex.head_s is not None:
            meter.first_byte_s.append(ex.head_s - start)
        pool.release(conn)
        return ex
    raise AssertionError("unreachable")
