"""The site's page structure and chart fixes ("Site usability" and "A site for a lab"), as pure functions.

Run views are built by hand (``RunView``/``WorkloadView`` with the fields the pages read), so each expected value
below is worked out from the inputs in the test.
"""

from __future__ import annotations

from pipeline.pages import charts, explain, explaincharts, throughputchart
from pipeline.pages.indexviews import model_pages, run_page_path
from pipeline.pages.pointrows import point_rows
from pipeline.pages.views import RunView, WorkloadView


def _workload(model: str, inp: int = 64, engine: str = "transformers", eff: dict | None = None) -> WorkloadView:
    m = {"model": model, "engine": engine, "input_len": inp, "output_len": 32, "kind": "dense",
         "scaling_efficiency": eff or {"1": 1.0}}
    pts = [{"concurrency": 1, "output_throughput_tok_s": 10.0, "per_user_tok_s": 10.0,
            "ttft_s": {"p50": 0.0123, "p99": 0.02}, "tpot_s": {"p50": 0.1, "p99": None}}]
    aps = [{"concurrency": 1, "roofline_tok_s": 20.0, "mbu": 0.5, "mfu": 0.01, "regime": "batching",
            "server": {"kv_cache_usage_max": 0.25}}]
    return WorkloadView(model=m, points=pts, analysis_points=aps)


class _View(RunView):
    """A run view whose quality verdict is given (the real one is computed from run files)."""

    def __init__(self, run_id: str, workloads: list[WorkloadView], flagged: bool = False, hardware: str = "cpu"):
        super().__init__(run_id=run_id, meta={"source": "measured"}, analysis={"hardware": {"name": hardware}},
                         workloads=workloads)
        self._flagged = flagged

    @property
    def flagged(self) -> bool:  # noqa: D102
        return self._flagged


def test_model_pages_group_every_run_of_a_model_newest_first_with_unique_file_names():
    a, b = _View("20260101T000000Z-a", [_workload("m1"), _workload("M1")]), _View("20260102T000000Z-b", [_workload("m1")])
    pages = model_pages([a, b])
    assert [p.model for p in pages] == ["M1", "m1"]  # case-insensitive order, then as given
    m1 = pages[1]
    assert [v.run_id for v, _ in m1.entries] == ["20260102T000000Z-b", "20260101T000000Z-a"]
    # "M1" and "m1" make the same anchor: one of them gets a hash, and no two pages share a file
    assert len({p.path for p in pages}) == 2 and all(str(p.path).startswith("models/") for p in pages)
    assert run_page_path("20261129T165000Z-vm.02").startswith("runs/20261129t165000z-vm-02-")


def test_point_rows_do_the_arithmetic_the_template_did():
    (row,) = point_rows(_workload("m"))
    # TTFT p50 0.0123 s = 12.30 ms; TPOT p99 missing → "–"; KV cache 0.25 → "25.0 %"; MBU 0.5 (not above 1) as is
    assert row["ttft_p50"] == "12.30" and row["tpot_p99"] == "–" and row["tpot_p50"] == "100.00"
    assert row["regime"] == "batching (25.0 %)" and row["mbu"] == "0.50" and row["roofline"] == "20.0"


def test_efficiency_axis_holds_every_point():
    """Regression (fault kind: mark outside its frame): the axis was fixed at [0, 1.1] and a measured 1.25 was
    drawn above the frame.  The top is now 5 % above the largest value (1.25 × 1.05 = 1.3125 → 1.31), never under
    1.1."""
    assert charts.efficiency_domain([0.4, 1.25]) == [0, 1.31]
    assert charts.efficiency_domain([0.4, 0.9]) == [0, 1.1]
    spec = charts.efficiency_chart([{"model": "x", "kind": "dense", "scaling_efficiency": {"1": 1.0, "2": 1.25}}])
    assert spec["encoding"]["y"]["scale"]["domain"] == [0, 1.31]
    moe = explaincharts.moe_dense_efficiency_chart([("r", _workload("x", eff={"1": 1.0, "2": 1.25}))])
    assert moe["layer"][0]["encoding"]["y"]["scale"]["domain"] == [0, 1.31]


def test_ceilings_title_promises_diamonds_only_when_drawn():
    rows = [{"model": "m", "ceilings": {"native (bf16)": 10.0}, "measured": []}]
    assert "◆" not in charts_title(explaincharts.ceilings_chart(rows))
    rows[0]["measured"] = [{"tok_s": 8.0, "label": "run"}]
    spec = explaincharts.ceilings_chart(rows)
    assert "◆" in charts_title(spec)
    assert any(layer["mark"].get("shape") == "diamond" for layer in spec["layer"])


def charts_title(spec: dict) -> str:
    t = spec.get("title")
    return t if isinstance(t, str) else t.get("text", "")


def test_capacity_chart_names_the_models_it_cannot_draw_and_tells_overlapping_lines_apart():
    tables = [{"model": "fits", "contexts": [{"context": 8192, "max_sequences": 4, "within_max_context": True}]},
              {"model": "twin", "contexts": [{"context": 8192, "max_sequences": 4, "within_max_context": True}]},
              {"model": "too-big", "contexts": [{"context": 8192, "max_sequences": 0, "within_max_context": True}]}]
    spec = explaincharts.capacity_chart(tables)
    assert spec["title"]["subtitle"].endswith(": too-big")
    line, dots = spec["layer"]
    shapes = dots["encoding"]["shape"]["scale"]
    dashes = line["encoding"]["strokeDash"]["scale"]
    assert shapes["domain"] == ["fits", "too-big", "twin"] and len(set(map(str, shapes["range"]))) == 3
    assert len(set(map(str, dashes["range"]))) == 3  # "fits" and "twin" coincide, yet differ in dash and shape


