"""The provenance of a run merged from its parts (:mod:`pipeline.sweep.parts`): its ``run.json``, from the parts' own.

Split out of :mod:`pipeline.sweep.parts`, whose merge stage calls :func:`merged_provenance`.
"""

from __future__ import annotations

from typing import Any

from pipeline.config.sweepconfig import SweepConfig
from pipeline.config.variants import part_names
from pipeline.analysis.probedrift import probe_moved

#: Provenance a part records of itself, kept per part in the merged ``run.json`` (``parts``).
PART_FIELDS = ("host", "platform", "gpu_driver", "versions", "git_commit", "command", "probe", "probe_after", "server",
               "backend_fallback", "machine", "started_at", "finished_at", "stopped", "failures")


def _merged_server(metas: list[dict[str, Any]]) -> Any:
    """The first part's server provenance, with every part's ``servers`` (a served backend's per-model commands)."""
    engines = [m.get("server") for m in metas if m.get("server") is not None]
    if not engines or not isinstance(engines[0], dict):
        return engines[0] if engines else None
    out = dict(engines[0])
    if any(isinstance(e, dict) and "servers" in e for e in engines):
        out["servers"] = {k: v for e in engines if isinstance(e, dict) for k, v in (e.get("servers") or {}).items()}
    return out


def merged_provenance(cfg: SweepConfig, run_id: str, metas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``run.json`` of the merged run (status complete), from the parts' ``run.json`` in config order.

    What every part shares (config, its digest, the hardware profile, source) is taken once;
    ``host`` is the one host, or the hosts joined with ", "; ``hosts`` lists them; ``parts``
    keeps each part's own provenance (:data:`PART_FIELDS`).  The run-level ``probe``,
    ``versions``, ``gpu_driver`` and ``server`` are the first part's, which the analysis uses for every
    model (on one host the parts' probes are repeats of one measurement; across hosts of one
    profile, each part's own probe stays in ``parts``); a probe warning of any part is kept, and
    so is any part's ``probe_after`` warning or before/after drift beyond its probes' own noise
    (:func:`pipeline.analysis.probedrift.probe_moved`, in ``probe_after.warning``), so the run is flagged.
    ``started_at`` is the earliest part's start, ``finished_at`` the latest part's end;
    ``stopped`` and ``failures`` add the parts' up, and so do an adaptive sweep's ``adaptive.models``.
    """
    names = part_names(cfg)
    ordered = [metas[n] for n in names]
    first = ordered[0]
    hosts = sorted({str(m.get("host")) for m in ordered if m.get("host")})
    probe = dict(first.get("probe") or {}) or None
    warnings = [f"{name}: {(m.get('probe') or {}).get('warning')}" for name, m in metas.items()
                if (m.get("probe") or {}).get("warning")]
    if probe is not None and warnings:
        probe["warning"] = "; ".join(warnings)
    # the probe after the sweep (pipeline.analysis.quality compares it with the probe): the first part's, and what
    # any part's own pair says (its warning, or a drift beyond quality's limit), so that no part's flag is lost
    probe_after = dict(first.get("probe_after") or {}) or None
    after_warnings = []
    for name, m in metas.items():
        own = (m.get("probe_after") or {}).get("warning")
        drift = probe_moved(m)
        if own:
            after_warnings.append(f"{name}: {own}")
        if name != names[0] and drift is not None:
            after_warnings.append(f"{name}: bandwidth after its sweep {drift:+.0%} from before it")
    if probe_after is not None and after_warnings:
        probe_after["warning"] = "; ".join(after_warnings)
    failures: dict[str, int] = {}
    stopped: dict[str, Any] = {}
    for m in ordered:
        for k, v in (m.get("failures") or {}).items():
            failures[k] = failures.get(k, 0) + int(v)
        stopped.update(m.get("stopped") or {})
    adaptive = [m["adaptive"] for m in ordered if m.get("adaptive")]  # one model's choices per part (pipeline.predict.adaptive)
    if adaptive:
        adaptive = [{**adaptive[0], **{part: {k: v for a in adaptive for k, v in (a.get(part) or {}).items()}
                                       for part in ("models", "frontiers")}}]
    fallback = next((m["backend_fallback"] for m in ordered if m.get("backend_fallback")), None)
    out: dict[str, Any] = {
        "run_id": run_id, "status": "complete",
        **{k: first.get(k) for k in ("source", "config_name", "config_digest", "config_path", "config", "hardware",
                                     "platform", "git_commit", "versions", "gpu_driver", "variants") if k in first},
        "host": ", ".join(hosts) if hosts else None, "hosts": hosts,
        "started_at": min(str(m.get("started_at")) for m in ordered),
        "command": f"batchmark merge --config {first.get('config_path')} --run-id {run_id}",
        "probe": probe, **({"probe_after": probe_after} if probe_after else {}), "server": _merged_server(ordered),
        **({"backend_fallback": fallback} if fallback else {}),
        "stopped": stopped, "failures": failures, **({"adaptive": adaptive[0]} if adaptive else {}),
        "parts": [{"model": name, **{k: metas[name].get(k) for k in PART_FIELDS if k in metas[name]}}
                  for name in names],
        "finished_at": max(str(m.get("finished_at")) for m in ordered),
    }
    return out
