"""The fusion planner: its guarantees on every example and on random programs, its quality, its outputs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest
from conftest import FACTS, ROOT
from hypothesis import HealthCheck, given, settings
from strategies import tp_programs

from tprules.planner import Plan, plan, plan_graph
from tprules.program.order import data_flow
from tprules.shim import Fit, FusedOp, Support, TensorGraph
from tprules.workspace import Workspace

EXAMPLES = sorted(p.name for p in FACTS.iterdir() if p.is_dir() and (p / "op.facts").exists())
SHIMS = ("cuda-lane:h100:Bf16", "cuda-lane:rtx3060:TwoPassInt8", "cpu:x86:F32", "cuda-lane:h200:Bf16SymmMem")

# Groups per example and shim, pinned the way tinygrad pins kernel counts: a change here
# is a change in what the planner fuses, to be looked at.
GROUP_COUNTS = {  # h200 declares collective kernels: the planner forms those the rules allow (test_kernels.py)
    "async-tp-mlp-tp2": {"cuda-lane:h100:Bf16": 18, "cuda-lane:rtx3060:TwoPassInt8": 20, "cpu:x86:F32": 16,
                        "cuda-lane:h200:Bf16SymmMem": 15},
    "gather-mlp-tp2": {"cuda-lane:h100:Bf16": 4, "cuda-lane:rtx3060:TwoPassInt8": 4, "cpu:x86:F32": 4,
                      "cuda-lane:h200:Bf16SymmMem": 4},
    "int8-mlp-tp2": {"cuda-lane:h100:Bf16": 5, "cuda-lane:rtx3060:TwoPassInt8": 12, "cpu:x86:F32": 7,
                    "cuda-lane:h200:Bf16SymmMem": 5},
    "llama-layer-tp4": {"cuda-lane:h100:Bf16": 29, "cuda-lane:rtx3060:TwoPassInt8": 49, "cpu:x86:F32": 21,
                       "cuda-lane:h200:Bf16SymmMem": 12},
    "megatron-mlp-tp2": {"cuda-lane:h100:Bf16": 4, "cuda-lane:rtx3060:TwoPassInt8": 6, "cpu:x86:F32": 4,
                        "cuda-lane:h200:Bf16SymmMem": 4},
    "megatron-mlp-tp4": {"cuda-lane:h100:Bf16": 6, "cuda-lane:rtx3060:TwoPassInt8": 10, "cpu:x86:F32": 6,
                        "cuda-lane:h200:Bf16SymmMem": 6},
    "relocated-head-tp2": {"cuda-lane:h100:Bf16": 5, "cuda-lane:rtx3060:TwoPassInt8": 9, "cpu:x86:F32": 5,
                          "cuda-lane:h200:Bf16SymmMem": 5},
    "sp-mlp-tp2": {"cuda-lane:h100:Bf16": 6, "cuda-lane:rtx3060:TwoPassInt8": 8, "cpu:x86:F32": 6,
                  "cuda-lane:h200:Bf16SymmMem": 6},
}


def verdicts_of_groups(folder: Path, result: Plan, shim: str, scratch: Path) -> dict[str, tuple[str, ...]]:
    """Judge every group of two or more members the way `tprules check` does: as member facts
    of a copy of the program."""
    copy = scratch / f"judged-{folder.name}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(folder, copy)
    lines = [f"{g.group}\t{o}" for g in result.groups if len(g.members) > 1 for o in g.members]
    (copy / "member.facts").write_text("".join(line + "\n" for line in lines))
    return {v.fusion: v.reasons for v in Workspace(copy, shim=shim).verdicts()}


def assert_guarantees(folder: Path, result: Plan, shim: str, scratch: Path) -> None:
    ws = Workspace(folder, shim=shim)
    statements = ws.program.order
    # every statement in exactly one group, members in program order
    seen = [o for g in result.groups for o in g.members]
    assert sorted(seen) == sorted(statements) and len(seen) == len(set(seen))
    position = ws.program.position
    for g in result.groups:
        assert list(g.members) == sorted(g.members, key=position.__getitem__)
    # no group of two or more members is refused by the rules
    refused = {f: r for f, r in verdicts_of_groups(folder, result, shim, scratch).items() if r}
    assert not refused
    # the graph of groups is acyclic
    of = {o: g.group for g in result.groups for o in g.members}
    groups = nx.DiGraph()
    groups.add_nodes_from(g.group for g in result.groups)
    groups.add_edges_from((of[a], of[b]) for a, bs in data_flow(ws.program.facts).items() for b in bs
                          if of[a] != of[b])
    assert nx.is_directed_acyclic_graph(groups)
    # every fold alone, as a collective, or the one fold of a collective kernel (legal by the
    # rules, above: exactly a pattern the shim declares); every other group where its members run
    places = ws.places()
    folds = {o for o, _ in ws.program.facts.tuples("fold")}
    declared = any(s == shim for s, _ in ws.program.facts.tuples("collective_kernel"))
    for g in result.groups:
        if folds & set(g.members):
            assert g.place == "collective" and (len(g.members) == 1 or declared and len(folds & set(g.members)) == 1)
        else:
            assert {places[o] for o in g.members} == {g.place}


@pytest.mark.parametrize("shim", SHIMS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_guarantees_on_every_example(example, shim, tmp_path):
    folder = FACTS / example
    result = plan(Workspace(folder, shim=shim))
    assert_guarantees(folder, result, shim, tmp_path)


@pytest.mark.parametrize("shim", SHIMS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_group_count_is_pinned(example, shim):
    assert len(plan(Workspace(FACTS / example, shim=shim)).groups) == GROUP_COUNTS[example][shim]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=tp_programs(candidates=False))
def test_guarantees_on_random_programs(program, tmp_path):
    folder = program.write(tmp_path / "program")
    result = plan(Workspace(folder, shim="cuda-lane:h100:Bf16"))
    assert_guarantees(folder, result, "cuda-lane:h100:Bf16", tmp_path)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=tp_programs(candidates=False, max_statements=10))
def test_guarantees_on_random_programs_on_a_tight_shim(program, tmp_path):
    folder = program.write(tmp_path / "program")
    shim = "cuda-lane:rtx3060:TwoPassInt8"
    assert_guarantees(folder, plan(Workspace(folder, shim=shim)), shim, tmp_path)


# -- quality ---------------------------------------------------------------------------


def test_llama_layer_has_at_most_60_percent_as_many_groups_as_statements():
    ws = Workspace(FACTS / "llama-layer-tp4")
    assert len(plan(ws).groups) <= 0.6 * len(ws.program.order)


@pytest.mark.parametrize("shim", SHIMS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_matmul_epilogues_are_fused_where_the_shim_allows(example, shim, tmp_path):
    """A matmul and its elementwise consumer share a group, unless the rules refuse merging
    their groups or the merge would make the graph of groups cyclic."""
    folder = FACTS / example
    ws = Workspace(folder, shim=shim)
    result = plan(ws)
    of = result.group_of()
    kinds = {c: k for c, k, _ in ws.program.facts.tuples("registry")}
    classes = dict(ws.program.facts.tuples("op"))
    pairs = [(a, b) for a, bs in data_flow(ws.program.facts).items() for b in sorted(bs)
             if kinds[classes[a]] == "matmul" and kinds[classes[b]] == "elementwise" and of[a] != of[b]]
    if not pairs:
        return
    merged = Plan(result.shim, tuple(
        type(result.groups[0])(f"{a}__{b}", tuple(sorted(of[a].members + of[b].members)), "")
        for a, b in pairs))
    verdicts = verdicts_of_groups(folder, merged, shim, tmp_path)
    for a, b in pairs:
        if verdicts[f"{a}__{b}"]:
            continue
        groups = nx.DiGraph((of[x].group, of[y].group) for x, ys in data_flow(ws.program.facts).items()
                            for y in ys if of[x] != of[y])
        assert nx.has_path(groups, of[a].group, of[b].group) and any(
            nx.has_path(groups, s, of[b].group) for s in groups.successors(of[a].group) if s != of[b].group), \
            f"{a} → {b}: legal to merge, acyclic, yet not fused"


# -- the planner only asks ---------------------------------------------------------------


def test_a_rule_that_refuses_everything_leaves_every_statement_alone(rules_copy):
    (rules_copy / "tp.dl").write_text((rules_copy / "tp.dl").read_text()
                                      + '\nrefused(F, "nothing_fuses") :- candidate(F).\n')
    ws = Workspace(FACTS / "llama-layer-tp4", rules_dir=rules_copy)
    assert all(len(g.members) == 1 for g in plan(ws).groups)


def test_a_rule_edit_changes_the_plan(rules_copy):
    (rules_copy / "tp.dl").write_text((rules_copy / "tp.dl").read_text()
                                      + '\nrefused(F, "no_gelu") :- member(F, O), op(O, "gelu").\n')
    result = plan(Workspace(FACTS / "megatron-mlp-tp2", rules_dir=rules_copy))
    gelus = [g for g in result.groups if any(o.startswith("gelu") for o in g.members)]
    assert len(gelus) == 2 and all(len(g.members) == 1 for g in gelus)
    assert result != plan(Workspace(FACTS / "megatron-mlp-tp2"))


class SmallKernels:
    """A compiler's own shim: fuses up to three statements, never two matmuls."""

    def name(self) -> str:
        return "small-kernels"

    def supports(self, cls):
        return Support.FUSED

    def fits(self, op, g):
        if isinstance(op, FusedOp):
            reasons = [r for r, bad in (("too_big", len(op.members) > 3),
                                        ("two_matmuls", sum(m.cls == "matmul" for m in op.members) > 1)) if bad]
            if reasons:
                return Fit.refused(op.name, *reasons)
        return Fit.success(op.name)

    def activation(self, consumer, operand, g):
        return None


