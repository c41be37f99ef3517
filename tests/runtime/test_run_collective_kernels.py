"""Collective kernels at run time (SPEC §3, runtime/plan/collective.py, runtime/execution/overlap.py): a
planned kernel runs as one collective with the unfused program's outputs, in one process
(cpu, sim) bit for bit as its parts run apart, and on ranks overlapped (thread ranks here;
the MPI path and its trace: test_run_collective_kernels_mpi.py).

Each program is written for these tests, one a pattern (and the variants whose blocks
overlap differently: a gather along the contracted axis, a scatter along the columns), for
a shim of their own that declares every pattern with a small `min_collective_block`."""

from __future__ import annotations

import numpy as np
import pytest
from ranks import run_on_threads

from tprules.planner.plan import Group, Plan
from tprules.program.builder import ProgramBuilder
from tprules.runtime import Program, execute, run_plan
from tprules.runtime.execution.overlap import CHUNKS
from tprules.runtime.plan.collective import collective_kernel
from tprules.shim.base import own_shim
from tprules.workspace import Workspace

SHIM = "cuda-lane:tiny:SymmMem"
PATTERNS = ("all_gather_matmul", "matmul_reduce_scatter", "all_reduce_norm")


def builder(chips: int) -> ProgramBuilder:
    b = ProgramBuilder(chips=chips)
    own_shim(b, SHIM, PATTERNS, {"min_collective_block": 2, "max_members": 16, "max_inputs": 16, "max_matmuls": 8})
    return b


def gather_matmul(chips: int = 2, axis: int = 0, block: int = 4) -> ProgramBuilder:
    """ag: x = cat(x_k) along `axis`; mm_k: h_k = x @ w_k (chip k); act_k: a_k = relu(h_k).
    Chip k's block is `block` rows (axis 0) or 3 columns of `block` + 1 rows (the contracted axis)."""
    b = builder(chips)
    rows, width = block * chips, 6
    if axis == 0:
        xs = [b.tensor(f"x_{k}", [block, width], chip=k) for k in range(chips)]
        x = b.gather("ag", xs, b.tensor("x", [rows, width], spine=True), "sp_in", axis=0)
    else:
        xs = [b.tensor(f"x_{k}", [block + 1, 3], chip=k) for k in range(chips)]
        x = b.gather("ag", xs, b.tensor("x", [block + 1, 3 * chips], spine=True), "cols", axis=-1)
    m, n = b.shapes[x][0], 5
    for k in range(chips):
        h = b.stmt(f"mm_{k}", "matmul", [x, b.tensor(f"w_{k}", [b.shapes[x][1], n], chip=k)],
                   b.tensor(f"h_{k}", [m, n], chip=k))
        b.stmt(f"act_{k}", "relu", [h], b.tensor(f"a_{k}", [m, n], chip=k))
    return b


