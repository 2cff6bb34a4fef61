"""Run vs run, comparability: the provenance of two runs, compared field by field, and the diff's headline.

The provenance of both runs (hardware, probed bandwidth, engine, its version and flags, model revisions,
input/output lengths and how they were drawn, batchmark and package versions) is compared; a different hardware
profile or workload (a different length distribution too) is
stated in the headline, which every output format puts first.  Probed bandwidth: every
bandwidth-bound figure (single stream, throughput before the knee, MBU) moves with the memory bandwidth the
machine delivers, so two runs whose probed bandwidths differ by more than ``BANDWIDTH_LIMIT`` (10 %, relative
to A) are NOT COMPARABLE (the machine changed, or another load shared it); above ``BANDWIDTH_TOLERANCE``
(5 %, the probe's own noise) and up to 10 % they are comparable with a warning.  The site pairs runs that
share :func:`comparison_key` (hardware, engine, input/output lengths).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pipeline.diff.lengthsdiff import imported_parts, measured_parts, parts_differ, parts_words
from pipeline.diff.metrics import relative_change
from pipeline.core.pointsummary import PointSummary


class RunData(Protocol):
    """What the diff reads of a run: the view :func:`pipeline.analysis.stages.load_run` returns (``RunResults``).

    The diff never reads storage itself; its caller (the CLI, the Changes page) loads both runs.
    """

    @property
    def run_id(self) -> str: ...
    meta: dict[str, Any]
    summaries: list[PointSummary]
    analysis: dict[str, Any]


BANDWIDTH_TOLERANCE = 0.05  # probed bandwidths within 5 % are probe noise, not a different machine
BANDWIDTH_LIMIT = 0.10  # beyond 10 % apart the runs are not comparable (module docstring)


@dataclass
class ProvenanceItem:
    """One provenance field of both runs and whether it differs."""

    field: str
    label: str
    a: Any
    b: Any
    differs: bool



def _backend(meta: dict[str, Any]) -> str | None:
    """How the run got its tokens: its config's ``backend`` (``engine`` in a config stored before the rename)."""
    cfg = meta.get("config") or {}
    return cfg.get("backend") or cfg.get("engine")


def _engine_name(meta: dict[str, Any], summaries: list[PointSummary]) -> str | None:
    """The serving engine that produced the run's tokens: its server block's ``engine``, else its points' engines
    (what the points are keyed under), else its backend's name."""
    eng = meta.get("server")
    if isinstance(eng, dict) and eng.get("engine"):
        return str(eng["engine"])
    names = sorted({s.engine for s in summaries})
    return ", ".join(names) or _backend(meta)


def provenance_of(r: RunData) -> dict[str, Any]:
    """The provenance fields a diff compares, read from ``run.json`` and the summaries.

    Keys: hardware, bandwidth_gb_s_probed, engine, engine_version, engine_flags (dict),
    model_revisions (dict by model), workloads (sorted ``in X / out Y`` strings), models
    (sorted names), batchmark_version, versions (other packages), gpu_driver, source.  A field a
    run does not record is None (imports record less than measured runs).
    """
    meta = r.meta
    eng = meta.get("server") if isinstance(meta.get("server"), dict) else {}
    versions = dict(meta.get("versions") or {})
    name = _engine_name(meta, r.summaries)
    from pipeline.backends.served import server_version

    version = (eng.get(f"{name}_version") or eng.get("version") or versions.get(name or "")
               or server_version(eng)) if name else None
    # ``servers`` (port, pid, start time, log of each model's server) differs in every run: no flag to compare
    flags = {k: v for k, v in eng.items() if k not in ("engine", "servers") and not k.endswith("version")}
    cfg = meta.get("config") or {}
    backend = _backend(meta)  # the options of the backend that drove the server (an endpoint's are openai's)
    if backend and isinstance(cfg.get(backend), dict):
        flags.update({f"config.{k}": v for k, v in cfg[backend].items()})
    revisions: dict[str, Any] = {}
    for m in cfg.get("models") or []:
        if isinstance(m, dict) and m.get("name"):
            revisions[m["name"]] = {k: v for k, v in m.items() if k != "name" and v is not None}
    for k, v in (meta.get("model_revisions") or {}).items():
        revisions.setdefault(k, {})["revision"] = v
    probe = meta.get("probe") or {}
    measured = bool(cfg.get("models"))
    parts = measured_parts(cfg.get("lengths")) if measured else imported_parts(r.summaries)
    return {
        "hardware": (meta.get("hardware") or {}).get("name"),
        "bandwidth_gb_s_probed": probe.get("bandwidth_gb_s"),
        "engine": name,
        "engine_version": version,
        "engine_flags": flags,
        "model_revisions": revisions,
        "workloads": sorted({f"in {s.input_len} / out {s.output_len}" for s in r.summaries}),
        "models": sorted({s.model for s in r.summaries}),
        "batchmark_version": versions.pop("batchmark", None),
        "versions": {k: v for k, v in versions.items() if k != (name or "")},
        "gpu_driver": meta.get("gpu_driver"),
        "source": meta.get("source", "measured"),
        # how each request's lengths were drawn: a measured run's config states it (none: fixed, as every run before
        # lengths: existed); an import's points what its file states (None: nothing, never called different)
        "lengths": parts_words(parts, measured, cfg.get("lengths")),
        "lengths_parts": parts,
    }