def test_the_planner_runs_with_any_shim():
    g = TensorGraph.load(FACTS / "llama-layer-tp4")
    result = plan_graph(g, SmallKernels())
    assert result.shim == "small-kernels" and {grp.place for grp in result.groups} == {"device"}
    assert sorted(o for grp in result.groups for o in grp.members) == sorted(op.name for op in g.ops)
    for grp in result.groups:
        assert SmallKernels().fits(g.fuse("x", grp.members), g).ok or len(grp.members) == 1
    assert len(result.groups) < len(g.ops)


# -- determinism and outputs -------------------------------------------------------------


def test_plan_is_deterministic_across_processes():
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-m", "tprules", "plan", "facts/llama-layer-tp4", "--format", "json"],
                              cwd=ROOT, env=env, capture_output=True, text=True, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1
    expected = plan(Workspace(FACTS / "llama-layer-tp4")).to_json()
    assert json.loads(outputs.pop()) == {"shim": expected["shim"], "shim_source": "library",
                                         "groups": expected["groups"]}


def test_json_is_spec_shaped(cli):
    status, out, err = cli("plan", FACTS / "relocated-head-tp2", "--format", "json")
    assert status == 0 and not err
    data = json.loads(out)
    assert list(data) == ["shim", "shim_source", "groups"] and data["shim"] == "cuda-lane:h100:Bf16"
    assert data["shim_source"] == "library"
    for g in data["groups"]:
        assert list(g) == ["group", "members", "place"]
        assert g["place"] in {"spine", "collective"} or g["place"].startswith("chip:")
    assert {"group": "g4", "members": ["head", "probs", "pick"], "place": "chip:0"} in data["groups"]


