"""The ``vllm`` engine: start an OpenAI-compatible server per model, measure it, stop it.

For each model the engine formats ``vllm.command`` (default ``vllm serve {model} …`` with prefix caching off, a
fixed seed, ``--max-num-seqs`` ≥ the largest concurrency, memory utilisation from the hardware profile — 0.85 on
a DGX Spark — and ``--max-model-len`` input + output + 64), appends ``vllm.extra_args``, and starts it on a free
port in its own process group.  The same template can put NVIDIA's vLLM container in front (``docker run … vllm serve …``) or
start SGLang, ``llama-server`` or ``trtllm-serve``; the engine only needs ``/health`` and the OpenAI API.

Life cycle:

- start: stdout and stderr go to ``<run>/servers/<model>.log`` (appended on resume); the
  engine polls ``vllm.health_path`` until it answers 200; a server that exits first, or is
  not healthy within ``vllm.health_timeout_s``, is stopped and raises a one-line
  BatchmarkError carrying the tail of its log;
- measure: the shared load generator (:mod:`pipeline.loadgen.loadgen`); ``/metrics`` is
  scraped before and after each repeat and sampled about once a second during it (KV-cache usage,
  preemptions, running and waiting requests) into ``server_metrics``;
- crash mid-point: the load generator stops sending when the process has exited, the
  requests that were cut off are recorded as failed, the point's meta keeps the exit code
  and the log tail, the point is stored as it is (failed), and :meth:`VLLMBackend.fits`
  answers False for the model's next point, so the sweep moves on to the next model and
  everything measured before stays;
- stop: SIGINT to the process group, SIGKILL after ``vllm.stop_grace_s``, then wait until none of it runs.

:meth:`VLLMBackend.provenance` gives the server's version and every model's exact command line (``servers``);
the sweep writes it into ``run.json``.  This module never imports vLLM: the server is a separate process.
"""

from __future__ import annotations

import math
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from pipeline.config.workload import server_len
from pipeline.machine import serverenv
from pipeline.config.options import VLLMOptions
from pipeline.config.sweepconfig import ModelSpec, SweepConfig
from pipeline.loadgen import client
from pipeline.backends.served import ServedBackend, prometheus_samples, served_card
from pipeline.core.errors import BatchmarkError
from pipeline.machine.cpuisa import served_dtype
from pipeline.machine.hardware import load_profile
from pipeline.core.credentials import redact_argv
from pipeline.backends.serverproc import (dtype_flag, format_command, free_port, log_tail, repo_relative, scrub_log,
                                         server_api_key, server_environment, server_secrets)
from pipeline.config.variants import kv_cache_name
from pipeline.core.records import DEFAULT_VARIANT, PointKey, server_key

def _release_cuda_cache() -> None:
    """Hand back the GPU memory this process's torch still caches (the hardware probe's buffers) before a server starts.

    torch is never imported here for this: only a process that already used CUDA has anything to free.
    """
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


_FLAG_LIMITS = {"--max-num-seqs": "max_num_seqs", "--max-model-len": "max_model_len",
                "--max-num-batched-tokens": "max_num_batched_tokens"}
_INFO_LIMITS = ("kv_cache_size_tokens", "num_gpu_blocks", "block_size", "kv_cache_max_concurrency")


