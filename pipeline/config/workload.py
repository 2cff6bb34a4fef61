"""A workload as a distribution: how each request's prompt and output lengths are drawn (``lengths:``), and the one
draw that the sweep, the simulated server and the plan share (:func:`draw_lengths`).

A shape's ``input_len`` / ``output_len`` is the *nominal* length L (the point's key, its file name, the pages'
label); ``lengths:`` says how a request's own length is drawn around it:

- ``fixed`` (the default, and every config written before ``lengths:`` existed): every request L.
- ``uniform`` with ``range_ratio`` r in [0, 1): integers uniform on [⌊L·(1 − r)⌋, ⌈L·(1 + r)⌉], an output at least 1
  (vLLM's ``--random-range-ratio``: ``vllm/benchmarks/datasets.py``, ``RandomDataset.get_sampling_params``, which
  draws the inputs then the outputs from one ``numpy.random.default_rng(seed)``; vLLM also takes the tokenizer's
  special tokens off L, which batchmark's prompts do not carry).
- ``normal`` with ``std`` (tokens): round(N(L, std²)).
- ``lognormal`` with ``sigma``: round(exp(N(μ, σ²))), μ = ln L − σ²/2 so that the mean is L.

Every draw is clipped to at least 1 and at most :func:`longest` (the distribution's upper end: uniform's high
bound, L + 4·std for a normal, exp(μ + 4σ) for a lognormal, at most the server's ``max_model_len`` less the other
length and the prefix), so the server started for the sweep fits every request it is sent.  ``prefix_len`` tokens
are shared by every request of a point, before its own prompt (vLLM's ``--random-prefix-len``: the prompt is the
prefix then ``input`` tokens).  ``ignore_eos: false`` lets an output stop where the model stops (its drawn length is
then the most it may have, ``max_tokens``), and every per-token figure counts the tokens each request really got.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, Literal

import numpy as np
from pydantic import Field, ValidationError, model_validator

from pipeline.config.options import StrictModel
from pipeline.config.promptfile import read_prompt_file
from pipeline.config.tracefile import config_trace
from pipeline.core.errors import BatchmarkError

#: How far out a normal or lognormal tail is kept (standard deviations): past it a draw is clipped to it.
TAIL_SIGMAS = 4.0


class LengthDist(StrictModel):
    """How one length (a prompt's or an output's) is drawn around the shape's nominal length (module docstring)."""

    distribution: Literal["fixed", "uniform", "normal", "lognormal"] = Field(
        default="fixed", description="fixed (every request the shape's length), uniform (vLLM's range ratio), "
                                     "normal (std), lognormal (sigma; mean the shape's length)")
    range_ratio: float | None = Field(default=None, ge=0, lt=1, description="uniform: integers on "
                                      "[floor(L(1-r)), ceil(L(1+r))], r in [0, 1) (vLLM --random-range-ratio)")
    std: float | None = Field(default=None, gt=0, le=10_000_000, description="normal: standard deviation, tokens")
    sigma: float | None = Field(default=None, gt=0, le=5, description="lognormal: standard deviation of ln(length)")

    @model_validator(mode="after")
    def _its_parameter(self) -> "LengthDist":
        need = {"fixed": None, "uniform": "range_ratio", "normal": "std", "lognormal": "sigma"}[self.distribution]
        for name in ("range_ratio", "std", "sigma"):
            given = getattr(self, name) is not None
            if name == need and not given:
                raise ValueError(f"{name}: the {self.distribution} distribution needs it")
            if given and name != need:
                raise ValueError(f"{name}: not a parameter of the {self.distribution} distribution")
        return self

    def _param(self, name: str) -> float:
        """The distribution's parameter ``name`` (``range_ratio``, ``std``, ``sigma``): the validator above requires it
        of its distribution."""
        value = getattr(self, name)
        assert value is not None, name
        return float(value)

    def high(self, nominal: int) -> int:
        """The longest length this distribution draws around ``nominal`` (tokens; the clip's upper end)."""
        if self.distribution == "uniform":
            return math.ceil(nominal * (1 + self._param("range_ratio")))
        if self.distribution == "normal":
            return math.ceil(nominal + TAIL_SIGMAS * self._param("std"))
        if self.distribution == "lognormal":
            return math.ceil(math.exp(math.log(nominal) - self._param("sigma") ** 2 / 2 + TAIL_SIGMAS * self._param("sigma")))
        return nominal

    def draw(self, rng: np.random.Generator, nominal: int, n: int, low: int = 1) -> np.ndarray:
        """``n`` lengths (int64 tokens) around ``nominal`` from ``rng``, clipped to [``low``, :meth:`high`]."""
        if self.distribution == "fixed":
            return np.full(n, nominal, dtype=np.int64)
        if self.distribution == "uniform":
            lo = max(math.floor(nominal * (1 - self._param("range_ratio"))), low)
            values = rng.integers(lo, self.high(nominal) + 1, size=n)
        elif self.distribution == "normal":
            values = np.rint(rng.normal(nominal, self._param("std"), size=n))
        else:
            values = np.rint(rng.lognormal(math.log(nominal) - self._param("sigma") ** 2 / 2, self._param("sigma"), size=n))
        return np.clip(values, low, self.high(nominal)).astype(np.int64)


