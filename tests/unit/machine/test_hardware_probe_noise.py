"""The probe's noise is judged robustly, and a machine is called busy only on evidence of another load.

Regression (fault kind: one slow repeat flags a run): the probe called itself noisy ("was the machine busy?")
when the max / min of its seven repeats exceeded 1.25, so on an idle 2-core machine (load average 0.0–0.5) 7 of
10 probes in a row flagged their run on the matmul (max / min 1.13–1.68×) while the median absolute deviation of
the same repeats was 1–9 %.  The rule now is the median absolute deviation (Hampel 1974, JASA 69:383) over at
least five repeats, and "busy" needs other processes' CPU or steal time, as the interference check measures it.
"""

from __future__ import annotations

import pytest

from pipeline.machine.hardware import probe_busy, probe_load, probe_warning, relative_mad

# Seven matmul repeats of an idle probe with one slow repeat: max / min = 0.119 / 0.071 = 1.68×
# (the old rule's flag); median 0.115, |x − median| = 0.004, 0.002, 0, 0.001, 0.003, 0.044, 0.001 → MAD 0.002,
# 0.002 / 0.115 = 1.7 %.
IDLE_TFLOPS = [0.119, 0.117, 0.115, 0.116, 0.112, 0.071, 0.114]
IDLE_BW = [9.8, 10.1, 10.0, 9.9, 10.2, 10.0, 9.7]
IDLE_LOAD = {"outside_share": 0.02, "outside_load_cpus": 0.04, "cpu_count": 2, "steal_share": 0.0, "loadavg_1m": 0.3}


def test_relative_mad_by_hand():
    assert relative_mad(IDLE_TFLOPS) == pytest.approx(0.002 / 0.115)
    assert relative_mad([1.0, 2.0]) is None  # fewer than five repeats: no judgement


def test_one_injected_slow_repeat_is_not_noise():
    assert max(IDLE_TFLOPS) / min(IDLE_TFLOPS) > 1.25  # what the old rule flagged
    assert probe_warning(IDLE_BW, IDLE_TFLOPS, IDLE_LOAD) is None


def test_a_spread_without_another_load_is_not_called_busy():
    # median 25, deviations 5, 5, 0, 5, 5 → MAD 5 = 20 % of the median (above 15 %)
    w = probe_warning([20.0, 20.0, 25.0, 30.0, 30.0], IDLE_TFLOPS, IDLE_LOAD)
    assert w.startswith("noisy probe (bandwidth repeats' median absolute deviation 20% of their median; "
                        "no other load seen while probing)")
    assert "busy" not in w


def test_other_processes_cpu_is_evidence_of_a_busy_machine():
    """90 % of 2 CPUs kept busy by others while probing (the interference meter's figure) is more than its 25 %."""
    hog = {**IDLE_LOAD, "outside_share": 0.9, "outside_load_cpus": 1.8, "loadavg_1m": 6.2}
    w = probe_warning(IDLE_BW, IDLE_TFLOPS, hog)
    assert w == ("probe under another load (machine busy while probing: other processes kept 1.8 of 2 CPUs busy (90%), "
                 "load average 6.2): ceilings, roofline, MBU and MFU of this run are less certain")
    stolen = probe_busy({**IDLE_LOAD, "steal_share": 0.3})
    assert stolen == "the hypervisor stole 30% of the CPU time, load average 0.3"


def test_probe_load_by_hand():
    """2 s of steal over a 1 s probe on 4 CPUs: 2 / (1 × 4) = 50 %."""
    rec = probe_load({"outside_share": 0.1, "outside_load_cpus": 0.4, "cpu_count": 4}, 2.0, 1.0, 1.5)
    assert rec == {"outside_share": 0.1, "outside_load_cpus": 0.4, "cpu_count": 4, "steal_share": 0.5, "loadavg_1m": 1.5}