@pytest.mark.parametrize("example", ["megatron-mlp-tp2", "int8-mlp-tp2"])
def test_text_output(cli, example, monkeypatch):
    """Golden text (regenerate: `python -m tprules plan facts/EXAMPLE > tests/data/plan/EXAMPLE.txt`)."""
    monkeypatch.chdir(ROOT)
    status, out, _ = cli("plan", f"facts/{example}")
    assert status == 0
    assert out == (ROOT / "tests" / "data" / "plan" / f"{example}.txt").read_text()


def test_dot_output(cli):
    status, out, _ = cli("plan", FACTS / "llama-layer-tp4", "--format", "dot")
    assert status == 0 and out.startswith("digraph plan {") and out.rstrip().endswith("}")
    clusters = [line.split('"')[1] for line in out.splitlines() if line.strip().startswith("subgraph")]
    assert clusters == ["cluster_spine"] + [f"cluster_chip:{c}" for c in range(4)]
    assert out.count("shape=octagon") == 2 and "all-reduce attn_out" in out
    fills = {line.split('fillcolor="')[1].split('"')[0] for line in out.splitlines()
             if line.startswith("    \"g") and "fillcolor" in line}
    assert len(fills) == 5  # four chips and the spine
    assert '"g1" -> "g3"' in out or "->" in out
    if shutil.which("dot"):
        drawn = subprocess.run(["dot", "-Tsvg"], input=out, capture_output=True, text=True)
        assert drawn.returncode == 0, drawn.stderr


def test_show_plan_reports_rounds(cli):
    status, _, err = cli("plan", FACTS / "megatron-mlp-tp2", "--show", "plan")
    assert status == 0 and err.startswith("[plan] ") and "batches" in err


# -- bad input gets the same clean errors as check -----------------------------------------


@pytest.mark.parametrize("damage", [
    ("op.facts", "broken\n", "op.facts:10:"),  # wrong number of columns
    ("reads.facts", "mm1_0\tzero\tx\n", "reads.facts:"),  # a non-number in a number column
    ("placed.facts", "x\t0\n", "spine.facts:1:"),  # x is also on the spine
    ("chips.facts", "7\n", "chips.facts:2:"),  # chips given twice
])
def test_bad_input_is_a_clean_error(cli, program_copy, damage):
    folder = program_copy("megatron-mlp-tp2")
    name, line, where = damage
    with open(folder / name, "a") as f:
        f.write(line)
    status, out, err = cli("plan", folder)
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert where in err
    assert cli("check", folder)[1:] == (out, err)


