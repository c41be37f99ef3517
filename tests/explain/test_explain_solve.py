"""The explanation pass's interpreter agrees with the compiled engine and with brute force."""

from __future__ import annotations

import pytest
from conftest import FACTS, RULES

from tprules.datalog.analysis.checked import check_rules, load_rules
from tprules.datalog.engine.compiled import Evaluator
from tprules.datalog.lang import ast
from tprules.datalog.lang.parser import parse_text
from tprules.datalog.lang.printer import print_rules
from tprules.explain.access import SCANS_BEFORE_INDEX, ColumnarAccess, TupleAccess
from tprules.explain.query import read_atom, read_query
from tprules.explain.solve import Solver
from tprules.workspace import Workspace

QUERIES = [
    "member(F, O), on_chip(O, C), C > 0",
    "member(F, O), !on_chip(O, _), !on_spine(O)",
    "candidate(F), N = count : { member(F, _) }, N > 2",
    "candidate(F), N = count : { member(F, O), op(O, \"matmul\") }",
    "candidate(F), S = sum I : { member(F, O), reads(O, I, _) }",
    "candidate(F), M = min N : { member(F, O), topo(O, N) }, X = M * 2 - 1",
    "refused(F, R), R != \"cycle\", !legal(F)",
    "flows(A, B), flows(B, C), A < C",
    "topo(O, N), N % 3 = 1, -N < -4",
]


@pytest.fixture(scope="module", params=["megatron-mlp-tp2", "llama-layer-tp4"])
def workspace(request):
    return Workspace(FACTS / request.param)


@pytest.mark.parametrize("query", QUERIES)
def test_queries_agree_with_the_compiled_engine(workspace, query):
    body, names = read_query(query, workspace.checked)
    ours = {tuple(env[n] for n in names) for env, _ in Solver(workspace.model).solutions(body, {})}
    # The same body as a rule of the rule program, evaluated by the engine.
    decl = f".decl answer({', '.join(f'{n.lower()}: {_type(workspace, body, n)}' for n in names)})"
    text = print_rules(workspace.checked.program) + f"{decl}\nanswer({', '.join(names)}) :- {query}.\n"
    model = Evaluator(check_rules(parse_text(text))).evaluate(workspace.program.facts.relations)
    assert ours == model.tuples("answer")
    assert ours, "a query that finds nothing shows nothing"


def _type(workspace, body, name) -> str:
    for atom, _ in ast.body_atoms(body):
        for arg, attr in zip(atom.args, workspace.checked.decls[atom.rel].attrs):
            if isinstance(arg, ast.Var) and arg.name == name:
                return attr.type
    return "number"  # bound by arithmetic or an aggregate


PATTERNS = ['member(F, O)', 'member("mm2_bias", O)', 'reads(O, 0, T)', 'reads("mm2_0", I, "a_0")',
            'escapes(F, "allreduce")', 'flows(X, X)', 'on_chip(O, 1)', 'refused(_, "cycle")']


@pytest.mark.parametrize("engine, reader", [("fast", ColumnarAccess), ("compiled", TupleAccess)])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_lookups_match_brute_force_on_either_model(pattern, engine, reader):
    ws = Workspace(FACTS / "megatron-mlp-tp2", engine=engine)
    atom = read_atom(pattern, ws.checked)
    want = sorted(t for t in ws.model.tuples(atom.rel) if _brute(atom, t))
    solver = Solver(ws.model)
    assert isinstance(solver.read, reader)
    for _ in range(SCANS_BEFORE_INDEX + 2):  # a tuple model scans first, then indexes
        assert solver.matching(atom) == want


@pytest.mark.parametrize("engine", ["fast", "compiled"])
def test_rounds_and_membership_read_alike(engine):
    ws = Workspace(FACTS / "megatron-mlp-tp2", engine=engine)
    read = Solver(ws.model).read
    for values in sorted(ws.model.tuples("escapes")):
        assert read.contains("escapes", values)
        assert read.round("escapes", values) == ws.model.rounds["escapes"][values]
    assert not read.contains("escapes", ("mm2_bias", "nowhere"))
    assert read.count("member") == len(ws.model.tuples("member"))


def _brute(atom: ast.Atom, values: tuple) -> bool:
    seen: dict = {}
    for arg, v in zip(atom.args, values):
        if isinstance(arg, ast.Var):
            if seen.setdefault(arg.name, v) != v:
                return False
        elif isinstance(arg, (ast.Num, ast.Str)) and arg.value != v:
            return False
    return True


def test_unsafe_body_reaching_the_solver_is_a_query_error():
    from tprules.explain.query import QueryError

    checked = load_rules(RULES)
    ws = Workspace(FACTS / "megatron-mlp-tp2", checked=checked)
    body = (ast.Negation(ast.Atom("member", (ast.Var("F"), ast.Var("O")))),)
    with pytest.raises(QueryError, match="no positive atom binds F, O"):
        list(Solver(ws.model).solutions(body, {}))
