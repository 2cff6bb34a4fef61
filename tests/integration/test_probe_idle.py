"""An idle machine's probes are not called noisy (the probe runs here: seconds, with small buffers).

Regression (fault kind: one slow repeat flags a run): on an idle 2-core machine 7 of 10 probes in a row called
themselves noisy by max / min of their repeats; the median absolute deviation of the same repeats was 1–9 %
(tests/unit/machine/test_hardware_probe_noise.py has the rule worked by hand).
"""

from __future__ import annotations

import pytest

from pipeline.machine.hardware import probe_busy, probe_warning

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # alone: it asserts what an idle machine's probe says (run alone: another test process is load)


def test_an_idle_machines_probes_are_not_called_noisy():
    """Probes of this machine measured now (small buffers, so seconds): the issue's 7-of-10 false alarms came
    from the idle machine's own matmul jitter, which the median absolute deviation does not take for noise."""
    from pipeline.machine.hardware import probe

    # 512 MiB: beyond the last-level cache, as the probe's own 1 GiB (a 64 MiB buffer half fit in this Xeon's cache
    # and read 36–39 GB/s against 19–23 from memory, its repeats' MAD up to 18 %: the test's noise, not the machine's);
    # each matmul repeat loops for tens of milliseconds (pipeline.machine.roofprobe.TARGET_S)
    res = [probe("cpu", repeats=7, buffer_bytes=512 << 20) for _ in range(3)]
    busy = [r for r in res if probe_busy(r.load)]
    if busy:
        pytest.skip(f"another load shared this machine while probing ({probe_busy(busy[0].load)}): not idle")
    assert all(r.load is not None for r in res)
    # the median absolute deviation is judged, not max / min: at most one of three small probes may be noisy here
    noisy = [probe_warning(r.bandwidth_repeats_gb_s, r.tflops_repeats, r.load) for r in res]
    assert sum(w is not None for w in noisy) <= 1, noisy


