"""KV capacity: how many sequences fit beside the weights, and which models fit a machine (pure).

Definition (docs/definitions.md, "KV capacity"): max concurrent sequences at a context length =
(usable memory − weights − runtime reserve) / KV bytes of one sequence at that context.
Usable memory is the smaller of the hardware profile's ``memory_gb`` × ``gpu_memory_utilization``
(vLLM's ``--gpu-memory-utilization``: the share of the device's memory its engine takes for weights,
activations and KV cache; 0.85 on the DGX Spark, whose unified memory the OS shares; the pages
sized 96 sequences of Llama-3.1-8B at 8k where vLLM gets about 86) and ``memory_gb`` − ``runtime_reserve_gb``
(activations, CUDA graphs, the OS on a unified-memory machine) (:func:`usable_memory_gb`; GB = 1e9 bytes).
A profile without ``memory_gb`` sized with this machine's memory is a CPU's: no utilisation applies there.  KV bytes of one sequence count sliding-window
layers by their window (:func:`pipeline.cards.stepcost.kv_bytes_per_sequence`).

Units: one system everywhere, decimal: GB = 10⁹ bytes (as memory and bandwidth spec sheets
state them), kB = 10³ bytes; the JSON gives sizes in bytes and says so in ``units``.  A profile
without ``memory_gb`` (the generic ``cpu`` one) is sized by the caller with this machine's memory
(:func:`machine_memory`), and ``hardware.memory_source`` says so.
"""

from __future__ import annotations

import math
from typing import Any

from pipeline.core.errors import BatchmarkError
from pipeline.cards.registry import list_card_files, load_card
from pipeline.cards.modelcards import ModelCard
from pipeline.cards.stepcost import kv_bytes_per_sequence
from pipeline.core.texttable import text_table

#: Context lengths of the capacity table (tokens): 4k, 8k, 32k, 128k.
DEFAULT_CONTEXTS = (4096, 8192, 32768, 131072)

#: The unit statement of every capacity output (CLI, JSON, pages).
UNITS = "GB = 10^9 bytes, kB = 10^3 bytes; *_bytes fields in bytes"


def machine_memory() -> dict[str, Any]:
    """This machine's total memory (psutil) as a profile's ``memory_gb``, with where it came from."""
    import psutil

    total = psutil.virtual_memory().total
    return {"memory_gb": total / 1e9,
            "memory_source": f"this machine's total memory ({total / 1e9:.1f} GB, psutil); the profile states none"}


#: Formats of the "which models fit" table besides each model's native one.
FIT_QUANTS = ("fp8", "nvfp4")


def kv_capacity(card: ModelCard, memory_gb: float, reserve_gb: float, context: int) -> dict[str, Any]:
    """Concurrent sequences of ``context`` tokens that fit beside the weights.

    Args:
        card: the model (its ``weight_bytes`` and KV layout).
        memory_gb: memory usable for weights and KV cache (GB, 1e9 bytes).
        reserve_gb: runtime reserve kept free (GB).
        context: tokens per sequence (prompt + generated).

    Returns:
        ``{"context", "kv_bytes_per_sequence", "free_bytes" (after weights and reserve;
        negative when the weights do not fit), "weights_fit" (free > 0), "max_sequences"
        (floor of free / per-sequence; 0 when the weights do not fit), "memory_left_bytes"
        (free − sequences × per-sequence; None when the weights do not fit: nothing is left),
        "fits" (weights + reserve fit and at least one sequence), "within_max_context" (None
        when the card has no max)}``.

    Raises:
        BatchmarkError: a context below 1.
    """
    if context < 1:
        raise BatchmarkError(f"context: must be >= 1 token, got {context}")
    per_seq = kv_bytes_per_sequence(card, context)
    free = memory_gb * 1e9 - reserve_gb * 1e9 - card.weight_bytes
    seqs = max(0, math.floor(free / per_seq)) if per_seq > 0 and free > 0 else 0
    return {
        "context": context,
        "kv_bytes_per_sequence": per_seq,
        "free_bytes": free,
        "weights_fit": free > 0,
        "max_sequences": seqs,
        "memory_left_bytes": free - seqs * per_seq if free > 0 else None,
        "fits": free > 0 and seqs >= 1,
        "within_max_context": (context <= card.max_context) if card.max_context else None,
    }


