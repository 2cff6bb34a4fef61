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




def _native_roof(res) -> float:
    """The roof of the dtype this CPU runs natively (bfloat16 with AVX512-BF16, AMX or Arm BF16), TFLOP/s."""
    native = (res.cpu or {}).get("native_dtype") or res.dtype
    return (res.peak_tflops_by_dtype or {}).get(native) or res.peak_tflops


def test_six_probes_agree_idle_and_a_busy_core_is_read_or_said():
    """Regression (fault kind: a probe operation shorter than a scheduler slice reads the machine's load, 25× apart):
    six probes in a row on an idle machine agree on the native dtype's roof within 1.25× (max / min), and with another
    process spinning on one core the probe reads at least half its idle roof, or its warning says it could not measure
    one (another load seen).  Measured on this project's quiet 2-core AVX512-BF16 machine, ten repeats a probe:
    1.07–1.11× in four series of six (five repeats: 1.11–1.23×), so a 10 % agreement is not what it gives; 1.25× is
    the bound it held every time, against the 0.015–0.77 TFLOP/s (51×) the old one-product probe read.  Under 60 s."""
    import subprocess
    import sys

    from pipeline.machine.hardware import probe

    idle = [probe("cpu", repeats=10, buffer_bytes=512 << 20) for _ in range(6)]
    busy = [r for r in idle if probe_busy(r.load)]
    if busy:
        pytest.skip(f"another load shared this machine while probing ({probe_busy(busy[0].load)}): not idle")
    roofs = [_native_roof(r) for r in idle]
    assert max(roofs) / min(roofs) <= 1.25, roofs
    spin = subprocess.Popen([sys.executable, "-c", "import os; os.sched_setaffinity(0, {0})\nwhile True: pass"])
    try:
        loaded = probe("cpu", repeats=10, buffer_bytes=512 << 20)
    finally:
        spin.kill()
        spin.wait()
    said = probe_warning(loaded.bandwidth_repeats_gb_s, loaded.tflops_repeats, loaded.load)
    assert _native_roof(loaded) >= 0.5 * max(roofs) or said, (_native_roof(loaded), max(roofs), said)
