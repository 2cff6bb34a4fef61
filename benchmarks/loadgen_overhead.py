"""How many streamed tokens/s the load generator itself sustains, beside a minimal socket client and GuideLLM, in one run.

A local OpenAI-compatible server (raw asyncio, HTTP/1.1 keep-alive, chunked SSE) streams
``max_tokens`` one-token chunks per request as fast as it can: every response is
pre-serialised (vLLM's chunk shape, a usage chunk, ``[DONE]``), and one loop writes the next
chunk of every active stream per "step", like an engine's decode step, then yields to the
event loop once ``BENCH_WRITES_PER_YIELD`` chunks (default 64) were written since the last yield
(``BENCH_EVENTS_PER_WRITE`` events per chunk, default 1).  It runs in its own
process per core but the client's (``--server-processes``: they share its port, SO_REUSEPORT, the kernel
spreading the connections), on every core but the client's.  On two cores that is one server process for one
client, and the two cost about the same per token (the sender's ``send`` on loopback runs the TCP receive path
too), so there the server's core, not the client, may set the figure: the ``CPU`` columns say which (a client
below about 95 % of its core waited for the server).

Each client runs in its own process pinned to one core (``os.sched_setaffinity``; GuideLLM
through ``taskset``), at concurrency 1, 64, 256 and 1,024, ``--repeats`` times, ours and the minimal
client in turn against the same server:

- ours: :func:`pipeline.loadgen.loadgen.closed_loop` exactly as the engines use it
  (warm-up wave excluded, ``max(4·N, 64)`` measured requests, raised to stream at least ``--min-tokens``:
  :func:`measured_requests`); figure = tokens every stream
  received inside the measured window (first measured send → last measured completion) / that
  window (``PointSummary.delivered_output_throughput_tok_s``);
- minimal (:func:`minimal`, about 60 lines): raw HTTP/1.1 over asyncio streams, one timestamp per
  read, content events counted by a byte search, no JSON parsing; the same request shape and the
  same figure.  ``ratio`` = the median over repeats of ours / minimal within each pair (the two run back to
  back, so a pair shares the machine's load, which the medians of each side apart do not): the load generator's own
  cost at that concurrency (the target is ≥ 0.95×); ``CPU`` columns = each client's CPU time / wall time (100 %: that client was
  the limit, not the server); ``µs/tok`` columns = each client's CPU time per token it received (its own cost,
  which other work on a shared core does not change, where the tokens/s ratio then mostly shows who got the core;
  ours without the parse of every event after the repeat, which no measured read waits for: the receiving loop's);
- ``--transports raw aiohttp``: the load generator once per transport (its own HTTP/1.1 reader, the default for
  ``http://``; aiohttp, the former reader), each run paired with a minimal run of its own, one row each;
- ``--event-loops auto asyncio``: the load generator once per event loop (:mod:`pipeline.loadgen.eventloop`; auto:
  uvloop where installed, as the engines run it), again each paired with a minimal run; the minimal client always
  runs on asyncio's own loop, so the yardstick stays the standard library; the table and ``--json`` say which loop
  each side ran on;
- httptools (only where ``httptools`` is installed; skipped with a message when absent): :func:`framed`, the raw
  reader's protocol client with httptools' ``HttpResponseParser`` framing each read in place of the reader's own,
  run after each pair; its tokens/s and CPU µs per token printed beside ours (the hand framing), so the two framings
  can be compared before the reader is moved onto httptools;
- GuideLLM (found as ``$GUIDELLM`` or ``guidellm`` on PATH; skipped with a message when
  absent): ``guidellm run`` with the concurrent profile at the same concurrency and the
  same request count (warm-up wave included, N + :func:`measured_requests`); figure = output tokens of
  its successful requests / its benchmark duration.

Both clients stream ``/v1/chat/completions`` (GuideLLM 0.8.1 cannot build
``/v1/completions`` requests from its synthetic data: "missing text_column").

Prints a table of medians (tokens/s) with the ratios, then which peers this machine has (vLLM's
``vllm bench serve``, AIPerf, GuideLLM: each run only where installed; the line says so), and writes
the samples as JSON with ``--json``.

    PYTHONPATH=$PWD python benchmarks/loadgen_overhead.py [--repeats 3] [--output-tokens 512]

Not a test: it needs a machine with at least two cores and nothing else busy for figures
that mean something.  GuideLLM is never a dependency of batchmark; install it apart, e.g.
``python3 -m venv /work/venv-guidellm && /work/venv-guidellm/bin/pip install guidellm``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVENTS_PER_WRITE = int(os.environ.get("BENCH_EVENTS_PER_WRITE", "1"))
#: Chunks the server writes between two yields to its event loop (:class:`_Stepper`).
WRITES_PER_YIELD = int(os.environ.get("BENCH_WRITES_PER_YIELD", "64"))


# ---------------------------------------------------------------------------------------------
# the server

def _event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def sse_body(path: str, model: str, max_tokens: int, prompt_tokens: int) -> list[bytes]:
    """The SSE events of one streamed response (vLLM's chunk shape), as HTTP/1.1 chunks of 16 events."""
    created = int(time.time())
    events = []
    for i in range(max_tokens):
        word = f" w{i % 1000}"
        if path.endswith("/chat/completions"):
            choice = {"index": 0, "delta": {"content": word}, "logprobs": None, "finish_reason": None}
            obj = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [choice]}
        else:
            choice = {"index": 0, "text": word, "logprobs": None, "finish_reason": None, "stop_reason": None}
            obj = {"id": "cmpl-bench", "object": "text_completion", "created": created, "model": model,
                   "choices": [choice], "usage": None}
        events.append(_event(obj))
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens, "total_tokens": prompt_tokens + max_tokens}
    events.append(_event({"id": "cmpl-bench", "object": "text_completion", "created": created, "model": model,
                          "choices": [], "usage": usage}))
    events.append(b"data: [DONE]\n\n")
    out = []
    for i in range(0, len(events), EVENTS_PER_WRITE):
        data = b"".join(events[i:i + EVENTS_PER_WRITE])
        out.append(b"%x\r\n%s\r\n" % (len(data), data))
    out.append(b"0\r\n\r\n")
    return out


