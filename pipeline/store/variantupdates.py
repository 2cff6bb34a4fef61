"""The stored files' migrations to variants (:mod:`pipeline.store.schemas`): a point, summary, analysis row or model
written before a run could hold named server settings says its ``variant`` (``default``), and ``run.json`` its
``variants``.  Format only, never a number."""

from __future__ import annotations

from typing import Any


def with_variant(point: Any) -> Any:
    """A stored point key (or a summary, an analysis row or model) written before variants existed: ``variant``
    ``default`` inserted right after ``engine`` (where the current writers put it); anything else as is."""
    if not isinstance(point, dict) or "variant" in point:
        return point
    out: dict[str, Any] = {}
    for k, v in point.items():
        out[k] = v
        if k == "engine":
            out["variant"] = "default"
    out.setdefault("variant", "default")
    return out


def _run_update_to_4(data: dict[str, Any]) -> dict[str, Any]:
    """Version 3 → 4: the run's server settings, ``variants: [{name, baseline, settings}]``; a run written before
    them measured one, ``default``, setting nothing."""
    if "variants" in data:
        return data
    return {**data, "variants": [{"name": "default", "baseline": True, "settings": {}}]}


def _analysis_update_to_4(data: dict[str, Any]) -> dict[str, Any]:
    """Version 3 → 4: every point and model (workload) says its ``variant`` (``default``: :func:`with_variant`)."""
    out = dict(data)
    for part in ("points", "models"):
        if isinstance(out.get(part), list):
            out[part] = [with_variant(p) for p in out[part]]
    return out
