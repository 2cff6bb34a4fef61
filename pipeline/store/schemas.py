"""The stored files of a run: one pydantic model each, a ``schema_version`` checked on load, migrations.

As asv's results files carry ``api_version`` and are brought forward by ``update_to_N``, every file
of a run folder carries ``schema_version``: ``run.json`` (:class:`RunFile`), ``summaries.json``
(:class:`SummariesFile`), ``analysis.json`` (:class:`AnalysisFile`), each point record file
``points/<model>/<slug>.json`` (:class:`PointRecordsFile`) and each model card ``models/<model>.json``
(:class:`ModelCardFile`).

- A file without ``schema_version`` is version 1 (the model card files of runs written before
  cards were versioned): it loads unchanged.
- A file of an older version is brought to the current one in memory by the model's
  ``updates`` (``{N: update_to_N}``, each taking the mapping of version N − 1 to version N);
  ``batchmark upgrade`` writes the result back.  An update changes the format, never a number.
- A newer version than this batchmark knows is refused: one-line BatchmarkError naming the file.

The models check the envelope (the fields every reader relies on, their types) and keep every
other key (``extra="allow"``): readers get the migrated mapping itself, so what they read is
exactly what was stored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.core.errors import BatchmarkError
from pipeline.store.schema_analysis import AnalysisModel, AnalysisPoint
from pipeline.store.variantupdates import _analysis_update_to_4, _run_update_to_4, with_variant  # noqa: F401
from pipeline.store.nameupdates import _run_update_to_5

Update = Callable[[dict[str, Any]], dict[str, Any]]


class StoredFile(BaseModel):
    """Base of every stored file: its ``schema_version`` and the migrations that bring older versions forward."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = 1

    #: The version this batchmark writes and reads.
    current: ClassVar[int] = 1
    #: ``{N: update_to_N}``: mapping of version N − 1 → mapping of version N (format only, never a number).
    updates: ClassVar[dict[int, Update]] = {}


#: Top-level folders of the repository: an absolute path through one of them names the repository's own file on the
#: machine that wrote it (``/work/main/pipeline/__main__.py``, ``/tmp/fresh-main/data/model-folders/…``).
REPO_TOP_FOLDERS = ("pipeline", "data", "config", ".venv-vllm", "tests", "benchmarks", "templates")
_MACHINE_PREFIX = re.compile(r"(?<![\w.~-])/(?:[^\s\"'/]+/)+?(?=(?:" + "|".join(map(re.escape, REPO_TOP_FOLDERS)) + r")/)")


def repo_relative_text(text: Any) -> Any:
    """``text`` with every absolute path into the repository made relative to it (the machine's part dropped).

    A path is taken to be the repository's when it runs through one of :data:`REPO_TOP_FOLDERS`
    (the shortest such prefix is dropped): ``/work/main/pipeline/__main__.py sweep …`` →
    ``pipeline/__main__.py sweep …``.  Applied only to the fields that hold the project's own
    paths (a command, the server's Python, a tokenizer folder); anything but a string is returned as is.
    """
    return _MACHINE_PREFIX.sub("", text) if isinstance(text, str) else text


def _run_update_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 → 2: the paths a run recorded of the machine that measured it are made relative to the repository
    (:func:`repo_relative_text`): the ``command``, ``config_path``, the server environment's ``python`` and each
    server's ``command`` (committed runs carry no machine path).  No number changes."""
    out = dict(data)
    for k in ("command", "config_path"):
        if k in out:
            out[k] = repo_relative_text(out[k])
    eng = out.get("engine")
    if isinstance(eng, dict):
        eng = dict(eng)
        env = eng.get("server_env")
        if isinstance(env, dict) and "python" in env:
            eng["server_env"] = {**env, "python": repo_relative_text(env["python"])}
        servers = eng.get("servers")
        if isinstance(servers, dict):
            eng["servers"] = {name: ({**srv, "command": repo_relative_text(srv["command"])}
                                     if isinstance(srv, dict) and "command" in srv else srv)
                              for name, srv in servers.items()}
        out["engine"] = eng
    return out


