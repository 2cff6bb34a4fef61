"""batchmark agrees with ``vllm bench serve`` on workloads as users run them, on one real vLLM CPU server.

``benchmarks/vllm_workload_agreement.py`` sends two workloads with both clients, open loop at 4 requests/s with gamma
gaps of burstiness 0.7 (``--request-rate 4 --burstiness 0.7``): ``--dataset-name random --random-input-len 32
--random-output-len 32 --random-range-ratio 0.9`` (batchmark: ``lengths`` uniform, range ratio 0.9) and
``--dataset-name custom --dataset-path data/prompts/cpu-words.jsonl`` (batchmark: ``lengths.prompt_file``, the same
file), four runs of each client per workload (ABBA; 48 requests a run of ``random``, the file's 24 lines once a
run of ``custom``), and compares them by
:func:`benchmarks.vllm_agreement.compare`, the tolerances of the closed-loop agreement test
(``test_vllm_agreement.py``: each figure within max(3 %, e^(5 SE) − 1) of the A/A noise, drift-corrected by the
server's own histograms).  Asserted:

- exactly: every request of both clients served; per request, the lengths each client drew are the lengths the
  server counted (batchmark's usage against its drawn lengths; vLLM's ``input_lens``/``output_lens`` of
  ``--save-detailed``); for ``random`` both clients' lengths identical request for request (vLLM given the seed
  batchmark drew the point from) and inside vLLM's range [⌊32 × 0.1⌋, ⌈32 × 1.9⌉] = [3, 61]; for ``custom`` the
  same multiset of (prompt, output) lengths (every line of the file once);
- within the tolerance: TTFT, TPOT and per-chunk ITL p50.  Output throughput is printed, not asserted: vLLM rescales
  its gaps so its N arrivals span exactly N / rate, batchmark keeps its draw (the benchmark's docstring).

``test_batchmarks_uniform_draw_is_vllms_own`` runs vLLM's own ``get_sampling_params`` (no server) against
:func:`pipeline.config.workload.draw_lengths`: the same seed gives the same lengths, value for value.

Expected time of the slow test: about 4.5 min on the 2-core machine at load average 7 to 9 (server start, 16 runs of
24 to 48 requests; 260 s on 2026-12-04); ``alone``, since it compares timings.  Skips, saying why, where ``.venv-vllm`` could not be made.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from benchmarks.vllm_agreement import vllm_python
from benchmarks.vllm_workload_agreement import ASSERTED, length_checks, report, run
from pipeline.config.workload import LengthDist, Lengths, draw_lengths
from pipeline.machine import serverenv


@pytest.fixture(autouse=True)
def need_env():
    if vllm_python() is None:
        status = serverenv.read_status(serverenv.resolve(serverenv.DEFAULT_DEST))
        why = status.get("reason") if status else "never made"
        pytest.skip(f"vLLM CPU environment .venv-vllm not usable ({why}); make it with `batchmark server-env`")


#: vLLM's draw, from its own module (``vllm/benchmarks/datasets/utils.py``), with a tokenizer stand-in that adds no
#: special tokens (as batchmark's word tokenizer adds none) and a vocabulary of 4096 (only the offsets use it).
_VLLM_DRAW = """
import json, sys
import numpy as np
from vllm.benchmarks.datasets.utils import get_sampling_params
class Tok:
    vocab_size = 4096
    def num_special_tokens_to_add(self):
        return 0
out = []
for seed, n, r, i, o in json.loads(sys.argv[1]):
    ins, outs, _ = get_sampling_params(np.random.default_rng(seed), n, r, i, o, Tok())
    out.append([ins.tolist(), outs.tolist()])
print(json.dumps(out))
"""


def test_batchmarks_uniform_draw_is_vllms_own():
    """Fault kind: batchmark's uniform lengths drawn on another range than vLLM's (round for floor/ceil, an open high
    end, outputs before inputs), so a run said to match ``--random-range-ratio`` sends other requests.  Cases: the
    agreement's 32/32 at 0.9 (range [3, 61]), 1023 in at 0.5 ([511, 1535]: floor and ceil differ from round), an
    output of 2 at 0.9 (vLLM's low end of 1), 4000/500 at 0.9 as config/spark-open-loop-eos.yaml."""
    cases = [(0, 24, 0.9, 32, 32), (7, 20_000, 0.5, 1023, 2), (3, 200, 0.9, 4000, 500), (12345, 50, 0.0, 64, 16)]
    got = subprocess.run([str(vllm_python()), "-c", _VLLM_DRAW, json.dumps(cases)], capture_output=True, text=True,
                         timeout=300, check=True)
    vllm = json.loads(got.stdout.strip().splitlines()[-1])
    for (seed, n, r, i, o), (v_in, v_out) in zip(cases, vllm):
        uniform = LengthDist(distribution="uniform", range_ratio=r)
        b_in, b_out = draw_lengths(Lengths(input=uniform, output=uniform), i, o, n, seed)
        assert b_in.tolist() == v_in and b_out.tolist() == v_out, (seed, n, r, i, o)
    assert (min(vllm[1][0]), max(vllm[1][0])) == (511, 1535) and min(vllm[1][1]) == 1


@pytest.mark.slow
@pytest.mark.alone  # two clients' timings of one vLLM server on both cores
def test_batchmark_agrees_with_vllm_bench_serve_on_drawn_and_file_workloads(tmp_path):
    res = run(rate=4.0, n=48, work=tmp_path)
    print(report(res))
    for w in ("random", "custom"):
        assert not length_checks(res[w], w), length_checks(res[w], w)
        assert {r["metric"] for r in res[w]["rows"]} >= set(ASSERTED)
        for v in res[w]["raw"]["vllm"]:
            assert v["completed"] == res[w]["n"] and not v["failed"]
        if w == "random":  # the range, as both drew it: [floor(32 × 0.1), ceil(32 × 1.9)] = [3, 61]
            lens = np.concatenate([v["input_lens"] for v in res[w]["raw"]["vllm"]])
            assert 3 <= lens.min() and lens.max() <= 61
        assert res[w]["ok"], "\n".join(res[w]["failures"])
