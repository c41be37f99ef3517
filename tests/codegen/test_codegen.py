"""Code generation without running: stages of the usual fused groups, parameters, sources."""

from __future__ import annotations

import pytest
from plans import cases, example, fused_plan

from tprules.codegen import lower
from tprules.codegen.cpu import function as cpu
from tprules.codegen.cuda import kernel as cuda
from tprules.codegen.ir import Load, Op, Pointwise
from tprules.program.builder import ProgramBuilder
from tprules.runtime import Program
from tprules.runtime.plan.groups import unfused
from tprules.workspace import Workspace

CASES = cases()


def kernels_of(prog, groups):
    plan = fused_plan(prog, groups)
    return {g.group: lower(g, prog) for g in plan.groups}


@pytest.mark.parametrize("name", sorted(CASES))
def test_stages_of_a_fused_group(name):
    case = CASES[name]
    _, prog = example(case["program"])
    kernels = kernels_of(prog, case["groups"])
    assert [kernels[f"g{i}"].kind for i in range(len(case["groups"]))] == case["kinds"]


def test_a_chain_stores_only_what_others_read():
    _, prog = example("int8-mlp-tp2")
    k = kernels_of(prog, [["relu_1", "u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7"]])["g0"]
    roles = {p.tensor: p.role for p in k.params}
    # r_1 is read by square_1 outside the group, ue7 by nobody (a program output)
    assert {t for t, r in roles.items() if r == "out"} == {"r_1", "ue7"}
    assert "scratch" not in roles.values()
    (stage,) = k.stages
    assert isinstance(stage, Pointwise) and len(stage.stores) == 2


def test_two_matmuls_in_a_row_go_through_a_scratch_buffer():
    _, prog = example("megatron-mlp-tp4")
    k = kernels_of(prog, [["mm1_2", "gelu_2", "mm2_2"]])["g0"]
    assert {p.tensor: p.role for p in k.params if p.role != "in"} == {"a_2": "scratch", "p_2": "out"}


def test_a_fused_fold_reads_only_its_own_chips_partial():
    _, prog = example("megatron-mlp-tp2")
    k = kernels_of(prog, [["allreduce", "bias"]])["g0"]
    (local,) = [p for p in k.params if p.role == "local"]
    assert dict(local.local) == {0: "p_0", 1: "p_1"}
    (stage,) = k.stages
    (store,) = stage.stores
    fold = store.value.args[0]  # bias = fold + b
    assert isinstance(fold, Op) and fold.cls == "sum" and fold.args == (Load(local.name, (8, 16)),)


def test_a_fold_alone_sums_every_chips_partial():
    _, prog = example("megatron-mlp-tp4")
    k = lower(next(g for g in unfused(prog).groups if g.group == "allreduce"), prog)
    assert k.place == "collective"
    assert [p.tensor for p in k.params if p.role == "in"] == ["p_0", "p_1", "p_2", "p_3"]


def test_the_same_group_on_two_chips_renders_the_same_source():
    _, prog = example("llama-layer-tp4")
    ks = kernels_of(prog, [["gate_0", "up_0", "silu_0", "swiglu_0"], ["gate_1", "up_1", "silu_1", "swiglu_1"]])
    assert cpu.render(ks["g0"]) == cpu.render(ks["g1"])
    target = cuda.Target(16)
    assert cuda.render(ks["g0"], target) == cuda.render(ks["g1"], target)


def test_unfused_kernels_have_one_stage_and_one_store():
    _, prog = example("llama-layer-tp4")
    for g in unfused(prog).groups:
        k = lower(g, prog)
        assert len(k.stages) == 1 and len(k.stages[0].stores) == 1, g.group


@pytest.mark.parametrize("name", ["attention-core", "rmsnorm-into-quantized-matmuls", "broadcast-transpose-softmax"])
def test_gpu_source_is_python_and_launches_fit(name):
    case = CASES[name]
    _, prog = example(case["program"])
    k = kernels_of(prog, case["groups"])["g0"]
    source, launches = cuda.render(k, cuda.Target(16))
    compile(source, "kernel.py", "exec")
    assert "cache=True" in source and "SHARED_LOCK" not in source
    assert len(launches) == len(k.stages)
    assert all(grid >= 1 and block in (256,) for grid, block in launches)


def big_matmul(tmp_path, n: int) -> Workspace:
    b = ProgramBuilder(chips=1)
    b.stmt("mm", "matmul", [b.tensor("a", [n, n], spine=True), b.tensor("w", [n, n], spine=True)],
           b.tensor("y", [n, n], spine=True))
    return Workspace(b.write(tmp_path / f"mm{n}"))


@pytest.mark.parametrize("n, parallel", [(8, False), (64, True)])
def test_cpu_kernels_use_threads_only_when_big(tmp_path, n, parallel):
    prog = Program.from_workspace(big_matmul(tmp_path, n))
    kernel = lower(unfused(prog).groups[0], prog)
    assert f"parallel={parallel}" in cpu.render(kernel, threads=2)
    assert "parallel=False" in cpu.render(kernel, threads=1)  # a chip with one thread: no thread pool at all