def test_unknown_shim_is_a_usage_error(cli):
    status, out, err = cli("plan", FACTS / "megatron-mlp-tp2", "--shim", "nope")
    assert status == 2 and out == "" and "nope" in err and len(err.strip().splitlines()) == 1
    assert cli("check", FACTS / "megatron-mlp-tp2", "--shim", "nope") == (status, out, err)


def test_siblings_that_share_an_input_and_a_place_fuse_horizontally(tmp_path):
    from tprules.planner import Stats
    from tprules.program.builder import ProgramBuilder

    b = ProgramBuilder(chips=2)
    x = b.tensor("x", [2, 4], spine=True)
    b.stmt("r", "relu", [x], b.tensor("r_out", [2, 4], spine=True))
    b.stmt("e", "exp", [x], b.tensor("e_out", [2, 4], spine=True))
    for c in (0, 1):  # readers of x on two chips: same input, different places
        b.stmt(f"n{c}", "neg", [x], b.tensor(f"n_out{c}", [2, 4], chip=c))
    stats = Stats()
    result = plan(Workspace(b.write(tmp_path / "p")), stats=stats)
    assert [g.members for g in result.groups] == [("r", "e"), ("n0",), ("n1",)]
    assert stats.by_pass["horizontal"] == 1 and stats.by_pass["vertical"] == 0


@pytest.mark.parametrize("engine", ["compiled", "pydatalog"])
@pytest.mark.parametrize("example", ["megatron-mlp-tp2", "relocated-head-tp2"])
def test_every_engine_gives_the_same_plan(example, engine):
    folder = FACTS / example
    assert plan(Workspace(folder, engine=engine)) == plan(Workspace(folder))


def test_merges_across_places_follow_the_rules(rules_copy):
    """Without the chip_and_spine rule, spine work may fuse into a chip's group: the planner
    asks across places and so finds it; told not to ask across places, it does not."""
    tp_file = rules_copy / "tp.dl"
    rule = 'refused(F, "chip_and_spine") :-\n    member(F, A), member(F, B), on_chip(A, _), on_spine(B), !kernel(F, _).\n'
    assert rule in tp_file.read_text()
    tp_file.write_text(tp_file.read_text().replace(rule, ""))
    ws = Workspace(FACTS / "llama-layer-tp4", rules_dir=rules_copy)
    places = ws.places()
    mixed = [g for g in plan(ws).groups if len({places[o] for o in g.members}) > 1]
    assert mixed and all(g.place.startswith("chip:") for g in mixed)
    assert not [g for g in plan(ws, across_places=False).groups if len({places[o] for o in g.members}) > 1]


def test_an_epilogue_and_attentions_chain_are_found_through_views():
    """A matmul's activation behind a reshape (as imported) is still its epilogue, with the
    reshape on the way; attention's chain runs from one bmm to the next through elementwise,
    layout and row statements, and not into the projection after it."""
    import numpy as np

    from tprules.planner.index import priority_pairs

    flows = {"mm": ["r"], "r": ["act"], "act": ["mul"], "up": ["mul"], "mul": ["mm2"], "mm2": [],
             "qk": ["s"], "s": ["sm"], "sm": ["p"], "p": ["pv"], "pv": ["o"], "o": ["wo"], "wo": []}
    cls = {"mm": "matmul", "r": "reshape", "act": "gelu", "up": "matmul", "mul": "mul", "mm2": "matmul",
           "qk": "bmm", "s": "scale", "sm": "softmax", "p": "reshape", "pv": "bmm", "o": "permute", "wo": "matmul"}
    kinds = {"matmul": "matmul", "bmm": "matmul", "softmax": "row", "reshape": "layout", "permute": "layout",
             "gelu": "elementwise", "mul": "elementwise", "scale": "elementwise"}
    names = list(flows)
    at = {o: k for k, o in enumerate(names)}
    src = np.array([at[o] for o in names for _ in flows[o]], dtype=np.int64)
    dst = np.array([at[c] for o in names for c in flows[o]], dtype=np.int64)
    first_src, first_dst = priority_pairs(len(names), src, dst, [cls[o] for o in names], kinds)
    pairs = [(names[a], names[b]) for a, b in zip(first_src.tolist(), first_dst.tolist())]
    # epilogues: mm's activation behind its reshape (the reshape on the way), up's mul; none of mm2
    assert [p for p in pairs if p[0] in ("mm", "up", "mm2")] == [("mm", "r"), ("mm", "act"), ("up", "mul")]
    # attention's chain: bmm to bmm, not into the projection after it
    assert [p for p in pairs if p[0] not in ("mm", "up", "mm2")] == \
        [("qk", "s"), ("s", "sm"), ("sm", "p"), ("p", "pv")]
