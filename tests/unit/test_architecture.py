"""The package map of ``docs/architecture.md``, checked: no module imports a later stage, no import cycles.

Every module of ``pipeline/`` has a layer (its stage); a module may import modules of its own
layer or earlier ones.  Imports are read with :mod:`ast` from the source (top-level, inside
functions and under ``TYPE_CHECKING`` alike: a lazy import is still a dependency).  The few
imports that would break the order are listed in ``ALLOWED`` with the reason each stays (none today).
Sizes too: no module over 400 lines, no function over 80, with no exceptions.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pipeline"

# Folder order, earliest first (the same order as ``docs/architecture.md``).  A module's layer is its folder's
# (``pipeline.backends.vllm`` → ``pipeline.backends``); ``pipeline`` itself (the version) is the foundation's.
FOLDERS: list[str] = [
    "pipeline.core", "pipeline.machine", "pipeline.cards", "pipeline.config", "pipeline.simulation", "pipeline.loadgen",
    "pipeline.backends", "pipeline.store",
    "pipeline.metrics", "pipeline.analysis", "pipeline.predict", "pipeline.diff", "pipeline.sweep", "pipeline.plan",
    "pipeline.importers", "pipeline.views", "pipeline.pages", "pipeline.commands", "pipeline.api", "pipeline.cli",
]
LAYERS: list[tuple[str, ...]] = [("pipeline", *FOLDERS[:1])] + [(f,) for f in FOLDERS[1:-1]] + [
    ("pipeline.cli", "pipeline.__main__")]

# (importer, imported) pairs that break the order, each with why it stays.  None today: the config
# validates its hardware profile name, so the inputs (hardware profiles, model cards) come before it;
# the sweep summarizes each point as it is measured (progress bar, stop after the knee), so the pure
# metrics and analysis come before it (docs/architecture.md says why).
ALLOWED: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The ``pipeline`` modules that ``name`` imports (a ``from pkg import sub`` of a submodule counts as ``pkg.sub``)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            found.update(subs if subs else [base])
    return {m for m in found if m in known and m != name}


def import_graph() -> dict[str, set[str]]:
    """Each ``pipeline`` module → the ``pipeline`` modules it imports (a fresh copy of :func:`_import_graph`)."""
    return {name: set(deps) for name, deps in _import_graph().items()}


@functools.lru_cache(maxsize=1)
def _import_graph() -> dict[str, frozenset[str]]:
    """The import graph, parsed once per session: the tests of this file read it a dozen times (the unit loop)."""
    mods = all_modules()
    known = set(mods)
    return {name: frozenset(imports_of(name, path, known)) for name, path in mods.items()}


def layer_of(name: str) -> int:
    probe = name
    while probe:
        for i, members in enumerate(LAYERS):
            if probe in members:
                return i
        probe = probe.rpartition(".")[0]
    raise AssertionError(f"{name} has no layer: add it to LAYERS and to docs/architecture.md")


def later_stage_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(a, b) for a, deps in graph.items() for b in deps if layer_of(b) > layer_of(a)}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_every_module_has_a_layer():
    for name in all_modules():
        layer_of(name)


def test_no_flat_module_but_the_packages_face():
    """Every module lives in a folder by concern; the top level holds only the version, ``__main__`` and the CLI."""
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert flat == ["__init__.py", "__main__.py", "cli.py"], flat
    for folder in FOLDERS[:-1]:
        init = PACKAGE / folder.removeprefix("pipeline.") / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), f"{init}: say what the folder owns"


def test_no_module_imports_a_later_stage():
    bad = later_stage_imports(import_graph()) - set(ALLOWED)
    assert not bad, "imports of a later stage (see docs/architecture.md): " + ", ".join(
        f"{a} → {b}" for a, b in sorted(bad))


def stale_entries(allowed: dict[tuple[str, str], str], graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The allowed pairs that no longer break the order (the import is gone or now goes the right way), and any
    allowed without a reason."""
    return sorted((set(allowed) - later_stage_imports(graph)) | {k for k, why in allowed.items() if not why.strip()})


