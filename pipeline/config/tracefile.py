"""A trace to replay (``open_loop.load: trace``, ``open_loop.trace_file``): arrival times and, where stated, each
request's lengths, in Mooncake's trace format, read once and checked line by line.

One JSON object a line (https://jsonlines.org/; blank lines skipped): ``{"timestamp": ms, "input_length": n,
"output_length": n, "hash_ids": [...]}`` — the format of the Mooncake repository's ``mooncake_trace.jsonl`` and of
AIPerf's ``--custom-dataset-type mooncake_trace`` with ``--fixed-schedule`` (``docs/benchmark_modes/trace_replay.md``):
``timestamp`` the arrival in milliseconds since the first request (equal for requests arriving together),
``input_length`` / ``output_length`` tokens.  ``hash_ids`` (prefix-cache blocks) are read past: batchmark's prompts
share no blocks but a ``lengths.prefix_len``.  Lengths are all stated or none (then ``lengths:`` draws them).

The replay (derived): a trace of N arrivals over a span S (s) has its own mean rate R₀ = (N − 1) / S.  At an
offered rate R its gaps are scaled by R₀ / R (a speed-up of R / R₀, so ``rates`` sweeps the same trace faster and
slower), request i of a repeat is line i mod N (a repeat longer than the trace goes round again, after one mean gap
1 / R), and the achieved rate and schedule are kept as for any open loop.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from pipeline.core.errors import BatchmarkError

#: Longest trace file read (bytes): Mooncake's published traces are a few MB.
MAX_TRACE_FILE_BYTES = 64 * 2**20
#: Longest length a trace line may state (tokens).
MAX_TRACE_LENGTH = 10_000_000


@dataclass(frozen=True)
class Trace:
    """A read trace: arrival offsets (s since its first line, non-decreasing) and per line its lengths (tokens) where
    the file states them (else None)."""

    offsets_s: np.ndarray
    input_lens: np.ndarray | None
    output_lens: np.ndarray | None

    @property
    def rate_rps(self) -> float:
        """The trace's own mean arrival rate, (N − 1) / span, requests/s."""
        return (len(self.offsets_s) - 1) / float(self.offsets_s[-1] - self.offsets_s[0])

    def gaps_s(self, rate_rps: float) -> np.ndarray:
        """One round of gaps (s) at the offered ``rate_rps``: the trace's gaps × R₀ / R, then the gap back to its first
        line, 1 / R (module docstring)."""
        scale = self.rate_rps / rate_rps
        return np.append(np.diff(self.offsets_s) * scale, 1.0 / rate_rps)

    def lengths(self, n: int, per: int) -> tuple[np.ndarray, np.ndarray]:
        """(prompt, output) tokens of ``n`` bodies, ``per`` a repeat: body b is line (b mod per) mod N."""
        lines = (np.arange(n) % per) % len(self.offsets_s)
        return self.input_lens[lines], self.output_lens[lines]


def _number(obj: dict, name: str, where: str, integer: bool) -> float | int:
    """``obj[name]`` checked: a finite number ≥ 0 (a timestamp) or an integer in [1, MAX_TRACE_LENGTH] (a length)."""
    v = obj.get(name)
    if integer:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= MAX_TRACE_LENGTH:
            raise BatchmarkError(f"{where}: {name}: {v!r} is not a positive number of tokens")
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise BatchmarkError(f"{where}: {name}: {v!r} is not a finite number of milliseconds ≥ 0")
    return v


