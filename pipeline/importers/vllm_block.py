"""``vllm bench serve``'s printed "Serving Benchmark Result" blocks (a console log) → points.

A block starts at ``============ Serving Benchmark Result ============`` and holds ``Successful
requests:``, ``Output token throughput (tok/s):``, ``Mean/Median/P99 TTFT (ms):`` … lines, read
into the keys of a ``--save-result`` object and made a point as one
(:func:`pipeline.importers.vllm_result.point_from_result`).  The concurrency comes from ``Maximum
request concurrency:`` (printed before or inside the block; ``None`` = uncapped), the rate from
``Traffic request rate:`` (before) or ``Request rate configured (RPS):`` (inside), the burstiness
from ``Burstiness factor:`` (before).  The block names no model; ``vllm bench serve`` prints its
arguments first (``Namespace(... model='<name>' ...)``, the ``--model`` it was given, which its
``--save-result`` JSON stores as ``model_id``), so the model of a whole stdout is read there
(real vLLM 0.32 stdout, tests/data/README.md: it was refused for want of ``--model``); ``--model`` overrides it,
and a block with neither is refused.  A block without a concurrency or rate line:
``batchmark import --concurrency N`` or ``--rate R`` says what it omits.

``vllm bench sweep serve --show-stdout`` prints every run's output, each after ``Run Number: N``
(``vllm/benchmarks/sweep/serve.py``; −1 = its warm-up, "excluded from summary statistics"): a block
after ``Run Number: N`` is run N of its point, and a warm-up block is left out (real vLLM
0.32 log: the warm-up was read as a measurement and the runs of a point refused as duplicates).

SGLang's ``bench_serving`` prints a block of the same title (``python/sglang/bench_serving.py``): ``Backend:
sglang…`` inside it (read: the block is SGLang's, engine ``sglang`` unless ``--engine`` says otherwise),
``Max request concurrency:`` (its concurrency), ``Mean/Median/P90/P99 E2E Latency (ms)`` (its E2EL), ``Total
generated tokens (retokenized)`` (the streamed text re-tokenized by the client; compared with the generated count
by :func:`pipeline.importers.vllm_result.point_from_result`) and no failed count (failures unknown).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pipeline.importers.cardmatch import model_name_as_given
from pipeline.importers.checks import REFUSAL_FAILURE_RATE
from pipeline.importers.parsing import fail, number
from pipeline.importers.vllm_result import is_sglang, point_from_result
from pipeline.importers.vllm_sweep import overrides


#: The ``model`` of the ``Namespace(...)`` line ``vllm bench serve`` prints before a run (``served_model_name`` is
#: another key: ``\b`` does not match after its ``_``).
_NAMESPACE_MODEL = re.compile(r"""\bmodel=(?:'([^']*)'|"([^"]*)")""")

_BLOCK_KEYS = {
    "Successful requests": "completed", "Failed requests": "failed", "Benchmark duration (s)": "duration",
    "Total input tokens": "total_input_tokens", "Total generated tokens": "total_output_tokens",
    "Output token throughput (tok/s)": "output_throughput", "Request throughput (req/s)": "request_throughput",
    "Total generated tokens (retokenized)": "total_output_tokens_retokenized",
}
#: The statistic lines of a block: vLLM's ``Mean TTFT (ms)`` …, SGLang's ``Mean E2E Latency (ms)`` (its E2EL) and
#: ``P90``/``P95`` ones; read into ``{mean,median,p<N>}_{ttft,tpot,itl,e2el,e2e_latency}_ms``.
_STAT = re.compile(r"^(Mean|Median|P(\d+(?:\.\d+)?)) (TTFT|TPOT|ITL|E2EL|E2E Latency) \(ms\)$")


def _read_key(path: Path, no: int, s: str, key: str, value: str, block: dict[str, Any] | None,
              pending: dict[str, Any], concurrency: int | None) -> None:
    """Read line ``no`` (``s``, as ``key: value``) into the open ``block``, or into ``pending`` (what the lines above
    the next block say of how it ran: rate, concurrency, burstiness); ``concurrency``: ``--concurrency``, for an
    uncapped run."""
    if key in ("Traffic request rate", "Request rate configured (RPS)"):
        rate: Any = "inf" if value.lower() in ("inf", "infinity") else number(path, no, value)
        (block if block is not None else pending)["request_rate"] = rate
        return
    if key == "Backend" and block is not None:
        block["backend"] = value  # SGLang's block names its backend (sglang, sglang-oai, sglang-oai-chat, …)
        return
    if key in ("Maximum request concurrency", "Max request concurrency"):  # vLLM's, SGLang's
        conc = None if value == "None" or s.endswith("not set") else int(number(path, no, value))  # SGLang: "not set"
        conc = concurrency if conc is None and concurrency is not None else conc  # uncapped: --concurrency says
        (block if block is not None else pending)["max_concurrency"] = conc
        return
    if key == "Burstiness factor":
        (block if block is not None else pending)["burstiness"] = number(path, no, value)
        return
    if block is None:
        return
    stat = _STAT.match(key)
    if stat:
        which = "median" if stat.group(1) == "Median" else ("mean" if stat.group(1) == "Mean" else f"p{stat.group(2)}")
        block[f"{which}_{stat.group(3).lower().replace(' ', '_')}_ms"] = number(path, no, value)
    elif key in _BLOCK_KEYS:
        v = number(path, no, value)
        block[_BLOCK_KEYS[key]] = int(v) if key in ("Successful requests", "Failed requests") else v