def usable_memory_gb(hardware: dict[str, Any]) -> dict[str, Any]:
    """Memory usable for weights and KV cache on a profile (GB): ``{"usable_gb", "by_utilization_gb",
    "after_reserve_gb", "rule"}``, the smaller of memory × ``gpu_memory_utilization`` and memory − reserve.

    Derived: vLLM allocates ``gpu_memory_utilization`` × the device memory to its engine (vLLM engine arguments,
    ``--gpu-memory-utilization``), and the runtime reserve must stay free besides, so the tighter of the two
    bounds the KV cache.  Without a profile ``memory_gb`` (``memory_source`` set: this machine's memory, a CPU)
    only the reserve applies.  Dgx-spark: min(128 × 0.85, 128 − 8) = min(108.8, 120) = 108.8 GB.
    """
    memory = float(hardware["memory_gb"])
    reserve = float(hardware.get("runtime_reserve_gb") or 0.0)
    util = hardware.get("gpu_memory_utilization") if not hardware.get("memory_source") else None
    after = memory - reserve
    by_util = memory * float(util) if util else None
    if by_util is not None and by_util < after:
        rule = (f"memory {memory:.1f} GB × gpu_memory_utilization {float(util):g} = {by_util:.1f} GB usable "
                f"(below memory − reserve {reserve:.1f} GB = {after:.1f} GB)")
        return {"usable_gb": by_util, "by_utilization_gb": by_util, "after_reserve_gb": after, "rule": rule}
    rule = f"memory {memory:.1f} GB − reserve {reserve:.1f} GB = {after:.1f} GB usable"
    if by_util is not None:
        rule += f" (below memory × gpu_memory_utilization {float(util):g} = {by_util:.1f} GB)"
    return {"usable_gb": after, "by_utilization_gb": by_util, "after_reserve_gb": after, "rule": rule}


def capacity_table(card: ModelCard, hardware: dict[str, Any], contexts: tuple[int, ...] | list[int] = DEFAULT_CONTEXTS
                   ) -> dict[str, Any]:
    """The capacity of one model on one hardware profile at each context (see :func:`kv_capacity`).

    ``hardware`` is a profile as a dict (``HardwareProfile.model_dump()``).

    Raises:
        BatchmarkError: the profile states no ``memory_gb``.
    """
    memory_gb = hardware.get("memory_gb")
    if not memory_gb:
        raise BatchmarkError(f"hardware {hardware.get('name')!r}: profile has no memory_gb; capacity needs it")
    reserve = float(hardware.get("runtime_reserve_gb") or 0.0)
    usable = usable_memory_gb(hardware)
    return {
        "units": UNITS,
        "hardware": {"name": hardware.get("name"), "memory_gb": memory_gb, "runtime_reserve_gb": reserve,
                     "gpu_memory_utilization": hardware.get("gpu_memory_utilization"),
                     "usable_gb": usable["usable_gb"], "usable_rule": usable["rule"],
                     "memory_source": hardware.get("memory_source") or "profile memory_gb"},
        "usable_bytes": usable["usable_gb"] * 1e9,
        "weights_fit": card.weight_bytes < usable["usable_gb"] * 1e9,
        "model": card.name, "kind": card.kind, "quantization": card.quantization,
        "total_params": card.total_params, "active_params": card.active_params,
        "weight_bytes": card.weight_bytes, "kv_bytes_per_token": card.kv_bytes_per_token,
        "sliding_window": card.sliding_window, "sliding_layers": card.sliding_layers,
        "max_context": card.max_context,
        "contexts": [kv_capacity(card, usable["usable_gb"], 0.0, int(c)) for c in contexts],
    }


def fit_table(hardware: dict[str, Any], contexts: tuple[int, ...] | list[int] = (8192, 32768),
              quants: tuple[str, ...] = FIT_QUANTS, folder: Any = None, engine: str | None = None) -> list[dict[str, Any]]:
    """"Which models fit": every card of ``data/models/`` in its native format, as ``engine`` serves it on the
    profile's hardware where that differs (:func:`pipeline.cards.servedformat.served_card`: gpt-oss on a DGX Spark
    under vLLM is MXFP4 throughout with an fp8 KV cache), and in each of ``quants`` (KV cache bf16).

    Returns one row per (model, format): ``{"model", "kind", "quantization", "basis" ("checkpoint", "served" or
    "quantised"), "source" (where the format comes from), "kv_cache" (dtype), "weight_bytes", "kv_bytes_per_token",
    "fits" (weights within usable memory), "max_sequences": {context: n}}``, sorted by model name then weight bytes
    (largest first).
    """
    from pipeline.cards.servedformat import served_card

    rows = []
    for name in sorted(list_card_files(folder), key=str.lower):
        native = load_card(name, folder=folder)
        cards = [(native, "checkpoint", "the card file (its checkpoint's format)")]
        served = served_card(native, engine=engine, hardware=hardware.get("name")) if engine else native
        if served is not native:
            cards.append((served, "served", served.extra["served_format"]["source"]))
        for q in quants:
            c = load_card(name, quant=q, folder=folder)
            if c.weight_bytes < native.weight_bytes and c.weight_bytes != served.weight_bytes:
                cards.append((c, "quantised", f"every matrix in {q}, embedding and head in bf16, KV cache bf16"))
        for card, basis, source in sorted(cards, key=lambda t: -t[0].weight_bytes):
            table = capacity_table(card, hardware, contexts)
            rows.append({
                "model": card.name, "kind": card.kind, "quantization": card.quantization, "basis": basis,
                "source": source, "kv_cache": ((card.extra or {}).get("served_format") or {}).get("kv_cache", "bf16"),
                "total_params": card.total_params, "active_params": card.active_params,
                "weight_bytes": card.weight_bytes, "kv_bytes_per_token": card.kv_bytes_per_token,
                "fits": table["contexts"][0]["free_bytes"] > 0,
                "max_sequences": {str(r["context"]): (r["max_sequences"] if r["within_max_context"] is not False else None)
                                  for r in table["contexts"]},
            })
    return rows