class _Handler(asyncio.Protocol):
    """One connection: parses requests, hands streaming responses to the :class:`_Stepper`."""

    cache: dict = {}
    stepper: "_Stepper"

    def connection_made(self, transport):
        self.transport = transport
        self.buf = b""
        self.busy = False

    def data_received(self, data):
        self.buf += data
        if not self.busy:
            self._next()

    def _next(self):
        head_end = self.buf.find(b"\r\n\r\n")
        if head_end < 0:
            return
        lines = self.buf[:head_end].decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        length = 0
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            if k.strip().lower() == "content-length":
                length = int(v)
        if len(self.buf) < head_end + 4 + length:
            return
        body = self.buf[head_end + 4:head_end + 4 + length]
        self.buf = self.buf[head_end + 4 + length:]
        self._respond(method, path.split("?")[0], body)

    def _simple(self, status: str, obj: dict):
        data = json.dumps(obj).encode()
        self.transport.write(b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(data), data))

    def _respond(self, method: str, path: str, body: bytes):
        if method == "GET" and path in ("/health", "/v1/health"):
            self._simple("200 OK", {"status": "ok"})
        elif method == "GET" and path == "/v1/models":
            self._simple("200 OK", {"object": "list", "data": [{"id": "bench", "object": "model"}]})
        elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            req = json.loads(body or b"{}")
            n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
            key = (path, req.get("model", "bench"), n)
            if key not in self.cache:
                self.cache[key] = sse_body(path, key[1], n, 16)
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                 b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")
            self.busy = True
            self.stepper.add(self, self.cache[key])
            return
        else:
            self._simple("404 Not Found", {"error": f"no route {method} {path}"})
        if self.buf:
            self._next()

    def finished(self):
        self.busy = False
        if self.buf:
            self._next()