def server_limits(cmd: list[str], metrics_text: str = "") -> dict[str, float | None]:
    """The server's own limits: batch and length flags of its command line, KV-cache size from ``/metrics``.

    ``--max-num-seqs`` (requests decoded together; more wait in the queue), ``--max-model-len``
    and ``--max-num-batched-tokens`` come from ``cmd`` (the last occurrence wins, as in
    argparse; ``--flag=value`` too); ``kv_cache_size_tokens``, ``num_gpu_blocks``,
    ``block_size`` and ``kv_cache_max_concurrency`` from the labels of vLLM's
    ``vllm:cache_config_info`` gauge.  A limit that is not known is None.
    """
    out: dict[str, float | None] = {v: None for v in _FLAG_LIMITS.values()}
    out.update({k: None for k in _INFO_LIMITS})
    words = list(cmd)
    for i, w in enumerate(words):
        flag, eq, val = w.partition("=")
        if flag in _FLAG_LIMITS:
            val = val if eq else (words[i + 1] if i + 1 < len(words) else "")
            try:
                out[_FLAG_LIMITS[flag]] = int(val)
            except ValueError:
                pass
    for name, labels, _ in prometheus_samples(metrics_text):
        if name == "vllm:cache_config_info":
            for k in _INFO_LIMITS:
                try:
                    num = float(labels[k])
                except (KeyError, ValueError):
                    continue
                if math.isfinite(num):
                    out[k] = num
            break
    return out


def _wait_group_gone(pgid: int, timeout_s: float = 10.0) -> None:
    """Wait until no process of group ``pgid`` runs (a SIGKILLed worker is gone only once the kernel ended it)."""
    import psutil

    def alive(p: psutil.Process) -> bool:
        try:
            return os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE
        except (ProcessLookupError, psutil.Error):
            return False
    psutil.wait_procs([p for p in psutil.process_iter(["pid"]) if alive(p)], timeout=timeout_s)


