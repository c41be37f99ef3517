"""The class grouped_matmul (issue 36, docs/classes.md): each expert's rows of A times its
matrix. Its reference against torch's meaning, its kernels (cpu with BLAS per expert, our
own loops, the simulator's per-expert tiles) fused with a prologue and an epilogue as the
grouped experts' form fuses them, and its cost: each used expert's weights read once."""

from __future__ import annotations

import numpy as np
import pytest
from plans import fused_plan
from plans import spine_statement as _s

from tprules import ops
from tprules.codegen import cost, lower
from tprules.codegen.cpu import function as cpu
from tprules.program.builder import ProgramBuilder
from tprules.runtime import Program, execute
from tprules.runtime.devices.cpu import CpuDevice
from tprules.workspace import Workspace


def grouped_alone(b, offsets=(2, 2, 6)):
    """7 rows, 3 experts: expert 1 has no rows, row 6 lies past the last offset (zero)."""
    a = b.tensor("a", [7, 5], spine=True)
    w = b.tensor("w", [3, 5, 6], spine=True)
    offs = b.tensor("offs", [3], "i32", spine=True, data=np.array(offsets, np.int32))
    _s(b, "out", "grouped_matmul", [a, w, offs], [7, 6])


def experts(b):
    """The grouped experts' form: the tokens' rows gathered in expert order, a grouped
    matmul by the checkpoint's [E, 2I, H] weights read transposed, SwiGLU, the grouped down
    projection, each row weighted."""
    x = b.tensor("x", [4, 6], spine=True)
    perm = b.tensor("perm", [8], "i64", spine=True, data=np.array([1, 3, 0, 6, 2, 5, 7, 4], np.int64))
    tok = b.tensor("tok", [8], "i64", spine=True, data=np.array([0, 1, 0, 3, 1, 2, 3, 2], np.int64))
    offs = b.tensor("offs", [3], "i32", spine=True, data=np.array([3, 5, 8], np.int32))
    rows = _s(b, "rows", "take_rows", [x, tok], [8, 6])
    gate_up = b.tensor("gate_up", [3, 10, 6], spine=True)
    gu_t = _s(b, "gu_t", "permute", [gate_up], [3, 6, 10], dims="0,2,1")
    h = _s(b, "h", "grouped_matmul", [rows, gu_t, offs], [8, 10])
    g = _s(b, "g", "slice", [h], [8, 5], axis=1, start=0, end=5, step=1)
    u = _s(b, "u", "slice", [h], [8, 5], axis=1, start=5, end=10, step=1)
    act = _s(b, "act", "mul", [_s(b, "sg", "silu", [g], [8, 5]), u], [8, 5])
    down = b.tensor("down", [3, 5, 6], spine=True)
    y = _s(b, "y", "grouped_matmul", [act, down, offs], [8, 6])
    wt = b.tensor("wt", [8, 1], spine=True)
    back = _s(b, "back", "take_rows", [_s(b, "yw", "mul", [y, wt], [8, 6]), perm], [8, 6])
    _s(b, "out", "add_scalar", [back], [8, 6], value="0.0")


def ranks(b):
    """The stable sort of the grouped form: ids with ties (and a row with a NaN and an
    infinity), each element's place, and the sorted ids put there."""
    ids = b.tensor("ids", [2, 9], spine=True, data=np.array(
        [[3, 1, 3, 0, 1, 1, 2, 0, 3], [2.5, np.nan, -np.inf, 2.5, 0, np.nan, 7, -1, 0]], np.float32))
    rank = _s(b, "rank", "sort_rank", [ids], [2, 9], "i64")
    _s(b, "sorted", "put_along", [b.tensor("zeros", [2, 9], spine=True, data=np.zeros((2, 9), np.float32)), rank,
                                  ids], [2, 9], axis=1)


def _write(tmp_path, build, **kw):
    b = ProgramBuilder(chips=1)
    build(b, **kw)
    return Workspace(b.write(tmp_path / "p"))


