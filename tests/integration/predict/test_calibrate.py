"""``batchmark predict`` of a committed run as a user runs it (a process): JSON, a bad option, too few points.

The unit tests of the calibrated model are tests/unit/predict/test_calibrate.py; this one starts
``python -m pipeline predict``, three times.
"""

import json
import subprocess
import sys


def test_cli_predict_committed_run_json_and_bad_option(tmp_path):
    run = "data/runs/20261130T010035Z-vm"
    out = subprocess.run([sys.executable, "-m", "pipeline", "predict", run, "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["run_id"] == "20261130T010035Z-vm"
    for m in doc["models"]:
        assert m["calibrated_on"] == ([1, 8, 64] if m["kind"] == "dense" else [1, 2, 64])
        assert {"concurrency", "calibration", "measured", "predicted"} <= set(m["points"][0])
    bad = subprocess.run([sys.executable, "-m", "pipeline", "predict", run, "--calibrate-on", "1,x"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--calibrate-on: 'x'" in bad.stderr
    few = subprocess.run([sys.executable, "-m", "pipeline", "predict", run, "--calibrate-on", "1,64"],
                         capture_output=True, text=True)
    assert few.returncode == 0 and "three terms need three" in few.stdout

