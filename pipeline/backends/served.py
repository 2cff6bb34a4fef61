"""What the served backends (``openai``, ``vllm``) share: :class:`ServedBackend`, model cards, tokenizers, ``/metrics``.

:class:`ServedBackend` implements the :class:`pipeline.backends.base.Backend` protocol's
measurement half for any OpenAI-compatible server: it loads the tokenizer, detects the
server's optional request fields, and measures each point as ``repeats`` closed-loop repeats
with the shared load generator (:mod:`pipeline.loadgen.loadgen`: client, prompts, scheduler), scraping Prometheus
``/metrics`` before and after each repeat and sampling it about once a second during it into
``server_metrics`` — the sampling in a process of its own (:class:`pipeline.backends.scrape.Sampler`),
never in the event loop that timestamps the chunks.  The ``openai`` engine points it
at a running server; the ``vllm`` engine adds the server's life cycle on top.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from pipeline.config.sweepconfig import ModelSpec, SweepConfig
from pipeline.config.options import ClientOptions
from pipeline.loadgen import client, clientprocs, eventloop, scheduler, streamrecord
from pipeline.loadgen.clientmeter import ClientMeter
from pipeline.loadgen.repeatplan import Hooks, Limits, RepeatPlan, point_load
from pipeline.loadgen.pointrequests import point_requests
from pipeline.loadgen.prompts import make_prompts
from pipeline.core import scrub
from pipeline.backends.scrape import Sampler, parse_prometheus, prometheus_samples  # noqa: F401  (re-exported)
from pipeline.core.errors import BatchmarkError
from pipeline.core.records import DEFAULT_VARIANT, PointKey, PointRecords, RepeatRecord

def served_point_seed(key: PointKey, seed: int) -> int:
    """The seed a served point draws its lengths, prompts and schedule from (the config's ``seed`` mixed with the
    point's key), which a caller that must draw alike (``vllm bench serve --seed``) reads here."""
    if key.open_loop:
        return (seed * 1_000_003 + (key.max_concurrency or 0) * 7919 + key.input_len * 31 + key.output_len
                + round(key.rate_rps * 1000) * 104_729 + (1 if key.load == "poisson" else 2))
    return seed * 1_000_003 + key.concurrency * 7919 + key.input_len * 31 + key.output_len


def chat_template_tokens(tokenizer: Any, prompt: str, prompt_len: int) -> int | None:
    """Tokens the model's chat template adds around a user prompt of ``prompt_len`` tokens; None without a template.

    The server counts the templated prompt, so the chat endpoint's served prompt is this much
    longer than the one the client built (:func:`pipeline.loadgen.tokencount.input_mismatch`).
    """
    if not getattr(tokenizer, "chat_template", None):
        return None
    try:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                            tokenize=True)
    except Exception:  # a template that needs what we do not send: unknown
        return None
    return max(len(ids) - prompt_len, 0)


def server_version(engine: dict[str, Any]) -> str | None:
    """The version the started servers reported (``run.json`` ``server.servers.<model>.server_version``; a fault
    seen in a committed run: a vLLM run's ``versions.vllm`` was null while the version was there), several joined by ", "; None without."""
    servers = engine.get("servers") if isinstance(engine.get("servers"), dict) else {}
    found = sorted({str(s["server_version"]) for s in servers.values()
                    if isinstance(s, dict) and s.get("server_version")})
    return ", ".join(found) or None


def load_tokenizer(source: str, field: str) -> Any:
    """The Hugging Face tokenizer at ``source`` (local folder, or hub id where the hub is reachable).

    Raises:
        BatchmarkError: it cannot be loaded (the message names ``field``).
    """
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source, local_files_only=Path(source).is_dir())
    except Exception as exc:  # transformers raises OSError, ValueError, HF hub errors …
        raise BatchmarkError(f"{field}: cannot load a tokenizer from {source!r} "
                             f"({str(exc).splitlines()[0][:200]})") from None


