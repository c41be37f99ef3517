"""The library matmul path of GPUs: matmul stages split into our stages around a library's gemm
(codegen/render/extern.py), and which core each device chooses (runtime/devices/matmul.py).

Without a GPU the path runs on the simulator with numpy standing in for cuBLAS
(`--matmul library`), so the split kernels, their scratch buffers and the launches
between them are checked against the reference here; benchmarks/gpu_check.sh runs the
same with cuBLAS on a GPU.
"""

from __future__ import annotations

import pytest
from plans import FACTS, cases, example, fused_plan

from tprules.codegen import lower
from tprules.codegen.ir import Gemm, MatmulStage, Pointwise
from tprules.codegen.render.extern import split_matmuls
from tprules.runtime import execute
from tprules.runtime.devices import DeviceUnavailable
from tprules.runtime.devices.matmul import cpu_core, gpu_core

CASES = cases()


@pytest.mark.parametrize("name, split", [
    ("matmul-gelu-epilogue", ["gemm", "pointwise"]),  # the GELU epilogue reads the gemm's result
    ("gelu-matmul-prologue", ["pointwise", "gemm"]),  # GELU computed into a buffer, then the gemm
    ("qkv-siblings", ["gemm", "gemm", "gemm"]),  # each result straight into its output buffer
    ("swiglu", ["gemm", "gemm", "pointwise"]),
    ("key-transpose", ["gemm", "pointwise"]),  # k kept as it is; its transpose stored by the epilogue
    ("quantized-matmul-epilogue", ["absmax", "pointwise", "gemm", "pointwise"]),
    ("attention-core", ["gemm", "pointwise", "row", "gemm"]),  # scores, scale, softmax, weighted values
])
def test_split_stages(name, split):
    case = CASES[name]
    _, prog = example(case["program"])
    plan = fused_plan(prog, case["groups"])
    kernel = split_matmuls(lower(plan.groups[0], prog))
    assert [type(s).__name__.lower().replace("stage", "") for s in kernel.stages] == split
    assert not any(isinstance(s, MatmulStage) for s in kernel.stages)
    names = {p.name for p in kernel.params}
    for g in (s for s in kernel.stages if isinstance(s, Gemm)):
        assert {g.a, g.b, g.c} <= names


def test_a_kernel_without_matmuls_is_left_alone():
    _, prog = example("llama-layer-tp4")
    kernel = lower(fused_plan(prog, [["res1", "rms2"]]).groups[0], prog)
    assert split_matmuls(kernel) is kernel


def test_a_result_kept_as_it_is_needs_no_epilogue():
    _, prog = example("llama-layer-tp4")
    kernel = split_matmuls(lower(fused_plan(prog, [["wo_0"]]).groups[0], prog))
    (gemm,) = kernel.stages
    assert kernel.param(gemm.c).role == "out" and not any(isinstance(s, Pointwise) for s in kernel.stages)


@pytest.mark.parametrize("program, groups", [
    ("megatron-mlp-tp2", [["mm1_0", "gelu_0"], ["gelu_1", "mm2_1"]]),
    ("int8-mlp-tp2", [["mm1_0", "relu_0"]]),
    ("llama-layer-tp4", [["qk_1", "scale_1", "softmax_1", "pv_1"], ["gate_0", "up_0", "silu_0", "swiglu_0"],
                         ["k_2", "kt_2"]]),
])
def test_the_library_path_on_the_simulator_matches_the_reference(program, groups):
    ws, prog = example(program)
    report = execute(ws, fused_plan(prog, groups), device="sim", prog=prog, matmul="library")
    assert "numpy standing in for cuBLAS" in report.device
    assert report.ok, [o for o in report.outputs if not o.ok]


def test_run_takes_the_library_path_from_the_command_line(cli):
    status, out, err = cli("run", FACTS / "megatron-mlp-tp2", "--device", "sim", "--matmul", "library")
    assert status == 0 and "matmul: numpy standing in for cuBLAS" in out.splitlines()[0], err


def test_the_json_report_says_which_core_ran_and_why(cli):
    import json

    status, out, _ = cli("run", FACTS / "megatron-mlp-tp2", "--device", "sim", "--format", "json")
    assert status == 0 and json.loads(out)["matmul"] == {
        "kind": "tiles", "library": "own shared-memory tiles", "reason": "the simulator runs our own kernels"}
    status, out, _ = cli("run", FACTS / "megatron-mlp-tp2", "--matmul", "own", "--format", "json")
    assert json.loads(out)["matmul"]["reason"] == "asked for (--matmul own)"


