"""The one loaded program (program/model.py `Program`): the objects it makes when asked
say what the facts say, the planner's index is computed from it, one workspace builds it
once, and plans through it are the Shim API's plans, on every example and on random programs."""

from __future__ import annotations

import random
import shutil

import networkx as nx
import pytest
from conftest import FACTS
from hypothesis import HealthCheck, given, settings
from strategies import tp_programs

from tprules.planner import KernelCost, checked_view, plan, plan_graph, registry_kinds, shim_machine
from tprules.planner.index import PlanIndex
from tprules.program.model import Program
from tprules.program.shapes import fact_tensors
from tprules.program.view import PROVENANCE
from tprules.shim import FactShim, Manifest, Op, TensorGraph, TensorParallelShim
from tprules.shim.stores import Built, OfProgram
from tprules.workspace import Workspace

EXAMPLES = sorted(p.name for p in FACTS.iterdir() if p.is_dir() and (p / "op.facts").exists())
SHIMS = ("cuda-lane:h100:Bf16", "cuda-lane:rtx3060:TwoPassInt8", "cpu:x86:F32")
RANDOM = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def producers_first(facts) -> list[str]:
    """Producers before their readers, ties in op.facts order: networkx's, not program/order.py's."""
    statements = [o for o, _ in facts.ordered("op")]
    rank = {o: i for i, o in enumerate(statements)}
    writer = {t: o for o, t in facts.tuples("writes")}
    graph = nx.DiGraph()
    graph.add_nodes_from(statements)
    graph.add_edges_from((writer[t], o) for o, _, t in facts.tuples("reads") if t in writer)
    return list(nx.lexicographical_topological_sort(graph, key=rank.__getitem__))


def same_partition(ids: list[int], values: list) -> bool:
    """Equal ids exactly for equal values."""
    return len(set(ids)) == len(set(values)) == len(set(zip(ids, values)))


def from_facts(ws: Workspace) -> tuple[list[tuple], dict]:
    """Each statement as a tuple read straight off the fact tuples, in topological order,
    and each tensor (what the program's objects must say)."""
    facts = ws.program.facts
    operands: dict[str, dict[int, str]] = {}
    for o, i, t in facts.tuples("reads"):
        operands.setdefault(o, {})[i] = t
    writes, class_of = dict(facts.tuples("writes")), dict(facts.tuples("op"))
    attrs: dict[str, list] = {}
    for o, key, value in facts.ordered("attr"):
        attrs.setdefault(o, []).append((key, value))
    folds = {o for o, _ in facts.tuples("fold")}
    quantized = {(c, i): f for s, c, i, f in facts.tuples("quantized") if s == ws.shim}
    out = []
    for o in producers_first(facts):
        reads = tuple(t for _, t in sorted(operands.get(o, {}).items()))
        q = tuple(sorted((i, f) for (c, i), f in quantized.items() if c == class_of[o] and i < len(reads)))
        out.append((o, class_of[o], reads, writes[o], tuple(attrs.get(o, ())), o in folds, q))
    return out, fact_tensors(facts)


def assert_program_says_what_the_facts_say(ws: Workspace) -> None:
    prog = Program.from_workspace(ws)
    statements, tensors = from_facts(ws)
    assert prog.names == [s[0] for s in statements]
    assert [(s.name, s.cls, s.reads, s.writes, s.attrs, s.fold, s.quantized) for s in prog.statements] == statements
    assert [prog.statement(s[0]) for s in statements] == list(prog.statements)
    assert dict(prog.position) == {s[0]: k for k, s in enumerate(statements)}
    assert dict(prog.tensors) == tensors and list(prog.tensors) == list(tensors)
    readers: dict[str, list[str]] = {}
    for s in statements:
        for t in dict.fromkeys(s[2]):
            readers.setdefault(t, []).append(s[0])
    assert dict(prog.readers) == {t: tuple(r) for t, r in readers.items()}
    assert dict(prog.writer) == {s[3]: s[0] for s in statements}
    assert prog.places == ws.places()
    assert prog.where[statements[0][0]] == ws.program.facts.where("op", statements[0][:2])
    sig = prog.signatures
    listed = [prog.tensors[t] for t in prog.tensor_names]
    assert same_partition(sig.tensor, [(t.shape, t.dtype) for t in listed])
    assert same_partition(sig.statement, [
        (s.cls, tuple(a for a in s.attrs if a[0] not in PROVENANCE), s.quantized, s.fold, len(s.reads),
         prog.tensors[s.writes].shape, prog.tensors[s.writes].dtype) for s in prog.statements])
    assert same_partition(sig.alone, [(sig.statement[k], tuple((list(dict.fromkeys(s.reads)).index(t),
                                                                  prog.tensors[t].shape, prog.tensors[t].dtype)
                                                                 for t in s.reads))
                                      for k, s in enumerate(prog.statements)])


