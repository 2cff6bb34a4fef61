"""How two runs' requests were drawn, compared: a measured run's ``lengths:`` (its config) against another's, or an
import's stated distribution (its points' ``lengths``: :mod:`pipeline.core.lengthstats`) — what the diff names as a
different workload.

A run's *parts* say what is known of its draw: ``input`` / ``output`` (a ``lengths:`` distribution in JSON form,
or ``{"distribution": "varies", "min", "max"}`` for an import's prompt lengths that differ between requests with
no distribution stated), ``prefix_len``, ``ignore_eos``, ``prompt_file``.  A measured run knows every part (no
``lengths:``: fixed); an import only those its file states (vLLM's ``random_range_ratio``, AIPerf's and GuideLLM's
standard deviations, a prompt length the same for every request: fixed).  Two runs differ only on a part both know;
an import's lengths that vary with no distribution stated differ only from fixed ones.  Output lengths are never read
off the requests (an output stopped at EOS varies whatever was drawn).
"""

from __future__ import annotations

from typing import Any

from pipeline.config.workload import Lengths, dist_words, lengths_words

#: The parts of a draw, in the order they are said.
PARTS = ("input", "output", "prefix_len", "ignore_eos", "prompt_file")


def measured_parts(stored: Any) -> dict[str, Any]:
    """The parts of a measured run's ``config.lengths`` (JSON; None or not a mapping: fixed lengths, every part)."""
    full = Lengths().model_dump(mode="json")
    if isinstance(stored, dict):
        full.update({k: v for k, v in stored.items() if k in full})
    return {k: full.get(k) for k in PARTS}


def imported_parts(summaries: list[Any]) -> dict[str, Any] | None:
    """The parts an import's points state (the first point's stated distribution that has each; a prompt length the
    same for every request of every point is ``fixed``, one that differs ``varies``); None where nothing is stated."""
    parts: dict[str, Any] = {}
    for s in summaries:
        stated = (getattr(s, "lengths", None) or {}).get("stated") or {}
        for k in PARTS:
            if k in stated and stated[k] is not None:
                parts.setdefault(k, stated[k])
    if "input" not in parts:
        ins = [(getattr(s, "lengths", None) or {}).get("input") for s in summaries]
        ins = [x for x in ins if x]
        if ins and all(x["min"] == x["max"] for x in ins):
            parts["input"] = {"distribution": "fixed"}
        elif ins:
            parts["input"] = {"distribution": "varies", "min": min(x["min"] for x in ins),
                              "max": max(x["max"] for x in ins)}
    return parts or None


def parts_words(parts: dict[str, Any] | None, measured: bool, stored: Any = None) -> str | None:
    """A run's draw in words: a measured run's as :func:`pipeline.config.workload.lengths_words` says it; an import's
    from the parts it states (``input uniform (range ratio 0.9), output …``); None where nothing is known."""
    if measured:
        return lengths_words(stored if isinstance(stored, dict) else None)
    if not parts:
        return None
    words = []
    for k in ("input", "output"):
        d = parts.get(k)
        if isinstance(d, dict) and d.get("distribution") == "varies":
            words.append(f"{k} {d['min']:g}–{d['max']:g} tokens (how drawn not stated)")
        elif isinstance(d, dict):
            words.append(f"{k} {dist_words(d)}")
    if parts.get("prefix_len"):
        words.append(f"shared prefix {parts['prefix_len']}")
    if parts.get("ignore_eos") is False:
        words.append("outputs stop at EOS")
    return ", ".join(words) or None


def _plain(v: Any) -> Any:
    """A part as compared: a distribution without its unset parameters (a stored ``lengths:`` writes them null)."""
    return {k: x for k, x in v.items() if x is not None} if isinstance(v, dict) else v


def _fixed(d: Any) -> bool:
    return isinstance(d, dict) and d.get("distribution", "fixed") == "fixed"


def parts_differ(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """True when two runs' parts (:func:`measured_parts`, :func:`imported_parts`) differ on one both know (module
    docstring); False where either knows nothing."""
    if not a or not b:
        return False
    for k in set(a) & set(b):
        va, vb = _plain(a[k]), _plain(b[k])
        if k in ("input", "output") and "varies" in (va.get("distribution"), vb.get("distribution")):
            if _fixed(va) or _fixed(vb):
                return True
            continue
        if va != vb:
            return True
    return False
