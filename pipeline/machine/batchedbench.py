"""llama-batched-bench run on a GGUF file, its whole table kept or the run refused by name.

``llama-batched-bench -m FILE -c N_CTX -npp PP,… -ntg TG,… -npl B,…`` prints one table row per (PP, TG, B) whose
context fits: a row is skipped when ``B·(PP + TG)`` exceeds ``n_kv_max`` (the context, ``llama_n_ctx``) —
``tools/batched-bench/batched-bench.cpp`` (``n_ctx_req > n_kv_max``: ``continue``).  So the rows a run must print
are known before it starts (:func:`expected_rows`).

Why the check: the table is written through llama.cpp's common logger, a worker thread fed by a queue, and that
logger is deliberately leaked at exit (``common/log.cpp``, ``common_log_main``: "this design may cause logs to be
lost if not flushed before the program exits").  On a loaded machine the worker has not been scheduled when
``main`` returns, so the last rows vanish and the process still exits 0; a table that ends one row early looks
whole.  :func:`run_batched_bench` compares the rows printed with the rows asked for and runs again (up to
``attempts`` times) when one is missing; then it refuses, naming the rows.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.core.atomicfiles import atomic_write_text
from pipeline.core.errors import BatchmarkError

#: Runs of llama-batched-bench before a table still missing rows is refused.
ATTEMPTS = 3


def expected_rows(npp: Sequence[int], ntg: Sequence[int], npl: Sequence[int], n_ctx_tokens: int) -> set[tuple[int, int, int]]:
    """The (PP, TG, B) rows llama-batched-bench prints for this grid: those with ``B·(PP + TG) ≤ n_ctx_tokens``."""
    return {(pp, tg, b) for pp in npp for tg in ntg for b in npl if b * (pp + tg) <= n_ctx_tokens}


def printed_rows(text: str) -> set[tuple[int, int, int]]:
    """The (PP, TG, B) of every data row of the Markdown table(s) in ``text`` (a header or rule row is not one)."""
    rows = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else []
        if len(cells) >= 3 and all(c.isdigit() for c in cells[:3]):
            rows.add((int(cells[0]), int(cells[1]), int(cells[2])))
    return rows


def _grid(name: str, values: Sequence[int]) -> str:
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise BatchmarkError(f"{name}: {list(values)!r} is not a list of positive token or sequence counts")
    return ",".join(map(str, values))


def run_batched_bench(tool: Path, gguf: Path, out: Path, grid: Mapping[str, Sequence[int]], n_ctx_tokens: int,
                      attempts: int = ATTEMPTS, timeout_s: float = 600.0,
                      run: Callable[..., Any] = subprocess.run) -> set[tuple[int, int, int]]:
    """Run llama-batched-bench (``tool``) on ``gguf`` over ``grid`` (``{"npp": …, "ntg": …, "npl": …}``) with a
    context of ``n_ctx_tokens``; write its log and table (stderr, then stdout) to ``out``; return the rows printed.

    Raises:
        BatchmarkError: a grid with no row that fits the context, the tool failing or timing out (its last error
            line), or rows still missing after ``attempts`` runs (named; the last output is kept in ``out``).
    """
    args = {k: _grid(k, grid.get(k, ())) for k in ("npp", "ntg", "npl")}
    want = expected_rows(grid["npp"], grid["ntg"], grid["npl"], n_ctx_tokens)
    if not want:
        raise BatchmarkError(f"llama-batched-bench: no (PP, TG, B) of the grid fits a context of {n_ctx_tokens} tokens")
    cmd = [str(tool), "-m", str(gguf), "-c", str(n_ctx_tokens)] + [a for k, v in args.items() for a in (f"-{k}", v)]
    missing: set[tuple[int, int, int]] = set()
    for _ in range(max(1, attempts)):
        try:
            res = run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise BatchmarkError(f"llama-batched-bench on {gguf.name}: no table within {timeout_s:.0f} s") from None
        if res.returncode != 0:
            last = next((ln for ln in reversed(res.stderr.splitlines()) if ln.strip()), "no output")
            raise BatchmarkError(f"llama-batched-bench on {gguf.name} exited {res.returncode}: {last.strip()}")
        atomic_write_text(out, res.stderr + res.stdout)
        got = printed_rows(res.stdout)
        missing = want - got
        if not missing:
            return got
    named = ", ".join(f"PP={pp} TG={tg} B={b}" for pp, tg, b in sorted(missing))
    raise BatchmarkError(f"llama-batched-bench on {gguf.name}: {attempts} runs each lost rows of the table ({named}; "
                         f"llama.cpp's logger drops its last lines at exit on a loaded machine) — output kept in {out}")