def assert_index_is_computed_from_the_program(ws: Workspace) -> None:
    prog = ws.tensor_program
    index = PlanIndex.of(prog)
    assert prog.kinds == registry_kinds()  # the registry loaded with the program: the library's
    assert index.names is prog.names and index.ids.tolist() == prog.loaded.order_ids.tolist()
    writer = {s.writes: k for k, s in enumerate(prog.statements)}
    flow = sorted({(writer[t], k) for k, s in enumerate(prog.statements) for t in s.reads if t in writer})
    assert list(zip(index.src.tolist(), index.dst.tolist())) == flow
    assert index.matmul.tolist() == [prog.kinds.get(s.cls) == "matmul" for s in prog.statements]
    assert index.elementwise.tolist() == [prog.kinds.get(s.cls) == "elementwise" for s in prog.statements]
    assert sorted(index.shared) == sorted(list(prog.position[o] for o in r) for r in prog.readers.values() if len(r) > 1)


def assert_the_graph_is_a_view_of_the_program(ws: Workspace) -> None:
    """A graph of a loaded program reads the program's own records, and answers what a graph
    built from those records one by one (as a compiler builds one) answers."""
    prog = ws.tensor_program
    g = TensorGraph.from_program(prog)
    assert g.program is prog and len(g) == len(prog) and g.order() == prog.names
    assert all(g.op(s.name) is s for s in prog.statements)
    assert all(g.tensor(t) is prog.tensors[t] for t in prog.tensor_names)
    view, built = OfProgram(prog), Built.of(OfProgram(prog))
    assert view.ops() == built.ops() and view.tensors() == built.tensors()
    assert view.order() == built.order() and dict(view.position()) == built.position()
    assert view.flows() == built.flows()
    assert all(view.pred(o) == built.pred(o) for o in prog.names)
    assert all(view.readers(t) == built.readers(t) and view.writer(t) == built.writer(t) for t in prog.tensor_names)
    loaded = TensorGraph.from_facts(ws.program.facts)  # the facts' own program, not the workspace's
    assert loaded.program is not None and loaded.program is not prog and loaded.order() == prog.names
    assert [(o.name, o.cls, o.reads, o.writes, o.attrs) for o in loaded.ops] == \
        [(o.name, o.cls, o.reads, o.writes, o.attrs) for o in built.ops()]


def assert_plan_is_the_shim_api_plan(ws: Workspace) -> None:
    facts = ws.program.facts
    g = TensorGraph.from_program(ws.tensor_program)
    assert [(o.name, o.cls, o.reads, o.writes, o.attrs) for o in g.ops] == \
        [(o.name, o.cls, o.reads, o.writes, o.attrs) for o in TensorGraph.from_facts(facts).ops]
    assert [(t.name, t.shape, t.dtype) for t in g.tensors] == \
        [(t.name, t.shape, t.dtype) for t in TensorGraph.from_facts(facts).tensors]
    tp = TensorParallelShim(FactShim(ws.shim, facts, checked=ws.checked), Manifest.from_facts(facts), checked=ws.checked)
    tp.bind(g, ws)
    cost = KernelCost(checked_view(ws), shim_machine(ws.shim))
    assert plan(ws) == plan_graph(g, tp, name=ws.shim, cost=cost)


