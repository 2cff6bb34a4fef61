"""``batchmark capacity``'s work: the concurrent sequences of a model that fit beside its weights on a hardware
profile, per context length (:mod:`pipeline.analysis.capacity`)."""

from __future__ import annotations

import json

from pipeline.commands import print  # noqa: A004 (escapes control characters; see pipeline.commands.print)
from pipeline.core.errors import BatchmarkError


def capacity(hardware: str, model: str, *, contexts: list[int] | None = None, quant: str | None = None,
             served: str | None = None, as_json: bool = False) -> int:
    """``batchmark capacity``: print the KV capacity table of ``model`` (a card name, alias, config.json path or
    cached repo id) on the profile ``hardware`` at each context length in tokens (default
    :data:`pipeline.analysis.capacity.DEFAULT_CONTEXTS`), in the weight format ``quant`` (default the card's), or as
    the engine ``served`` loads it on that hardware by default (:func:`pipeline.cards.servedformat.served_card`: the
    format of each tensor group and of the KV cache, with its source; the checkpoint's format where no default is
    known, and the table says so).

    Returns:
        0.

    Raises:
        BatchmarkError: an unknown profile or model, a context outside 1 to ``CONTEXT_MAX`` tokens, or both
            ``quant`` and ``served`` (one line).
    """
    if quant and served:
        raise BatchmarkError("--quant and --served: give one (a format of every matrix, or an engine's own loading)")
    from pipeline.analysis.capacity import DEFAULT_CONTEXTS, capacity_table, format_capacity
    from pipeline.machine.hardware import load_profile

    hw = load_profile(hardware, field="--hardware").model_dump(mode="json")
    if not hw.get("memory_gb"):  # the generic cpu profile: size it by this machine, and say so
        from pipeline.analysis.capacity import machine_memory

        hw.update(machine_memory())
    from pipeline.cards.modelarch import CONTEXT_MAX

    for ctx in contexts or []:  # a 400-digit context ended in OverflowError
        if not 1 <= ctx <= CONTEXT_MAX:
            raise BatchmarkError(f"--context: {ctx if abs(ctx) < 10**20 else 'a number of ' + str(len(str(ctx))) + ' digits'}"
                                 f" is not a context length (1 to {CONTEXT_MAX:,} tokens)")
    from pipeline.analysis.capacity import capacity_card

    card = capacity_card(model, quant)
    if served:
        from pipeline.cards.servedformat import served_card

        as_served = served_card(card, engine=served, hardware=hw.get("name"))
        fmt = (as_served.extra or {}).get("served_format") if as_served is not card else None
        card = as_served
    table = capacity_table(card, hw, contexts or DEFAULT_CONTEXTS)
    if served:
        table["format_source"] = (f"as {served} serves it on {hw.get('name')}: {fmt['source']}" if fmt else
                                  f"no default format is known for {served} on {hw.get('name')}: the checkpoint's")
    print(json.dumps(table, indent=1) if as_json else format_capacity(table))
    return 0
