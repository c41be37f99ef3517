"""Imports flow one way (STYLE.md): no cycle between the package's modules, counting the
imports inside functions too (a lazy import hides a cycle from Python, not from a reader)."""

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
    assert g.has_edge("tprules.codegen.lower", "tprules.program.model")
    assert not g.has_edge("tprules.codegen.batched", "tprules.codegen.cuda")


def _edges_between(graph, source: str, target: str) -> list[tuple[str, str]]:
    def inside(m, pkg):
        return m == pkg or m.startswith(pkg + ".")
    return [(a, b) for a, b in graph.edges() if inside(a, source) and inside(b, target)]


def test_the_pipeline_runs_one_way():
    g = import_graph()
    assert _edges_between(g, "tprules.codegen", "tprules.runtime") == []  # runtime reads codegen
    assert _edges_between(g, "tprules.ops", "tprules.codegen") == []  # the class table is upstream
    assert _edges_between(g, "tprules.ops", "tprules.runtime") == []
    assert _edges_between(g, "tprules.errors", "tprules.datalog.lang") == []  # Pos has one home: tprules.pos