# -- which core, and why ----------------------------------------------------------------

MISSING = (("cupy", lambda: (False, "cannot be imported (No module named 'cupy')")),
           ("torch", lambda: (False, "torch 2.13.0+cpu sees no GPU")))


def test_no_gpu_library_means_our_own_tiles_and_says_why():
    core = gpu_core("auto", probes=MISSING)
    assert core.own and core.kind == "tiles"
    assert core.reason == ("no GPU matmul library (cupy: cannot be imported (No module named 'cupy'); "
                           "torch: torch 2.13.0+cpu sees no GPU)")


def test_the_first_library_present_is_taken():
    probes = (("cupy", lambda: (False, "cannot be imported")), ("torch", lambda: (True, "cuBLAS through torch 9")))
    core = gpu_core("auto", probes=probes, providers={"torch": lambda: "torch provider"})
    assert (core.kind, core.library, core.provider) == ("library", "cuBLAS through torch 9", "torch provider")


def test_insisting_on_a_missing_library_is_a_clean_error():
    with pytest.raises(DeviceUnavailable, match="--matmul library: no GPU matmul library"):
        gpu_core("library", probes=MISSING)
    with pytest.raises(DeviceUnavailable, match="--matmul library: no BLAS for the cpu device: scipy"):
        cpu_core("library", probe=lambda: (False, "scipy cannot be imported"))


def test_own_is_taken_when_asked_even_with_a_library():
    assert gpu_core("own", probes=(("cupy", lambda: (True, "cuBLAS")),)).kind == "tiles"
    assert cpu_core("own", probe=lambda: (True, "openblas")).kind == "loops"


def test_the_cpu_takes_blas_when_present_and_loops_when_not():
    assert cpu_core("auto", probe=lambda: (True, "openblas 9")).library == "openblas 9 tiles"
    core = cpu_core("auto", probe=lambda: (False, "scipy cannot be imported"))
    assert (core.kind, core.reason) == ("loops", "no BLAS: scipy cannot be imported")


def test_the_simulator_runs_our_own_tiles_unless_asked():
    assert gpu_core("auto", simulator=True).kind == "tiles"
    assert gpu_core("library", simulator=True).library == "numpy standing in for cuBLAS"


def test_an_unknown_choice_is_a_clean_error():
    with pytest.raises(DeviceUnavailable, match="unknown matmul core fast"):
        cpu_core("fast")


def _views_program(b):
    """Matmul operands that are views of buffers: a reshape, a slice of columns (a leading
    dimension wider than the block), a permute (a transposed block)."""
    from plans import spine_statement as _s

    x = _s(b, "x2", "reshape", [b.tensor("x", [2, 3, 8], spine=True)], [6, 8])
    cols = _s(b, "cols", "slice", [b.tensor("wide", [8, 16], spine=True)], [8, 5], axis=1, start=4, end=9)
    _s(b, "mm", "matmul", [x, cols], [6, 5])
    at = _s(b, "at", "permute", [b.tensor("xt", [8, 6], spine=True)], [6, 8], dims="1,0")
    _s(b, "mm2", "matmul", [at, b.tensor("w", [8, 5], spine=True)], [6, 5])


def test_the_library_reads_views_as_they_lie(tmp_path_factory):
    """On the GPU's library split an operand that is a view of a buffer goes to the library as
    an offset and a leading dimension (a strided block), with no prologue copying it."""
    from plans import write_programs

    from tprules.planner.plan import Group, Plan
    from tprules.runtime import Program
    from tprules.workspace import Workspace

    folder = write_programs({"views": _views_program}, tmp_path_factory)["views"]
    ws = Workspace(folder)
    prog = Program.from_workspace(ws)
    groups = (Group("g0", ("x2", "cols", "mm"), "spine"), Group("g1", ("at", "mm2"), "spine"))
    plan = Plan(prog.shim, groups)
    first, second = (split_matmuls(lower(g, prog)) for g in groups)
    assert [type(s) for s in first.stages] == [Gemm] and [type(s) for s in second.stages] == [Gemm]
    (g0,), (g1,) = first.stages, second.stages
    assert g0.a_at == (0, 8) and g0.b_at == (4, 16) and not g0.ta and not g0.tb
    assert g1.a_at == (0, 6) and g1.ta and g1.b_at is None
    report = execute(ws, plan, device="sim", prog=prog, matmul="library")
    assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs]