class _Stepper:
    """Writes the next chunk of every active stream once per step, like an engine's decode step.

    It yields to the event loop (new requests, closed connections) after a step once at least
    :data:`WRITES_PER_YIELD` chunks were written since the last yield: at c = 1 a yield after every one-chunk step
    cost the server an ``epoll_wait`` and a loop pass per token, which made this server, not the client under test,
    the limit (client CPU 50–75 % of its core); from c = 64 on, every step yields, as before."""

    def __init__(self):
        self.active: list = []
        self.wake = asyncio.Event()

    def add(self, handler, pieces):
        self.active.append([handler, pieces, 0])
        self.wake.set()

    async def run(self):
        written = 0
        while True:
            if not self.active:
                self.wake.clear()
                await self.wake.wait()
            current, self.active = self.active, []
            keep = []
            for item in current:
                handler, pieces, i = item
                if handler.transport.is_closing():
                    continue
                handler.transport.write(pieces[i])
                item[2] = i + 1
                if item[2] < len(pieces):
                    keep.append(item)
                else:
                    handler.finished()
            self.active = keep + self.active  # streams added while writing start next step
            written += len(current)
            if written >= WRITES_PER_YIELD or not self.active:
                written = 0
                await asyncio.sleep(0)


def serve(port: int) -> None:
    """Run the token-streaming server on 127.0.0.1:``port`` until killed."""
    async def main():
        stepper = _Stepper()
        _Handler.stepper = stepper
        task = asyncio.get_running_loop().create_task(stepper.run())
        server = await asyncio.get_running_loop().create_server(_Handler, "127.0.0.1", port, backlog=4096,
                                                                reuse_port=True)  # several server processes
        async with server:
            await server.serve_forever()
        task.cancel()

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------
# clients

def ours(url: str, concurrency: int, n_measured: int, output_tokens: int,
         transport: str = "auto", loop: str = "auto") -> tuple[float, float, float, str]:
    """Our load generator at ``concurrency`` on the event loop ``loop`` (:mod:`pipeline.loadgen.eventloop`, as the
    served engines run it): (tokens/s every stream delivered inside the measured window, as
    ``PointSummary.delivered_output_throughput_tok_s`` counts them, the client's CPU time / wall time of the loop —
    near 1.0 when the client is the limit, the client's CPU µs per token received — its cost, which a core shared
    with other work does not change, the loop's name).  The CPU and wall time of the parse after the repeat (the scheduler's fold:
    orjson and the token accounting of every event, done once nothing is in flight) are left out of both, as they
    are out of the measured window: what is compared is the loop that receives."""
    sys.path.insert(0, str(ROOT))
    from pipeline.loadgen import eventloop, loadgen, scheduler

    folding = {"cpu": 0.0, "wall": 0.0}
    fold = scheduler._folded

    def timed_fold(streams, target):
        c, w = time.process_time(), time.perf_counter()
        try:
            return fold(streams, target)
        finally:
            folding["cpu"] += time.process_time() - c
            folding["wall"] += time.perf_counter() - w

    scheduler._folded = timed_fold

    target = loadgen.Target(base_url=url, model="bench", endpoint="chat", timeout_s=600)
    feats = loadgen.Features(ignore_eos=True, min_tokens=True, stream_options=True, continuous_usage_stats=False)
    bodies = [loadgen.build_body(target, feats, f"w{i} w1 w2 w3", output_tokens)
              for i in range(concurrency + n_measured)]

    out = {}

    async def run() -> None:  # the result kept aside: asyncio.run reprs its main task's result on exit (https://github.com/python/cpython/issues/112559)
        async with loadgen.make_session(concurrency, transport=transport) as session:
            t0 = time.perf_counter()
            out["res"] = await loadgen.closed_loop(session, target, bodies, concurrency, concurrency, t0)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    eventloop.run(run(), loop)
    res = out["res"]
    cpu_s = time.process_time() - cpu0 - folding["cpu"]
    cpu_frac = cpu_s / (time.perf_counter() - wall0 - folding["wall"])
    records = [loadgen.finalize(s, 4) for s in res.streams]
    bad = [r.error for r in records if r.error]
    if bad:
        raise SystemExit(f"ours: {len(bad)} failed requests, e.g. {bad[0]}")
    start, end = loadgen.measured_window(records)
    chunks = [(t, k) for r in records for t, k in r.chunks]
    chunks += [(t, 1) for raw in res.cooldown for t in raw.times]  # one token per event from the bench server
    return (delivered_tok_s(chunks, start, end), cpu_frac, cpu_s / sum(k for _, k in chunks) * 1e6,
            eventloop.loop_name(loop))


