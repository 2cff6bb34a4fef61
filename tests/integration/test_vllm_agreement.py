"""batchmark's load generator agrees with ``vllm bench serve`` on one real vLLM server, by vLLM's definitions.

``benchmarks/vllm_agreement.py`` runs both clients on the same workload (same request body, tokenizer, lengths and
number of requests) against one vLLM CPU server at c = 1, 4, 16, four runs each per point taking turns (ABBA
ABBA), and compares output throughput, TTFT p50, TPOT p50 and per-chunk ITL p50 (its docstring says how, and why
the first run disagreed by −86 % to +236 %: the server burst its streams, for any client).

What is asserted, and why it holds on a busy 2-core machine (:func:`benchmarks.vllm_agreement.compare`):

- each client's figure is the median of its four runs, so one run that burst (TPOT 0) or ran beside a spike of
  other work is outvoted, never skipped;
- the machine's load slows the server, and so every figure of a run; the server's own histograms of the same
  quantities (``/metrics``, read before and after each run) slow as much, so each run's figure is taken relative
  to them (drift-corrected) before the clients are compared; the plain figures are printed beside;
- each figure must agree within max(3 %, e^(5 SE) − 1), and each metric's mean over c = 1, 4, 16 within
  max(3 %, e^(4 SE / √3) − 1), SE from σ, the run-to-run noise of the compared values that the clients' own
  repeats show (their A/A spread); both printed with the figures, with the smallest disagreement the run catches
  99 % of the time.  A run with σ above 20 % fails as too noisy to compare;
- what is exact is asserted exactly: no request failed, both clients' requests were 32 tokens in and 32 out as
  the server counted them;
- per-chunk ITL p50 is asserted like the others.  It was once printed unasserted: on a quiet machine batchmark's
  came out 5 to 8 % below vLLM's at c = 1 and 4 while TPOT agreed, because batchmark sampled the server's
  ``/metrics`` every 0.25 s during each run and vLLM renders that page in the loop that writes the streams, which
  bunched them (``pipeline/backends/scrape.py`` says how it now keeps off the server).

``tests/unit/backends/test_vllm_agreement_stats.py`` shows the comparison catching a 10 % disagreement and its error rates.
Serves the dtype this CPU runs natively (:func:`benchmarks.vllm_agreement.agreement_dtype`, as config/vllm-cpu.yaml's
``vllm.dtype: native``): bfloat16 on a CPU with AVX512-BF16 or AMX, float32 where bfloat16 would be emulated; it
served bfloat16 everywhere once and took about 29 min on an AVX2-only CPU, whose emulated bfloat16 matmul runs at
0.2 GFLOP/s against 65 in float32 (pipeline/machine/cpuisa.py).  Expected time: 150 to 173 s on this 2-core Xeon
(AMX-BF16: bfloat16 served) at load average 7 to 13 (server start, the ``vllm bench serve`` process, 24 runs); five
runs in a row passed there (2026-12-01).  On 2026-12-02, with three other jobs sharing those 2 cores, 459 s and 446 s
at load average 7 to 12: the first failed one drift-corrected throughput figure (c = 16, +8.2 % against ±5.3 %,
the plain figures 0.7 % apart; vLLM's own A/A spread 23 %), the second agreed throughout.  On a 2-core AVX2-only CPU, serving float32, about the same (not measured
end to end; ``tests/unit/machine/test_cpuisa.py`` checks the dtype chosen there).  Skips, saying why, where the vLLM environment (``.venv-vllm``, made by ``batchmark
server-env``; CI makes it in ``.ci/run``) could not be made.
"""

from __future__ import annotations

import pytest

from benchmarks.vllm_agreement import METRICS, ROUNDS, report, run, vllm_python
from pipeline.machine import serverenv

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # alone: two clients' timings of one vLLM server on both cores (run alone: another test process would be part of what it times)

CONCURRENCIES = (1, 4, 16)
LEN = 32


@pytest.fixture(autouse=True)
def need_env():
    if vllm_python() is None:
        status = serverenv.read_status(serverenv.resolve(serverenv.DEFAULT_DEST))
        why = status.get("reason") if status else "never made"
        pytest.skip(f"vLLM CPU environment .venv-vllm not usable ({why}); make it with `batchmark server-env`")


def test_batchmark_agrees_with_vllm_bench_serve(tmp_path):
    res = run(CONCURRENCIES, LEN, LEN, work=tmp_path)
    print(report(res))
    for c in CONCURRENCIES:
        assert len(res["vllm"][c]) == len(res["summaries"][c]) == ROUNDS
        for v, s in zip(res["vllm"][c], res["summaries"][c]):
            n = v["completed"] + v["failed"]
            assert (v["failed"], s.failed, s.completed) == (0, 0, n), (c, v["completed"], s)
            assert v["total_input_tokens"] / n == s.input_tokens_served == LEN, c
            assert v["total_output_tokens"] / n == s.output_tokens_served == LEN, c
    assert {r["metric"] for r in res["rows"]} == {m[0] for m in METRICS} and len(res["rows"]) == 12
    assert res["ok"] and not res["failures"], "\n".join(res["failures"])