class Lengths(StrictModel):
    """The config's ``lengths:``: how every shape's requests are drawn (absent: fixed lengths, ``ignore_eos``)."""

    input: LengthDist = Field(default=LengthDist(), description="How a prompt's length is drawn around input_len")
    output: LengthDist = Field(default=LengthDist(), description="How an output's length is drawn around output_len")
    prefix_len: int = Field(default=0, ge=0, le=10_000_000, description="Tokens every request of a point shares "
                            "before its own prompt (vLLM --random-prefix-len)")
    ignore_eos: bool = Field(default=True, description="true: every output is its drawn length; false: an output "
                             "stops where the model stops (at most its drawn length)")
    prompt_file: str | None = Field(default=None, min_length=1, description="JSON Lines file of the prompts to send "
                                    "({prompt[, output | output_len]} or ShareGPT conversations a line; served "
                                    "backends): prompts and reference outputs' lengths from it, the rest of output "
                                    "drawn, prefix_len shared tokens before each prompt (pipeline.config.promptfile)")

    @model_validator(mode="after")
    def _prompts_or_drawn(self) -> "Lengths":
        if self.prompt_file is not None:
            if self.input.distribution != "fixed":
                raise ValueError("prompt_file: its prompts are the inputs; give no input distribution")
            try:
                read_prompt_file(self.prompt_file)  # at the edge: a bad file is refused before anything runs
            except BatchmarkError as exc:
                raise ValueError(f"prompt_file: {exc}") from None
        return self

    def fixed(self) -> bool:
        """True when every request of a shape is the shape itself (what a config without ``lengths:`` means)."""
        return self == Lengths()


def longest(lengths: Lengths | None, input_len: int, output_len: int) -> int:
    """Tokens of the longest request a shape may draw: prefix + the input's and the output's high ends."""
    if lengths is None:
        return input_len + output_len
    return lengths.prefix_len + lengths.input.high(input_len) + lengths.output.high(output_len)