def delivered_tok_s(chunks: list[tuple[float, int]], start: float, end: float) -> float:
    """Tokens every stream (warm-up, measured, cool-down) received inside ``[start, end]`` (s) / the window: what the
    server delivered there, the figure both clients are compared on (``pipeline.loadgen.scheduler.delivered_tokens``)."""
    return sum(k for t, k in chunks if start <= t <= end) / (end - start)


def minimal(url: str, concurrency: int, n_measured: int, output_tokens: int) -> tuple[float, float, float, str]:
    """A minimal socket client: raw HTTP/1.1 keep-alive over asyncio streams on asyncio's own event loop (never
    uvloop: the yardstick stays the plain standard library), one timestamp per read, the content
    events of each read counted by a byte search (one token per event, as the bench server sends them); the same
    shape as ours (``concurrency`` warm-up requests, ``n_measured`` measured, cool-down until they are done).
    Returns (delivered tok/s over first measured send → last measured completion, CPU time / wall time, CPU µs per
    token received, ``"asyncio"``)."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    body = json.dumps({"model": "bench", "stream": True, "max_tokens": output_tokens, "ignore_eos": True,
                       "messages": [{"role": "user", "content": "w0 w1 w2 w3"}]}).encode()
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (host.encode(), len(body)))
    n_total, chunks, sends, ends = concurrency + n_measured, [], [], []
    state = {"next": 0, "done": 0}
    all_done = asyncio.Event()

    async def slot() -> None:
        reader, writer = await asyncio.open_connection(host, int(port), limit=2 ** 22)
        perf, mark, end_mark = time.perf_counter, b'"content"', b"0\r\n\r\n"
        while not all_done.is_set():
            i = state["next"]
            state["next"] += 1
            t_send = perf()
            writer.write(head + body)
            tail = b""
            while True:
                data = await reader.read(2 ** 20)
                now = perf()
                if not data:
                    raise ConnectionError("server closed the connection")
                seen = tail + data
                chunks.append((now, seen.count(mark) - tail.count(mark)))
                tail = seen[-16:]
                if seen.endswith(end_mark):
                    break
            if concurrency <= i < n_total:
                sends.append(t_send)
                ends.append(now)
                state["done"] += 1
                if state["done"] >= n_measured:
                    all_done.set()
        writer.close()

    async def run() -> None:
        tasks = [asyncio.create_task(slot()) for _ in range(concurrency)]
        await all_done.wait()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    asyncio.run(run())
    cpu_s = time.process_time() - cpu0
    cpu_frac = cpu_s / (time.perf_counter() - wall0)
    return delivered_tok_s(chunks, min(sends), max(ends)), cpu_frac, cpu_s / sum(k for _, k in chunks) * 1e6, "asyncio"


def measured_requests(concurrency: int, output_tokens: int, min_tokens: int) -> int:
    """Measured requests of one sample: ``max(4·N, 64)``, raised so that the sample streams at least ``min_tokens``
    tokens (a c = 1 sample of 64 requests of 256 tokens lasts 0.2 s, within reach of one scheduling hiccup of a
    shared core; 262,144 tokens last 2–3 s at the 100k tok/s one client core receives)."""
    return max(4 * concurrency, 64, -(-min_tokens // output_tokens))


def build_tokenizer(folder: Path) -> None:
    """A local word-level tokenizer (``w0 … w999``) for GuideLLM's synthetic prompts; nothing downloaded."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, **{f"w{i}": i + 1 for i in range(1000)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<unk>").save_pretrained(folder)


