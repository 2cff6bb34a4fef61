"""The ``openai`` engine: any OpenAI-compatible server that is already running.

SGLang, llama.cpp ``llama-server``, TGI, Ollama, ``transformers serve`` or a remote vLLM: the
engine points the shared load generator (:mod:`pipeline.loadgen.loadgen`) at
``openai.base_url`` and measures each point as ``repeats`` closed-loop repeats.  The API key is
read from the environment variable named by ``openai.api_key_env`` at start (none is sent when it is unset) and is never
written anywhere.  When the server exposes Prometheus ``/metrics`` they are scraped before
and after each repeat, and sampled about once a second during it, into ``server_metrics``.

:class:`pipeline.backends.served.ServedBackend` holds everything the served backends share.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pipeline.config.options import OpenAIOptions
from pipeline.config.sweepconfig import ModelSpec, SweepConfig
from pipeline.loadgen import client
from pipeline.backends import endpointkind
from pipeline.backends.served import (ServedBackend, card_from_config, load_tokenizer,  # noqa: F401  (importable from here)
                                     parse_prometheus, served_card)


class OpenAIBackend(ServedBackend):
    """An OpenAI-compatible endpoint that batchmark does not start."""

    name = "openai"
    opts: OpenAIOptions  # the config's ``openai:`` block (the served base holds any client's options)

    def __init__(self, cfg: SweepConfig):
        super().__init__(cfg, cfg.openai)
        self.api_key: str | None = None
        if cfg.openai.api_key_env:  # a key only if the server wants one (README); unset: no key is sent
            self.api_key = os.environ.get(cfg.openai.api_key_env) or None
        self._murl: str | None = None
        self._serving_engine: str | None = cfg.openai.engine

    @property
    def serving_engine(self) -> str:
        """What the endpoint is (``openai.engine``, else what the server says, else ``openai``): the point keys' engine,
        asked once (:func:`pipeline.backends.endpointkind.detect_engine`)."""
        if self._serving_engine is None:
            async def ask() -> str:
                async with client.make_session(1) as session:
                    return await endpointkind.detect_engine(session, self.opts.base_url)

            self._serving_engine = asyncio.run(ask())
        return self._serving_engine

    def _target(self) -> client.Target:
        assert self.spec is not None, "load() a model first"
        return client.Target(base_url=self.opts.base_url, model=self.spec.served_name, endpoint=self.opts.endpoint,
                              api_key=self.api_key, timeout_s=self.opts.timeout_s)

    def _metrics_url(self) -> str | None:
        return self._murl

    def load(self, spec: ModelSpec) -> dict[str, Any] | None:
        """Load the tokenizer, detect the server's optional fields; return the model card (:func:`served_card`).

        Raises:
            BatchmarkError: no tokenizer, or the server refuses a plain streaming request.
        """
        self._prepare(spec, "openai")
        url = self.opts.metrics_url or endpointkind.server_root(self.opts.base_url) + "/metrics"

        async def check() -> bool:
            async with client.make_session(1) as session:
                return await self._scrape(session, url) is not None

        self._murl = url if asyncio.run(check()) else None
        return served_card(spec, self.tokenizer_source, self.card_reasons, self.serving_engine, self.cfg.hardware)

    def provenance(self) -> dict[str, Any]:
        """Engine description for ``run.json`` (never the API key)."""
        return {"engine": self.serving_engine, "backend": "openai", "base_url": self.opts.base_url, "endpoint": self.opts.endpoint,
                "api_key_env": self.opts.api_key_env, "requests_per_point": self.opts.requests_per_point,
                "timeout_s": self.opts.timeout_s, "extra_body": self.opts.extra_body,
                "client": self.client_description(),
                **({"models_without_card": dict(self.card_reasons)} if self.card_reasons else {})}