def test_the_reference_is_each_expert_s_rows_times_its_matrix():
    rng = np.random.default_rng(0)
    a, w = rng.standard_normal((7, 3)).astype(np.float32), rng.standard_normal((3, 3, 4)).astype(np.float32)
    out = ops.CLASSES["grouped_matmul"].reference({}, a, w, np.array([2, 2, 6], np.int32))
    assert np.allclose(out[:2], a[:2] @ w[0]) and np.allclose(out[2:6], a[2:6] @ w[2])
    assert (out[6] == 0).all()
    # an offset below an earlier one ends an empty group (the running maximum)
    out = ops.CLASSES["grouped_matmul"].reference({}, a, w, np.array([5, 3, 7], np.int32))
    assert np.allclose(out[:5], a[:5] @ w[0]) and np.allclose(out[5:], a[5:] @ w[2])


def test_the_reference_agrees_with_torch_s_grouped_mm():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    a, w = rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((3, 4, 4)).astype(np.float32)
    offs = np.array([3, 3, 8], np.int32)
    want = torch._grouped_mm(torch.tensor(a), torch.tensor(w), offs=torch.tensor(offs)).numpy()
    got = ops.CLASSES["grouped_matmul"].reference({}, a, w, offs)
    assert np.allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("offsets", [(2, 2, 6), (7, 7, 7), (0, 0, 0), (5, 3, 7)])
@pytest.mark.parametrize("device", ["cpu", "cpu-own", "sim"])
def test_the_kernels_match_the_reference(tmp_path, offsets, device):
    ws = _write(tmp_path, grouped_alone, offsets=offsets)
    where = CpuDevice("own", threads=1) if device == "cpu-own" else device
    report = execute(ws, device=where)
    assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs]


@pytest.mark.parametrize("device, unfused", [("cpu", False), ("sim", False), ("sim", True), ("cpu-own", False)])
def test_the_experts_fused_as_planned_match_the_reference(tmp_path, device, unfused):
    ws = _write(tmp_path, experts)
    where = CpuDevice("own", threads=2) if device == "cpu-own" else device
    report = execute(ws, device=where, baseline=unfused)
    assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs]


def test_one_blas_call_per_expert_and_the_weights_read_transposed_where_they_lie(tmp_path):
    ws = _write(tmp_path, experts)
    prog = Program.from_workspace(ws)
    plan = fused_plan(prog, [["rows", "gu_t", "h", "g", "u", "sg", "act"]])
    kernel = lower(plan.groups[0], prog)
    assert kernel.kind == "grouped_matmul+pointwise"  # the gate and up halves are slices: a pass of their own
    source = cpu.render(kernel, gemm=True)
    (call,) = [line for line in source.splitlines() if "gemm(" in line]
    assert call.strip().startswith("gemm(0, 1,")  # B: the [E, 2I, H] weights as they lie, transposed
    report = execute(ws, plan, device="cpu", prog=prog)
    assert report.ok


def test_the_columns_are_tiles_shared_by_the_threads_however_the_tokens_chose(tmp_path):
    """Wider than one column tile, on two threads, the groups uneven (one expert empty, one
    holding most rows, rows past the last group): each (column tile, expert, row tile) is
    one BLAS call, the column tile outermost, and the result is the reference's."""
    def wide(b):
        a = b.tensor("a", [40, 24], spine=True)
        w = b.tensor("w", [3, 1100, 24], spine=True)  # the checkpoint's [E, N, K], read transposed
        offs = b.tensor("offs", [3], "i32", spine=True, data=np.array([3, 3, 37], np.int32))
        wt = _s(b, "wt", "permute", [w], [3, 24, 1100], dims="0,2,1")
        _s(b, "out", "grouped_matmul", [a, wt, offs], [40, 1100])

    ws = _write(tmp_path, wide)
    prog = Program.from_workspace(ws)
    plan = fused_plan(prog, [["wt", "out"]])
    source = cpu.render(lower(plan.groups[0], prog), gemm=True, threads=2)
    assert "column tiles of up to" in source and "prange(" in source
    report = execute(ws, plan, device=CpuDevice(threads=2), prog=prog)
    assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs]