def parse_block(path: Path, text: str, model: str | None, engine: str | None,
                max_failure_rate: float = REFUSAL_FAILURE_RATE, concurrency: int | None = None,
                rate: float | None = None) -> list[tuple[Any, int | None, str | None]]:
    """Every "Serving Benchmark Result" block of a printed log → [(point, run number, server)] (model: ``model``, else
    the ``model='…'`` of the ``Namespace(...)`` line printed before the block; run number: the ``Run Number: N`` of
    ``vllm bench sweep serve`` before it, else None; warm-up blocks, run −1, are left out; server: the text of the
    sweep's last ``Server overrides:`` line before it, ``--serve-params``' combination, else None).

    The lines above a block say how it ran: ``Traffic request rate: inf`` (closed loop) or a
    rate (open loop), ``Burstiness factor:``, ``Maximum request concurrency:`` (``None`` =
    uncapped), and the progress bar
    ``100/100 [...]`` whose total counts every request sent (blocks of before mid-2025 print
    no ``Failed requests:`` line, so total − successful is the failed count there).

    Raises:
        BatchmarkError: a block without a model, cut short or malformed (naming its line); no block at all; only
            warm-up blocks.
    """
    points: list[tuple[Any, int | None, str | None]] = []
    printed_model: str | None = None
    server: str | None = None
    run_number: int | None = None
    block_model = ""
    warmups = 0
    pending: dict[str, Any] = {}
    given: dict[str, Any] = {"max_concurrency": concurrency, "request_rate": rate if rate is not None else "inf"}
    block: dict[str, Any] | None = None
    total: int | None = None
    start = 0
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip().lstrip("#").strip()
        found = _NAMESPACE_MODEL.search(s) if block is None and s.startswith("Namespace(") else None
        if found:
            printed_model = (found.group(1) if found.group(1) is not None else found.group(2)) or None
            continue
        if re.match(r"^=+\s*Serving Benchmark Result\s*=+$", s):
            if block is not None:
                raise fail(path, start, "Serving Benchmark Result block never closed (cut short?)")
            if not (model or printed_model):
                raise fail(path, no, "the printed Serving Benchmark Result block names no model; pass --model "
                                     "(or give vllm bench serve's whole output: its Namespace(...) line names it)")
            block, start, block_model = {**given, **pending}, no, model or printed_model
            continue
        if block is not None and s and set(s) == {"="}:
            if run_number is not None and run_number < 0:
                warmups += 1  # vllm bench sweep's warm-up: "excluded from summary statistics"
            else:
                points.append((point_from_result(path, block, model_name_as_given(block_model),
                                                 engine or ("sglang" if is_sglang(block) else "vllm"),
                                                 where=f"block at line {start}", max_failure_rate=max_failure_rate,
                                                 total=total), run_number, server))
            block, pending, total, run_number = None, {}, None, None
            continue
        bar = re.search(r"\|\s*(\d+)/(\d+)\s*\[", s)
        if bar and block is None:
            total = int(bar.group(2))
            continue
        m = re.match(r"^([A-Za-z][^:]*?):\s+(\S+)(?:\s.*)?$", s)
        if not m:
            continue
        key, value = m.group(1).strip(), m.group(2)
        if key == "Server overrides" and block is None:
            server = s.split(":", 1)[1].strip()  # vllm bench sweep serve, when it starts a server
            overrides(path, no, server)  # refused here, naming its line, when it is no dict of plain values
            continue
        if key == "Run Number" and block is None and re.fullmatch(r"-?\d+", value):
            run_number = int(value)  # vllm bench sweep serve, before each run's output
            continue
        _read_key(path, no, s, key, value, block, pending, concurrency)
    if block is not None:
        raise fail(path, start, "Serving Benchmark Result block never closed (cut short?)")
    if not points and warmups:
        raise fail(path, None, f"holds only vllm bench sweep's warm-up ({warmups} block(s) after 'Run Number: -1'), "
                               "which vLLM excludes from its results")
    if not points:
        raise fail(path, None, "no 'Serving Benchmark Result' block found; not vllm bench serve output")
    return points
