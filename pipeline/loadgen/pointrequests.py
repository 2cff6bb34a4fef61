"""The requests of one served point as its workload draws them: per body its prompt (its own length, the shared
prefix first), the output it asks for, and the fields that say whether the output may stop at EOS.

Pure of timing: :mod:`pipeline.backends.served` builds the bodies from it and reads each record back with the lengths
its body was built with.  The lengths come from :func:`pipeline.config.workload.point_lengths`, the one draw the
simulated server and the plan share.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.config.promptfile import read_prompt_file
from pipeline.config.workload import point_lengths
from pipeline.loadgen.prompts import make_prompts, make_prompts_of
from pipeline.loadgen.streamrecord import Features


@dataclass
class PointRequests:
    """A point's bodies' prompts and lengths (tokens), in body order (repeat by repeat)."""

    prompts: list[str]
    inexact: int
    input_lens: np.ndarray | None   # prompt tokens per body, prefix included; None: every body the shape's
    output_lens: np.ndarray | None  # max_tokens per body; None: every body the shape's
    features: Features              # what the bodies ask: ignore_eos/min_tokens off where outputs stop at EOS

    def input_len(self, i: int, nominal: int) -> int:
        """Prompt tokens of body ``i`` (``nominal`` when every body is the shape)."""
        return nominal if self.input_lens is None else int(self.input_lens[i])

    def output_len(self, i: int, nominal: int) -> int:
        """Output tokens body ``i`` asks for (``nominal`` when every body is the shape)."""
        return nominal if self.output_lens is None else int(self.output_lens[i])

    def meta(self, cfg: Any, load: str = "closed") -> dict[str, Any]:
        """What the point's meta says of its workload: the ``lengths:`` stated (each record keeps its own draw) and a
        gamma schedule's ``burstiness`` (its summary's), a trace point's ``trace_file``."""
        return workload_meta(cfg, load)

    def stamp(self, record: Any, i: int) -> Any:
        """``record`` (of body ``i``) with its drawn lengths (``drawn_input_len``, ``drawn_output_len``) where the
        bodies were drawn; returned."""
        if self.input_lens is not None:
            record.drawn_input_len, record.drawn_output_len = int(self.input_lens[i]), int(self.output_lens[i])
        return record


def workload_meta(cfg: Any, load: str) -> dict[str, Any]:
    """A point's meta of its workload (served and simulated alike): ``lengths`` (the config's, JSON) where stated,
    ``burstiness`` for a ``gamma`` point, ``trace_file`` for a ``trace`` point."""
    lengths = getattr(cfg, "lengths", None)
    out: dict[str, Any] = {} if lengths is None else {"lengths": lengths.model_dump(mode="json")}
    if load == "gamma":
        out["burstiness"] = cfg.open_loop.burstiness
    if load == "trace":
        out["trace_file"] = cfg.open_loop.trace_file
    return out


def point_requests(cfg: Any, tokenizer: Any, features: Features, key: Any, n: int, seed: int,
                   max_model_len: int | None = None, per: int | None = None) -> PointRequests:
    """The ``n`` bodies' prompts and lengths of point ``key`` (its ``input_len`` and ``output_len``: a
    :class:`~pipeline.core.records.PointKey`) of ``cfg`` (a sweep config) from the point's ``seed``.

    Without ``lengths:`` (or with fixed lengths and no prefix) the prompts are :func:`make_prompts`' as ever; else
    each body's lengths are :func:`pipeline.config.workload.point_lengths`' and its prompt
    :func:`make_prompts_of`'s.  ``lengths.ignore_eos: false`` turns ``ignore_eos`` and ``min_tokens`` off in the
    bodies (an output stops where the model stops, at most its ``max_tokens``).  ``per``: bodies a repeat (a
    replayed trace's lengths start again at each repeat).
    """
    lengths, input_len, output_len = getattr(cfg, "lengths", None), key.input_len, key.output_len
    feats = features if lengths is None or lengths.ignore_eos else dataclasses.replace(
        features, ignore_eos=False, min_tokens=False)
    if lengths is not None and lengths.prompt_file is not None:
        return _from_file(lengths, tokenizer, feats, output_len, n, seed, max_model_len)
    drawn = point_lengths(cfg, input_len, output_len, n, seed, max_model_len, per)
    if drawn is None:
        prompts, inexact = make_prompts(tokenizer, n, input_len, seed)
        return PointRequests(prompts, inexact, None, None, feats)
    prompts, inexact = make_prompts_of(tokenizer, drawn[0], seed, lengths.prefix_len if lengths else 0)
    return PointRequests(prompts, inexact, drawn[0], drawn[1], feats)


def _from_file(lengths: Any, tokenizer: Any, features: Features, output_len: int, n: int, seed: int,
               max_model_len: int | None) -> PointRequests:
    """``n`` bodies from ``lengths.prompt_file``: its prompts in a seeded order (``numpy.random.default_rng(seed)``'s
    permutation, cycled), each prompt's length its tokens, each output its reference output's tokens or stated
    ``output_len`` where the line has one, else drawn from ``lengths.output`` around ``output_len`` (clipped so that
    prompt + output fits ``max_model_len``).  ``lengths.prefix_len`` > 0: one prefix of that many drawn tokens
    (:func:`make_prompts_of`'s, from ``seed``) and a space begin every prompt (a system prompt shared by every
    request); each prompt's length is then its whole text's tokens, the prefix included."""
    entries = read_prompt_file(lengths.prompt_file)
    rng = np.random.default_rng(seed)
    chosen = [entries[int(j)] for j in np.resize(rng.permutation(len(entries)), n)]
    drawn = lengths.output.draw(rng, output_len, n)
    prefix = make_prompts_of(tokenizer, [lengths.prefix_len], seed)[0][0] + " " if lengths.prefix_len else ""
    prompts = [prefix + e.prompt for e in chosen]
    ins = np.array([len(tokenizer.encode(p, add_special_tokens=False)) for p in prompts], dtype=np.int64)
    outs = np.array([len(tokenizer.encode(e.output, add_special_tokens=False)) if e.output else e.output_len or int(d)
                     for e, d in zip(chosen, drawn)], dtype=np.int64)
    if max_model_len is not None:
        outs = np.minimum(outs, np.maximum(max_model_len - ins, 1))
    return PointRequests(prompts, 0, ins, np.maximum(outs, 1), features)