def draw_lengths(lengths: Lengths | None, input_len: int, output_len: int, n: int, seed: int,
                 max_model_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(prompt lengths, output lengths) of ``n`` requests (int64 tokens, the prefix left out), drawn as the sweep draws
    them: inputs then outputs from ``numpy.random.default_rng(seed)`` (vLLM's order), each clipped to at least 1 and,
    with ``max_model_len``, so that prefix + input + output fits it.  ``lengths`` None: fixed lengths."""
    if lengths is None or lengths.fixed():
        return np.full(n, input_len, dtype=np.int64), np.full(n, output_len, dtype=np.int64)
    rng = np.random.default_rng(seed)
    ins = lengths.input.draw(rng, input_len, n)
    outs = lengths.output.draw(rng, output_len, n)
    if max_model_len is not None:
        room = max(max_model_len - lengths.prefix_len, 2)
        ins = np.minimum(ins, room - 1)
        outs = np.clip(np.minimum(outs, room - ins), 1, None)
    return ins, outs


def point_lengths(cfg, input_len: int, output_len: int, n: int, seed: int,
                  max_model_len: int | None = None, per: int | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """(prompt tokens with the shared prefix, output tokens) of a point's ``n`` bodies under ``cfg`` (a sweep config),
    drawn by :func:`draw_lengths` from the point's ``seed`` as the sweep sends them, or, where ``cfg`` replays a trace
    that states lengths, the trace's (:meth:`pipeline.config.tracefile.Trace.lengths`, ``per`` bodies a repeat); None
    for a config whose requests are all the shape (no ``lengths:``, or fixed ones): every caller then keeps its
    one-length path."""
    lengths = getattr(cfg, "lengths", None)
    if lengths is not None and lengths.prompt_file is not None:
        raise BatchmarkError(f"lengths.prompt_file: {lengths.prompt_file}: its lengths are its prompts' tokens, which "
                             "only a served backend counts (with the model's tokenizer); the simulated server and "
                             "the plan cannot draw them")
    trace = config_trace(cfg)
    if trace is not None:
        ins, outs = trace.lengths(n, per or n)
        if max_model_len is not None:  # as a drawn request is clipped: the prompt first, then the output
            ins = np.minimum(ins, max_model_len - 1)
            outs = np.clip(np.minimum(outs, max_model_len - ins), 1, None)
        return ins, outs
    if lengths is None or (lengths.input.distribution == lengths.output.distribution == "fixed"
                           and not lengths.prefix_len):
        return None
    ins, outs = draw_lengths(lengths, input_len, output_len, n, seed, max_model_len)
    return ins + lengths.prefix_len, outs


def traced_longest(cfg) -> int:
    """Tokens of the longest request (prompt + output) of the trace ``cfg`` replays, where it states lengths; else 0."""
    trace = config_trace(cfg)
    if trace is None or trace.input_lens is None or trace.output_lens is None:  # config_trace: both, where stated
        return 0
    return int(np.max(trace.input_lens + trace.output_lens))


def server_len(cfg, input_len: int, output_len: int) -> int:
    """The ``max_model_len`` a server started for one shape of ``cfg`` needs by default: its longest request + 64
    (a replayed trace's longest, where it states lengths)."""
    return max(longest(getattr(cfg, "lengths", None), input_len, output_len), traced_longest(cfg)) + 64


def refuse_beyond_context(cfg) -> None:
    """Refuse a sweep config ``cfg`` whose requests cannot fit the context it states: a shape (prefix + ``input_len``
    + ``output_len``, its nominal lengths) longer than a stated ``vllm.max_model_len`` or ``simulated.max_model_len``
    (a drawn tail beyond it is clipped to it, :func:`draw_lengths`; the shape itself is not), or a server length
    (the stated ``vllm.max_model_len``, else :func:`server_len`) beyond a model's ``max_position_embeddings`` (its
    ``architecture`` or its card in ``data/models/``), which vLLM refuses to start with.

    Raises:
        ValueError: naming the key and the numbers.
    """
    lengths = getattr(cfg, "lengths", None)
    prefix = lengths.prefix_len if lengths is not None else 0
    shapes = [(s.input_len, s.output_len) for s in cfg.shapes()]
    for key in ("vllm", "simulated"):
        limit = getattr(cfg, key).max_model_len
        for i, o in shapes if limit else ():
            if prefix + i + o > limit:
                raise ValueError(f"{key}.max_model_len = {limit}: the shape's input_len {i} + output_len {o}"
                                 f"{f' + lengths.prefix_len {prefix}' if prefix else ''} = {prefix + i + o} tokens "
                                 "do not fit it; raise it or shorten the shape")
    for n, m in enumerate(cfg.models):
        ctx, where = _max_position(m)
        if ctx is None or cfg.backend == "openai":
            continue
        for i, o in shapes:
            stated = cfg.vllm.max_model_len if cfg.backend == "vllm" else None
            need = stated or (server_len(cfg, i, o) if cfg.backend != "transformers" else longest(lengths, i, o))
            if need > ctx:
                how = ("vllm.max_model_len" if stated else f"the longest request of shape {i}/{o} the lengths draw"
                       + (" + 64, the server's default max_model_len" if cfg.backend != "transformers" else ""))
                raise ValueError(f"models[{n}] ({m.name}): {where}max_position_embeddings = {ctx} is below {how} "
                                 f"({need} tokens); shorten the lengths or state a smaller vllm.max_model_len")


def _max_position(model) -> tuple[int | None, str]:
    """A model spec's ``max_position_embeddings`` (tokens) and where it was read (``architecture.`` or its card's
    file), None where neither states it."""
    ctx = (model.architecture or {}).get("max_position_embeddings")
    if isinstance(ctx, int) and not isinstance(ctx, bool):
        return ctx, "architecture."
    if model.card:
        from pipeline.cards.registry import find_card_file

        found = find_card_file(model.card)
        arch = (found[1].get("config") if found and isinstance(found[1], dict) else None) or {}
        ctx = arch.get("max_position_embeddings") if isinstance(arch, dict) else None
        if isinstance(ctx, int) and not isinstance(ctx, bool):
            return ctx, f"card {model.card}: "
    return None, ""


def repeat_lengths(cfg, key, per: int, repeats: int, r: int, seed: int,
                   max_model_len: int | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """The lengths of repeat ``r``'s ``per`` bodies of point ``key`` (a :class:`pipeline.core.records.PointKey`):
    its slice of the point's ``repeats × per`` bodies drawn at once from the point's ``seed`` (:func:`point_lengths`,
    as the served sweep draws them), what the simulated server and the plan send; None: every body the shape."""
    drawn = point_lengths(cfg, key.input_len, key.output_len, repeats * per, seed, max_model_len, per)
    return None if drawn is None else (drawn[0][r * per:(r + 1) * per], drawn[1][r * per:(r + 1) * per])


def dist_words(d: dict) -> str:
    """``uniform (range ratio 0.9)``, ``normal (std 40)``, ``lognormal (sigma 0.5)``, ``fixed``: one stored length."""
    name = d.get("distribution", "fixed")
    param = next(((k, d[k]) for k in ("range_ratio", "std", "sigma") if d.get(k) is not None), None)
    return name if param is None else f"{name} ({param[0].replace('_', ' ')} {param[1]:g})"


def lengths_words(stored: dict | None) -> str:
    """A run's ``lengths:`` (its stored config's, JSON) in words, what a diff names: ``fixed lengths`` for none, else
    e.g. ``input uniform (range ratio 0.9), output uniform (range ratio 0.9), outputs stop at EOS``."""
    if not isinstance(stored, dict) or stored == Lengths().model_dump(mode="json"):
        return "fixed lengths"
    parts = [f"input {dist_words(stored.get('input') or {})}", f"output {dist_words(stored.get('output') or {})}"]
    if stored.get("prefix_len"):
        parts.append(f"shared prefix {stored['prefix_len']}")
    if stored.get("prompt_file"):
        parts.append(f"prompts from {stored['prompt_file']}")
    if stored.get("ignore_eos") is False:
        parts.append("outputs stop at EOS")
    return ", ".join(parts)


def stored_workload(meta: dict, where: str = "run.json") -> SimpleNamespace | None:
    """What a prediction of a stored run draws its requests from: ``lengths`` and ``seed`` of the run's config
    (``meta``: its ``run.json``), as :func:`repeat_lengths` reads a config; None for fixed lengths (every request the
    shape) and for a prompt file (its lengths are tokens only a served backend counts).

    Raises:
        BatchmarkError: the stored ``config.lengths`` is not a valid ``lengths:`` (``where`` named).
    """
    raw = meta.get("config")
    cfg: dict[str, Any] = raw if isinstance(raw, dict) else {}
    stored = cfg.get("lengths")
    if stored is None or (isinstance(stored, dict) and stored.get("prompt_file")):
        return None
    try:
        lengths = Lengths.model_validate(stored)
    except ValidationError as exc:
        raise BatchmarkError(f"{where}: config.lengths: {exc.errors()[0]['msg']}") from None
    seed = cfg.get("seed", 0)
    return None if lengths.fixed() else SimpleNamespace(lengths=lengths, seed=seed if isinstance(seed, int) else 0)