def guidellm(exe: str, url_root: str, concurrency: int, n_requests: int, output_tokens: int, tok_dir: Path,
             core: int, workdir: Path) -> float:
    """GuideLLM's output tokens/s at ``concurrency`` (concurrent profile, pinned to ``core`` with taskset)."""
    out = workdir / f"guidellm-c{concurrency}-{time.monotonic_ns()}.json"
    cmd = ["taskset", "-c", str(core), exe, "run",
           "--backend", f"kind=openai_http,target={url_root},model=bench,http2=false",
           "--profile", f"kind=concurrent,streams={concurrency}",
           "--constraint", f"kind=max_requests,count={n_requests + concurrency}",
           "--data", f"kind=synthetic_text,prompt_tokens=4,output_tokens={output_tokens}",
           "--tokenizer", f"kind=huggingface_auto,model={tok_dir}",
           "--output", f"kind=json,path={out}", "--disable-console-interactive"]
    env = {**os.environ, "GUIDELLM__MAX_CONCURRENCY": str(max(concurrency, 512)), "HF_HUB_OFFLINE": "1"}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if res.returncode != 0 or not out.exists():
        raise RuntimeError(f"guidellm failed ({res.returncode}): {(res.stderr or res.stdout)[-1500:]}")
    return _guidellm_tok_s(json.loads(out.read_text()))


def _guidellm_tok_s(report: dict) -> float:
    """Output tokens of the successful requests / benchmark duration (s), from a GuideLLM JSON report.

    The same quotient as ours (tokens over the window); GuideLLM's own
    ``output_tokens_per_second`` is a mean over time buckets and is not used.
    """
    bench = report["benchmarks"][0]
    tokens = bench["metrics"]["output_token_count"]["successful"]["total_sum"]
    if not tokens:
        raise KeyError("the GuideLLM report has no successful requests")
    return float(tokens) / float(bench["duration"])


# ---------------------------------------------------------------------------------------------
# orchestration

def peers() -> dict[str, str]:
    """Which peer load generators this machine has, and what this benchmark does with them (one line each)."""
    vllm = shutil.which("vllm") or next((str(p) for p in (ROOT / ".venv-vllm" / "bin" / "vllm",) if p.exists()), None)
    return {"guidellm": "run above (concurrent profile, pinned with taskset)" if shutil.which("guidellm") or
            os.environ.get("GUIDELLM") else "not installed: its column is n/a",
            "aiperf": "not installed: not run" if not shutil.which("aiperf") else "installed, not run by this script",
            "vllm bench serve": (f"installed ({vllm}), not run here: benchmarks/vllm_agreement.py compares against it "
                                 "on a vLLM server" if vllm else "not installed: not run")}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def framed(url: str, concurrency: int, n_measured: int, output_tokens: int) -> tuple[float, float, float, str]:
    """The minimal client's requests on asyncio's protocol API, as the load generator's raw reader reads
    (``pipeline/loadgen/rawhttp.py``), with httptools' ``HttpResponseParser`` (llhttp, Node.js's parser) doing the
    HTTP/1.1 framing in place of the raw reader's own: one ``perf_counter`` stamp per read in ``data_received``, the
    body bytes llhttp hands back counted for content events by a byte search (with the 16-byte edge of the read
    before), the request done at llhttp's message end; asyncio's own event loop, as the minimal client.  What the
    framing would cost the raw reader on httptools, beside the ``ours`` figure (its hand framing).  Returns what
    :func:`minimal` returns, the loop ``"asyncio+httptools"``."""
    import httptools

    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    body = json.dumps({"model": "bench", "stream": True, "max_tokens": output_tokens, "ignore_eos": True,
                       "messages": [{"role": "user", "content": "w0 w1 w2 w3"}]}).encode()
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % (host.encode(), len(body))) + body
    n_total, chunks, sends, ends = concurrency + n_measured, [], [], []
    state = {"next": 0, "done": 0}
    all_done = asyncio.Event()
    perf, mark = time.perf_counter, b'"content"'

    class Framed(asyncio.Protocol):
        def __init__(self) -> None:
            self.parser = httptools.HttpResponseParser(self)
            self.waiter: asyncio.Future | None = None
            self.tail, self.events, self.now = b"", 0, 0.0

        def connection_made(self, transport) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            self.now, self.events = perf(), 0
            self.parser.feed_data(data)  # on_body, on_message_complete run inside
            chunks.append((self.now, self.events))

        def on_body(self, part: bytes) -> None:
            seen = self.tail + part
            self.events += seen.count(mark) - self.tail.count(mark)
            self.tail = seen[-16:]

        def on_message_complete(self) -> None:
            self.tail = b""
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(self.now)

        def connection_lost(self, exc) -> None:
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_exception(ConnectionError("server closed the connection"))

    async def slot() -> None:
        loop = asyncio.get_running_loop()
        transport, proto = await loop.create_connection(Framed, host, int(port))
        while not all_done.is_set():
            i = state["next"]
            state["next"] += 1
            proto.waiter = loop.create_future()
            t_send = perf()
            transport.write(request)
            now = await proto.waiter
            if concurrency <= i < n_total:
                sends.append(t_send)
                ends.append(now)
                state["done"] += 1
                if state["done"] >= n_measured:
                    all_done.set()
        transport.close()

    async def run() -> None:
        tasks = [asyncio.create_task(slot()) for _ in range(concurrency)]
        await all_done.wait()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    asyncio.run(run())
    cpu_s = time.process_time() - cpu0
    cpu_frac = cpu_s / (time.perf_counter() - wall0)
    return (delivered_tok_s(chunks, min(sends), max(ends)), cpu_frac, cpu_s / sum(k for _, k in chunks) * 1e6,
            "asyncio+httptools")


