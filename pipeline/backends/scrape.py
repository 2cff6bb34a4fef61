"""A server's Prometheus ``/metrics``: parsing a page, and sampling it during a repeat in a process of its own.

Why a process: the load generator's event loop
timestamps every streamed chunk, and ``prometheus_client``'s pure-Python parser took 122 ms for a
77 KiB page of 1,320 histogram samples (the size a GPU vLLM exposes).  Scraped and parsed inside
that loop every 0.25 s, each parse delays the chunks that arrive meanwhile, and TTFT and ITL
absorb the delay.  A thread would still hold the GIL while it parses; a separate process (its own
interpreter, its own HTTP client: ``urllib``) shares nothing with the timing loop.  The parent only
sends ``start`` before a repeat and ``stop`` after it, and receives one small mapping: the highest
value of each sampled gauge (:data:`DURING`) over the repeat.

Why seldom, and only the gauges (agreement with ``vllm bench serve``): a scrape also costs the
server.  vLLM serves ``/metrics`` with ``prometheus_client.make_asgi_app``, which renders the whole page
synchronously inside the API server's event loop (``prometheus_client/asgi.py``: ``_bake_output`` in an
``async def``), the loop that writes every stream's events, so each scrape holds every stream for the render
(6.4 ms for vLLM's CPU build's 51 KiB page here).  Sampled every 0.25 s and fully parsed (6.2 ms more of CPU,
on a 2-core machine shared with the server), batchmark's streams came out bunched: its per-chunk ITL p50 fell
4 to 8 % below that of ``vllm bench serve`` (which does not scrape) on the same server, while TPOT agreed;
without sampling they agreed within 0.2 % (``benchmarks/vllm_agreement.py --no-scrape``).  So the sampler
scrapes every :data:`EVERY_S` at most and keeps its share of the server's time under :data:`SCRAPE_DUTY`
(:func:`next_wait_s`), and parses only the gauges it keeps.

This module imports nothing heavy, so the sampler process (``spawn``) starts in a fraction of a
second.
"""

from __future__ import annotations

import multiprocessing
import re
from typing import Any

#: Gauges sampled during a repeat (their highest value is kept): running, waiting, queue, KV usage.
DURING = re.compile(r"running|waiting|queue|usage", re.I)
_PARTS = ("_bucket", "_sum", "_count", "_created")
_NAME = re.compile(r"[^{\s]*")
#: Seconds one scrape of ``/metrics`` may take in the sampler before it is given up.
SCRAPE_TIMEOUT_S = 5.0
#: Seconds between the sampler's scrapes during a repeat (at least; :func:`next_wait_s`).
EVERY_S = 1.0
#: Most of the server's time the sampler may take: the server renders its page while the stream waits (module
#: docstring), so the next scrape waits at least (1 − duty) / duty times as long as the server took to answer the last.
SCRAPE_DUTY = 0.01