def test_chart_shapes_built_once_carry_each_calls_own_data_and_title():
    w1, w2 = _workload("one"), _workload("two")
    w2.points[0]["output_throughput_tok_s"] = 30.0
    s1 = throughputchart.throughput_chart({"model": "one"}, w1.points, w1.analysis_points)
    s2 = throughputchart.throughput_chart({"model": "two", "ceiling_tok_s": 50.0}, w2.points, w2.analysis_points)
    assert s1["title"] == "one: output throughput vs concurrency" and s2["title"].startswith("two")
    def measured(spec: dict) -> list[float]:  # the points' data: on the layer chart (Altair hoists shared data)
        return [r["tok_s"] for r in (spec.get("data") or spec["layer"][0]["data"])["values"]
                if r["series"] == "measured (median)"]

    assert measured(s1) == [10.0] and measured(s2) == [30.0]
    assert len(s2["layer"]) == len(s1["layer"]) + 2  # the ceiling's rule and label only where there is a ceiling
    # the same as Altair builds with the data given inline (spec of the first call, made afresh)
    charts._SKELETONS.clear()
    assert throughputchart.throughput_chart({"model": "one"}, w1.points, w1.analysis_points) == s1


def test_explainers_show_each_workload_once_from_its_newest_clean_run():
    old, mid, new = (_View("20260101T000000Z-a", [_workload("m")]), _View("20260102T000000Z-b", [_workload("m")]),
                     _View("20260103T000000Z-c", [_workload("m")], flagged=True))
    other = _View("20260101T000000Z-h", [_workload("m")], hardware="h200")
    got = [v.run_id for v, _ in explain.latest_workloads([new, mid, old, other])]
    # newest clean (b) and the flagged run newer than it (c); the h200 run is another workload
    assert got == ["20260103T000000Z-c", "20260102T000000Z-b", "20260101T000000Z-h"]
    only_flagged = [_View("20260103T000000Z-c", [_workload("m")], flagged=True),
                    _View("20260102T000000Z-b", [_workload("m")], flagged=True)]
    assert [v.run_id for v, _ in explain.latest_workloads(only_flagged)] == ["20260103T000000Z-c"]


def test_point_and_stream_rows_carry_the_interval_over_repeats():
    """The point of :func:`tests.runbuilder.three_repeat_served_point` (three repeats; half-width
    t(0.975, 2) · s / √3 = 2.484138 · s with t(0.975, 2) = 4.303): output per repeat 28.571, 22.222, 18.182 tok/s
    (median 22.2, s = 5.2374 → ±13.0); TTFT 100 ms every repeat (±0.00); TPOT 4g / 3 = 13.33, 26.67, 40.00 ms
    (s = 13.333 → ±33.12); TTST 10, 20, 30 ms (p50 20.00, s = 10 → ±24.84); delivered 8, 10, 12 tok/s (±5.0); in
    flight 0.9, 1.0, 1.1 (±0.2); CPU 20, 30, 40 % (±25); one token a chunk, four chunks a request; no first byte."""
    from pipeline.metrics.summarize import summarize_point
    from pipeline.pages.pointrows import CI_NOTE, ci_note, client_cell, stream_rows
    from tests.runbuilder import three_repeat_served_point

    p = summarize_point(three_repeat_served_point()).as_dict()
    w = WorkloadView(model={"model": "m", "engine": "openai", "input_len": 4, "output_len": 4}, points=[p],
                     analysis_points=[{"concurrency": 1}])
    (row,) = point_rows(w)
    assert (row["output"], row["ttft_p50"], row["tpot_p50"]) == ("22.2 ±13.0", "100.00 ±0.00", "26.67 ±33.12")
    assert row["ttft_p99"] == "100.00" and "±" not in row["per_user"]  # no interval on a figure without one
    (stream,) = stream_rows(w)
    assert stream == {"c": "1", "first_byte_p50": "–", "ttst_p50": "20.00 ±24.84", "tokens_per_chunk": "1.00",
                      "chunks_per_request": "4.0", "delivered": "10.0 ±5.0"}
    assert client_cell(p) == "1.0 ±0.2 in flight, CPU 30 ±25 %, read wait – ms"
    assert ci_note([row], [stream]) == CI_NOTE
    # one repeat: no interval, no note; an import (no stream figure): no second table
    one = {**p, "ci95": None}
    assert point_rows(WorkloadView(model=w.model, points=[one], analysis_points=[{"concurrency": 1}]))[0]["output"] == "22.2"
    assert ci_note(point_rows(_workload("m"))) is None
    assert stream_rows(_workload("m")) == []



def test_a_client_bound_cell_is_bold_on_the_page_and_its_figures_escaped():
    """``CLIENT-BOUND`` reaches the Markdown as ``**…**`` (bold), not as escaped asterisks; the figures after it are
    still escaped text (a ``*`` in them would show as itself)."""
    from markdown import markdown

    from pipeline.pages.pointrows import client_cell
    from pipeline.pages.render import _finalize

    p = {"achieved_concurrency": 15.2, "client_cpu_share": 0.99, "client_read_wait_s": 0.012, "client_bound": True}
    cell = str(_finalize(client_cell(p)))
    assert cell == "**CLIENT-BOUND** 15.2 in flight, CPU 99 %, read wait 12.0 ms"
    assert "<strong>CLIENT-BOUND</strong>" in markdown(cell)
    assert "**" not in str(_finalize(client_cell({**p, "client_bound": False})))
