"""An import's credentials, redacted before its run is written: a ``vllm bench sweep serve --serve-params`` combination
that sets a server's key (``{"api_key": K}``, ``api-key=K``) writes it into every ``run=N.json``, its folder's name
and a ``--show-stdout`` log's ``Server overrides:`` line, and the importer makes the combination a variant.

The values of credential-named settings (:func:`pipeline.core.scrub.tree_secrets`: ``api_key``, ``api-key``,
``hf_token``, any ``*_key``/``*_token``/``*_secret``/``*password*``) are the import's secrets: each setting becomes
``[redacted]``, and the value is redacted in every spelling (:func:`pipeline.core.scrub.redact`) from the variant's
name (``api_key_K-max_num_seqs_2`` → ``api_key_redacted-max_num_seqs_2``: a name stays letters, digits, ``. _ -``),
the points' variant and error texts, the source file names (also as ``sanitize_filename`` writes a value in a
folder's name: ``/`` → ``_``) and the source details.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pipeline.core import scrub
from pipeline.core.credentials import REDACTED
from pipeline.importers.vllm_sweep import sanitize


def _name(name: str, secrets: tuple[str, ...], taken: set[str]) -> str:
    """``name`` with the secrets in it spelled ``redacted``, made distinct from ``taken`` (``-2``, ``-3`` …)."""
    clean = (scrub.redact(name, secrets) or name).replace(REDACTED, "redacted")
    out, n = clean, 1
    while out in taken:
        n += 1
        out = f"{clean}-{n}"
    taken.add(out)
    return out


def redact_import(result: Any) -> Any:
    """``result`` (an :class:`pipeline.importers.base.ImportResult`) with its variants' credentials redacted (module
    docstring); the same object when no variant sets one."""
    named = scrub.tree_secrets(result.variants)
    # and as vLLM's sweep writes a value into its folders' names (sanitize_filename: / → _)
    secrets = tuple(dict.fromkeys([*named, *(sanitize(s) for s in named)]))
    if not secrets:
        return result
    taken: set[str] = set()
    names = {v["name"]: _name(v["name"], secrets, taken) for v in result.variants}
    variants = [{**v, "name": names[v["name"]], "settings": scrub.scrub_tree(v.get("settings"), secrets)}
                for v in result.variants]
    summaries = [dataclasses.replace(s, variant=names.get(s.variant, s.variant),
                                     errors=[scrub.redact(e, secrets) or e for e in s.errors])
                 for s in result.summaries]
    return dataclasses.replace(result, variants=variants, summaries=summaries,
                               files=[scrub.redact(f, secrets) or f for f in result.files],
                               details=scrub.scrub_tree(result.details, secrets))