def _pinned(core: int, args: list[str], which: str = "ours") -> tuple[float, float, float, str]:
    """Run this script's ``client-<which>`` in a fresh process pinned to ``core``; (tokens/s, CPU fraction, CPU µs
    per token, the event loop it ran on)."""
    res = subprocess.run([sys.executable, __file__, f"client-{which}", "--core", str(core), *args],
                         capture_output=True, text=True, timeout=1800, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                             [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])})
    if res.returncode != 0:
        raise RuntimeError(f"client failed: {res.stderr[-1500:]}")
    tok_s, cpu, us, loop = res.stdout.strip().splitlines()[-1].split(maxsplit=3)
    return float(tok_s), float(cpu), float(us), loop


def table(args: argparse.Namespace, samples: dict, arms: list[tuple[str, str]], loops: dict[str, set[str]],
          load_before: tuple[float, float, float], n_cores: int) -> None:
    """Print the medians of ``samples`` (tok/s, CPU share, CPU µs per token), one row per concurrency and arm
    (transport, event loop), with the paired ratio and the loop each side ran on."""
    print(f"\nstreamed output tokens/s delivered in the measured window, client pinned to one core, median of "
          f"{args.repeats} (load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after, {n_cores} cores)")
    framing = bool(samples.get("framed"))  # the httptools arm ran (httptools installed)
    print(f"{'concurrency':>11}  {'transport':>9}  {'loop ours':>14}  {'batchmark':>10}  {'minimal':>10}  {'ratio':>6}  "
          f"{'CPU ours':>8}  {'CPU min':>7}  {'µs/tok ours':>11}  {'µs/tok min':>10}  {'guidellm':>9}"
          + (f"  {'httptools':>10}  {'µs/tok ht':>9}" if framing else ""))
    for conc in args.concurrency:
        g = statistics.median(samples["guidellm"][conc]) if samples["guidellm"].get(conc) else None
        for t, loop in arms:
            arm = f"{t}-{loop}"
            med = {k: statistics.median(samples[f"{k}-{arm}"][conc]) for k in (
                "ours", "minimal", "ours_cpu_fraction", "minimal_cpu_fraction", "ours_cpu_us_per_token",
                "minimal_cpu_us_per_token")}
            ratio = statistics.median(a / b for a, b in zip(samples[f"ours-{arm}"][conc], samples[f"minimal-{arm}"][conc]))
            print(f"{conc:>11}  {t:>9}  {'/'.join(sorted(loops[f'ours-{arm}'])):>14}  {med['ours']:>10,.0f}  "
                  f"{med['minimal']:>10,.0f}  {ratio:>5.2f}x  {med['ours_cpu_fraction']:>8.0%}  "
                  f"{med['minimal_cpu_fraction']:>7.0%}  {med['ours_cpu_us_per_token']:>11.2f}  "
                  f"{med['minimal_cpu_us_per_token']:>10.2f}  {(f'{g:,.0f}' if g else 'n/a'):>9}"
                  + (f"  {statistics.median(samples['framed'][conc]):>10,.0f}  "
                     f"{statistics.median(samples['framed_cpu_us_per_token'][conc]):>9.2f}" if framing else ""))
    minimal_loops = sorted(set().union(*(v for k, v in loops.items() if k.startswith("minimal-"))))
    print(f"event loops: batchmark as the row says; the minimal client {', '.join(minimal_loops)} (always asyncio's own)")
    if framing:
        print("httptools: the raw reader's protocol client with httptools' HttpResponseParser framing each read "
              "(asyncio's own loop), beside ours (its hand framing); µs/tok: its CPU per token received")
    else:
        print("httptools: not installed: its columns are skipped (pip install httptools)")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or one of its server/client subcommands); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd")
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, required=True)
    for name in ("client-ours", "client-minimal", "client-framed"):
        c = sub.add_parser(name)
        c.add_argument("--core", type=int, default=0)
        c.add_argument("--url", required=True)
        c.add_argument("--concurrency", type=int, required=True)
        c.add_argument("--requests", type=int, required=True)
        c.add_argument("--output-tokens", type=int, required=True)
        c.add_argument("--transport", default="auto", choices=["auto", "raw", "aiohttp"])
        c.add_argument("--event-loop", default="auto", choices=["auto", "uvloop", "asyncio"])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 64, 256, 1024])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--output-tokens", type=int, default=512, help="streamed tokens per request")
    ap.add_argument("--server-processes", type=int, default=0,
                    help="bench server processes sharing its port (SO_REUSEPORT; default one per core not the "
                         "client's): the server must outpace the client for the figure to be the client's")
    ap.add_argument("--min-tokens", type=int, default=262_144,
                    help="tokens every sample streams at least (its measured requests raised to reach it)")
    ap.add_argument("--client-core", type=int, default=0, help="the one core every client is pinned to")
    ap.add_argument("--guidellm", default=os.environ.get("GUIDELLM") or shutil.which("guidellm"),
                    help="GuideLLM executable (default $GUIDELLM, then PATH)")
    ap.add_argument("--transports", nargs="+", default=["raw"], choices=["raw", "aiohttp"],
                    help="the load generator's transports, each paired with its own minimal-client run (raw: its own "
                         "HTTP/1.1 reader, the default for http://; aiohttp: the former reader)")
    ap.add_argument("--event-loops", nargs="+", default=["auto"], choices=["auto", "uvloop", "asyncio"],
                    help="the load generator's event loops (pipeline/loadgen/eventloop.py; auto: uvloop where "
                         "installed), each run paired with its own minimal-client run; the minimal client always "
                         "runs on asyncio's own loop")
    ap.add_argument("--json", default=None, help="write every sample here")
    args = ap.parse_args(argv)

    if args.cmd == "serve":
        serve(args.port)
        return 0
    if args.cmd in ("client-ours", "client-minimal", "client-framed"):
        os.sched_setaffinity(0, {args.core})
        if args.cmd == "client-ours":
            print(*ours(args.url, args.concurrency, args.requests, args.output_tokens, args.transport, args.event_loop))
        elif args.cmd == "client-framed":
            print(*framed(args.url, args.concurrency, args.requests, args.output_tokens))
        else:
            print(*minimal(args.url, args.concurrency, args.requests, args.output_tokens))
        return 0

    cores = sorted(os.sched_getaffinity(0))
    server_cores = [c for c in cores if c != args.client_core] or cores
    port = _free_port()
    n_servers = args.server_processes or len(server_cores)
    servers = [subprocess.Popen([sys.executable, __file__, "serve", "--port", str(port)],  # the kernel spreads
                                preexec_fn=lambda: os.sched_setaffinity(0, set(server_cores)))  # connections
               for _ in range(n_servers)]
    samples: dict[str, dict[int, list[float]]] = {"guidellm": {}}
    arms = [(t, loop) for t in args.transports for loop in args.event_loops]  # each ours run: transport, event loop
    loops: dict[str, set[str]] = {}  # the loop each side ran on, as the client said
    load_before = os.getloadavg()
    has_httptools = importlib.util.find_spec("httptools") is not None  # the framing arm: only where installed
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(1.0 if n_servers > 1 else 0.0)  # every server process listening before the first client
        print(f"{n_servers} server process(es) on core(s) {server_cores}, clients pinned to core {args.client_core}; "
              f"{args.output_tokens} tokens per request, requests per point max(4·N, 64, ⌈{args.min_tokens} / tokens⌉) + N warm-up; "
              f"{len(cores)} cores visible", file=sys.stderr)
        tmp = Path(tempfile.mkdtemp(prefix="loadgen-overhead-"))
        if args.guidellm:
            build_tokenizer(tmp / "tok")
        else:
            print("GuideLLM not found ($GUIDELLM or PATH): its column is skipped", file=sys.stderr)
        for r in range(args.repeats):
            for conc in args.concurrency:
                n = measured_requests(conc, args.output_tokens, args.min_tokens)
                argv_c = ["--url", f"http://127.0.0.1:{port}/v1", "--concurrency", str(conc), "--requests", str(n),
                          "--output-tokens", str(args.output_tokens)]
                for (transport, loop), which in ((a, w) for a in arms for w in ("ours", "minimal")):
                    # side by side, in turn, against the same server: each arm's run paired with a minimal one
                    arm = f"{transport}-{loop}"
                    v, cpu, us, ran_on = _pinned(args.client_core, argv_c + ["--transport", transport, "--event-loop",
                                                                            loop] * (which == "ours"), which)
                    samples.setdefault(f"{which}-{arm}", {}).setdefault(conc, []).append(v)
                    samples.setdefault(f"{which}_cpu_fraction-{arm}", {}).setdefault(conc, []).append(cpu)
                    samples.setdefault(f"{which}_cpu_us_per_token-{arm}", {}).setdefault(conc, []).append(us)
                    loops.setdefault(f"{which}-{arm}", set()).add(ran_on)
                    print(f"repeat {r + 1} c={conc} {which} ({transport}, {ran_on}) {v:,.0f} tok/s (client CPU "
                          f"{cpu:.0%} of wall, {us:.2f} µs/token)", file=sys.stderr)
                if has_httptools:  # the httptools framing on the same server, right after the pair
                    v, cpu, us, _ = _pinned(args.client_core, argv_c, "framed")
                    samples.setdefault("framed", {}).setdefault(conc, []).append(v)
                    samples.setdefault("framed_cpu_us_per_token", {}).setdefault(conc, []).append(us)
                    print(f"repeat {r + 1} c={conc} httptools framing {v:,.0f} tok/s (client CPU {cpu:.0%} of wall, "
                          f"{us:.2f} µs/token)", file=sys.stderr)
                if args.guidellm:
                    try:
                        g = guidellm(args.guidellm, f"http://127.0.0.1:{port}", conc, n, args.output_tokens,
                                     tmp / "tok", args.client_core, tmp)
                        samples["guidellm"].setdefault(conc, []).append(g)
                        print(f"repeat {r + 1} c={conc} guidellm {g:,.0f} tok/s", file=sys.stderr)
                    except (RuntimeError, KeyError, subprocess.TimeoutExpired) as exc:
                        print(f"guidellm at c={conc}: {exc}", file=sys.stderr)
    finally:
        for server in servers:
            server.kill()
            server.wait()
    table(args, samples, arms, loops, load_before, len(cores))
    for name, hint in peers().items():
        print(f"{name}: {hint}")
    if args.json:
        Path(args.json).write_text(json.dumps({"output_tokens": args.output_tokens, "samples": samples,
                                               "event_loops": {k: sorted(v) for k, v in loops.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