def test_allow_list_has_no_stale_entries():
    assert not stale_entries(ALLOWED, import_graph()), "no longer needed, remove from ALLOWED"
    # the check itself: an entry for an import that goes the right way is stale; one that breaks the order stays
    graph = {"pipeline.store.runs": {"pipeline.core.errors"}, "pipeline.core.errors": {"pipeline.metrics.summarize"}}
    allowed = {("pipeline.store.runs", "pipeline.core.errors"): "once the other way round",
               ("pipeline.core.errors", "pipeline.metrics.summarize"): "why it stays"}
    assert stale_entries(allowed, graph) == [("pipeline.store.runs", "pipeline.core.errors")]
    assert stale_entries({("pipeline.core.errors", "pipeline.metrics.summarize"): " "}, graph) == [
        ("pipeline.core.errors", "pipeline.metrics.summarize")]


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_checker_sees_a_cycle_and_a_later_stage_import():
    graph = {"pipeline.store.runs": {"pipeline.metrics.summarize"}, "pipeline.metrics.summarize": {"pipeline.store.runs"}}
    assert cycles(graph) == [["pipeline.metrics.summarize", "pipeline.store.runs"]]
    assert later_stage_imports(graph) == {("pipeline.store.runs", "pipeline.metrics.summarize")}
    assert layer_of("pipeline.backends.vllm") == layer_of("pipeline.backends") == 6
    assert layer_of("pipeline.machine.hardware") < layer_of("pipeline.config.sweepconfig")
    assert layer_of("pipeline.analysis.analyze") == layer_of("pipeline.analysis.stages") < layer_of("pipeline.sweep.gridwalk")


def test_storage_imports_no_stage():
    graph = import_graph()
    stages = {"pipeline.metrics.definitions", "pipeline.metrics.goodput", "pipeline.metrics.summarize", "pipeline.analysis.analyze", "pipeline.analysis.knee", "pipeline.analysis.regime", "pipeline.analysis.ratesweep",
              "pipeline.analysis.stages", "pipeline.sweep.gridwalk", "pipeline.sweep.parts"}
    for storage in ("pipeline.store.runs", "pipeline.store.schemas", "pipeline.store.columnar", "pipeline.store.runids", "pipeline.store.runlock",
                    "pipeline.core.atomicfiles", "pipeline.store.pointfiles", "pipeline.store.upgrade"):
        assert not graph[storage] & stages, storage


def test_show_diff_and_pages_read_a_run_one_way():
    """One ``load_run`` (pipeline.analysis.stages) for show, diff and pages; no other reader of a whole run."""
    import pipeline.store.runs
    import pipeline.analysis.stages

    assert not hasattr(pipeline.store.runs, "load_run_results") and callable(pipeline.analysis.stages.load_run)
    readers = {"pipeline.views.show", "pipeline.commands.diff", "pipeline.pages.render", "pipeline.pages.changes"}
    mods = all_modules()
    for name in readers:
        assert "load_run" in called_names(mods[name]), name
    assert not [n for n, p in mods.items() if "load_run_view" in called_names(p)]
    # the check reads calls, not text: a name in a comment or a docstring is no call
    assert called_names_of("# load_run(x)\n'load_run(y)'\nf(1)\n") == {"f"}
    assert called_names_of("from m import load_run\nload_run(p)\nstages.load_run(p)\n") == {"load_run"}


