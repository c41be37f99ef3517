"""The CPU matmul core: BLAS on tiles with the group's prologue and epilogue (codegen/cpu/gemm.py).

Each case of tests/data/runtime/matmul/ is a small program (an optional prologue, one or
two sibling matmuls, an optional epilogue) run as one fused group on the cpu device, with
the BLAS core and with our own loops, on the thread count the case names; both must match
the reference. Sizes are odd and not multiples of the tile on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from plans import fused_plan

from tprules.codegen import lower
from tprules.codegen.cpu import function as cpu
from tprules.codegen.cpu.gemm import SMALL_MNK, TILE_ALIGN, TILE_COLS, TILE_ROWS, tile_plan
from tprules.program.builder import ProgramBuilder
from tprules.runtime import Program, execute
from tprules.runtime.devices.cpu import CpuDevice, thread_shares
from tprules.workspace import Workspace

CASES = {p.stem: json.loads(p.read_text())
         for p in sorted((Path(__file__).resolve().parents[2] / "data" / "runtime" / "matmul").glob("*.json"))}
INT8_SHIM = "cuda-lane:rtx3060:TwoPassInt8"  # reads a matmul's operand 0 as int8 in two passes


def program(case: dict) -> ProgramBuilder:
    m, k, n = case["m"], case["k"], case["n"]
    b = ProgramBuilder(chips=1)
    if case.get("transposed_a"):  # the operand is a transpose computed in the group
        a = b.stmt("flip", "transpose", [b.tensor("xt", [k, m], spine=True)], b.tensor("a", [m, k], spine=True))
    else:
        a = b.tensor("x", [m, k], spine=True)
    if case.get("prologue"):
        a = b.stmt("pro", case["prologue"], [a], b.tensor("pa", [m, k], spine=True))
    outs = []
    for i in range(case.get("siblings", 1)):
        w = b.tensor(f"w{i}", [n, k] if case.get("transpose_b") else [k, n], spine=True)
        if case.get("b_prologue"):
            w = b.stmt(f"wpro{i}", case["b_prologue"], [w], b.tensor(f"pw{i}", [k, n], spine=True))
        attrs = {"transpose_b": "1"} if case.get("transpose_b") else {}
        h = b.stmt(f"mm{i}", "matmul", [a, w], b.tensor(f"h{i}", [m, n], case.get("dtype", "f32"), spine=True), **attrs)
        if case.get("epilogue") and (i == 0 or case.get("siblings", 1) == 1):
            h = b.stmt(f"epi{i}", case["epilogue"], [h], b.tensor(f"e{i}", [m, n], spine=True))
        outs.append(h)
    if len(outs) == 2:
        b.stmt("glu", "mul", outs, b.tensor("out", [m, n], spine=True))
    if case.get("keep"):  # the matmul's result is read outside the group too: it is stored as it is
        b.stmt("after", "neg", ["h0"], b.tensor("later", [m, n], spine=True))
    return b


def run_case(tmp_path, case: dict, matmul: str):
    ws = Workspace(program(case).write(tmp_path / "p"), shim=INT8_SHIM if case.get("quantized") else None)
    prog = Program.from_workspace(ws)
    group = [s.name for s in prog.statements if s.name != "after"]
    plan = fused_plan(prog, [group])
    device = CpuDevice(matmul, threads=case.get("threads", 1))
    return execute(ws, plan, device=device, prog=prog), prog, plan


OWN_TOO = ("odd-sizes", "transpose-b", "prologue-and-epilogue", "quantized-operand")  # our own loops: fewer cases


@pytest.mark.parametrize("name, matmul", [(n, "auto") for n in sorted(CASES)] + [(n, "own") for n in OWN_TOO])
def test_a_fused_matmul_group_matches_the_reference(tmp_path, name, matmul):
    case = CASES[name]
    report, _, plan = run_case(tmp_path, case, matmul)
    assert report.kernels == len(plan.groups)
    assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs if not o.ok]
    assert ("openblas" in report.device or "blas" in report.device) == (matmul == "auto")


@pytest.mark.parametrize("name", ["odd-sizes", "prologue-and-epilogue", "siblings-with-swiglu", "quantized-operand"])
def test_the_blas_core_is_what_runs(tmp_path, name):
    case = CASES[name]
    ws = Workspace(program(case).write(tmp_path / "p"), shim=INT8_SHIM if case.get("quantized") else None)
    prog = Program.from_workspace(ws)
    (group,) = fused_plan(prog, [[s.name for s in prog.statements]]).groups[:1]
    kernel = lower(group, prog)
    source = cpu.render(kernel, gemm=True, threads=case.get("threads", 1))
    assert source.count("gemm(") == case.get("siblings", 1)
    assert "gemm(" not in cpu.render(kernel, gemm=False)
    # a computed operand (a prologue, an int8 read) is computed once into a buffer, not inside the matmul
    computed = bool(case.get("prologue") or case.get("quantized"))
    assert ("opnd" in source) == computed


def test_a_result_kept_as_it_is_is_written_by_blas_in_place(tmp_path):
    case = CASES["epilogue-that-keeps-the-result"]
    _, prog, plan = run_case(tmp_path, case, "auto")
    kernel = lower(plan.groups[0], prog)
    source = cpu.render(kernel)
    (call,) = [line for line in source.splitlines() if "gemm(" in line]
    h0 = next(p.name for p in kernel.params if p.tensor == "h0")
    assert f"{h0}, i0" in call.replace("  ", " ") or f", {h0}, " in call  # C is the output buffer itself


@pytest.mark.parametrize("m, n, threads", [(128, 2816, 2), (128, 704, 1), (8, 16, 2), (1, 1, 2), (300, 530, 2),
                                           (2048, 8192, 4), (7, 5, 3), (33, 7, 2), (1000, 17, 16)])
def test_tiles_cover_the_result_once_and_share_it_out(m, n, threads):
    rows, cols, tm, tn = tile_plan(m, n, threads)
    covered = np.zeros((m, n), int)
    for t in range(rows * cols):
        i0, j0 = (t // cols) * tm, (t % cols) * tn
        assert i0 < m and j0 < n  # no empty tile
        covered[i0:i0 + tm, j0:j0 + tn] += 1
    assert (covered == 1).all()
    assert tm <= max(TILE_ROWS, -(-m // threads)) and tn <= TILE_COLS + TILE_ALIGN and tn % TILE_ALIGN == 0
    if n >= threads * TILE_ALIGN:
        assert cols % threads == 0 or rows * cols >= threads


@pytest.mark.parametrize("m, n, k, threads", [(1, 2048, 2048, 2), (1, 2048, 5632, 2), (8, 5632, 2048, 2),
                                              (8, 2048, 5632, 1), (2, 17, 4096, 2), (1, 4096, 64, 2)])
def test_a_skinny_products_tiles_fit_the_blass_small_matrix_kernels(m, n, k, threads):
    rows, cols, tm, tn = tile_plan(m, n, threads, k=k)
    assert rows * cols * tm >= m and cols * tn >= n and tn % TILE_ALIGN == 0
    assert tm * tn * k <= SMALL_MNK  # (a decode step's matrix-vector products: no packing of the weights)
    assert (rows, cols, tm, tn) == tile_plan(m, n, threads) or tn < tile_plan(m, n, threads)[3]


def test_a_tall_product_is_tiled_as_before():
    assert tile_plan(128, 2816, 2, k=1024) == tile_plan(128, 2816, 2)


@pytest.mark.parametrize("cores, chips, shares", [
    (2, 1, [2]), (2, 2, [1, 1]), (2, 4, [1, 1, 1, 1]), (16, 4, [4] * 4), (16, 3, [5] * 3), (4, 8, [1] * 8)])
def test_threads_per_chip(cores, chips, shares):
    assert thread_shares(cores, chips) == shares  # (a kernel holds a core per thread: devices/cpu.py Cores)


def test_the_report_says_how_many_threads_each_chip_got(cli):
    from plans import FACTS

    status, out, _ = cli("run", FACTS / "megatron-mlp-tp2", "--format", "json")
    import numba

    expected = thread_shares(numba.config.NUMBA_NUM_THREADS, 2)
    assert status == 0 and [c["threads"] for c in json.loads(out)["chips"]] == expected
    status, out, _ = cli("run", FACTS / "megatron-mlp-tp2")
    assert "threads" in out.splitlines()[3]


@pytest.mark.parametrize("name", ["tprules.codegen.blas", "tprules.codegen.cpu.gemm", "tprules.codegen.cost",
                                  "tprules.runtime.devices.cpu", "tprules.runtime.devices.matmul"])
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0 and result.attempted > 0


def test_the_cpu_device_keeps_freed_memory_for_reuse():
    import platform

    from tprules.runtime.devices.cpu import reuse_freed_memory

    CpuDevice()
    assert reuse_freed_memory() == (platform.libc_ver()[0] == "glibc")
