"""Imports flow one way (STYLE.md): no cycle between the package's modules, and no import
from a layer of the pipeline to one above it (LAYERS), counting the imports inside
functions too (a lazy import hides a cycle from Python, not from a reader)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import tprules

ROOT = Path(tprules.__file__).resolve().parent


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _targets(module: str, is_package: bool, node, known: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        stem = ".".join(base + ([node.module] if node.module else []))
    else:
        stem = node.module or ""
    # `from pkg import sub` depends on the module pkg.sub where there is one, and on pkg
    # itself only for names that are not modules
    subs = [f"{stem}.{a.name}" for a in node.names if f"{stem}.{a.name}" in known]
    return subs + ([stem] if len(subs) < len(node.names) else [])


def import_graph() -> nx.DiGraph:
    files = {_name(p): p for p in ROOT.rglob("*.py")}
    known = set(files)
    graph = nx.DiGraph()
    graph.add_nodes_from(known)
    for module, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, path.name == "__init__.py", node, known):
                    if target in known and target != module:
                        graph.add_edge(module, target)
    return graph


def cycles(graph: nx.DiGraph) -> list[list[str]]:
    return [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]


def test_no_import_cycle_between_modules():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_a_cycle_is_named():
    g = nx.DiGraph([("tprules.a", "tprules.b"), ("tprules.b", "tprules.a"), ("tprules.b", "tprules.c")])
    assert cycles(g) == [["tprules.a", "tprules.b"]]


def test_function_level_imports_count():
    g = import_graph()
    assert g.has_edge("tprules.codegen.lowering.lower", "tprules.program.model")
    assert not g.has_edge("tprules.codegen.render.batched", "tprules.codegen.cuda.kernel")


# The pipeline's layers (STYLE.md), upstream first: a module imports only from a lower layer
# or from its own unit. A unit is a top-level module, a package, or a package of the Datalog
# wing (`tprules.datalog.lang`). Units on one layer are siblings and import neither way.
LAYERS = {
    # the floor: positions, settings, paths, the version; none imports another unit
    "tprules.pos": 0, "tprules.version": 0, "tprules.config": 0, "tprules.paths": 0,
    "tprules.deep": 0, "tprules.heap": 0, "tprules.progress": 0,
    "tprules.errors": 1,
    # a rules folder, checked (config.py finds it; errors.py says what is wrong with it)
    "tprules.rulefolder": 2,
    # the Datalog wing: rule text and its values -> checks | fact files -> engines
    "tprules.datalog": 2, "tprules.datalog.lang": 2,
    "tprules.datalog.analysis": 3, "tprules.datalog.facts": 3,
    "tprules.datalog.engine": 4,
    # the tensor program on the wing: its class table, its facts, the verdicts on it
    "tprules.ops": 5,
    "tprules.program": 6,
    "tprules.verdicts": 7,
    "tprules.workspace": 8,
    # beside one another: kernels (the planner prices a group by lowering it), proofs, the Shim API
    "tprules.codegen": 9, "tprules.explain": 9, "tprules.shim": 9,
    "tprules.planner": 10,
    "tprules.runtime": 11, "tprules.golden": 11, "tprules.repl": 11,
    "tprules.lsp": 12,
    "tprules.frontends": 12,  # the importer writes a program and checks it with the runtime's reference
    "tprules.serving": 13,  # generate: imported programs run as a serving loop, over the runtime
    "tprules.commands": 14,
    "tprules.cli": 15, "tprules": 15,  # the command line and the package's face (the Shim API)
    "tprules.__main__": 16,
}


def unit(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:3] if len(parts) > 2 and parts[1] == "datalog" else parts[:2])


def unplaced(graph: nx.DiGraph, layers: dict[str, int]) -> list[str]:
    return sorted({unit(m) for m in graph} - set(layers))


def back_up_imports(graph: nx.DiGraph, layers: dict[str, int]) -> list[tuple[str, str]]:
    """Imports from a unit to one on its own layer or above (every import counts: see
    import_graph); a unit with no layer is `unplaced`'s to report."""
    def up(a: str, b: str) -> bool:
        return unit(a) != unit(b) and layers.get(unit(b), -1) >= layers.get(unit(a), 1 << 30)
    return sorted((a, b) for a, b in graph.edges() if up(a, b))


def test_every_module_has_a_layer():
    g = import_graph()
    assert unplaced(g, LAYERS) == [], "units with no layer in LAYERS: a new package needs its place"
    assert sorted(set(LAYERS) - {unit(m) for m in g}) == [], "LAYERS names a unit that is gone"


def test_no_import_runs_back_up_the_layers():
    found = back_up_imports(import_graph(), LAYERS)
    assert not found, "imports up the layers: " + "; ".join(f"{a} -> {b}" for a, b in found)


def test_a_back_up_import_is_reported():
    g = nx.DiGraph([("tprules.datalog.lang.printer", "tprules.datalog.engine.values"),  # up
                    ("tprules.datalog.engine.compiled", "tprules.datalog.lang.ast"),  # down
                    ("tprules.planner.cost", "tprules.planner.state"),  # within a unit
                    ("tprules.shim.graph", "tprules.codegen.lowering.lower")])  # sideways: siblings
    assert back_up_imports(g, LAYERS) == [("tprules.datalog.lang.printer", "tprules.datalog.engine.values"),
                                          ("tprules.shim.graph", "tprules.codegen.lowering.lower")]


def test_a_unit_without_a_layer_is_reported():
    g = nx.DiGraph([("tprules.newthing.a", "tprules.errors"), ("tprules.datalog.lang.ast", "tprules.pos")])
    assert unplaced(g, LAYERS) == ["tprules.newthing"]
    assert unit("tprules.datalog.facts.scan") == "tprules.datalog.facts" and unit("tprules") == "tprules"
    assert unit("tprules.codegen.cuda.kernel") == "tprules.codegen"