def does_not_fit(table: dict[str, Any]) -> str | None:
    """Why the weights of :func:`capacity_table`'s model do not fit, or None when they do.

    E.g. ``"does not fit: weights 141.1 GB > 108.8 GB usable"`` (usable: :func:`usable_memory_gb`, whose rule the
    table's first line states).
    """
    if table["weights_fit"]:
        return None
    return (f"does not fit: weights {table['weight_bytes'] / 1e9:.1f} GB > "
            f"{table['usable_bytes'] / 1e9:.1f} GB usable")


def format_capacity(table: dict[str, Any]) -> str:
    """Plain-text form of :func:`capacity_table` for the CLI.

    A model whose weights do not fit gets a :func:`does_not_fit` line, 0 sequences and no
    memory-left figure; a context beyond the model's maximum gets neither sequences nor memory left.
    """
    hw = table["hardware"]
    lines = [f"{table['model']} ({table['kind']}, {table['quantization']}) on {hw['name']}: "
             f"{hw['usable_rule']}, "
             f"weights {table['weight_bytes'] / 1e9:.2f} GB, KV {table['kv_bytes_per_token'] / 1e3:.1f} kB/token"
             + (f" ({table['sliding_layers']} layers slide over {table['sliding_window']} tokens)" if table["sliding_window"] else "")]
    if hw.get("memory_source") and hw["memory_source"] != "profile memory_gb":
        lines.append(f"memory: {hw['memory_source']}")
    if table.get("format_source"):
        lines.append(f"format: {table['format_source']}")
    lines.append("units: GB = 10^9 bytes, kB = 10^3 bytes")
    if does_not_fit(table):
        lines.append(does_not_fit(table))
    rows = []
    for r in table["contexts"]:
        beyond = r["within_max_context"] is False
        note = f"(beyond the model's max context {table['max_context']})" if beyond else ""
        seqs = "–" if beyond else str(r["max_sequences"])
        left = "–" if beyond or r["memory_left_bytes"] is None else f"{r['memory_left_bytes'] / 1e9:.2f}"
        rows.append([str(r["context"]), f"{r['kv_bytes_per_sequence'] / 1e9:.2f}", seqs, left, note])
    lines += text_table(["context", "KV/seq GB", "sequences", "left GB", ""], rows, align="rrrrl", rule=False)
    return "\n".join(lines)


def capacity_card(model: str, quant: str | None) -> Any:  # a ModelCard
    """The card ``capacity --model`` sizes: a card file or local config (:func:`pipeline.cards.registry.resolve_card`),
    else a model of the default config (``config/vllm-cpu.yaml``, given by architecture) counted in its served dtype."""
    from pipeline.cards.registry import resolve_card

    try:
        return resolve_card(model, quant=quant)
    except BatchmarkError as exc:
        from pipeline.cards.modelarch import card_from_config
        from pipeline.config.sweepconfig import load_config
        from pipeline.core import paths

        default = paths.root() / "config" / "vllm-cpu.yaml"
        spec = next((m for m in load_config(default).models if m.name == model and m.architecture), None) \
            if default.is_file() else None
        if spec is None:
            raise exc from None
        from pipeline.machine.cpuisa import served_dtype

        dcfg = load_config(default)
        dtype = quant or served_dtype(dcfg.vllm.dtype, hardware=dcfg.hardware)[0]
        return card_from_config(spec.name, dict(spec.architecture), quant=dtype)