def test_the_trace_says_the_weights_each_form_reads(tmp_path):
    """A kernel's trace slice counts the experts' weights a grouped matmul reads once, and
    a gather of them once per (token, expert) pair."""
    from tprules.runtime.trace import kernel_args

    def gathered(b):
        x = b.tensor("x", [16, 8], spine=True)
        ids = b.tensor("ids", [16], "i64", spine=True, data=np.arange(16, dtype=np.int64) % 4)
        wb = _s(b, "wb", "take_rows", [b.tensor("w", [4, 8, 12], spine=True), ids], [16, 8, 12])
        _s(b, "h", "bmm", [_s(b, "x3", "reshape", [x], [16, 1, 8]), wb], [16, 1, 12])

    def grouped(b):
        offs = b.tensor("offs", [4], "i32", spine=True, data=np.array([4, 8, 12, 16], np.int32))
        _s(b, "h", "grouped_matmul", [b.tensor("x", [16, 8], spine=True), b.tensor("w", [4, 8, 12], spine=True),
                                      offs], [16, 12])

    read = {}
    for build in (gathered, grouped):
        prog = Program.from_workspace(_write(tmp_path / build.__name__, build))
        kernel = lower(fused_plan(prog, [[s.name for s in prog.statements]]).groups[0], prog)
        read[build.__name__] = kernel_args(kernel, prog, "cpu")["weights_read_bytes"]
    x, w, ids, offs = 16 * 8 * 4, 4 * 8 * 12 * 4, 16 * 4, 4 * 4  # every element counted as 4 bytes
    assert read["grouped"] == x + w + offs
    assert read["gathered"] == x + 16 * 8 * 12 * 4 + ids  # the pairs' matrices


def test_the_cost_reads_each_used_expert_s_weights_once(tmp_path):
    """Against the batched form's gather of weights: a bmm of one row per (token, expert)
    whose B is the experts' matrices taken by id, [S, K, N]."""
    def gathered(b):
        x = b.tensor("x", [64, 32], spine=True)
        ids = b.tensor("ids", [64], "i64", spine=True, data=np.arange(64, dtype=np.int64) % 4)
        w = b.tensor("w", [4, 32, 48], spine=True)
        wb = _s(b, "wb", "take_rows", [w, ids], [64, 32, 48])
        _s(b, "h", "bmm", [_s(b, "x3", "reshape", [x], [64, 1, 32]), wb], [64, 1, 48])

    def grouped(b):
        x = b.tensor("x", [64, 32], spine=True)
        offs = b.tensor("offs", [4], "i32", spine=True, data=np.array([16, 32, 48, 64], np.int32))
        _s(b, "h", "grouped_matmul", [x, b.tensor("w", [4, 32, 48], spine=True), offs], [64, 48])

    estimates = {}
    for build in (gathered, grouped):
        prog = Program.from_workspace(_write(tmp_path / build.__name__, build))
        plan = fused_plan(prog, [[s.name for s in prog.statements]])
        estimates[build.__name__] = cost.estimate(lower(plan.groups[0], prog), cost.CPU)
    weights = 4 * 32 * 48 * cost.WORD
    assert estimates["grouped"].bytes < 1.5 * weights + (64 * 32 + 64 * 48 + 4) * cost.WORD
    assert estimates["gathered"].bytes > 64 * 32 * 48 * cost.WORD  # every pair's matrix, copied
    assert estimates["grouped"].flops == estimates["gathered"].flops == 2 * 64 * 32 * 48


def test_sort_rank_inverts_torch_s_stable_sort():
    torch = pytest.importorskip("torch")
    x = np.array([[3, 1, 3, 0, 1, 1, 2, 0, 3], [2.5, np.nan, -np.inf, 2.5, 0, np.nan, 7, -1, 0]], np.float32)
    rank = ops.CLASSES["sort_rank"].reference({}, x).astype(np.int64)
    order = torch.sort(torch.tensor(x), stable=True).indices.numpy()
    assert (np.take_along_axis(rank, order, axis=-1) == np.arange(9)).all()


@pytest.mark.parametrize("device, unfused", [("cpu", False), ("sim", False), ("sim", True)])
def test_the_rank_kernels_match_the_reference(tmp_path, device, unfused):
    report = execute(_write(tmp_path, ranks), device=device, baseline=unfused)
    assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs]