def card_from_config(source: str, name: str, reasons: dict[str, str] | None = None) -> dict[str, Any] | None:
    """A model card counted from the model's config on the meta device (no weights); None if that fails.

    Counts assume the config's dtype (bfloat16 when it names none); quantised checkpoints
    read fewer bytes than this card says, which its ``source`` states.  When it fails, why is
    put in ``reasons[name]`` (one line; the engine's provenance records it in ``run.json`` as
    ``models_without_card``, so MBU and the ceiling are missing for a stated reason).
    """
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM

        from pipeline.backends.torchcard import card_from_torch_model

        config = AutoConfig.from_pretrained(source, local_files_only=Path(source).is_dir())
        dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or torch.bfloat16
        if isinstance(dtype, str):
            dtype = getattr(torch, dtype, torch.bfloat16)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
        card = card_from_torch_model(model, name).as_dict()
        quant = getattr(config, "quantization_config", None)
        card["source"] += f"; counted on the meta device from {source}'s config" + (
            f" (quantised {quant.get('quant_method', '?') if isinstance(quant, dict) else 'weights'}: real bytes are fewer)"
            if quant else "")
        return card
    except Exception as exc:  # a card is optional for served backends; transformers raises OSError, ValueError, hub errors …
        if reasons is not None:
            first = scrub.scrub_paths(" ".join(str(exc).split())[:200])  # a stored run names no machine folder
            reasons[name] = (f"no card file, and counting one from {scrub.relative_path(str(source))}'s config failed "
                             f"({type(exc).__name__}: {first}); MBU, ceiling and roofline are null")
        return None


def served_card(spec: ModelSpec, source: str, reasons: dict[str, str] | None = None, engine: str | None = None,
                hardware: str | None = None) -> dict[str, Any] | None:
    """The model card of a served model, named ``spec.name``, as served (``spec.served``, else ``engine``'s default on
    ``hardware``: :func:`pipeline.cards.servedformat.served_card`).

    In order: the card file ``spec.card`` names in ``data/models/``; a card file whose name or
    alias matches ``spec.path`` or ``spec.served_name`` (e.g. ``openai/gpt-oss-20b``); a card
    counted from the config at ``source`` (:func:`card_from_config`); None, with why in
    ``reasons[spec.name]``.

    Raises:
        BatchmarkError: ``spec.card`` names no card file.
    """
    from pipeline.cards.registry import find_card_file, load_card
    from pipeline.cards import servedformat

    def as_served(card):
        return servedformat.served_card(card, spec.served, engine, hardware).as_dict()

    if spec.card:
        try:
            return as_served(load_card(spec.card, card_name=spec.name))
        except BatchmarkError as exc:
            raise BatchmarkError(f"models.{spec.name}.card: {exc}") from None
    for ref in (spec.path, spec.served_name):
        if ref and find_card_file(ref) is not None:
            return as_served(load_card(ref, card_name=spec.name))
    return card_from_config(source, spec.name, reasons)


