"""The metric registry (pipeline/metrics/registry.py) against the code it describes: every function it names exists,
every summary metric is a stored field, units agree with names, the needs are ordered, and the lists made from it
(the diff's metrics, ``show --json``'s point fields) are exactly the ones the contract fixed before the registry.

The fault kind these pin: a metric described in one place and computed or listed differently in another (a diff
metric whose unit or direction disagrees with the summary's, a show field that vanished from the contract).
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import fields

import pytest

from pipeline.core.pointsummary import PointSummary
from pipeline.metrics import registry
from pipeline.metrics.registry import PEERS, Display, Metric, dependency_order
from pipeline.store.schema_analysis import AnalysisPoint


def _resolve(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("m", registry.METRICS, ids=lambda m: m.name)
def test_every_metric_names_functions_that_exist_and_a_stored_field(m):
    assert callable(_resolve(m.computed_by)), m.computed_by
    if m.reference:
        assert _resolve(m.reference).__module__ == "pipeline.metrics.definitions", m.reference
    stored = {f.name for f in fields(PointSummary)} if m.source == "summary" else set(AnalysisPoint.model_fields)
    assert m.name in stored, m.name
    assert set(m.peers) <= set(PEERS), m.peers
    assert m.formula and m.label


@pytest.mark.parametrize("m", registry.METRICS, ids=lambda m: m.name)
def test_units_are_in_the_names(m):
    """STYLE.md: units in names. ``_tok_s`` is tok/s, ``_rps`` req/s, any other ``_s`` seconds; a distribution is
    of seconds."""
    if m.name.endswith("_tok_s"):
        assert m.unit == "tok/s"
    elif m.name.endswith("_rps"):
        assert m.unit == "req/s"
    elif m.name.endswith("_s"):
        assert m.unit == "s"
    if m.kind == "distribution":
        assert m.unit == "s" and m.display.unit == "ms" and m.display.scale == 1e3


def test_the_names_are_unique_and_the_registry_is_ordered_by_need():
    assert len(registry.BY_NAME) == len(registry.METRICS)
    order = dependency_order()
    assert order.index("tpot_streamed_s") < order.index("per_user_tok_s")  # 1 / its median
    assert order.index("duration_s") < order.index("output_throughput_tok_s")  # its window
    assert order.index("step_time_s") < order.index("mbu") and order.index("step_time_s") < order.index("mfu")
    assert sorted(order) == sorted(registry.BY_NAME)


def test_dependency_order_sorts_and_refuses_a_loop_or_an_unknown_need():
    """A hand-built registry: c needs b needs a, listed c, b, a, sorts a, b, c (AIPerf's registry does the same)."""
    def m(name, *needs):
        return Metric(name, name, "s", False, "scalar", "f", "x.y", Display(name), needs=needs)

    assert dependency_order((m("c_s", "b_s"), m("b_s", "a_s"), m("a_s"))) == ["a_s", "b_s", "c_s"]
    with pytest.raises(ValueError, match="b_s: its needs form a loop"):
        dependency_order((m("b_s", "a_s"), m("a_s", "b_s")))
    with pytest.raises(ValueError, match=r"a_s: needs \['z_s'\]"):
        dependency_order((m("a_s", "z_s"),))


def test_display_headers_and_per_repeat_keys_by_hand():
    ttft = registry.metric("ttft_s")
    assert ttft.display.header("p50") == "TTFT p50 ms"
    assert registry.metric("output_throughput_tok_s").display.header() == "out tok/s"
    assert registry.metric("tokens_per_chunk").display.header() == "tok/chunk"
    assert ttft.repeat_sample_of("p99") == "ttft_p99_s_per_repeat" and ttft.repeat_sample_of("p50") == "ttft_s_per_repeat"
    assert registry.metric("per_user_tok_s").repeat_sample_of("value") == "per_user_tok_s"


def test_peer_names_by_the_peers_own_definitions():
    """vLLM's TPOT is (E2EL − TTFT) / (n − 1) (``vllm/benchmarks/serve.py``), which GuideLLM calls
    ``inter_token_latency_ms`` (``guidellm/schemas/request_stats.py``) and AIPerf ``inter_token_latency``
    (docs/metrics_reference.md of ai-dynamo/aiperf); vLLM's per-chunk ``itl`` is AIPerf's ``inter_chunk_latency``."""
    assert registry.metric("tpot_s").peers == {"vllm": "tpot", "guidellm": "inter_token_latency_ms",
                                               "aiperf": "inter_token_latency"}
    assert registry.metric("itl_chunk_s").peers == {"vllm": "itl", "aiperf": "inter_chunk_latency"}
    assert "vllm" not in registry.metric("itl_s").peers  # batchmark's per-token ITL is nobody's
    assert registry.metric("output_throughput_tok_s").peers["llama.cpp"] == "S_TG"


#: The diff's metrics as ``pipeline/diff/metrics.py`` listed them by hand before the registry (key, label, unit,
#: higher is better, source, distribution, percentile, gated).
DIFF_BEFORE = (
    ("output_throughput_tok_s", "output throughput", "tok/s", True, "summary", None, None, True),
    ("per_user_tok_s", "per-user throughput", "tok/s", True, "summary", None, None, True),
    ("ttft_p50_s", "TTFT p50", "s", False, "latency", "ttft", "p50", False),
    ("ttft_p99_s", "TTFT p99", "s", False, "latency", "ttft", "p99", False),
    ("tpot_p50_s", "TPOT p50", "s", False, "latency", "tpot", "p50", False),
    ("tpot_p99_s", "TPOT p99", "s", False, "latency", "tpot", "p99", False),
    ("mbu", "MBU", "fraction", True, "analysis", None, None, False),
    ("mfu", "MFU", "fraction", True, "analysis", None, None, False),
)


def test_the_diffs_metrics_come_from_the_registry_unchanged():
    from pipeline.diff.metrics import METRICS, registry_specs

    assert METRICS == registry_specs()
    assert tuple((m.key, m.label, m.unit, m.higher_is_better, m.source, m.distribution, m.percentile, m.throughput)
                 for m in METRICS) == DIFF_BEFORE


#: ``show --json``'s point fields as ``pipeline/views/show.py`` listed them by hand before the registry: the contract
#: of docs/definitions.md and its order (the JSON's key order).
POINT_FIELDS_BEFORE = (
    "model", "engine", "variant", "concurrency", "input_len", "output_len", "repeats", "completed", "failed",
    "output_throughput_tok_s", "per_user_tok_s", "ttft_s", "tpot_s", "itl_s", "e2el_s", "prefill_throughput_tok_s",
    "output_throughput_window", "itl_chunk_s", "tpot_streamed_s", "steady_output_throughput_tok_s", "duration_s",
    "input_tokens_served", "output_tokens_served", "achieved_concurrency", "client_lag_s", "client_read_wait_s",
    "client_cpu_share", "connect_s", "first_byte_s", "client_bound", "client_bound_reason",
    "delivered_output_throughput_tok_s", "itl_unresolved_share", "ttst_s", "tokens_per_chunk", "chunks_per_request",
    "ci95", "lengths")


def test_shows_point_fields_come_from_the_registry_unchanged():
    from pipeline.views.show import OPEN_LOOP_FIELDS, POINT_FIELDS

    assert POINT_FIELDS == POINT_FIELDS_BEFORE
    assert OPEN_LOOP_FIELDS == ("load", "rate_rps", "send_rate_rps", "schedule_rate_rps", "achieved_rate_rps",
                                "schedule_lag_s", "schedule_kept", "burstiness", "slo", "max_concurrency")
    shown = set(POINT_FIELDS) | set(OPEN_LOOP_FIELDS)
    for m in registry.METRICS:  # a metric the registry shows is shown; one it does not, is not (in the points)
        assert (m.name in shown) == (m.show is not None), m.name


def test_shows_tables_take_their_columns_and_formats_from_the_registry():
    """The headers ``show`` printed before the registry, and one point's cells worked by hand: TTFT p50 0.0123 s
    with a per-repeat interval [0.0118, 0.0130] reads ``12.3 ±0.6`` (ms, one decimal: half of 1.2 ms), its p99.9
    from ``tails_s`` 0.02 s reads ``20.0``, a CPU share 0.456 reads ``46`` (%), MBU 0.5 reads ``0.50``."""
    from pipeline.views.showtable import CLIENT_HEADER, metric_cell, point_header

    head, _ = point_header(False, False)
    assert head == ["model", "c", "out tok/s", "user tok/s", "req/s", "total tok/s", "repeats max/min", "TTFT p50 ms",
                    "TTFT p99 ms", "TPOT p50 ms", "TPOT p95 ms", "TPOT p99.9 ms", "ITL p50 ms", "ITL p95 ms",
                    "ITL p99.9 ms", "E2EL p50 ms", "E2EL p95 ms", "E2EL p99.9 ms", "MBU", "MFU", "KV %", "regime; notes"]
    assert CLIENT_HEADER == ["in flight", "client CPU %", "read wait ms", "delivered tok/s", "connect p50 ms",
                             "first byte p50 ms", "TTST p50 ms", "tok/chunk", "chunks/req"]
    p = {"ttft_s": {"p50": 0.0123, "p99": None}, "ci95": {"ttft_s_per_repeat": [0.0118, 0.0130]},
         "tails_s": {"ttft": {"p95": None, "p99_9": 0.02}}, "client_cpu_share": 0.456, "mbu": 0.5}
    assert metric_cell(p, "ttft_s", "p50", ci=True) == "12.3 ±0.6"
    assert metric_cell(p, "ttft_s", "p99") == "-" and metric_cell(p, "ttft_s", "p99.9") == "20.0"
    assert metric_cell(p, "client_cpu_share") == "46" and metric_cell(p, "mbu") == "0.50"


#: The fields of a point summary that are no metric: its key, what its figures are over or how they were measured,
#: the per-repeat and per-request values behind them, and the server's and the machine's own state.
NOT_METRICS = frozenset({
    "model", "engine", "variant", "input_len", "output_len", "concurrency", "max_concurrency", "load", "rate_rps",
    "burstiness", "errors", "samples", "caveats", "token_count_sources", "output_throughput_window", "server",
    "interference", "schedule_kept", "slo", "tails_s", "client_bound", "client_bound_reason", "ci95", "length_hist",
    "lengths"})


def test_every_figure_of_a_point_summary_has_its_registry_entry():
    """A figure added to PointSummary without a registry entry (its unit, formula, computing function, peers) fails
    here: every field is a summary metric of the registry or one of :data:`NOT_METRICS`, never both."""
    summary_fields = {f.name for f in fields(PointSummary)}
    metrics = {m.name for m in registry.METRICS if m.source == "summary"}
    assert not metrics & NOT_METRICS
    assert summary_fields - NOT_METRICS == metrics, (summary_fields - NOT_METRICS) ^ metrics


# -- no metric's formula outside the modules the registry names ------------------------------------------------------

def formulas_outside(source: str, names: set[str]) -> list[tuple[str, int]]:
    """(metric name, line) of each place in ``source`` that gives a metric of ``names`` a value computed there: a
    keyword argument, a dict entry or an assignment (to a name, an attribute or a string subscript) named after the
    metric whose value holds a subtraction or a division (a formula's arithmetic; a value read, copied or scaled by a
    product is not one), in line order.  A heuristic: a formula computed into a variable of another name and passed
    on is not seen, which :func:`test_every_figure_of_a_point_summary_has_its_registry_entry` and the reference
    forms' tests cover for the summary."""
    tree = ast.parse(source)

    def arithmetic(node: ast.AST) -> bool:
        return any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Sub, ast.Div)) for n in ast.walk(node))

    def target_name(t: ast.AST) -> str | None:
        if isinstance(t, ast.Name):
            return t.id
        if isinstance(t, ast.Attribute):
            return t.attr
        if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
            return t.slice.value
        return None

    found = []
    for node in ast.walk(tree):
        pairs: list[tuple[str | None, ast.AST | None]] = []
        if isinstance(node, ast.keyword):
            pairs.append((node.arg, node.value))
        elif isinstance(node, ast.Dict):
            pairs += [(k.value if isinstance(k, ast.Constant) else None, v) for k, v in zip(node.keys, node.values)]
        elif isinstance(node, ast.Assign):
            pairs += [(target_name(t), node.value) for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            pairs.append((target_name(node.target), node.value))
        found += [(n, v.lineno) for n, v in pairs if n in names and v is not None and arithmetic(v)]
    return sorted(found, key=lambda hit: hit[1])


def test_the_formula_scan_sees_a_formula_and_not_a_read():
    """Hand-made sources: a TTFT computed in a dict, a TPOT in a keyword and an attribute; reads and unit scales are
    no formula."""
    names = {"ttft_s", "tpot_s", "mbu"}
    src = ("row = {'ttft_s': r.first - r.sent}\nf(tpot_s=(e - t) / (n - 1))\nx.mbu = b / s / bw\n"
           "g(ttft_s=p['ttft_s'], tpot_s=v * 1e-3)\nrow['mbu'] = a.get('mbu')\n")
    assert formulas_outside(src, names) == [("ttft_s", 1), ("tpot_s", 2), ("mbu", 3)]


#: Modules that compute a registry metric besides the ones the registry names, and why each may.
FORMULAS_ALLOWED = {
    "pipeline/importers/": "an importer states a peer's figure in batchmark's terms by the peer's definition "
                           "(its unit, its per-user throughput = 1 / its median TPOT): docs/definitions.md",
    "pipeline/predict/": "a prediction of a metric from the calibrated step model, not the measured formula",
    "pipeline/simulation/": "the simulation model's harness figures, predicted in virtual time",
    "pipeline/sweep/frontierwalk.py": "a predicted curve's per-user throughput (1 / predicted TPOT) beside the "
                                      "measured points'",
}


def test_no_module_but_the_registrys_computes_a_metric():
    """Outside the modules the registry names (each metric's ``computed_by`` and ``reference``) and
    :data:`FORMULAS_ALLOWED`, no module of the package gives a registry metric a value it computed: the diff, show,
    the pages and the analysis read each figure from the summary or the analysis, never derive it again."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    homes = {p.rpartition(".")[0].replace(".", "/") + ".py" for m in registry.METRICS
             for p in (m.computed_by, m.reference) if p}
    names = set(registry.BY_NAME)
    found, allowed_used = {}, set()
    for path in sorted((root / "pipeline").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        hits = formulas_outside(path.read_text(encoding="utf-8"), names)
        allowed = next((a for a in FORMULAS_ALLOWED if rel.startswith(a)), None)
        if hits and allowed:
            allowed_used.add(allowed)
        elif hits and rel not in homes:
            found[rel] = hits
    assert not found, f"a metric's formula outside the registry's modules (pipeline/metrics/registry.py): {found}"
    assert allowed_used == set(FORMULAS_ALLOWED), f"stale allowances: {set(FORMULAS_ALLOWED) - allowed_used}"
