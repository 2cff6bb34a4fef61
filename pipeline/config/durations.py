"""Durations a config or the CLI writes (``budget: 8h``, ``--budget 90m``): text or seconds → seconds (pure)."""

from __future__ import annotations

import math
import re

from pipeline.core.errors import BatchmarkError

DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*d)?\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*(?:(\d+(?:\.\d+)?)\s*m(?:in)?)?"
                       r"\s*(?:(\d+(?:\.\d+)?)\s*s)?\s*$")


def parse_duration(text: str | float | int, field_name: str = "budget") -> float:
    """Seconds of a duration: ``8h``, ``90m``, ``1h30m``, ``2d``, ``3600s`` or a bare number of seconds.

    Raises:
        BatchmarkError: not a positive duration (the field is named).
    """
    if isinstance(text, bool):
        raise BatchmarkError(f"{field_name}: {text!r} is not a duration (e.g. 8h, 90m, 1h30m)")
    if isinstance(text, str) and re.fullmatch(r"\s*\d+(?:\.\d+)?\s*", text):  # "3600" (the CLI's --budget 3600)
        text = float(text)
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        m = DURATION.match(str(text))
        if not m or not any(m.groups()):
            raise BatchmarkError(f"{field_name}: {text!r} is not a duration (e.g. 8h, 90m, 1h30m)")
        d, h, mi, s = (float(g) if g else 0.0 for g in m.groups())
        seconds = d * 86400 + h * 3600 + mi * 60 + s
    if not math.isfinite(seconds) or seconds <= 0:
        raise BatchmarkError(f"{field_name}: {text!r} must be a positive duration")
    return seconds
