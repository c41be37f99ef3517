"""A class is one entry (issue 20): its name appears as a string only in the class table
(tprules/ops) and the ATen mapping, and what is generated from the table has not drifted."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tprules import ops
from tprules.ops import registry_files

PACKAGE = Path(ops.__file__).resolve().parents[1]
# the class table, and the ATen mapping (the op table's modules by kind of op; walk.py, the
# Lowerer that calls them, names none)
LOWERINGS = ("arithmetic", "compare", "matmul", "reductions", "layout", "items", "fills", "indexed", "grouped",
             "complex_pairs", "positions")
ALLOWED = {"ops", *(f"frontends/lowering/{name}.py" for name in LOWERINGS)}
# The rule language's side never sees a class: there `sum`, `mean` (aggregates), `cat` (a
# functor) and `neg` (a negated literal) are Datalog's own words.
RULE_LANGUAGE = ("datalog", "explain")  # the Datalog wing (tprules/datalog/) and its proofs
# Words that are a class's name and mean something else here, each said why.
OTHER_MEANINGS = {
    ("codegen/lowering/lower.py", "scale"): "a kernel parameter's role: the scale of a quantized read",
    ("runtime/execution/buffers.py", "scale"): "the same parameter role",
    ("codegen/cpu/function.py", "amax"): "a variable's stem in the quantized read's first pass (max |x|)",
    ("codegen/cuda/kernel.py", "amax"): "the same variable's stem",
    ("runtime/trace.py", "cat"): "the trace-event format's category key (Chrome's JSON, which Perfetto reads)",
    ("commands/run.py", "matmul"): "the --matmul option's name, as the launcher hands it to the ranks",
    ("program/model.py", "where"): "the program's `where` (each statement's op.facts line), named when it is pickled",
}


def _strings(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.split("/")[0] in ALLOWED or rel in ALLOWED or rel.split("/")[0] in RULE_LANGUAGE:
            continue
        yield rel, path


def test_class_names_live_in_the_table_and_the_aten_mapping():
    names = {str(op) for op in ops.Ops}
    found = {}
    for rel, path in _modules():
        for name in sorted(_strings(path) & names):
            if (rel, name) in OTHER_MEANINGS:
                continue
            found.setdefault(name, []).append(rel)
    assert not found, "class names outside tprules/ops and the ATen mapping (frontends/lowering/): " + "; ".join(
        f"{name!r} in {', '.join(where)}" for name, where in sorted(found.items()))


def test_the_scan_sees_a_class_name(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('"""sigmoid in a docstring is prose."""\nCLS = "sigmoid"\n')
    assert _strings(probe) == {"sigmoid"}


def test_generated_files_match_the_table():
    assert registry_files.drifted() == []
    assert registry_files.REGISTRY.read_text() == registry_files.registry_facts()


def test_drift_is_caught(tmp_path, monkeypatch):
    stale = tmp_path / "registry.facts"
    stale.write_text(registry_files.registry_facts().replace("sigmoid\telementwise\t1\n", ""))
    monkeypatch.setattr(registry_files, "REGISTRY", stale)
    assert registry_files.drifted() == [stale]
    assert registry_files.main(["--check"]) == 1


def test_every_class_has_one_entry_in_registry_order():
    assert list(ops.CLASSES) == list(ops.Ops)
    assert ops.ELEMENTWISE | ops.ROW | ops.MATMULS | ops.LAYOUT | ops.WINDOW == set(ops.Ops)


def test_a_backend_table_that_forgets_a_class_fails():
    table = {op: None for op in ops.ELEMENTWISE if op != ops.Ops.SIGMOID}
    with pytest.raises(ImportError, match="lacks sigmoid"):
        ops.require(table, ops.ELEMENTWISE, "a renderer")


def test_an_elementwise_entry_without_a_formula_fails():
    with pytest.raises(ValueError, match="has no formula"):
        ops.OpClass(ops.Ops.SIGMOID, "elementwise", 1, "0", "", lambda attrs, x: x, lambda *a: ())


def test_the_aten_mapping_is_the_op_tables_modules():
    from tprules.frontends.lowering import aten

    assert sorted(m.__name__.rsplit(".", 1)[1] for m in aten.MODULES) == sorted(LOWERINGS)
