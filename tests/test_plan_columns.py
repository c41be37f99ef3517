"""The planner reads the program from its columns (planner/index.py, program/view.py):
what it reads there is what the object models say, and its plans are those of the
`TensorGraph` and `TensorParallelShim` path, on every example and on random programs."""

from __future__ import annotations

import shutil

import pytest
from conftest import FACTS
from hypothesis import HealthCheck, given, settings
from strategies import tp_programs

from tprules.planner import KernelCost, plan, plan_graph, registry_kinds, shim_machine
from tprules.planner.index import PlanIndex
from tprules.program.model import RunProgram
from tprules.program.view import PROVENANCE, ProgramView
from tprules.shim import FactShim, Manifest, TensorGraph, TensorParallelShim
from tprules.workspace import Workspace

EXAMPLES = sorted(p.name for p in FACTS.iterdir() if p.is_dir() and (p / "op.facts").exists())
SHIMS = ("cuda-lane:h100:Bf16", "cuda-lane:rtx3060:TwoPassInt8", "cpu:x86:F32")
RANDOM = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def same_partition(ids: list[int], values: list) -> bool:
    """Equal ids exactly for equal values."""
    return len(set(ids)) == len(set(values)) == len(set(zip(ids, values)))


def assert_view_is_the_run_program(ws: Workspace) -> None:
    prog, view = RunProgram.from_workspace(ws), ProgramView(ws.program)
    assert view.names == [s.name for s in prog.statements]
    assert dict(view.position) == prog.position
    assert [view.statement(s.name) for s in prog.statements] == list(prog.statements)
    assert {t: view.tensors[t] for t in prog.tensors} == prog.tensors
    assert dict(view.readers) == prog.readers
    assert view.shapes_ok()
    sig = view.signatures
    tensors = [prog.tensors[t] for t in view.tensor_names]
    assert same_partition(sig.tensor, [(t.shape, t.dtype) for t in tensors])
    out = {s.name: prog.tensors[s.writes] for s in prog.statements}
    assert same_partition(sig.statement, [
        (s.cls, tuple(a for a in s.attrs if a[0] not in PROVENANCE), s.quantized, s.fold, len(s.reads),
         out[s.name].shape, out[s.name].dtype) for s in prog.statements])
    assert same_partition(sig.alone, [(sig.statement[k], tuple((list(dict.fromkeys(s.reads)).index(t),
                                                                  prog.tensors[t].shape, prog.tensors[t].dtype)
                                                                 for t in s.reads))
                                      for k, s in enumerate(prog.statements)])


def assert_index_is_the_graph(ws: Workspace) -> None:
    kinds = registry_kinds()
    ours, graph = PlanIndex.from_program(ws.program, kinds), PlanIndex.from_graph(TensorGraph.from_facts(ws.program.facts),
                                                                                   kinds)
    assert ours.names == graph.names == ws.program.order
    assert (ours.src.tolist(), ours.dst.tolist()) == (graph.src.tolist(), graph.dst.tolist())
    assert (ours.matmul.tolist(), ours.elementwise.tolist()) == (graph.matmul.tolist(), graph.elementwise.tolist())
    assert sorted(ours.shared) == sorted(graph.shared)


def assert_plan_is_the_shim_api_plan(ws: Workspace) -> None:
    facts = ws.program.facts
    g = TensorGraph.from_facts(facts)
    tp = TensorParallelShim(FactShim(ws.shim, facts, checked=ws.checked), Manifest.from_facts(facts), checked=ws.checked)
    tp.bind(g, ws)
    cost = KernelCost(ProgramView(ws.program), shim_machine(ws.shim))
    assert plan(ws) == plan_graph(g, tp, name=ws.shim, cost=cost)


@pytest.mark.parametrize("shim", SHIMS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_the_columns_say_what_the_objects_say(example, shim):
    ws = Workspace(FACTS / example, shim=shim)
    assert_view_is_the_run_program(ws)
    assert_index_is_the_graph(ws)
    assert_plan_is_the_shim_api_plan(ws)


@RANDOM
@given(program=tp_programs(candidates=False))
def test_the_columns_say_what_the_objects_say_on_random_programs(program, tmp_path):
    ws = Workspace(program.write(tmp_path / "program"))
    assert_view_is_the_run_program(ws)
    assert_index_is_the_graph(ws)
    assert_plan_is_the_shim_api_plan(ws)


def broken(tmp_path, edit) -> str:
    folder = tmp_path / "program"
    shutil.copytree(FACTS / "megatron-mlp-tp2", folder)
    path = folder / "shape.facts"
    path.write_text(edit(path.read_text()))
    return str(folder)


SHAPE_FAULTS = {
    "an axis of size 0": lambda text: text.replace("h_0\t1\t32", "h_0\t1\t0"),
    "an axis given twice": lambda text: text + "h_0\t0\t7\n",
    "an axis missing": lambda text: text.replace("h_0\t0\t8", "h_0\t2\t8"),
    "a shape that does not fit": lambda text: text.replace("h_0\t1\t32", "h_0\t1\t33"),
}


@pytest.mark.parametrize("fault", SHAPE_FAULTS, ids=list(SHAPE_FAULTS))
def test_plan_names_a_bad_shape_as_run_does(fault, tmp_path, cli):
    folder = broken(tmp_path, SHAPE_FAULTS[fault])
    ws = Workspace(folder)
    assert not ProgramView(ws.program).shapes_ok()
    with pytest.raises(Exception) as raised:
        RunProgram.from_workspace(ws)
    status, out, err = cli("plan", folder)
    assert (status, out) == (2, "")
    assert err.rstrip("\n").endswith(str(raised.value))
    status, _, err = cli("plan", folder, "--machine", "none")  # no cost model: shapes are not its business
    assert status == 0, err
