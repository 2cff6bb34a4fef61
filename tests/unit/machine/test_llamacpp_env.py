"""llama.cpp's environment (pipeline/machine/llamacppenv.py) where it is not built, the GGUF writer's pure parts
(pipeline/machine/ggufmodels.py), and the backend's reading of its own command line (pipeline/backends/llamacpp.py).

The build itself, the GGUF files and the server run in tests/integration/test_llamacpp_server.py."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.backends.llamacpp import LlamaCppBackend, flag_value
from pipeline.config.sweepconfig import parse_config
from pipeline.core.errors import BatchmarkError
from pipeline.machine import ggufmodels, llamacppenv


def test_the_project_pins_the_llama_cpp_source():
    assert llamacppenv.pinned_version(llamacppenv.DEFAULT_REQUIREMENTS) == "0.3.36"


def test_a_requirements_file_without_the_pin_is_refused(tmp_path):
    req = tmp_path / "req.txt"
    req.write_text("# llama-cpp-python==0.3.36 (a comment)\nllama-cpp-python>=0.3\n")
    with pytest.raises(BatchmarkError, match=r"req\.txt: no line llama-cpp-python==<version>"):
        llamacppenv.pinned_version(req)
    with pytest.raises(BatchmarkError, match="missing.txt: requirements file not found"):
        llamacppenv.pinned_version(tmp_path / "missing.txt")


def test_a_machine_without_the_build_tools_gets_a_status_saying_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no cmake, no ninja, no compiler on it
    monkeypatch.delenv("CXX", raising=False)
    status = llamacppenv.create_llamacpp_env(tmp_path / "env", log=lambda _: None)
    assert status == {"ok": False, "reason": "no cmake, ninja, C++ compiler on this machine", "version": "0.3.36"}
    assert llamacppenv.usable(tmp_path / "env") == (False, "no cmake, ninja, C++ compiler on this machine")
    assert llamacppenv.usable(tmp_path / "never")[1].endswith("was never made (make it: batchmark llamacpp-env)")


def test_the_backend_refuses_an_environment_that_is_not_there(tmp_path):
    cfg = parse_config({"name": "lc", "hardware": "cpu", "backend": "llamacpp", "concurrency": [1],
                        "llamacpp": {"build": str(tmp_path / "none")},
                        "models": [{"name": "t", "architecture": {"model_type": "llama"}}]})
    with pytest.raises(BatchmarkError, match=r"^llamacpp\.build: the llama\.cpp environment cannot run here: .*never made"):
        LlamaCppBackend(cfg)


def test_q_and_k_rows_are_interleaved_as_llama_cpp_s_converter_does():
    # one head of dimension 4: Hugging Face's rotary halves (rows 0, 1 | 2, 3) become llama.cpp's pairs (0, 2), (1, 3)
    # (convert_hf_to_gguf.py LlamaModel.permute); two heads permute each head's rows alone
    w = np.arange(4 * 3).reshape(4, 3)
    assert ggufmodels.permute_rows(w, 1)[:, 0].tolist() == [0, 6, 3, 9]
    w2 = np.arange(8)[:, None]
    assert ggufmodels.permute_rows(w2, 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


def test_an_unknown_gguf_type_is_refused_naming_the_model(tmp_path):
    with pytest.raises(BatchmarkError, match=r"models\.tiny\.gguf_type: 'Q5_K' is not one of F16, BF16, Q8_0, Q4_K_M"):
        ggufmodels.gguf_file(tmp_path, "tiny", "Q5_K", tmp_path)


def test_the_server_s_limits_come_from_its_command_line():
    cmd = ["llama-server", "--parallel", "2", "-np", "4", "--ctx-size=1024", "-b", "256", "-ctk", "q8_0"]
    assert flag_value(cmd, "-np", "--parallel") == "4"  # the last given wins, as llama.cpp reads its arguments
    assert flag_value(cmd, "-c", "--ctx-size") == "1024"
    assert flag_value(cmd, "--threads") is None
    limits = LlamaCppBackend.limits(None, cmd)
    assert limits == {"max_num_seqs": 4, "kv_cache_size_tokens": 1024, "max_model_len": 256,
                      "max_num_batched_tokens": 256}