def _text(path: Path) -> str:
    """The file's text, refused in one line when missing, too large or not UTF-8."""
    try:
        size = path.stat().st_size
        if size > MAX_TRACE_FILE_BYTES:
            raise BatchmarkError(f"{path}: {size} bytes; a trace file holds at most {MAX_TRACE_FILE_BYTES}")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BatchmarkError(f"{path}: trace file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BatchmarkError(f"{path}: not a readable UTF-8 text file ({type(exc).__name__})") from None


def read_trace(path: str | Path) -> Trace:
    """The trace of a Mooncake-format JSON Lines file (module docstring), offsets from its first line.

    Raises:
        BatchmarkError: the file is missing, too large or not UTF-8; a line is not a JSON object, its timestamp is
            not a finite number ≥ 0 or is earlier than the line before, a length is not a positive integer, some lines
            state lengths and others not; fewer than two lines, or all at one time (no rate) — one line naming the
            file and the line at fault.
    """
    path = Path(path)
    stamps: list[float] = []
    ins: list[int] = []
    outs: list[int] = []
    first_stated: bool | None = None
    for n, line in enumerate(_text(path).splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path} line {n}"
        try:
            obj = json.loads(line)
        except ValueError:
            raise BatchmarkError(f"{where}: not JSON (a trace is JSON Lines: one object a line)") from None
        if not isinstance(obj, dict):
            raise BatchmarkError(f"{where}: not a JSON object ({{timestamp, input_length, output_length}})")
        t = _number(obj, "timestamp", where, integer=False)
        if stamps and t < stamps[-1]:
            raise BatchmarkError(f"{where}: timestamp {t:g} ms is before the line before's ({stamps[-1]:g} ms); "
                                 "a trace's timestamps never decrease")
        stated = "input_length" in obj or "output_length" in obj
        first_stated = stated if first_stated is None else first_stated
        if stated != first_stated:
            raise BatchmarkError(f"{where}: {'states' if stated else 'states no'} input_length/output_length, unlike "
                                 "the first line; a trace states every line's lengths or none")
        if stated:
            ins.append(_number(obj, "input_length", where, integer=True))
            outs.append(_number(obj, "output_length", where, integer=True))
        stamps.append(float(t))
    if len(stamps) < 2 or stamps[-1] == stamps[0]:
        raise BatchmarkError(f"{path}: {len(stamps)} arrival(s) spanning 0 ms; a trace needs at least two arrivals "
                             "at different times (its rate)")
    offsets = (np.array(stamps) - stamps[0]) / 1000.0
    lens = (np.array(ins, dtype=np.int64), np.array(outs, dtype=np.int64)) if first_stated else (None, None)
    return Trace(offsets, *lens)


@lru_cache(maxsize=8)
def _cached(path: str, mtime_ns: int, size: int) -> Trace:
    """:func:`read_trace` remembered per file version (its path, modification time and size)."""
    return read_trace(path)


def load_trace(path: str | Path) -> Trace:
    """:func:`read_trace` of ``path``, read once per file version (a sweep asks for it at every repeat)."""
    try:
        st = Path(path).stat()
    except OSError:
        return read_trace(path)  # refused there in one line
    return _cached(str(path), st.st_mtime_ns, st.st_size)


def trace_gaps(cfg, load: str, rate_rps: float | None) -> np.ndarray | None:
    """The gaps (s) a ``trace`` point of ``cfg`` (a sweep config) replays at ``rate_rps`` (:meth:`Trace.gaps_s`);
    None for any other load."""
    if load != "trace":
        return None
    return load_trace(cfg.open_loop.trace_file).gaps_s(float(rate_rps))


def config_trace(cfg) -> Trace | None:
    """The trace of ``cfg``'s open loop where it replays one that states lengths (its lengths are then every
    point's requests'), else None."""
    ol = getattr(cfg, "open_loop", None)
    if ol is None or getattr(ol, "load", None) != "trace":
        return None
    trace = load_trace(ol.trace_file)
    return trace if trace.input_lens is not None else None


def checked_trace(path: str) -> Trace:
    """:func:`read_trace` of a config's ``trace_file``, its one-line refusal as a ``ValueError`` (what a pydantic
    validator raises, ``trace_file:`` named)."""
    try:
        return read_trace(path)
    except BatchmarkError as exc:
        raise ValueError(f"trace_file: {exc}") from None


def speedup_rates(data):
    """An ``open_loop:`` mapping with its ``speedups`` (a trace's, instead of ``rates``) read as the rates they give:
    the trace's own rate R₀ × each speed-up (to six significant figures); any other ``data`` as it is.

    Raises:
        ValueError: ``speedups`` without ``load: trace`` and a ``trace_file``, beside ``rates``, not a list of numbers
            in (0, 10000], or a trace refused (:func:`read_trace`).
    """
    if not isinstance(data, dict) or "speedups" not in data:
        return data
    data = dict(data)
    ups = data.pop("speedups")
    if data.get("load") != "trace" or "rates" in data or not isinstance(data.get("trace_file"), str):
        raise ValueError("speedups: only with load trace and a trace_file, instead of rates")
    if not isinstance(ups, list) or not ups or any(isinstance(u, bool) or not isinstance(u, (int, float))
                                                   or not math.isfinite(u) or not 0 < u <= 10_000 for u in ups):
        raise ValueError(f"speedups: {ups!r} is not a list of speed-ups above 0 and at most 10000")
    own = checked_trace(data["trace_file"]).rate_rps
    data["rates"] = [float(f"{own * u:.6g}") for u in ups]  # six significant figures: labels and keys agree
    return data


def refuse_drawn_beside_trace(cfg) -> None:
    """Refuse a sweep config ``cfg`` whose ``lengths:`` draws what its replayed trace states (its lengths).

    Raises:
        ValueError: ``lengths`` gives a distribution, a ``prefix_len`` or a ``prompt_file`` beside a trace that states
            every request's lengths (``ignore_eos`` alone may be given).
    """
    lengths = getattr(cfg, "lengths", None)
    if lengths is None or config_trace(cfg) is None:
        return
    if lengths.prefix_len or lengths.prompt_file or not (
            lengths.input.distribution == lengths.output.distribution == "fixed"):
        raise ValueError("lengths: the trace_file states every request's lengths; give no distribution, prefix_len "
                         "or prompt_file beside it (ignore_eos only)")


def refuse_unsendable_workload(cfg) -> None:
    """Refuse a sweep config ``cfg`` whose workload its backend cannot send, never silently dropped: an open loop or
    drawn lengths on the transformers backend (static batches), drawn lengths beside a trace that states them
    (:func:`refuse_drawn_beside_trace`).

    Raises:
        ValueError: naming the key.
    """
    for k, what in (("open_loop", "a rate sweep"), ("lengths", "drawn lengths")):
        if getattr(cfg, k, None) is not None and cfg.backend == "transformers":
            raise ValueError(f"{k}: the transformers backend runs static batches; {what} needs a served backend")
    refuse_drawn_beside_trace(cfg)