def called_names_of(source: str) -> set[str]:
    """The names a module's source calls (``f(…)`` and ``obj.f(…)`` both give ``f``)."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            fn = node.func
            out.add(fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else "")
    return out - {""}


def called_names(path: Path) -> set[str]:
    return called_names_of(path.read_text(encoding="utf-8"))


def test_served_engines_share_a_base_not_each_other():
    graph = import_graph()
    assert "pipeline.backends.served" in graph["pipeline.backends.vllm"] & graph["pipeline.backends.openai"]
    assert "pipeline.backends.openai" not in graph["pipeline.backends.vllm"]
    assert "pipeline.backends.vllm" not in graph["pipeline.backends.openai"]


def test_only_the_sweep_writes_the_run():
    graph = import_graph()
    assert not [m for m in graph if m.startswith("pipeline.backends") and "pipeline.store.runs" in graph[m]]


def test_every_backend_provides_the_protocol():
    """Every backend ``get_backend`` can return (each ``from pipeline.backends.X import YBackend`` in it), the
    simulated one included, has every method of the protocol with the protocol's parameters."""
    import importlib
    import inspect

    from pipeline.backends.base import Backend

    methods = [n for n, v in vars(Backend).items() if callable(v) and not n.startswith("_")]
    assert sorted(methods) == ["attach_run", "fits", "load", "measure", "provenance", "unload"]
    tree = ast.parse((PACKAGE / "backends" / "__init__.py").read_text(encoding="utf-8"))
    named = [(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
             and n.module.startswith("pipeline.backends.") for a in n.names if a.name.endswith("Backend")]
    classes = [getattr(importlib.import_module(m), c) for m, c in named if c != "Backend"]
    assert {c.__name__ for c in classes} >= {"TransformersBackend", "OpenAIBackend", "VLLMBackend", "LlamaCppBackend",
                                             "SimulatedBackend"}
    for cls in classes:
        for n in methods:
            assert callable(getattr(cls, n, None)), (cls, n)
            want = list(inspect.signature(getattr(Backend, n)).parameters)
            assert list(inspect.signature(getattr(cls, n)).parameters)[:len(want)] == want, (cls, n)


def test_the_http_client_knows_no_scheduling():
    graph = import_graph()
    assert "pipeline.loadgen.scheduler" not in graph["pipeline.loadgen.client"]
    assert "pipeline.loadgen.loadgen" not in graph["pipeline.loadgen.client"] | graph["pipeline.loadgen.scheduler"]


def test_statistics_modules_read_no_storage():
    """The pure stages (metrics, analysis, capacity, the diff's statistics) get data from their caller, never from files."""
    graph = import_graph()
    storage = {"pipeline.store.runs", "pipeline.store.pointfiles", "pipeline.store.upgrade", "pipeline.store.schemas", "pipeline.analysis.stages"}
    for name in ("pipeline.metrics.definitions", "pipeline.metrics.goodput", "pipeline.metrics.summarize", "pipeline.analysis.analyze", "pipeline.analysis.knee",
                 "pipeline.analysis.regime", "pipeline.analysis.ratesweep", "pipeline.analysis.quality", "pipeline.diff.rundiff", "pipeline.diff.metrics",
                 "pipeline.diff.match", "pipeline.diff.comparability", "pipeline.diff.withhold", "pipeline.diff.gate",
                 "pipeline.diff.report"):
        assert not graph[name] & storage, (name, graph[name] & storage)
    assert not {m for m in graph["pipeline.diff.stats"] if m.startswith("pipeline")}  # numbers in, numbers out


def test_cards_split_by_concern():
    """the card type imports nothing of batchmark; the weight formats and the architecture arithmetic read
    no file (the card registry does); an importer's reading of files knows no card, its card matching reads no foreign file."""
    graph = import_graph()
    assert not graph["pipeline.cards.modelcards"]
    files = {"pipeline.core.textfiles", "pipeline.core.paths", "pipeline.cards.registry"}
    for name in ("pipeline.cards.weightformats", "pipeline.cards.modelarch"):
        assert not graph[name] & files, (name, graph[name] & files)
    assert {"pipeline.core.textfiles", "pipeline.core.paths"} <= graph["pipeline.cards.registry"]
    assert not {m for m in graph["pipeline.importers.parsing"] if "card" in m or m == "pipeline.cards.modelarch"}
    assert "pipeline.importers.parsing" not in graph["pipeline.importers.cardmatch"]
    assert "pipeline.backends.torchcard" in graph["pipeline.backends.transformers"]


def test_explainers_only_render():
    """The explainers read no file: the reference measurement is a stage input (pipeline.importers.reference, ``pages --reference``)."""
    graph = import_graph()
    assert not graph["pipeline.pages.explain"] & {"pipeline.importers", "pipeline.importers.reference", "pipeline.store.runs",
                                                   "pipeline.analysis.stages"}
    assert "shared" not in (PACKAGE / "pages" / "explain.py").read_text(encoding="utf-8")  # no path to ../shared/


#: Modules that rename or replace files, other than the store, and why none of those files is a run's.
RENAMES_OUTSIDE_RUNS = {
    "pipeline.machine.serverenv": "the server's virtual environment status file (.venv-vllm), no run",
    "pipeline.machine.modelfolders": "local model folders (data/model-folders/), no run",
    "pipeline.machine.ggufmodels": "GGUF files inside the local model folders (data/model-folders/), no run",
    "pipeline.pages.downloads": "the site's downloads under the docs dir (copies of runs, never a run)",
}


def renames_in(path: Path) -> list[str]:
    """Every ``os.replace``/``os.rename``/``os.renames``/``shutil.move`` call and every ``.rename(…)`` method call in a
    module's source (``Path.rename``; ``.replace`` is left out: ``str.replace`` and ``dataclasses.replace`` look the same)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value.id if isinstance(node.func.value, ast.Name) else None
            name = node.func.attr
            if (owner == "os" and name in ("replace", "rename", "renames")) or (owner == "shutil" and name == "move") \
                    or (name == "rename" and owner != "os"):
                found.append(f"{owner or '…'}.{name} (line {node.lineno})")
    return found


def test_only_the_store_renames_files_of_a_run():
    """one owner of a run's life.  The sweep, the importers, the merge of parts and the reference stage
    publish through :mod:`pipeline.store.runs` (``assembling``, ``complete_run``, ``swap_in``, the atomic writers); no other
    module renames or replaces a file."""
    store = {"pipeline.store.runs", "pipeline.core.atomicfiles"}  # the store and its atomic writers
    offenders = {name: found for name, path in all_modules().items()
                 if name not in store and name not in RENAMES_OUTSIDE_RUNS and (found := renames_in(path))}
    assert not offenders, f"renames outside the store (pipeline.store.runs, pipeline.core.atomicfiles): {offenders}"
    assert all(renames_in(all_modules()[name]) for name in store)  # the check sees the store's own renames
    for name in RENAMES_OUTSIDE_RUNS:
        assert renames_in(all_modules()[name]), f"{name} renames nothing any more: remove it from RENAMES_OUTSIDE_RUNS"


#: The size limits of the house rules: a module reads in one sitting, a function does one job.
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def too_long(path: Path) -> list[str]:
    """The functions of a module longer than :data:`MAX_FUNCTION_LINES` (``def`` line to last line, decorators left
    out; a nested function counts on its own and inside its outer one), as ``name (N lines, line L)``."""
    return [f"{n.name} ({n.end_lineno - n.lineno + 1} lines, line {n.lineno})"
            for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]


def test_no_function_over_80_lines():
    """Every function of ``pipeline/`` is at most 80 lines; none is allowed over (no list of exceptions)."""
    offenders = {name: found for name, path in all_modules().items() if (found := too_long(path))}
    assert not offenders, f"functions over {MAX_FUNCTION_LINES} lines (split them into pieces of one job): {offenders}"


def test_no_module_over_400_lines():
    """Every module of ``pipeline/`` is at most 400 lines; none is allowed over (no list of exceptions)."""
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in all_modules().items()}
    offenders = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not offenders, f"modules over {MAX_MODULE_LINES} lines (move a concern into its own module): {offenders}"


def test_the_size_checks_see_a_long_function_and_count_as_stated(tmp_path):
    """The checks above can fail: an 81-line function is found, an 80-line one is not (lines counted from ``def``
    to the last line of the body, as ``ast``'s ``lineno`` and ``end_lineno`` give them)."""
    body = "".join(f"    x{i} = {i}\n" for i in range(79))
    (tmp_path / "m.py").write_text(f"def ok():\n{body}\n\ndef long():\n{body}    x = 0\n")
    assert too_long(tmp_path / "m.py") == ["long (81 lines, line 83)"]  # ok: lines 1-80, two blank lines