def prometheus_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of a Prometheus text page as (name, labels, value), read by ``prometheus_client``'s parser.

    A page the parser refuses as a whole is read line by line, and the lines it cannot read are
    skipped: a scrape is best effort, one odd line never costs the others.
    """
    from prometheus_client.parser import text_string_to_metric_families

    def read(page: str) -> list[tuple[str, dict[str, str], float]]:
        return [(smp.name, dict(smp.labels), float(smp.value))
                for fam in text_string_to_metric_families(page) for smp in fam.samples]

    try:
        return read(text)
    except ValueError:
        out: list[tuple[str, dict[str, str], float]] = []
        for line in text.splitlines():
            if line.strip() and not line.startswith("#"):
                try:
                    out.extend(read(line + "\n"))
                except ValueError:
                    continue
        return out


#: Gauges that are a fraction of one engine's capacity (vLLM's ``kv_cache_usage_perc``, a fraction 0–1 despite its
#: name; SGLang's ``token_usage``; hit rates): over label sets (one per engine of a data-parallel server, ``engine="0"``,
#: ``engine="1"``, …) the highest is kept, never their sum (two engines at 60 % are not "120 % full").
FRACTION = re.compile(r"(_perc|_usage|_hit_rate|_ratio|_fraction)$")


def parse_prometheus(text: str, only: re.Pattern[str] | None = None) -> dict[str, float]:
    """Namespaced samples (``vllm:…``, ``sglang:…``) of a Prometheus text page, summed over labels (requests running
    on every engine add up), except a :data:`FRACTION` gauge: the highest of its label sets (the fullest engine).

    Histogram and summary parts (``_bucket``, ``_sum``, ``_count``, ``_created``) are skipped.  ``only``: keep just
    the metrics whose name it matches, chosen line by line before the page is parsed (the sampler's 5 gauges of a
    581-line vLLM page parse in a fraction of a millisecond instead of 6 ms; a GPU vLLM's 77 KiB page took 122 ms).
    """
    if only is not None:
        text = "".join(line + "\n" for line in text.splitlines()
                       if line[:1] not in ("", "#") and (m := _NAME.match(line)) and only.search(m.group(0)))
    out: dict[str, float] = {}
    for name, _, value in prometheus_samples(text):
        if ":" in name and not name.endswith(_PARTS):
            if name not in out:
                out[name] = value
            elif FRACTION.search(name):
                out[name] = max(out[name], value)
            else:
                out[name] += value
    return out


def fold_during(during: dict[str, float], got: dict[str, float]) -> None:
    """Keep in ``during`` the highest value of each :data:`DURING` gauge of one scrape ``got``."""
    for k, v in got.items():
        if DURING.search(k):
            during[k] = max(during.get(k, v), v)


def _scrape_once(url: str, headers: dict[str, str]) -> tuple[dict[str, float], float]:
    """One scrape with ``urllib``: (the :data:`DURING` gauges of the page, or {} when it fails (best effort); the
    seconds the server took to answer, the part of the scrape that holds it)."""
    import time
    import urllib.request

    t = time.perf_counter()
    try:
        req = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(req, timeout=SCRAPE_TIMEOUT_S) as resp:  # noqa: S310 (the server's own URL)
            page = resp.read() if resp.status == 200 else None
    except Exception:
        return {}, time.perf_counter() - t
    took = time.perf_counter() - t
    if page is None:
        return {}, took
    try:
        return parse_prometheus(page.decode("utf-8", errors="replace"), only=DURING), took
    except Exception:
        return {}, took


def next_wait_s(every_s: float, scrape_s: float, duty: float = SCRAPE_DUTY) -> float:
    """Seconds from the end of one scrape to the start of the next: ``every_s``, or longer when the server took
    ``scrape_s`` seconds to answer the last one, so that scraping takes at most ``duty`` of the server's time
    (``scrape_s · (1 − duty) / duty``).

    Example: a 6.4 ms scrape (vLLM's CPU build, 51 KiB page, measured here) at 1 % waits max(1 s, 0.63 s) = 1 s; a
    40 ms one waits 0.040 × 0.99 / 0.01 = 3.96 s.
    """
    return max(every_s, scrape_s * (1.0 - duty) / duty)


def _sample_loop(url: str, headers: dict[str, str], every_s: float, conn: Any) -> None:
    """The sampler process: on ``start``, scrape (the first after 0.05 s, then :func:`next_wait_s` after each) until
    ``stop``, then send back the highest value of each gauge; ``quit`` (or a closed pipe) ends it."""

    import prometheus_client.parser  # noqa: F401  (imported before "ready", not inside the first scrape)

    conn.send("ready")
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg != "start":
            return
        during: dict[str, float] = {}
        wait = min(every_s, 0.05)
        while not conn.poll(wait):
            got, took = _scrape_once(url, headers)
            fold_during(during, got)
            wait = next_wait_s(every_s, took)
        try:
            conn.recv()  # "stop"
            conn.send(during)
        except (EOFError, OSError):
            return


class Sampler:
    """``/metrics`` sampled during each repeat by a separate process (see the module docstring).

    Use as an async context manager around the repeats of a point: ``start()`` before a repeat
    (the process is spawned at the first one, before any request goes out), ``stop()`` after it
    (returns ``{gauge: highest value}``); leaving the context ends the process.  Without a URL,
    and after any failure, it samples nothing and ``stop()`` gives {}: the measurement never
    depends on a scrape.
    """

    def __init__(self, url: str | None, headers: dict[str, str] | None = None, every_s: float = EVERY_S):
        self.url, self.headers, self.every_s = url, dict(headers or {}), every_s
        self._proc: Any = None
        self._conn: Any = None
        self._ok = bool(url)
        self._running = False

    async def __aenter__(self) -> "Sampler":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def _spawn(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_sample_loop, args=(self.url, self.headers, self.every_s, child), daemon=True)
        self._proc.start()
        child.close()
        self._ok = bool(self._conn.poll(60)) and self._recv() == "ready"

    def _recv(self) -> Any:
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            return None

    def start(self) -> None:
        """Begin sampling (returns at once; the first call spawns the process and waits until it is ready)."""
        if not self._ok:
            return
        if self._proc is None:
            self._spawn()
            if not self._ok:
                return
        try:
            self._conn.send("start")
            self._running = True
        except (OSError, ValueError):
            self._ok = False

    def stop(self, timeout_s: float = SCRAPE_TIMEOUT_S + 5) -> dict[str, float]:
        """End sampling; the highest value of each gauge over the repeat ({} when nothing was sampled)."""
        if not (self._ok and self._running):
            return {}
        self._running = False
        try:
            self._conn.send("stop")
            if self._conn.poll(timeout_s):
                got = self._recv()
                return got if isinstance(got, dict) else {}
        except (OSError, ValueError):
            pass
        self._ok = False  # a sampler that did not answer is not asked again
        return {}

    def close(self) -> None:
        """End the sampler process, if any (waits up to 2 s, then terminates it)."""
        if self._proc is None:
            return
        try:
            self._conn.send("quit")
        except (OSError, ValueError):
            pass
        self._proc.join(2)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(2)
        self._conn.close()
        self._proc = None
