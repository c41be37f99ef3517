"""Collective kernels in the plan (SPEC §3, planner/kernels.py): under a shim that declares
them, each pattern the rules allow is one group of place `collective`, formed where its
overlap pays; under any other shim the plan is what it was before (byte for byte)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tprules.codegen.cost import GPU
from tprules.planner import Stats, plan, plan_graph
from tprules.planner.cost import KernelCost
from tprules.planner.cost_lines import cost_lines
from tprules.planner.kernels import Overlap
from tprules.program.builder import ProgramBuilder
from tprules.runtime import Program
from tprules.shim import FactShim, Manifest, TensorGraph, TensorParallelShim
from tprules.workspace import Workspace

FACTS = Path(__file__).resolve().parents[2] / "facts"
DATA = Path(__file__).resolve().parents[1] / "data" / "plan"
H200 = "cuda-lane:h200:Bf16SymmMem"
ASYNC = FACTS / "async-tp-mlp-tp2"
KERNELS = {("allgather", "mm1_0", "mm1_1"), ("mm2_0", "mm2_1", "scatter", "scatter_0", "scatter_1"),
           ("allreduce", "res", "norm")}


def kernels_of(p) -> set[tuple[str, ...]]:
    return {g.members for g in p.groups if g.place == "collective" and len(g.members) > 1}


def test_the_legal_patterns_are_formed_and_the_refused_left_alone():
    stats = Stats()
    p = plan(Workspace(ASYNC, shim=H200), stats=stats)
    assert kernels_of(p) == KERNELS and stats.kernels == 3
    alone = {g.members[0] for g in p.groups if len(g.members) == 1 and g.place == "collective"}
    assert alone == {"gather_cols", "scatter2"}  # too_narrow, shared_partial
    # the kernels' members are in no other group; down_0's partial, read by probe, stays on chip 0
    assert ("down_0", "probe") in {g.members for g in p.groups}


def test_every_shim_that_declares_nothing_plans_as_before():
    """The plans of every example under the shims that declare nothing, as main planned them
    before collective kernels (tests/data/plan/non-declaring-shims.json)."""
    before = json.loads((DATA / "non-declaring-shims.json").read_text())
    for key, groups in before.items():
        example, shim = key.split()
        now = plan(Workspace(FACTS / example, shim=shim))
        assert [[g.group, list(g.members), g.place] for g in now.groups] == groups, key


def test_a_kernel_whose_overlap_does_not_pay_is_not_formed():
    """On a machine where a launch costs more than the transfer it would hide, no kernel pays."""
    g = TensorGraph.load(ASYNC)
    tp = TensorParallelShim(FactShim.load(H200), Manifest.load(ASYNC))
    view = Program.from_workspace(Workspace(ASYNC, shim=H200))
    assert kernels_of(plan_graph(g, tp, cost=KernelCost(view, GPU))) == KERNELS
    assert kernels_of(plan_graph(g, tp, cost=KernelCost(view, replace(GPU, launch_s=1.0)))) == set()


def test_plan_graph_forms_the_kernels_and_keeps_other_folds_alone():
    g = TensorGraph.load(ASYNC)
    tp = TensorParallelShim(FactShim.load(H200), Manifest.load(ASYNC))
    p = plan_graph(g, tp)
    assert kernels_of(p) == KERNELS
    folds = {"allgather", "scatter", "allreduce", "gather_cols", "scatter2"}
    for grp in p.groups:
        if folds & set(grp.members):
            assert grp.place == "collective" and len(folds & set(grp.members)) == 1
    # under a shim that declares nothing, plan_graph forms none
    plain = TensorParallelShim(FactShim.load("cuda-lane:h100:Bf16"), Manifest.load(ASYNC))
    assert kernels_of(plan_graph(g, plain)) == set()


@pytest.mark.parametrize("t, c, launch, pays", [(10, 5, 5, True), (10, 4, 5, False), (3, 30, 2, True),
                                                 (1, 30, 2, False)])
def test_overlap_pays_when_the_shorter_side_hides_more_than_a_launch(t, c, launch, pays):
    o = Overlap("all_gather_matmul", t, c, launch)
    assert o.kernel == max(t, c) + launch and o.hidden == min(t, c) and o.pays == pays


def test_show_cost_gives_each_kernel_its_overlap():
    ws = Workspace(ASYNC, shim=H200)
    lines = [line for line in cost_lines(Program.from_workspace(ws), plan(ws), "gpu") if "collective kernel" in line]
    assert [line.split()[6] for line in lines] == ["all_gather_matmul:", "matmul_reduce_scatter:", "all_reduce_norm:"]
    assert all("hidden by overlap" in line and "transfer" in line for line in lines)


def sp_block(chips: int = 2, rows: int = 2048, hidden: int = 16) -> ProgramBuilder:
    """A sequence-parallel block written for these tests: gather the tokens, a column matmul
    per chip, a row matmul per chip, reduce-scatter the tokens back."""
    b = ProgramBuilder(chips=chips)
    xs = [b.tensor(f"x_{k}", [rows // chips, hidden], chip=k) for k in range(chips)]
    x = b.gather("ag", xs, b.tensor("x", [rows, hidden], spine=True), "sp_in", axis=0)
    parts = []
    for k in range(chips):
        w = b.tensor(f"w_{k}", [hidden, hidden], chip=k)
        h = b.stmt(f"up_{k}", "matmul", [x, w], b.tensor(f"h_{k}", [rows, hidden], chip=k))
        a = b.stmt(f"act_{k}", "relu", [h], b.tensor(f"a_{k}", [rows, hidden], chip=k))
        v = b.tensor(f"v_{k}", [hidden, hidden], chip=k)
        parts.append(b.stmt(f"down_{k}", "matmul", [a, v], b.tensor(f"p_{k}", [rows, hidden], chip=k)))
    b.reduce_scatter("rs", parts, b.tensor("y", [rows, hidden], spine=True), "sp_out", axis=0,
                     blocks=[b.tensor(f"y_{k}", [rows // chips, hidden], chip=k) for k in range(chips)])
    return b


def test_a_program_the_tests_wrote_gets_both_sequence_parallel_kernels(tmp_path):
    folder = sp_block().write(tmp_path / "sp")
    p = plan(Workspace(folder, shim=H200))
    assert kernels_of(p) == {("ag", "up_0", "up_1"), ("down_0", "down_1", "rs", "rs_0", "rs_1")}
    narrow = sp_block(rows=1024).write(tmp_path / "narrow")  # blocks of 512 tokens: too_narrow
    assert kernels_of(plan(Workspace(narrow, shim=H200))) == set()
