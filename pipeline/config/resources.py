"""Resources of one measuring job (one model of a sweep) for Snakemake's executors, from the config and the hardware profile.

The Snakefile's ``part`` rule asks :func:`part_resources` for its ``resources:`` and
:func:`part_threads` for its ``threads:``; Snakemake's Slurm executor turns them into ``sbatch``
flags (``mem_mb`` → ``--mem``, ``runtime`` → ``-t``, ``gpu``/``gpu_model`` → ``--gpus``,
``slurm_partition`` → ``-p``, ``constraint`` → ``-C``, ``slurm_extra`` → verbatim), its
Kubernetes executor into a pod's requests.  ``measure=1`` marks a job that measures: with
``--resources measure=1`` (the Slurm profile sets it for local jobs) no two run at once on one
machine, whatever the executor.
"""

from __future__ import annotations

from typing import Any

from pipeline.config.sweepconfig import SweepConfig
from pipeline.machine.hardware import HardwareProfile

#: Host memory asked for a measuring job when neither ``cluster.mem_mb`` nor a unified-memory profile says (MB).
DEFAULT_MEM_MB = 16_000


def part_mem_mb(cfg: SweepConfig, hw: HardwareProfile) -> int:
    """Host memory (MB, 1e6 bytes) a measuring job asks for.

    ``cluster.mem_mb`` when set; else, on a unified-memory machine (the DGX Spark: GPU and CPU
    share it), the profile's ``memory_gb`` less its ``runtime_reserve_gb`` (derived: 128 GB − 8 GB
    = 120 000 MB on the Spark), since the model lives in that memory; else :data:`DEFAULT_MEM_MB`
    (a discrete GPU's weights live in GPU memory, which ``gpus`` asks for).
    """
    if cfg.cluster.mem_mb is not None:
        return cfg.cluster.mem_mb
    if hw.unified_memory and hw.memory_gb:
        return int(round((hw.memory_gb - hw.runtime_reserve_gb) * 1000))
    return DEFAULT_MEM_MB


def part_resources(cfg: SweepConfig, hw: HardwareProfile) -> dict[str, Any]:
    """The ``resources:`` of a measuring job: ``measure``, ``mem_mb``, ``runtime`` (minutes) and, when set,
    ``gpu``, ``gpu_model``, ``slurm_partition``, ``constraint``, ``cpus_per_task``, ``slurm_extra`` (``--exclusive``).

    Every value was validated with the config (:class:`pipeline.config.options.ClusterOptions`), so none
    can carry a shell metacharacter into an ``sbatch`` line.
    """
    c = cfg.cluster
    out: dict[str, Any] = {"measure": 1, "mem_mb": part_mem_mb(cfg, hw), "runtime": c.runtime_min}
    if c.gpus:
        out["gpu"] = c.gpus
        if c.gpu_model:
            out["gpu_model"] = c.gpu_model
    if c.partition:
        out["slurm_partition"] = c.partition
    if c.constraint:
        out["constraint"] = c.constraint
    if c.cpus_per_task:
        out["cpus_per_task"] = c.cpus_per_task
    if c.exclusive:
        out["slurm_extra"] = "--exclusive"
    return out


def part_threads(cfg: SweepConfig, cores: int | None) -> int:
    """``threads:`` of a measuring job: ``cluster.cpus_per_task`` when set, else every core Snakemake was given.

    Locally (``snakemake --cores all``) a measuring job so owns the machine and two never run at
    once; Snakemake also sets ``OMP_NUM_THREADS`` to it.  ``cores`` is ``workflow.cores``
    (None or absurdly large when an executor runs without ``--cores``: then 1, and ``--exclusive``
    gives the job its node's every CPU anyway).  A simulated sweep measures nothing of the machine:
    one thread, so Snakemake runs its parts side by side.
    """
    if cfg.cluster.cpus_per_task:
        return cfg.cluster.cpus_per_task
    if cfg.backend == "simulated":  # virtual time: one core each, and parts may run side by side
        return 1
    if not cores or cores > 100_000:
        return 1
    return int(cores)