class ServedBackend:
    """What the served backends share: tokenizer, prompts, features, the measured repeats.

    A subclass provides :meth:`_target` (where requests go) and ``load`` / ``provenance``; it may
    override :meth:`_metrics_url`, :meth:`_should_abort` and :meth:`_after_repeat`.
    """

    name = "served"

    def __init__(self, cfg: SweepConfig, opts: ClientOptions):
        self.cfg = cfg
        self.opts = opts
        self.run_dir: Path | None = None
        self.spec: ModelSpec | None = None
        self.tokenizer: Any = None
        self.features: streamrecord.Features | None = None
        self.tokenizer_source: str | None = None
        self.given_up: str | None = None
        self.device = "auto"  # the probe's device: a served backend cannot see the server's
        #: why a model has no card ({model: one line}), recorded in the provenance
        self.card_reasons: dict[str, str] = {}
        #: the server setting this engine runs (:class:`pipeline.config.variants.Variant`, set by the sweep; None:
        #: the config's own, ``default``)
        self.variant: Any = None

    @property
    def variant_name(self) -> str:
        """The name of the variant this engine runs (``default`` when none was set)."""
        return self.variant.name if self.variant is not None else DEFAULT_VARIANT

    # hooks of subclasses ------------------------------------------------------------------
    def attach_run(self, run_dir: Path) -> None:
        """Tell the engine which run folder it measures into (server logs go there)."""
        self.run_dir = Path(run_dir)

    def _target(self) -> client.Target:
        raise NotImplementedError

    def _metrics_url(self) -> str | None:
        return None

    def _should_abort(self) -> str | None:
        return None

    def _after_repeat(self, meta: dict[str, Any], failed: int = 0) -> bool:
        """Called after each repeat (``failed``: its requests that did not complete); False stops the
        remaining repeats of the point."""
        return True

    # Backend protocol ----------------------------------------------------------------------
    def _prepare(self, spec: ModelSpec, index_field: str) -> None:
        self.spec = spec
        source = self.opts.tokenizer or spec.path or spec.served_name
        self.tokenizer = load_tokenizer(source, f"{index_field}: tokenizer" if self.opts.tokenizer else
                                        f"models.{spec.name}: {'path' if spec.path else 'served_name'}")
        self.tokenizer_source = source
        prompts, _ = make_prompts(self.tokenizer, 1, 16, 0)

        async def probe() -> streamrecord.Features:
            async with client.make_session(1, transport=self.opts.transport) as session:
                return await client.detect_features(session, self._target(), prompts[0])

        self.features = eventloop.run(probe(), getattr(self.opts, "event_loop", "auto"))
        self.features.prompt_overhead = chat_template_tokens(self.tokenizer, prompts[0], 16) \
            if self.opts.endpoint == "chat" else 0

    def fits(self, key: PointKey) -> tuple[bool, str]:
        """Served backends cannot see the server's memory; every point is tried (the server queues or fails).

        After a point was aborted (requests failing in a row, the point deadline), the model's
        further points are not tried: the sweep moves on to the next model.
        """
        if self.given_up:
            return False, f"an earlier point was aborted: {self.given_up}"
        return True, ""

    def client_description(self) -> str:
        """How the load generator sent, for the provenance: closed loop, and the open loop where the config has one."""
        opts = getattr(self, "opts", None)
        url = getattr(opts, "base_url", "http://")  # a URL of its own, else a server batchmark starts (plain http)
        how = client.transport_for(url, getattr(opts, "transport", "auto"))
        out = f"batchmark loadgen ({'its own HTTP/1.1 reader' if how == 'raw' else 'aiohttp'}, orjson), closed loop"
        ol = getattr(self.cfg, "open_loop", None)
        if ol is not None:
            cap = "no cap" if ol.max_concurrency is None else f"at most {ol.max_concurrency} in flight"
            burst = f" of burstiness {ol.burstiness:g}" if ol.load == "gamma" else (
                f" from {scrub.relative_path(ol.trace_file)}" if ol.load == "trace" else "")
            out += f", then open loop ({ol.load} arrivals{burst}, {cap})"
        return out

    def unload(self) -> None:
        """Forget the model."""
        self.given_up = None
        self.spec = None
        self.tokenizer = None
        self.features = None

    def measure(self, key: PointKey, repeats: int, warmup: bool, seed: int) -> PointRecords:
        """Measure one point: ``repeats`` repeats of warm-up + measured requests, closed or open loop as ``key.load`` says.

        Times are seconds since the point's start; see :mod:`pipeline.loadgen.scheduler`.  An
        open-loop point sends by default ten expected E2ELs of arrivals (at least ten seconds) after one E2EL of
        warm-up arrivals (:func:`scheduler.open_loop_counts`; ``expected_e2el_s``, set by the rate walk); each
        repeat's schedule is seeded from the point's seed and the repeat.
        """
        if self.spec is None or self.features is None:
            raise RuntimeError("load() a model before measure()")
        if key.open_loop:
            n_warm, n_meas = scheduler.open_loop_counts(key.rate_rps, self.opts.min_requests,  # sized from the E2EL
                                                        getattr(self, "expected_e2el_s", None), warmup,
                                                        self.opts.requests_per_point)
        else:
            n = key.concurrency
            n_meas = self.opts.requests_per_point or scheduler.default_requests(n, self.opts.requests_per_slot, self.opts.min_requests)
            n_warm = n if warmup else 0
        point_seed = served_point_seed(key, seed)
        loop = getattr(self.opts, "event_loop", "auto")
        reqs = self.requests = point_requests(self.cfg, self.tokenizer, self.features, key,
                                              repeats * (n_warm + n_meas), point_seed, getattr(self.opts, "max_model_len", None),
                                              per=n_warm + n_meas)
        out_lens = [reqs.output_len(i, key.output_len) for i in range(len(reqs.prompts))]
        # the longest output any request asks for bounds each stream's bytes
        target = dataclasses.replace(self._target(), max_tokens=max(out_lens, default=key.output_len),
                                     body_secrets=client.body_secrets(self.opts.extra_body))
        bodies = [client.build_body(target, reqs.features, p, out_lens[i], self.opts.extra_body)
                  for i, p in enumerate(reqs.prompts)]
        meta: dict[str, Any] = {
            "seed": point_seed, "url": target.url, "endpoint": target.endpoint, "served_model": target.model,
            "requests_per_repeat": n_meas, "warmup_per_repeat": n_warm, "prompts_inexact": reqs.inexact, **reqs.meta(self.cfg, key.load),
            "tokenizer": scrub.relative_path(self.tokenizer_source or ""), "features": self.features.as_dict(),
            "token_counts": "per-chunk usage" if self.features.per_chunk_usage_seen else
            ("one per text chunk, reconciled with usage" if self.features.usage_seen else
             "tokenized chunk text; the server reports no usage"),
            "cooldown_sent": [], "aborted": None, "client": [],
            "transport": client.transport_for(target.url, self.opts.transport),
            "event_loop": eventloop.loop_name(loop),  # the processes that ran: min(client_processes, c); open loop one
            "client_processes": 1 if key.open_loop else clientprocs.processes_used(
                key.concurrency, getattr(self.opts, "client_processes", 1))}
        out: list[list[RepeatRecord]] = []

        async def main() -> None:  # the records kept aside: the runner formats its main task's result on exit since
            out.append(await self._measure_async(key, repeats, n_warm, n_meas, bodies, target, meta))  # Python 3.11

        eventloop.run(main(), loop)  # (https://github.com/python/cpython/issues/112559; 2 s of CPU for the repr of a point of 800,000 tokens)
        reps = out[0]
        return PointRecords(point=key, repeats=reps, meta=meta)

    async def _scrape(self, session: Any, url: str | None) -> dict[str, float] | None:
        if not url:
            return None
        import aiohttp

        try:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
                if resp.status != 200:
                    return None
                return parse_prometheus(await resp.text())
        except Exception:  # a scrape is best effort; the measurement never depends on it
            return None

    def _client_block(self, meter: ClientMeter, records: list[Any], cooldown: list[streamrecord.RawStream],
                      key: PointKey, start: float, end: float) -> dict[str, Any]:
        """One repeat's client figures for the point's meta (``meta["client"]``, one per repeat): the meter's CPU and
        lag (over several client processes, which of the lag samples are each one's and its wall time), the requests in flight time-weighted over the measured window, and the tokens every stream (warm-up,
        measured, cool-down) delivered inside it (:func:`scheduler.delivered_tokens`)."""
        chunks = [c for rec in records for c in rec.chunks]
        for raw in cooldown:
            counts = streamrecord.chunk_counts(raw, self.tokenizer, key.output_len)
            chunks.extend([t, k] for t, k in zip(raw.times, counts))
        res = meter.result or {}
        return {"wall_s": res.get("wall_s"), "cpu_s": res.get("cpu_s"), "cpu_share": res.get("cpu_share"),
                "lag_s": res.get("lag_s", []), "connect_s": res.get("connect_s", []),
                "first_byte_s": res.get("first_byte_s", []), "achieved_concurrency": meter.achieved_concurrency(start, end),
                **{k: res[k] for k in ("process_lag_counts", "process_wall_s") if k in res},  # several processes
                "delivered_tokens": scheduler.delivered_tokens(chunks, start, end) if end > start else None}

    async def _measure_async(self, key: PointKey, repeats: int, n_warm: int, n_meas: int, bodies: list[bytes],
                             target: client.Target, meta: dict[str, Any]) -> list[RepeatRecord]:
        per = n_warm + n_meas
        reps: list[RepeatRecord] = []
        murl = self._metrics_url()
        t0 = time.perf_counter()
        deadline = (t0 + self.opts.point_timeout_s) if self.opts.point_timeout_s else None
        metering: dict[str, ClientMeter | None] = {"now": None}  # the repeat's meter, for the HTTP phase trace
        async with client.make_session(key.concurrency or key.max_concurrency or 0, phases=lambda: metering["now"],
                                       transport=self.opts.transport) as session, Sampler(murl) as sampler:
            for r in range(repeats):
                left = None if deadline is None else max(deadline - time.perf_counter(), 0.0)
                before = await self._scrape(session, murl)
                if before is not None:
                    sampler.start()
                meter = metering["now"] = ClientMeter()
                meter.start(t0)
                procs = getattr(self.opts, "client_processes", 1)
                reason = f"point deadline of {self.opts.point_timeout_s or 0:g} s passed"
                plan = RepeatPlan(target=target, bodies=bodies[r * per:(r + 1) * per], n_warmup=n_warm, t0=t0,
                                  load=point_load(self.cfg, key, meta["seed"] + r),
                                  limits=Limits(self.opts.max_consecutive_failures, left, reason))
                try:
                    if not key.open_loop and procs > 1:  # the closed loop over several client processes
                        res, spread = await clientprocs.closed_loop(plan, procs, self.opts.transport,
                                                                    getattr(self.opts, "event_loop", "auto"),
                                                                    self._should_abort)
                    else:
                        res = await scheduler.run_repeat(session, plan, Hooks(self._should_abort, meter))
                finally:
                    during = sampler.stop()
                    await meter.stop()
                    metering["now"] = None
                if not key.open_loop and procs > 1:
                    meter = spread  # the processes' own figures, not the idle parent's
                after = await self._scrape(session, murl) if before is not None else None
                at = [r * per + s.request_id for s in res.streams]  # each stream's body (its drawn lengths)
                records = [self.requests.stamp(streamrecord.finalize(
                    s, self.requests.input_len(i, key.input_len), self.tokenizer,
                    self.requests.output_len(i, key.output_len), self.requests.features), i) for s, i in zip(res.streams, at)]
                for rec in records:
                    rec.request_id += r * per
                start, end = scheduler.measured_window(records)
                meta["client"].append(self._client_block(meter, records, res.cooldown, key, start, end))
                server_metrics = {"before": before, "after": after, "max_during": during} if before is not None else {}
                reps.append(RepeatRecord(repeat=r, batching="served", window_start_s=start, window_end_s=end,
                                         requests=records, server_metrics=server_metrics))
                meta["cooldown_sent"].append(res.cooldown_sent)
                if res.aborted:
                    meta["aborted"] = res.aborted
                    self.given_up = res.aborted
                if not self._after_repeat(meta, failed=sum(1 for rec in records if not rec.ok)) or res.aborted:
                    break
        return reps
