"""A workload said in words, one shape at a time: how its prompts and outputs were drawn and how its requests arrived
(what the model pages print beside a workload's figures and ``show`` prints once per shape).

For example, a run of ``lengths: {input: {distribution: uniform, range_ratio: 0.9}, ignore_eos: false,
prefix_len: 256}`` at 4000 in / 500 out sent at gamma arrivals of burstiness 0.7 reads "prompts uniform 399–7,600
tokens around 4,000 (range ratio 0.9), outputs stop at EOS up to 500 tokens, a shared prefix of 256 tokens, gamma
arrivals with burstiness 0.7" (399: ⌊4000 × (1 − 0.9)⌋ in binary floating point, as the draw itself and vLLM's
``np.floor`` compute it).  The ranges are :class:`pipeline.config.workload.LengthDist`'s own clip (uniform: vLLM's
[⌊L(1 − r)⌋, ⌈L(1 + r)⌉]; a normal or lognormal tail cut at its :data:`~pipeline.config.workload.TAIL_SIGMAS`).
Stored values are untrusted: a ``lengths`` the config model refuses is said as "lengths not readable", never raised.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from pipeline.config.workload import TAIL_SIGMAS, LengthDist, Lengths


def _dist(d: LengthDist, nominal: int, what: str) -> str:
    """One length's distribution around ``nominal`` tokens: ``prompts uniform 400–7600 tokens around 4000 (range
    ratio 0.9)``, ``outputs normal around 500 tokens (std 50, 300–700)``, ``prompts lognormal with mean 4000 tokens
    (sigma 0.5, up to 21,748)``, ``prompts 4000 tokens``."""
    if d.distribution == "uniform":
        low = max(math.floor(nominal * (1 - d.range_ratio)), 1)
        return f"{what} uniform {low:,}–{d.high(nominal):,} tokens around {nominal:,} (range ratio {d.range_ratio:g})"
    if d.distribution == "normal":
        low = max(math.floor(nominal - TAIL_SIGMAS * d.std), 1)
        return f"{what} normal around {nominal:,} tokens (std {d.std:g}, {low:,}–{d.high(nominal):,})"
    if d.distribution == "lognormal":
        return f"{what} lognormal with mean {nominal:,} tokens (sigma {d.sigma:g}, up to {d.high(nominal):,})"
    return f"{what} {nominal:,} tokens"


def arrival_words(loads: list[str], burstiness: float | None = None) -> str:
    """How a shape's requests arrived, for the loads its points were measured at (``closed``, ``poisson``,
    ``constant``, ``gamma``): ``a closed loop``, ``Poisson arrivals``, ``gamma arrivals with burstiness 0.7``, joined
    by "and"; ``""`` for none."""
    said = {"closed": "a closed loop (a fixed number in flight)", "poisson": "Poisson arrivals",
            "constant": "arrivals at a constant rate",
            "gamma": "gamma arrivals" + (f" with burstiness {burstiness:g}" if burstiness is not None else "")}
    return " and ".join(said.get(x, f"{x} arrivals") for x in dict.fromkeys(loads))


def workload_words(stored: Any, input_len: int, output_len: int, loads: list[str] | None = None,
                   burstiness: float | None = None) -> str:
    """One shape's workload in words (module docstring): ``stored`` is the run's ``config.lengths`` (JSON, or None for
    a config without ``lengths:``), ``input_len`` / ``output_len`` the shape's nominal lengths (tokens), ``loads`` and
    ``burstiness`` (:func:`arrival_words`) how its points' requests arrived.  Fixed lengths start "fixed lengths"."""
    try:
        lengths = Lengths() if stored is None else Lengths.model_validate(stored)
    except (ValidationError, TypeError, ValueError):
        lengths = None
    if lengths is None:
        parts = ["lengths not readable (run.json config.lengths)"]
    elif lengths.prompt_file is not None:
        stop = "stop at EOS, each at most" if not lengths.ignore_eos else "each"
        parts = [f"prompts from {lengths.prompt_file} (their own lengths)",
                 f"outputs {stop} its line's output length (else {_dist(lengths.output, output_len, '').strip()})"]
        if lengths.prefix_len:
            parts.append(f"a shared prefix of {lengths.prefix_len:,} tokens before each prompt")
    else:
        fixed = lengths.input.distribution == lengths.output.distribution == "fixed" and not lengths.prefix_len
        parts = (["fixed lengths"] if fixed else []) + [_dist(lengths.input, input_len, "prompts"),
                                                       _outputs(lengths, output_len)]
        if lengths.prefix_len:
            parts.append(f"a shared prefix of {lengths.prefix_len:,} tokens")
    arrivals = arrival_words(loads or [], burstiness)
    return ", ".join(parts + ([arrivals] if arrivals else []))


def _outputs(lengths: Lengths, output_len: int) -> str:
    """The outputs: drawn or fixed, and whether they stop at EOS (then the drawn length is the most they may get)."""
    if lengths.ignore_eos:
        return _dist(lengths.output, output_len, "outputs")
    if lengths.output.distribution == "fixed":
        return f"outputs stop at EOS up to {output_len:,} tokens"
    drawn = _dist(lengths.output, output_len, "outputs").removeprefix("outputs ")
    return f"outputs stop at EOS, each at most a draw {drawn}"