def matmul_scatter(chips: int = 2, axis: int = 0, transpose_b: bool = False, block: int = 4) -> ProgramBuilder:
    """mm_k: p_k = x_k @ w_k (chip k); rs: y = sum(p_k) along `axis`, chip k's block y_k; act_k: relu(y_k)."""
    b = builder(chips)
    rows, cols = block * chips, 2 * chips
    parts = []
    for k in range(chips):
        w = b.tensor(f"w_{k}", [cols, 3] if transpose_b else [3, cols], chip=k)
        attrs = {"transpose_b": 1} if transpose_b else {}
        parts.append(b.stmt(f"mm_{k}", "matmul", [b.tensor(f"x_{k}", [rows, 3], chip=k), w],
                            b.tensor(f"p_{k}", [rows, cols], chip=k), **attrs))
    block = [rows // chips, cols] if axis == 0 else [rows, cols // chips]
    ys = b.reduce_scatter("rs", parts, b.tensor("y", [rows, cols], spine=True), "sp_out", axis=axis % 2,
                          blocks=[b.tensor(f"y_{k}", block, chip=k) for k in range(chips)])
    for k, y in enumerate(ys):
        b.stmt(f"act_{k}", "relu", [y], b.tensor(f"z_{k}", block, chip=k))
    return b


def reduce_norm(chips: int = 2, residual: bool = True, rows: int = 6) -> ProgramBuilder:
    """mm_k: p_k = x @ w_k (chip k); ar: y = sum(p_k); res: r = y + x; norm: n = rmsnorm(r, nw); out: relu(n)."""
    b = builder(chips)
    x = b.tensor("x", [rows, 8], spine=True)
    parts = [b.stmt(f"mm_{k}", "matmul", [x, b.tensor(f"w_{k}", [8, 8], chip=k)], b.tensor(f"p_{k}", [rows, 8], chip=k))
             for k in range(chips)]
    y = b.fold("ar", parts, b.tensor("y", [rows, 8], spine=True), "out")
    if residual:
        y = b.stmt("res", "add", [y, x], b.tensor("r", [rows, 8], spine=True))
    n = b.stmt("norm", "rmsnorm", [y, b.tensor("nw", [8], spine=True)], b.tensor("n", [rows, 8], spine=True), eps="1e-5")
    b.stmt("out", "relu", [n], b.tensor("o", [rows, 8], spine=True))
    return b


PROGRAMS = {
    "gather-rows": (gather_matmul, {}, "all_gather_matmul"),
    "gather-contracted": (gather_matmul, {"axis": -1}, "all_gather_matmul"),
    "scatter-rows": (matmul_scatter, {}, "matmul_reduce_scatter"),
    "scatter-cols": (matmul_scatter, {"axis": -1}, "matmul_reduce_scatter"),
    "scatter-cols-transposed": (matmul_scatter, {"axis": -1, "transpose_b": True}, "matmul_reduce_scatter"),
    # blocks of 16 rows: each block's product in bands of rows, MPI given a turn between them
    "gather-rows-banded": (gather_matmul, {"block": 16}, "all_gather_matmul"),
    "gather-contracted-banded": (gather_matmul, {"axis": -1, "block": 16}, "all_gather_matmul"),
    "scatter-rows-banded": (matmul_scatter, {"block": 16}, "matmul_reduce_scatter"),
    "scatter-cols-banded": (matmul_scatter, {"axis": -1, "block": 16}, "matmul_reduce_scatter"),
    "norm-residual": (reduce_norm, {}, "all_reduce_norm"),
    "norm-alone": (reduce_norm, {"residual": False}, "all_reduce_norm"),
}


def load(tmp_path, name: str, chips: int = 2):
    make, kw, pattern = PROGRAMS[name]
    folder = make(chips=chips, **kw).write(tmp_path / f"{name}-{chips}")
    ws = Workspace(folder, shim=SHIM)
    return ws, Program.from_workspace(ws), pattern


def kernels(plan: Plan, prog) -> list:
    return [k for k in (collective_kernel(g, prog) for g in plan.groups) if k is not None]


def apart(plan: Plan, prog) -> Plan:
    """The plan with each collective kernel's members in groups of their own (the unfused pair)."""
    groups: list[Group] = []
    for g in plan.groups:
        k = collective_kernel(g, prog)
        groups.extend([g] if k is None else [Group(f"{g.group}_{o}", p.members, p.place)
                                             for o, p in zip(g.members, k.parts)])
    return Plan(plan.shim, tuple(groups))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_plan_forms_the_kernel_and_cpu_runs_it_as_its_parts_apart(name, tmp_path):
    ws, prog, pattern = load(tmp_path, name)
    plan = run_plan(ws, prog, "cpu")
    assert [k.pattern for k in kernels(plan, prog)] == [pattern]
    fused = execute(ws, plan, "cpu", prog=prog)
    unfused = execute(ws, apart(plan, prog), "cpu", prog=prog)
    assert fused.ok and unfused.ok
    assert sorted(fused.values) == sorted(unfused.values)
    for t, v in unfused.values.items():
        assert np.array_equal(fused.values[t], v), t


@pytest.mark.parametrize("name", ["gather-rows", "scatter-rows", "norm-residual"])
def test_sim_runs_each_pattern_with_the_reference_outputs(name, tmp_path):
    ws, prog, _ = load(tmp_path, name)
    plan = run_plan(ws, prog, "cpu")
    report = execute(ws, plan, "sim", prog=prog)
    assert report.ok and kernels(plan, prog)
    single = execute(ws, plan, "cpu", prog=prog)
    for t, v in single.values.items():
        assert np.allclose(report.values[t], v, rtol=1e-5, atol=1e-6), t


@pytest.mark.parametrize("chips, ranks", [(2, 2), (4, 2), (4, 4)])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_ranks_overlap_each_pattern_with_one_process_outputs(name, chips, ranks, tmp_path):
    ws, prog, pattern = load(tmp_path, name, chips)
    plan = run_plan(ws, prog, "cpu")
    assert [k.pattern for k in kernels(plan, prog)] == [pattern]
    single = execute(ws, plan, "cpu", prog=prog, share=False)
    report = run_on_threads(prog, plan, ranks)
    assert report.ok, [o for o in report.outputs if not o.ok]
    # the kernel ran overlapped: a ring of messages, or the all-reduce in row chunks, never the plain collective
    r0 = report.ranks[0]
    assert r0.allgathers == r0.reducescatters == 0
    assert report.allreduces == (CHUNKS if pattern == "all_reduce_norm" else 0)
    for t, want in single.values.items():
        scale = max(float(np.max(np.abs(want))), 1e-30)
        assert float(np.max(np.abs(report.values[t] - want))) / scale <= 1e-6, t


def bf16(make, **kw):
    """The program with every tensor bf16 (the values each statement stores are rounded)."""
    def made(chips: int = 2) -> ProgramBuilder:
        b = make(chips=chips, **kw)
        b.facts["tensor"] = [(t, "bf16") for t, _ in b.facts["tensor"]]
        return b
    return made


@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("make", [gather_matmul, matmul_scatter, reduce_norm], ids=lambda m: m.__name__)
def test_bf16_programs_match_the_reference_in_one_process_and_on_ranks(make, ranks, tmp_path):
    folder = bf16(make)().write(tmp_path / "bf16")
    ws = Workspace(folder, shim=SHIM)
    prog = Program.from_workspace(ws)
    plan = run_plan(ws, prog, "cpu")
    assert kernels(plan, prog) and execute(ws, plan, "cpu", prog=prog).ok
    assert run_on_threads(prog, plan, ranks).ok


def test_async_tp_example_on_cpu_and_two_thread_ranks():
    ws = Workspace("facts/async-tp-mlp-tp2", shim="cuda-lane:h200:Bf16SymmMem")
    prog = Program.from_workspace(ws)
    plan = run_plan(ws, prog, "cpu")
    assert sorted(k.pattern for k in kernels(plan, prog)) == sorted(PATTERNS)
    single = execute(ws, plan, "cpu", prog=prog, share=False)
    assert single.ok
    report = run_on_threads(prog, plan, 2)
    assert report.ok
    for t, want in single.values.items():
        assert np.allclose(report.values[t], want, rtol=1e-6, atol=1e-6), t


def test_show_kernels_on_ranks_says_what_each_collective_kernel_does(tmp_path):
    ws, prog, _ = load(tmp_path, "norm-residual")
    seen: list = []
    run_on_threads(prog, run_plan(ws, prog, "cpu"), 2, show_kernels=lambda modules, inputs: lambda k, src: seen.append((k, src)))
    (kernel, source), = [(k, s) for k, s in seen if k.kind.startswith("collective kernel")]
    assert kernel.members == ("ar", "res", "norm") and "row chunks" in source