def _lengths_differ(pa: dict[str, Any], pb: dict[str, Any]) -> bool:
    """True when two provenances' draws differ on a part both state (:func:`pipeline.diff.lengthsdiff.parts_differ`;
    a provenance without parts: its words, where both have them)."""
    if "lengths_parts" in pa and "lengths_parts" in pb:
        return parts_differ(pa["lengths_parts"], pb["lengths_parts"])
    la, lb = pa.get("lengths"), pb.get("lengths")
    return la is not None and lb is not None and la != lb


def _round1(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


def compare_provenance(pa: dict[str, Any], pb: dict[str, Any]) -> list[ProvenanceItem]:
    """Field-by-field comparison of two :func:`provenance_of` dicts; dicts are compared per key."""
    items: list[ProvenanceItem] = []

    def add(fld: str, label: str, a: Any, b: Any, differs: bool | None = None) -> None:
        items.append(ProvenanceItem(fld, label, a, b, (a != b) if differs is None else differs))

    add("hardware", "hardware", pa["hardware"], pb["hardware"])
    bw_a, bw_b = pa["bandwidth_gb_s_probed"], pb["bandwidth_gb_s_probed"]
    rel = relative_change(bw_a, bw_b)
    add("bandwidth_gb_s_probed", "probed bandwidth (GB/s)", _round1(bw_a), _round1(bw_b),
        (bw_a is None) != (bw_b is None) or (rel is not None and abs(rel) > BANDWIDTH_TOLERANCE))
    add("engine", "engine", pa["engine"], pb["engine"])
    add("engine_version", "engine version", pa["engine_version"], pb["engine_version"])
    for k in sorted(set(pa["engine_flags"]) | set(pb["engine_flags"])):
        add(f"engine_flags.{k}", f"engine flag {k}", pa["engine_flags"].get(k), pb["engine_flags"].get(k))
    for m in sorted(set(pa["model_revisions"]) & set(pb["model_revisions"])):
        add(f"model_revisions.{m}", f"model {m}", pa["model_revisions"][m], pb["model_revisions"][m])
    add("workloads", "input / output lengths", pa["workloads"], pb["workloads"])
    add("models", "models", pa["models"], pb["models"])
    add("batchmark_version", "batchmark version", pa["batchmark_version"], pb["batchmark_version"])
    for k in sorted(set(pa["versions"]) | set(pb["versions"])):
        add(f"versions.{k}", f"{k} version", pa["versions"].get(k), pb["versions"].get(k))
    add("gpu_driver", "GPU driver", pa["gpu_driver"], pb["gpu_driver"])
    add("source", "source", pa["source"], pb["source"])
    add("lengths", "length distribution", pa.get("lengths"), pb.get("lengths"), _lengths_differ(pa, pb))
    return items


def bandwidth_words(pa: dict[str, Any], pb: dict[str, Any]) -> tuple[float | None, str | None, bool]:
    """``(B / A − 1, sentence or None, comparable)`` for the probed bandwidths of two :func:`provenance_of` dicts.

    More than ``BANDWIDTH_LIMIT`` apart: not comparable; more than ``BANDWIDTH_TOLERANCE``: a warning.
    """
    bw_a, bw_b = pa.get("bandwidth_gb_s_probed"), pb.get("bandwidth_gb_s_probed")
    rel = relative_change(bw_a, bw_b)
    if rel is None or abs(rel) <= BANDWIDTH_TOLERANCE:
        return rel, None, True
    text = (f"probed bandwidth differs by {rel * 100:+.1f} % (A {bw_a:,.1f} GB/s, B {bw_b:,.1f} GB/s; "
            + (f"more than the {BANDWIDTH_LIMIT * 100:.0f} % limit: the machine or its load changed, and every "
               "bandwidth-bound figure moves with it)" if abs(rel) > BANDWIDTH_LIMIT else
               f"above the {BANDWIDTH_TOLERANCE * 100:.0f} % of probe noise, within the {BANDWIDTH_LIMIT * 100:.0f} % limit)"))
    return rel, text, abs(rel) <= BANDWIDTH_LIMIT


def headline(pa: dict[str, Any], pb: dict[str, Any], n_matched: int) -> tuple[str, bool]:
    """The first line of every diff output and whether the runs are like for like.

    Different hardware, a different workload (models, engine or input/output lengths) or probed
    bandwidths more than ``BANDWIDTH_LIMIT`` apart are said here rather than compared silently;
    bandwidths more than ``BANDWIDTH_TOLERANCE`` apart (and within the limit) give a warning.
    """
    problems = []
    kind = source_words(pa, pb)
    if pa["hardware"] != pb["hardware"]:
        problems.append(f"different hardware: A ran on {pa['hardware']}, B on {pb['hardware']}")
    _, bw_text, bw_ok = bandwidth_words(pa, pb)
    if not bw_ok:
        problems.append(bw_text)
    wl = []
    if pa["workloads"] != pb["workloads"]:
        wl.append(f"input/output lengths A {', '.join(pa['workloads']) or 'none'} vs B {', '.join(pb['workloads']) or 'none'}")
    if pa["engine"] != pb["engine"]:
        wl.append(f"engine A {pa['engine']} vs B {pb['engine']}")
    if _lengths_differ(pa, pb):
        wl.append(f"length distribution A {pa['lengths']} vs B {pb['lengths']}")
    if pa["models"] != pb["models"]:
        only_a = sorted(set(pa["models"]) - set(pb["models"]))
        only_b = sorted(set(pb["models"]) - set(pa["models"]))
        parts = ([f"only in A: {', '.join(only_a)}"] if only_a else []) + ([f"only in B: {', '.join(only_b)}"] if only_b else [])
        wl.append("models " + "; ".join(parts))
    if wl:
        problems.append("different workload: " + "; ".join(wl))
    if n_matched == 0:
        problems.append("no point of A matches a point of B")
    if problems:
        return kind + "NOT COMPARABLE — " + "; ".join(problems) + ". Changes below are not like for like.", False
    same = (f"same hardware ({pa['hardware']}), engine ({pa['engine']}) and workload "
            f"({', '.join(pa['workloads'])}; {len(pa['models'])} model(s))")
    if bw_text:
        return f"{kind}Comparable, with a warning: {bw_text}; {same}.", True
    return f"{kind}Comparable: {same}.", True


def source_words(pa: dict[str, Any], pb: dict[str, Any]) -> str:
    """The start of a diff's headline when a run is simulated (``source: simulated``, a prediction), else ``""``.

    A simulated run against a measured one compares a prediction with a measurement, never two
    measurements; two simulated runs compare two predictions.
    """
    sim_a, sim_b = pa.get("source") == "simulated", pb.get("source") == "simulated"
    if sim_a and sim_b:
        return "PREDICTION vs PREDICTION — both runs are simulated (predictions, not measurements). "
    if sim_a or sim_b:
        return (f"PREDICTION vs MEASUREMENT — {'A' if sim_a else 'B'} is simulated (a prediction, not a measurement): "
                "this compares a prediction with a measurement. ")
    return ""


def comparison_key(prov: dict[str, Any]) -> tuple[Any, ...]:
    """What two runs must share to be diffed on the site: hardware, engine and input/output lengths."""
    return (prov["hardware"], prov["engine"], tuple(prov["workloads"]))