def test_the_cpu_rank_sorts_each_row_once(tmp_path):
    """sort_rank on the CPU sorts the row's values once (a stable merge sort), not a count
    over the row for each element; a long row of few distinct ids (the grouped form's
    (token, expert) pairs) gives the reference's ranks."""
    def long_row(b):
        ids = np.random.default_rng(0).integers(0, 8, 3000).astype(np.float32)
        ids[[5, 700]] = np.nan
        _s(b, "rank", "sort_rank", [b.tensor("ids", [3000], spine=True, data=ids)], [3000], "i64")

    ws = _write(tmp_path, long_row)
    prog = Program.from_workspace(ws)
    plan = fused_plan(prog, [["rank"]])
    source = cpu.render(lower(plan.groups[0], prog), gemm=True)
    assert source.count("np.argsort(") == 1 and "+= 1" not in source
    report = execute(ws, plan, device="cpu", prog=prog)
    assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs]


def test_the_rank_s_cost_grows_as_a_sort_s(tmp_path):
    """The cost of sort_rank over h elements is a sort's, h log h, not a count over the row
    for each element (h²): four times the row, about five times the work, not sixteen."""
    work = {}
    for h in (1024, 4096):
        def row(b, h=h):
            _s(b, "rank", "sort_rank", [b.tensor("ids", [h], spine=True)], [h], "i64")

        prog = Program.from_workspace(_write(tmp_path / str(h), row))
        work[h] = cost.estimate(lower(fused_plan(prog, [["rank"]]).groups[0], prog), cost.CPU).ops
    assert 4 < work[4096] / work[1024] < 6


def test_the_gpu_rank_merges_the_row_in_its_scratch(tmp_path):
    """On a GPU (the simulator), sort_rank sorts the row by merging runs in a scratch
    parameter of the kernel's own (sort_cuda.py) instead of counting over the row for each
    element; rows of odd length, ties, NaN and infinities give the reference's ranks, fused
    with the input's computation and with the sorted values put at the ranks."""
    from tprules.codegen.cuda import kernel as render_cuda

    def rows(b):
        rng = np.random.default_rng(1)
        ids = rng.integers(0, 5, (3, 37)).astype(np.float32)
        ids[1, [0, 9, 30]] = np.nan
        ids[2, [3, 4]] = -np.inf
        x = b.tensor("ids", [3, 37], spine=True, data=ids)
        y = _s(b, "y", "add_scalar", [x], [3, 37], value="1.0")
        rank = _s(b, "rank", "sort_rank", [y], [3, 37], "i64")
        _s(b, "sorted", "put_along", [b.tensor("zeros", [3, 37], spine=True, data=np.zeros((3, 37), np.float32)),
                                      rank, y], [3, 37], axis=1)

    ws = _write(tmp_path, rows)
    prog = Program.from_workspace(ws)
    plan = fused_plan(prog, [["y", "rank"]])
    kernel = render_cuda.prepare(lower(plan.groups[0], prog))
    assert [p.shape for p in kernel.params if p.role == "scratch"][-1] == (3, 4, 37)
    source, _ = render_cuda.render(kernel, render_cuda.Target(simulator=True))
    assert "+= 1" not in source  # no count over the row
    report = execute(ws, plan, device="sim", prog=prog)
    assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs]


def test_the_sharding_rule_splits_the_experts_n_or_k_as_moe_tp_experts_does():
    from tprules.frontends.sharding.placement import PARTIAL, REPLICATE, Shard, plain
    from tprules.frontends.sharding.table import NotShardable
    from tprules.frontends.sharding.table import rule as rule_of

    rule = rule_of("grouped_matmul")
    shapes, out = [(8, 6), (3, 6, 10), (3,)], (8, 10)
    colwise = rule({}, [REPLICATE, Shard((plain(2, 2, 10),)), REPLICATE], shapes, out, 2)
    assert colwise == Shard((plain(1, 2, 10),))
    k_split = Shard((plain(1, 2, 6),))
    assert rule({}, [k_split, k_split, REPLICATE], shapes, out, 2) == PARTIAL
    assert rule({}, [REPLICATE, REPLICATE, REPLICATE], shapes, out, 2) == REPLICATE
    with pytest.raises(NotShardable, match="rows and experts stay whole"):
        rule({}, [REPLICATE, Shard((plain(0, 2, 3),)), REPLICATE], shapes, out, 2)  # experts split: EP, not TP
    with pytest.raises(NotShardable, match="offsets"):
        rule({}, [REPLICATE, REPLICATE, Shard((plain(0, 3, 3),))], shapes, out, 3)