class VLLMBackend(ServedBackend):
    """A server batchmark starts and stops for each model (vLLM by default)."""

    name = "vllm"
    serving_engine = "vllm"
    opts: VLLMOptions  # the config's ``vllm:`` block (the served base holds any client's options)
    options_field = "vllm"  # the config block of its options, named in errors

    def __init__(self, cfg: SweepConfig):
        super().__init__(cfg, cfg.vllm)
        hw = load_profile(cfg.hardware)
        self.gpu_memory_utilization = cfg.vllm.gpu_memory_utilization or hw.gpu_memory_utilization
        self.served_dtype, self.dtype_why = served_dtype(cfg.vllm.dtype, hardware=cfg.hardware)
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.log_path: Path | None = None
        self._log_fh: Any = None
        self.crashed: str | None = None
        self.servers: dict[str, dict[str, Any]] = {}
        self.secrets: tuple[str, ...] = ()  # the running server's credentials (its --api-key, HF_TOKEN): never stored
        self.api_key: str | None = None  # the key the server asks of clients (its --api-key / VLLM_API_KEY)
        try:
            self.package_version: str | None = metadata.version("vllm")
        except metadata.PackageNotFoundError:
            self.package_version = None

    # -- server life cycle -----------------------------------------------------------------
    def _root_url(self) -> str:
        host = self.opts.host if self.opts.host not in ("0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.port}"

    def _target(self) -> client.Target:
        assert self.spec is not None, "load() a model first"
        return client.Target(base_url=self._root_url() + "/v1", model=self.spec.served_name or self.spec.path,
                              endpoint=self.opts.endpoint, api_key=self.api_key, timeout_s=self.opts.timeout_s)

    def _metrics_url(self) -> str | None:
        return self._root_url() + self.opts.metrics_path

    def command_for(self, spec: ModelSpec, port: int) -> list[str]:
        """The exact server command line for ``spec`` on ``port`` (a list of words)."""
        values = {"model": spec.path or spec.served_name, "served_name": spec.served_name or spec.path,
                  "host": self.opts.host, "port": port, "seed": self.cfg.seed,
                  "python": str(serverenv.resolve(self.opts.python)),
                  "max_num_seqs": self.opts.max_num_seqs or self.cfg.max_in_flight() or 256,
                  "gpu_memory_utilization": self.gpu_memory_utilization, "dtype": self.served_dtype,
                  "max_model_len": self.opts.max_model_len or server_len(self.cfg, self.cfg.input_len, self.cfg.output_len)}
        return format_command(self.opts.command, values, self.opts.extra_args)

    def _get(self, path: str, timeout_s: float = 2.0) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self._root_url() + path, timeout=timeout_s) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, b""
        except (OSError, ValueError):
            return 0, b""

    def start(self, spec: ModelSpec) -> None:
        """Start the server for ``spec`` and wait until it is healthy.

        Raises:
            BatchmarkError: the command cannot start, the server exits, or it is not healthy
                within ``vllm.health_timeout_s`` (the message ends with the log tail).
        """
        self.stop()
        self.crashed = None
        _release_cuda_cache()
        self.port = self.opts.port or free_port(self.opts.host if self.opts.host not in ("0.0.0.0", "::") else "127.0.0.1")
        cmd = self.command_for(spec, self.port)
        env = server_environment(os.environ, self.opts.env)
        self.secrets = server_secrets(cmd, self.opts.env, env)
        self.api_key = server_api_key(cmd, env)
        folder = (self.run_dir / "servers") if self.run_dir else Path(os.environ.get("TMPDIR", "/tmp")) / "batchmark-servers"
        folder.mkdir(parents=True, exist_ok=True)
        self.log_path = folder / (f"{spec.name}.log" if self.variant_name == DEFAULT_VARIANT else
                                  f"{spec.name}--{self.variant_name}.log")  # both names plain (config patterns)
        self._log_fh = open(self.log_path, "ab")
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._log_fh.write(f"=== batchmark {stamp}: {shlex.join(redact_argv(cmd))}\n".encode())
        self._log_fh.flush()
        try:
            self.proc = subprocess.Popen(cmd, stdout=self._log_fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, env=env)
        except OSError as exc:
            self._close_log()
            raise BatchmarkError(f"{self.options_field}.command: cannot start {cmd[0]!r} ({exc.strerror})") from None
        deadline = time.monotonic() + self.opts.health_timeout_s
        while True:
            rc = self.proc.poll()
            if rc is not None:
                tail = log_tail(self.log_path, secrets=self.secrets)
                self.stop()
                raise BatchmarkError(f"models.{spec.name}: server exited with code {rc} before it was healthy; "
                                     f"{self.log_path} ends: {tail}")
            status, _ = self._get(self.opts.health_path)
            if status == 200:
                break
            if time.monotonic() > deadline:
                self.stop()
                raise BatchmarkError(f"{self.options_field}.health_timeout_s: server for {spec.name} not healthy after "
                                     f"{self.opts.health_timeout_s:g} s; {self.log_path} ends: {log_tail(self.log_path, secrets=self.secrets)}")
            time.sleep(0.25)
        version = None
        status, body = self._get("/version")
        if status == 200:
            try:
                import orjson

                version = orjson.loads(body).get("version")
            except (ValueError, AttributeError):
                version = None
            if not isinstance(version, str) or not 0 < len(version) <= 64:  # a server's reply is untrusted
                version = None
        log_ref = str(self.log_path.relative_to(self.run_dir)) if self.run_dir else str(self.log_path)
        status, body = self._get(self.opts.metrics_path)
        metrics_text = body.decode("utf-8", "replace") if status == 200 else ""
        self.servers[server_key(spec.name, self.variant_name)] = {"command": shlex.join(repo_relative(redact_argv(cmd))), "server_version": version or self.package_version,
                                   "port": self.port, "pid": self.proc.pid, "log": log_ref, "started_at": stamp,
                                   "limits": server_limits(cmd, metrics_text)}

    def _close_log(self) -> None:
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None
            if self.log_path is not None:
                scrub_log(self.log_path, self.secrets)  # the server has stopped writing to it

    def stop(self) -> None:
        """Stop the server: SIGINT to its process group, SIGKILL after ``vllm.stop_grace_s``."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGINT)
                proc.wait(timeout=self.opts.stop_grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            except ProcessLookupError:
                pass
        if proc is not None:
            try:  # children left behind by a server that exited on its own
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            _wait_group_gone(proc.pid)
        self._close_log()

    # -- Backend protocol -------------------------------------------------------------------
    def load(self, spec: ModelSpec) -> dict[str, Any] | None:
        """Start the model's server, detect its request features; return the model card (see ``served_card``).

        Raises:
            BatchmarkError: the server does not come up (see :meth:`start`) or no tokenizer.
        """
        if spec.architecture is not None and spec.path is None:
            from pipeline.machine.modelfolders import build_model_folder

            dtype = (self.served_dtype if self.opts.model_dtype == "native" else self.opts.model_dtype).replace("auto", "bfloat16")
            folder = build_model_folder(spec.name, spec.architecture, dtype, self.cfg.seed)
            spec = spec.model_copy(update={"path": str(folder), "served_name": spec.served_name or spec.name})
        self.start(spec)
        try:
            self._prepare(spec, "vllm")
        except BaseException:
            self.stop()
            raise
        card = served_card(spec, self.tokenizer_source, self.card_reasons, "vllm", self.cfg.hardware)
        if card is not None:  # the server casts its weights to the command's --dtype: the card counts what it reads
            from pipeline.cards.modelcards import ModelCard
            from pipeline.cards.servedformat import in_served_dtype

            card = in_served_dtype(ModelCard.from_dict(card), dtype_flag(self.command_for(spec, self.port))).as_dict()
        kv = kv_cache_name(self.variant) if self.variant is not None else None
        if card is not None and kv is not None:  # the variant's --kv-cache-dtype: its KV bytes per token
            from pipeline.cards.modelcards import ModelCard
            from pipeline.cards.servedformat import with_kv_cache

            card = with_kv_cache(ModelCard.from_dict(card), kv).as_dict()
        return card

    def _exit_reason(self) -> str | None:
        if self.proc is None:
            return "server not running"
        rc = self.proc.poll()
        return None if rc is None else f"server exited with code {rc}"

    def _should_abort(self) -> str | None:
        return self._exit_reason()

    def _after_repeat(self, meta: dict[str, Any], failed: int = 0) -> bool:
        reason = self._exit_reason()
        if reason is None and (meta.get("aborted") or failed) and self.proc is not None:
            # a dying server closes its socket before the kernel reports its exit (and a busy machine
            # can take seconds to finish it): requests fail while poll() still says running.  After a
            # repeat with failed requests, give the server a moment to be seen dead; a live one costs
            # nothing here but the wait, which only a repeat with failures pays
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                pass
            reason = self._exit_reason()
        if reason is None:
            return True
        self.crashed = reason
        meta["server_crashed"] = reason
        meta["server_log_tail"] = log_tail(self.log_path, secrets=self.secrets) if self.log_path else None
        return False

    def fits(self, key: PointKey) -> tuple[bool, str]:
        """False once the model's server has crashed, so the sweep moves on to the next model."""
        if self.crashed:
            return False, f"{self.crashed} during an earlier point (log: {self.log_path})"
        return super().fits(key)

    def unload(self) -> None:
        """Stop the server and forget the model."""
        self.stop()
        super().unload()

    def provenance(self) -> dict[str, Any]:
        """Engine description for ``run.json``: template, flags, versions, and each model's exact command."""
        env = serverenv.read_status(serverenv.resolve(self.opts.python).parent.parent)
        return {"engine": "vllm", "command_template": " ".join(repo_relative(self.opts.command.split(" "))),
                "server_env": ({"distribution": env.get("distribution"), "version": env.get("version"),
                                "python": repo_relative([str(env.get("python") or "")])[0],
                                "requirements": env.get("requirements")} if env else None), "extra_args": redact_argv(self.opts.extra_args),
                "gpu_memory_utilization": self.gpu_memory_utilization, "endpoint": self.opts.endpoint,
                "requests_per_point": self.opts.requests_per_point, "vllm_package_version": self.package_version,
                "servers": dict(self.servers), "dtype": self.served_dtype,
                **({"dtype_choice": f"{self.served_dtype}: {self.dtype_why}"} if self.dtype_why else {}),
                "client": self.client_description(),
                **({"models_without_card": dict(self.card_reasons)} if self.card_reasons else {})}