@pytest.mark.parametrize("shim", SHIMS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_the_program_says_what_the_facts_say(example, shim):
    ws = Workspace(FACTS / example, shim=shim)
    assert_program_says_what_the_facts_say(ws)
    assert_index_is_computed_from_the_program(ws)
    assert_the_graph_is_a_view_of_the_program(ws)
    assert_plan_is_the_shim_api_plan(ws)


@RANDOM
@given(program=tp_programs(candidates=False))
def test_the_program_says_what_the_facts_say_on_random_programs(program, tmp_path):
    ws = Workspace(program.write(tmp_path / "program"))
    assert_program_says_what_the_facts_say(ws)
    assert_index_is_computed_from_the_program(ws)
    assert_the_graph_is_a_view_of_the_program(ws)
    assert_plan_is_the_shim_api_plan(ws)


def test_one_workspace_builds_its_program_once():
    ws = Workspace(FACTS / "megatron-mlp-tp2")
    prog = ws.tensor_program
    assert not prog._statements  # nothing made before it is asked
    prog.statement("gelu_0")
    assert list(prog._statements) == [prog.position["gelu_0"]]
    assert Program.from_workspace(ws) is prog and checked_view(ws) is prog  # checked: one per distinct statement
    assert len(prog._statements) <= 1 + len(set(prog.signatures.checked.tolist())) < len(prog)


def test_a_pickled_program_keeps_its_places_and_leaves_the_workspace():
    import pickle

    ws = Workspace(FACTS / "megatron-mlp-tp2")
    prog = Program.from_workspace(ws)
    again = pickle.loads(pickle.dumps(prog))  # as a `--ranks` job carries it
    assert again.places == ws.places() and again._places is None
    assert again.statements == prog.statements and dict(again.tensors) == dict(prog.tensors)
    assert b"Workspace" not in pickle.dumps(prog)


def test_a_pickled_program_carries_what_the_ranks_read_and_no_fact():
    import pickle

    prog = Program.from_workspace(Workspace(FACTS / "llama-layer-tp4"))
    data = pickle.dumps(prog)
    again = pickle.loads(data)
    assert again.facts is None and again.loaded is None and b"FactBase" not in data and b"Columns" not in data
    assert again.statements == prog.statements and dict(again.tensors) == dict(prog.tensors)
    assert dict(again.readers) == dict(prog.readers) and again.writer == prog.writer
    assert again.inputs == prog.inputs and again.outputs == prog.outputs and again.chips == prog.chips
    assert dict(again.where) == dict(prog.where) and again.where[prog.names[0]] is not None
    assert all(again.position[o] == k for k, o in enumerate(prog.names)) and "nope" not in again.position
    assert again.signatures.alone == prog.signatures.alone and again.kinds == prog.kinds
    assert b"FactBase" not in pickle.dumps(again) and pickle.loads(pickle.dumps(again)).statements == prog.statements


@pytest.mark.parametrize("example, kinds", [
    ("megatron-mlp-tp2", {"allreduce": "all_reduce"}), ("gather-mlp-tp2", None),
    ("sp-mlp-tp2", {"allgather": "all_gather", "scatter": "reduce_scatter"})])
def test_a_pickled_program_knows_its_folds_kinds(example, kinds):
    """A rank lowers each fold by its collective's kind, from the program it was handed."""
    import pickle

    prog = Program.from_workspace(Workspace(FACTS / example))
    again = pickle.loads(pickle.dumps(prog))
    assert again.folds == prog.folds and len(prog.folds) >= 1
    assert prog.folds == (kinds if kinds is not None else dict.fromkeys(prog.folds, "all_gather"))


@pytest.mark.parametrize("seed", range(3))
def test_an_order_written_out_of_order_is_found_on_the_ids(seed, tmp_path):
    folder = tmp_path / "program"
    shutil.copytree(FACTS / "llama-layer-tp4", folder)
    lines = (folder / "op.facts").read_text().splitlines()
    random.Random(seed).shuffle(lines)
    (folder / "op.facts").write_text("\n".join(lines) + "\n")
    loaded = Workspace(folder).program
    assert loaded.order == producers_first(loaded.facts) != [o for o, _ in loaded.facts.ordered("op")]


def broken(tmp_path, edit) -> str:
    folder = tmp_path / "program"
    shutil.copytree(FACTS / "megatron-mlp-tp2", folder)
    path = folder / "shape.facts"
    path.write_text(edit(path.read_text()))
    return str(folder)


SHAPE_FAULTS = {
    "an axis of size 0": (lambda text: text.replace("h_0\t1\t32", "h_0\t1\t0"), "shape.facts:"),
    "an axis given twice": (lambda text: text + "h_0\t0\t7\n", "shape.facts:"),
    "an axis missing": (lambda text: text.replace("h_0\t0\t8", "h_0\t2\t8"), "tensor.facts:"),
    "a shape that does not fit": (lambda text: text.replace("h_0\t1\t32", "h_0\t1\t33"), "op.facts:"),
}


@pytest.mark.parametrize("fault", SHAPE_FAULTS, ids=list(SHAPE_FAULTS))
def test_plan_names_a_bad_shape_as_run_does(fault, tmp_path, cli):
    edit, where = SHAPE_FAULTS[fault]
    folder = broken(tmp_path, edit)
    ws = Workspace(folder)
    assert not ws.tensor_program.shapes_ok()
    with pytest.raises(Exception) as raised:
        Program.from_workspace(ws)
    assert where in str(raised.value)
    status, out, err = cli("plan", folder)
    assert (status, out) == (2, "")
    assert err.rstrip("\n").endswith(str(raised.value))
    status, _, err = cli("run", folder)
    assert status == 2 and err.rstrip("\n").endswith(str(raised.value))
    status, _, err = cli("plan", folder, "--machine", "none")  # no cost model: shapes are not its business
    assert status == 0, err


def test_an_edited_view_becomes_its_own_graph_and_the_program_stays():
    prog = Workspace(FACTS / "megatron-mlp-tp2").tensor_program
    g = TensorGraph.from_program(prog)
    version, before = g.version, g.order()
    g.add_tensor("z2", "f32", (8, 16))
    g.add_op(Op("late", "relu", (prog.outputs[0],), "z2"))
    assert g.program is None and g.version == version + 2 and g.order() == [*before, "late"]
    assert [o.name for o in g.successors(prog.statements[-1].name)] == ["late"]
    assert len(prog) == len(before) and "late" not in prog.position  # the program is not edited


def test_facts_that_are_no_program_make_a_graph_that_says_what_is_wrong(tmp_path):
    shutil.copytree(FACTS / "megatron-mlp-tp2", tmp_path / "p")
    with open(tmp_path / "p" / "reads.facts", "a") as f:
        f.write("mm1_0\t9\tgelu_0_out_undeclared\n")
    with pytest.raises(ValueError, match="statement mm1_0 binds undeclared tensor gelu_0_out_undeclared"):
        TensorGraph.load(tmp_path / "p")