def _renamed(data: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """``data`` with each key of ``names`` renamed in place (order kept); no value changes."""
    return {names.get(k, k): v for k, v in data.items()}


#: The SLO's keys before its per-request goodput limits and its p99 bounds were apart: each was both
#: (as :data:`pipeline.config.options.DEPRECATED_SLO_KEYS`, which storage cannot import).
OLD_SLO_KEYS = {f"{m}_p99_ms": (f"goodput_{m}_ms", f"{m}_p99_max_ms") for m in ("ttft", "tpot", "e2el")}


def split_slo_keys(slo: Any) -> Any:
    """An SLO mapping (a config's, or a point's check of it) with each old key ``<m>_p99_ms`` replaced, in place, by
    ``goodput_<m>_ms`` and ``<m>_p99_max_ms`` at its value (what it meant: both); anything else as is."""
    if not isinstance(slo, dict) or not any(k in slo for k in OLD_SLO_KEYS):
        return slo
    out: dict[str, Any] = {}
    for k, v in slo.items():
        for new in OLD_SLO_KEYS.get(k, (k,)):
            out[new] = v
    return out


def _open_loop_cap(point: dict[str, Any]) -> dict[str, Any]:
    """A stored point key (or a summary, an analysis row) whose open-loop cap was ``concurrency``: the cap
    becomes ``max_concurrency`` and ``concurrency`` null; a closed-loop point is returned as is."""
    if not isinstance(point, dict) or point.get("load", "closed") == "closed" or "max_concurrency" in point:
        return point
    return {**point, "concurrency": None, "max_concurrency": point.get("concurrency")}


def _run_update_to_3(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 → 3: the config's SLO keys ``ttft_p99_ms`` … (each both a per-request goodput limit and a p99 bound)
    become ``goodput_ttft_ms`` and ``ttft_p99_max_ms`` … at the same value (:func:`split_slo_keys`)."""
    cfg = data.get("config")
    if isinstance(cfg, dict) and isinstance(cfg.get("slo"), dict):
        data = {**data, "config": {**cfg, "slo": split_slo_keys(cfg["slo"])}}
    return data


class RunFile(StoredFile):
    """``run.json``: provenance (hardware, probe, versions, config, server) and ``status``.

    Version 2: no path of the measuring machine (:func:`_run_update_to_2`).
    Version 3: the config's SLO says its goodput limits and p99 bounds apart (:func:`_run_update_to_3`).
    Version 4: the run's variants, ``[{name, baseline, settings}]`` (:func:`_run_update_to_4`).
    Version 5: ``server`` (was ``engine``), ``gpu_driver`` (was ``driver``), ``backend_fallback`` and the config's
    ``backend`` (were ``engine_fallback`` and ``engine``): :func:`pipeline.store.nameupdates._run_update_to_5`.
    """

    current: ClassVar[int] = 5
    updates: ClassVar[dict[int, Update]] = {2: _run_update_to_2, 3: _run_update_to_3, 4: _run_update_to_4,
                                            5: _run_update_to_5}

    run_id: str | None = None
    status: str | None = None
    source: str | None = None
    config: dict[str, Any] | None = None
    server: dict[str, Any] | None = None
    hardware: dict[str, Any] | None = None


def _summary_update_to_2(point: Any) -> Any:
    """One summary, version 1 → 2 (names that mean one thing): an open-loop point's cap moves from
    ``concurrency`` to ``max_concurrency`` (``concurrency`` null; every point gets the field), ``flags`` is named
    ``caveats`` ("flagged" is the quality verdict's word), and the SLO check's ``ttft_p99_ms`` … become
    ``goodput_ttft_ms`` and ``ttft_p99_max_ms`` … (:func:`split_slo_keys`).  No number changes."""
    if not isinstance(point, dict):
        return point
    out = _renamed(_open_loop_cap(point), {"flags": "caveats"})
    out.setdefault("max_concurrency", None)
    if isinstance(out.get("slo"), dict):
        out["slo"] = split_slo_keys(out["slo"])
    return out


class SummariesFile(StoredFile):
    """``summaries.json``: one point summary per point (metrics stage, or an importer).

    Version 2: an open-loop cap is ``max_concurrency``, a point's ``flags`` are ``caveats``, the SLO's two limits are
    apart (:func:`_summary_update_to_2`).
    Version 3: every point says its ``variant`` (``default`` before variants existed: :func:`with_variant`).
    """

    current: ClassVar[int] = 3
    updates: ClassVar[dict[int, Update]] = {
        2: lambda data: ({**data, "points": [_summary_update_to_2(p) for p in data["points"]]}
                         if isinstance(data.get("points"), list) else data),  # else refused by the model, named
        3: lambda data: ({**data, "points": [with_variant(p) for p in data["points"]]}
                         if isinstance(data.get("points"), list) else data)}

    run_id: str | None = None
    points: list[dict[str, Any]]


def _analysis_update_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 → 2: the hardware block's ``bandwidth_gb_s_measured`` and ``peak_tflops_measured`` are
    named ``bandwidth_gb_s_probed`` and ``peak_tflops_probed`` (the probe's figures; "measured" is a
    run's source, and ``mbu_probed`` / ``ceiling_tok_s_probed`` already say "probed")."""
    hw = data.get("hardware")
    if isinstance(hw, dict):
        names = {"bandwidth_gb_s_measured": "bandwidth_gb_s_probed", "peak_tflops_measured": "peak_tflops_probed"}
        data = {**data, "hardware": {names.get(k, k): v for k, v in hw.items()}}
    return data


def _analysis_update_to_3(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 → 3: an open-loop point's cap moves from ``concurrency`` to ``max_concurrency``
    (``concurrency`` null), a point's ``flags`` are named ``caveats`` and a model's ``flagged_concurrency``
    ``caveat_concurrency`` ("flagged" is the quality verdict's word).  No number changes."""
    out = dict(data)
    if isinstance(out.get("points"), list):
        out["points"] = [_renamed(_open_loop_cap(p), {"flags": "caveats"}) if isinstance(p, dict) else p
                         for p in out["points"]]
    if isinstance(out.get("models"), list):
        out["models"] = [_renamed(m, {"flagged_concurrency": "caveat_concurrency"}) if isinstance(m, dict) else m
                         for m in out["models"]]
    return out


class AnalysisFile(StoredFile):
    """``analysis.json``: per-model analysis, per-point MBU and caveats, the hardware block (analysis stage).

    Version 2: the probe's figures are ``*_probed`` (:func:`_analysis_update_to_2`).
    Version 3: an open-loop cap is ``max_concurrency``; ``caveats`` and ``caveat_concurrency`` (:func:`_analysis_update_to_3`).
    Version 4: points and models say their ``variant`` (:func:`_analysis_update_to_4`).
    """

    current: ClassVar[int] = 4
    updates: ClassVar[dict[int, Update]] = {2: _analysis_update_to_2, 3: _analysis_update_to_3, 4: _analysis_update_to_4}

    run_id: str | None = None
    hardware: dict[str, Any] | None = None
    models: list[AnalysisModel] | None = None
    points: list[AnalysisPoint] | None = None


class PointKeyModel(BaseModel):
    """The ``point`` of a record file: (model, engine, variant, input length, output length, concurrency[, load,
    rate_rps, max_concurrency]).  ``variant`` since version 5 (``default`` before).

    ``load``, ``rate_rps`` and ``max_concurrency`` appear only on open-loop points (``records.PointKey.as_dict``;
    ``concurrency`` null there); a file without them is a closed-loop point, so the files written before open
    loop existed read unchanged.
    """

    model_config = ConfigDict(extra="forbid")

    model: str
    engine: str
    variant: str = "default"
    input_len: int
    output_len: int
    concurrency: int | None
    load: Literal["closed", "poisson", "constant", "gamma", "trace"] = "closed"
    rate_rps: float | None = None
    max_concurrency: int | None = None


def _point_records_update_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 → 2: each repeat's ``kind`` (``static_batch`` | ``served``) is named ``batching``.

    ``kind`` is the model's dense/MoE everywhere else (cards, ``show --json``); one word per thing
   .  The value is kept as it is.
    """
    reps = []
    for rep in data.get("repeats") or []:
        if isinstance(rep, dict) and "kind" in rep and "batching" not in rep:
            rep = {("batching" if k == "kind" else k): v for k, v in rep.items()}
        reps.append(rep)
    return {**data, "repeats": reps}


def _point_records_update_to_3(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 → 3: the requests move to a Parquet file beside the JSON (``requests_file``, :mod:`pipeline.store.columnar`),
    and the engine's ``meta.tokenizer`` folder is made relative to the repository (:func:`repo_relative_text`).

    A mapping cannot write a file, so in memory a version 2 file reads as version 3 with its
    requests still inline in each repeat (``requests``), which readers accept
    (:func:`pipeline.store.pointfiles.load_point`); ``batchmark upgrade`` (:func:`pipeline.store.upgrade.upgrade_run`)
    writes the Parquet file and the JSON without them.  Every number is kept.
    """
    meta = data.get("meta")
    if isinstance(meta, dict) and "tokenizer" in meta:
        data = {**data, "meta": {**meta, "tokenizer": repo_relative_text(meta["tokenizer"])}}
    return data


def _point_records_update_to_4(data: dict[str, Any]) -> dict[str, Any]:
    """Version 3 → 4: an open-loop point's cap moves from ``point.concurrency`` to
    ``point.max_concurrency`` (``concurrency`` null; :func:`_open_loop_cap`).  A closed-loop point is unchanged."""
    point = data.get("point")
    return {**data, "point": _open_loop_cap(point)} if isinstance(point, dict) else data


class PointRecordsFile(StoredFile):
    """``points/<model>/<slug>.json``: one point: its key, the engine's ``meta``, each repeat's header.

    Version 2: a repeat's ``kind`` is named ``batching`` (:func:`_point_records_update_to_2`).
    Version 3: the requests of every repeat are ``requests_file`` (``<slug>.parquet`` beside it,
    :mod:`pipeline.store.columnar`), not inline lists of per-request objects; a file migrated in memory
    from version 2 keeps them inline (:func:`_point_records_update_to_3`) and has no ``requests_file``.
    Version 4: an open-loop point's cap is ``point.max_concurrency`` (:func:`_point_records_update_to_4`).
    Version 5: the point's ``variant`` (``default`` before: :func:`with_variant`).
    """

    current: ClassVar[int] = 5
    updates: ClassVar[dict[int, Update]] = {2: _point_records_update_to_2, 3: _point_records_update_to_3,
                                            4: _point_records_update_to_4,
                                            5: lambda data: {**data, "point": with_variant(data.get("point"))}
                                            if isinstance(data.get("point"), dict) else data}

    point: PointKeyModel
    repeats: list[dict[str, Any]]
    meta: dict[str, Any] | None = None
    requests_file: str | None = None


def _card_update_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 → 2: the weights' label is stored once, as ``quantization``; its copy ``dtype`` goes.

    A version 1 card stored the same label under both keys (``float32``, ``bf16+experts:mxfp4``);
    where ``quantization`` is missing or null, ``dtype``'s value becomes it.  No number changes.
    """
    if "dtype" not in data:
        return data
    out = {k: v for k, v in data.items() if k != "dtype"}
    if out.get("quantization") is None:
        out["quantization"] = data["dtype"]
    return out


class ModelCardFile(StoredFile):
    """``models/<model>.json``: the model card counted during the sweep (or given to an importer).

    Version 2: one label of the weights, ``quantization``, without its copy ``dtype`` (:func:`_card_update_to_2`).
    """

    current: ClassVar[int] = 2
    updates: ClassVar[dict[int, Update]] = {2: _card_update_to_2}

    name: str | None = None
    kind: str | None = None


def version_of(path: Path | str, data: dict[str, Any]) -> int:
    """The ``schema_version`` of a stored mapping (1 when absent).

    Raises:
        BatchmarkError: not a positive whole number (the file is named).
    """
    v = data.get("schema_version", 1)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise BatchmarkError(f"{path}: schema_version {v!r} is not a version number")
    return v


def migrate(cls: type[StoredFile], path: Path | str, data: Any) -> dict[str, Any]:
    """``data`` (a stored file's JSON) checked against ``cls`` and brought to ``cls.current``.

    Returns the migrated mapping with ``schema_version`` first; every other key as stored.

    Raises:
        BatchmarkError: not a JSON object, a newer version than ``cls.current``, or a field of the
            wrong shape (one line naming the file and the field).
    """
    if not isinstance(data, dict):
        raise BatchmarkError(f"{path}: expected a JSON object")
    v = version_of(path, data)
    if v > cls.current:
        raise BatchmarkError(f"{path}: schema_version {v} is newer than this batchmark reads "
                             f"({cls.current}); upgrade batchmark to read it")
    for n in range(v + 1, cls.current + 1):
        data = cls.updates[n](dict(data))
    out = {"schema_version": cls.current, **{k: val for k, val in data.items() if k != "schema_version"}}
    try:
        cls.model_validate(out)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise BatchmarkError(f"{path}: {where}: {err['msg']}") from None
    return out


def stamped(cls: type[StoredFile], body: dict[str, Any]) -> dict[str, Any]:
    """``body`` to be written as a file of ``cls``: ``schema_version`` (the current one) first."""
    return {"schema_version": cls.current, **{k: v for k, v in body.items() if k != "schema_version"}}
