"""The classes real models need (docs/classes.md): shapes checked, and their kernels, fused
as the planner fuses them and one per statement, against the reference on cpu and sim.

Each case is a small program of the shape an imported model has: RoPE's rotate-half,
GQA's repeated key/value heads, attention over heads, a decomposed RMSNorm, ...
"""

from __future__ import annotations

import numpy as np
import pytest
from plans import spine_statement as _s
from plans import write_programs

from tprules.errors import IllFormed
from tprules.program.builder import ProgramBuilder
from tprules.runtime import Program, execute
from tprules.workspace import Workspace


def embedding(b):
    ids = b.tensor("ids", [2, 3], "i64", spine=True, data=np.array([[4, 0, 2], [2, 2, 1]], np.int64))
    e = _s(b, "e", "embedding", [b.tensor("table", [5, 4], spine=True), ids], [2, 3, 4])
    _s(b, "out", "reshape", [_s(b, "s", "sigmoid", [e], [2, 3, 4])], [6, 4])


def ids_through_layout(b):
    """Ids reshaped and sliced before the embedding reads them, and ids above 2**24 (which
    float32 cannot hold) moved by layout classes to an output: integers all the way."""
    ids = b.tensor("ids", [1, 6], "i64", spine=True, data=np.array([[4, 0, 2, 2, 2, 1]], np.int64))
    two = _s(b, "two", "reshape", [ids], [2, 3], "i64")
    picked = _s(b, "picked", "slice", [two], [2, 2], "i64", axis=1, start=1, end=3)
    _s(b, "rows", "embedding", [b.tensor("table", [5, 4], spine=True), picked], [2, 2, 4])
    big = b.tensor("big", [2, 3], "i64", spine=True, data=np.arange(6, dtype=np.int64).reshape(2, 3) + (1 << 40) + 1)
    _s(b, "bigt", "reshape", [_s(b, "bigp", "permute", [big], [3, 2], "i64", dims="1,0")], [6], "i64")


def rotate_half(b):
    x = _s(b, "xp", "permute", [b.tensor("x", [1, 3, 2, 8], spine=True)], [1, 2, 3, 8], dims="0,2,1,3")
    lo = _s(b, "lo", "slice", [x], [1, 2, 3, 4], axis=3, start=0, end=4)
    hi = _s(b, "hi", "slice", [x], [1, 2, 3, 4], axis=3, start=4, end=8, step=1)
    rot = _s(b, "rot", "cat", [_s(b, "neg", "neg", [hi], [1, 2, 3, 4]), lo], [1, 2, 3, 8], axis=-1)
    cos = b.tensor("cos", [1, 1, 3, 8], spine=True)
    _s(b, "out", "add", [_s(b, "a", "mul", [x, cos], [1, 2, 3, 8]), _s(b, "r", "mul", [rot, cos], [1, 2, 3, 8])],
       [1, 2, 3, 8])


def repeat_kv(b):
    k = _s(b, "k1", "reshape", [b.tensor("k", [1, 2, 3, 4], spine=True)], [1, 2, 1, 3, 4])
    k = _s(b, "k2", "expand", [k], [1, 2, 2, 3, 4])
    _s(b, "out", "add_scalar", [_s(b, "k3", "reshape", [k], [1, 4, 3, 4])], [1, 4, 3, 4], value="0.5")


def attention(b):
    q = b.tensor("q", [2, 4, 8], spine=True)
    k = b.tensor("k", [2, 4, 8], spine=True)
    kt = _s(b, "kt", "permute", [k], [2, 8, 4], dims="0,2,1")
    s = _s(b, "sc", "scale", [_s(b, "s", "bmm", [q, kt], [2, 4, 4])], [2, 4, 4], factor="0.35")
    mask = b.tensor("mask", [1, 4, 4], spine=True)
    p = _s(b, "p", "softmax", [_s(b, "m", "add", [s, mask], [2, 4, 4])], [2, 4, 4])
    _s(b, "out", "tanh", [_s(b, "o", "bmm", [p, b.tensor("v", [2, 4, 8], spine=True)], [2, 4, 8])], [2, 4, 8])


def gqa_attention(b):
    """GQA as imported: each key/value head repeated for 2 query heads (reshape, expand,
    reshape), the key transposed by a permute, the heads split from [seq, heads * dim]."""
    q = _s(b, "q3", "permute", [_s(b, "q4", "reshape", [b.tensor("q", [3, 16], spine=True)], [3, 4, 4])],
           [4, 3, 4], dims="1,0,2")

    def repeated(name):
        x = _s(b, f"{name}1", "reshape", [b.tensor(name, [2, 3, 4], spine=True)], [2, 1, 3, 4])
        return _s(b, f"{name}3", "reshape", [_s(b, f"{name}2", "expand", [x], [2, 2, 3, 4])], [4, 3, 4])

    kt = _s(b, "kt", "permute", [repeated("k")], [4, 4, 3], dims="0,2,1")
    p = _s(b, "p", "softmax", [_s(b, "s", "scale", [_s(b, "sc", "bmm", [q, kt], [4, 3, 3])], [4, 3, 3],
                                 factor="0.5")], [4, 3, 3])
    _s(b, "out", "bmm", [p, repeated("v")], [4, 3, 4])


def rmsnorm_decomposed(b):
    x = b.tensor("x", [1, 4, 16], spine=True)
    m = _s(b, "m", "mean", [_s(b, "sq", "pow", [x], [1, 4, 16], exponent="2.0")], [1, 4, 1])
    r = _s(b, "r", "rsqrt", [_s(b, "e", "add_scalar", [m], [1, 4, 1], value="1e-06")], [1, 4, 1])
    n = _s(b, "n", "mul", [b.tensor("w", [16], spine=True), _s(b, "xr", "mul", [x, r], [1, 4, 16])], [1, 4, 16])
    h = _s(b, "h", "reshape", [n], [4, 16])
    _s(b, "out", "matmul", [h, b.tensor("wq", [8, 16], spine=True)], [4, 8], transpose_b=1)


def layernorms(b):
    x = b.tensor("x", [3, 8], spine=True)
    y = _s(b, "y", "layernorm", [x, b.tensor("w", [8], spine=True), b.tensor("bias", [8], spine=True)], [3, 8],
           eps="1e-05")
    _s(b, "out", "layernorm", [_s(b, "g", "gelu_erf", [y], [3, 8])], [3, 8])


def xielu(b):
    x = b.tensor("x", [4, 8], spine=True)
    pos = _s(b, "pos", "greater", [x], [4, 8], "i8", value="0")
    a = _s(b, "a", "pow", [x], [4, 8], exponent="3.0")
    m = _s(b, "m", "expm1", [_s(b, "mn", "minimum", [x, b.tensor("eps", [], spine=True)], [4, 8])], [4, 8])
    _s(b, "out", "where", [pos, a, m], [4, 8])


def routing(b):
    # a router's top-2 (ties: the lower index first) and each pair's expert weights by id
    x = b.tensor("x", [3, 6], spine=True, data=np.array([[1, 3, 3, 2, 0, 3], [5, 5, 5, 1, 2, 0], [0, 1, 2, 3, 4, 5]],
                                                        np.float32))
    v = _s(b, "v", "topk_values", [_s(b, "p", "softmax", [x], [3, 6])], [3, 2], k=2)
    i = _s(b, "i", "topk_indices", [x], [3, 2], "i64", k=2)
    w = _s(b, "w", "take_rows", [b.tensor("experts", [6, 4, 5], spine=True), _s(b, "ids", "reshape", [i], [6], "i64")],
           [6, 4, 5])
    _s(b, "out", "mul", [w, _s(b, "vv", "reshape", [v], [6, 1, 1])], [6, 4, 5])


def vocab_slice(b):
    ids = b.tensor("ids", [2, 3], "i64", spine=True, data=np.array([[4, 0, 2], [7, 5, 3]], np.int64))
    _s(b, "out", "embedding", [b.tensor("rows", [4, 3], spine=True), ids], [2, 3, 3], offset=4)


def gelu_tails(b):
    """gelu (the tanh approximation, computed as x / (1 + exp(-2u))) far out on both sides,
    where exp overflows (x / inf: -0) or vanishes (x itself), and near 0."""
    x = np.array([[-100, -40, -9, -5.4, -1, -1e-3], [0, 1e-3, 0.5, 3, 30, 100]], np.float32)
    _s(b, "out", "gelu", [_s(b, "g", "mul", [b.tensor("x", [2, 6], spine=True, data=x),
                                           b.tensor("one", [2, 6], spine=True, data=np.ones((2, 6), np.float32))],
                          [2, 6])], [2, 6])


CASES = {f.__name__: f for f in (embedding, ids_through_layout, rotate_half, repeat_kv, attention, gqa_attention,
                                 rmsnorm_decomposed, layernorms, xielu, routing, vocab_slice, gelu_tails)}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return write_programs(CASES, tmp_path_factory)


@pytest.mark.parametrize("device, unfused", [("cpu", False), ("sim", False), ("sim", True)])
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernels_match_the_reference(programs, name, device, unfused):
    report = execute(Workspace(programs[name]), device=device, baseline=unfused)
    assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs]


def test_ids_above_two_to_the_24_are_moved_exactly(programs):
    """The reference and the kernels move integers as integers (float32 would round them)."""
    report = execute(Workspace(programs["ids_through_layout"]), device="cpu")
    out = next(o for o in report.outputs if o.tensor == "bigt")
    assert out.max_abs_err == 0
    assert report.values["bigt"].tolist() == [(1 << 40) + 1 + v for v in (0, 3, 1, 4, 2, 5)]


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_an_embedding_reads_its_ids_as_the_buffers_integers(programs, device):
    """From the i64 buffer to the table's subscript no float32 copy of an id is made: the
    ids' buffer is only ever read bare (`ix = p1[...]`), never inside f32(...)."""
    import re

    from tprules.codegen import lower
    from tprules.codegen.cpu import function as cpu
    from tprules.codegen.cuda import kernel as cuda
    from tprules.planner.plan import Group

    prog = Program.from_workspace(Workspace(programs["ids_through_layout"]))
    group = Group("g0", ("two", "picked", "rows"), "spine")
    kernel = lower(group, prog)
    source = cpu.render(kernel) if device == "cpu" else cuda.render(kernel, cuda.Target(8, simulator=True))[0]
    ids = next(p.name for p in kernel.params if p.tensor == "ids")
    reads = re.findall(rf"(\S*){ids}\[", source)
    assert reads and all(r.endswith("= ") or r == "" for r in reads), reads
    assert f"f32({ids}[" not in source


def test_top_k_takes_the_lower_index_first_among_equals(programs):
    from tprules.runtime.values.inputs import program_inputs
    from tprules.runtime.values.reference import reference

    prog = Program.from_workspace(Workspace(programs["routing"]))
    got = reference(prog, program_inputs(prog)).get("i")
    assert got.tolist() == [[1, 2], [0, 1], [5, 4]]


def test_the_planner_fuses_layout_members_into_their_readers(programs):
    report = execute(Workspace(programs["rotate_half"]), device="sim")
    assert report.groups == 1 and report.kinds == {"pointwise": 1}


def test_a_bmm_reads_repeated_key_value_heads_in_place(programs):
    """On the CPU's BLAS core the expanded keys and values are views: each product's call
    reads key/value head b // 2 where it lies, and nothing is computed into a buffer."""
    from tprules.codegen import lower
    from tprules.codegen.cpu.function import render
    from tprules.planner.plan import Group

    prog = Program.from_workspace(Workspace(programs["gqa_attention"]))
    layout = [s.name for s in prog.statements if s.cls in ("reshape", "expand", "permute")]
    for product in ("sc", "out"):
        members = [o for o in layout if o.startswith(("q", "k") if product == "sc" else "v")] + [product]
        kernel = lower(Group("g", tuple(sorted(members, key=prog.position.get)), "spine"), prog)
        source = render(kernel, gemm=True, threads=1)
        assert "opnd" not in source and source.count("gemm(") == 1, source
        assert "// 2) * 12" in source  # head b reads key/value head b // 2 (12 elements a head)


@pytest.mark.parametrize("cls, reads, shape, attrs, message", [
    ("reshape", [[2, 3]], [5], {}, "reshape of [2, 3] (6 elements) to [5] (5 elements)"),
    ("permute", [[2, 3]], [3, 2], {"dims": "0,0"}, "not a permutation"),
    ("expand", [[2, 3]], [4, 3], {}, "[2, 3] does not expand to [4, 3]"),
    ("slice", [[4]], [2], {"axis": "0", "start": "3", "end": "5"}, "slice 3:5:1 of axis 0 (size 4)"),
    ("bmm", [[2, 3, 4], [3, 4, 5]], [2, 3, 5], {}, "batch or inner sizes differ"),
    ("embedding", [[5], [2]], [2, 5], {}, "embedding reads a table [V, H]"),
    ("layernorm", [[2, 4], [3]], [2, 4], {}, "weight and bias have shape [4]"),
    ("pow", [[2]], [2], {}, "needs a number attribute exponent"),
    ("topk_values", [[2, 3]], [2, 4], {"k": "4"}, "top-4 of a last axis of 3"),
    ("topk_indices", [[2, 3]], [2, 2], {}, "needs an integer attribute k"),
    ("take_rows", [[4, 2, 3], [5]], [5, 3, 3], {}, "computes shape [5, 2, 3]"),
])
def test_a_statement_that_does_not_fit_its_class_is_ill_formed(tmp_path, cls, reads, shape, attrs, message):
    b = ProgramBuilder(chips=1)
    operands = [b.tensor(f"in{i}", s, spine=True) for i, s in enumerate(reads)]
    b.stmt("bad", cls, operands, b.tensor("out", shape, spine=True), **attrs)
    with pytest.raises(IllFormed, match="bad") as err:
        Program.from_workspace(Workspace(b.write(tmp_path / "p")))
    assert message in str(err.value) and "op.facts:1" in str(err.value)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_index_names_never_hide_the_integer_conversions(tmp_path, device):
    """Fresh index names run i1, i2, ...: a kernel with an index named i8 or i32 still
    converts to int8 (a regression: the conversions were named i8 and i32)."""
    import re

    from tprules.codegen import lower
    from tprules.codegen.cpu import function as cpu
    from tprules.planner.plan import Group, Plan

    b = ProgramBuilder(chips=1)
    t = b.tensor("x", [2, 3, 4], spine=True)
    for n, shape in enumerate([[6, 4], [2, 12], [24], [4, 6], [3, 8], [2, 3, 4]] * 3):
        t = _s(b, f"r{n}", "reshape", [t], shape)  # each reshape names fresh indexes
    _s(b, "g", "greater", [t], [2, 3, 4], "i8", value="0")
    ws = Workspace(b.write(tmp_path / "p"))
    prog = Program.from_workspace(ws)
    plan = Plan(prog.shim, (Group("g0", tuple(s.name for s in prog.statements), "spine"),))
    assert {"i8", "i32"} <= set(re.findall(r"\b(i8|i32) = ", cpu.render(lower(plan.groups[0], prog))))
    assert execute(ws, plan, device=device, prog=prog).ok


@pytest.mark.parametrize("machine, views, copied", [("cpu", True, False), ("gpu", True, False)])
def test_plan_show_cost_says_which_layouts_are_views(programs, capsys, machine, views, copied):
    """The CPU's BLAS core and the GPU (the library split, and the tiles that evaluate an
    operand's layout in their loads) read GQA's repeated heads as views: they cost nothing,
    nothing is copied, and the cost says so."""
    from tprules.cli import main

    assert main(["plan", str(programs["gqa_attention"]), "--machine", machine, "--show", "cost"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("[cost]")]
    assert lines[-1].startswith(f"[cost] {len(lines) - 1} groups on {machine}: ")
    assert ("read as views" in err) == views and ("of layouts copied into buffers" in err) == copied, err


def test_attention_where_the_shim_allows_is_one_kernel_on_blas(programs):
    """QKᵀ → scale → softmax → ·V over GQA heads: one group, one kernel of one attention
    stage (codegen/lowering/attention.py), both products BLAS calls reading the repeated key/value
    heads in place."""
    from tprules.runtime import Prepared
    from tprules.runtime.devices import get_device

    ws = Workspace(programs["gqa_attention"])
    prog = Program.from_workspace(ws)
    device = get_device("cpu")
    from tprules.planner import plan

    ready = Prepared(prog, plan(ws, machine=device.machine), device)
    assert [k.kind for k in ready.kernels] == ["attention"]
    source = ready.compiled[0].source
    assert source.count("gemm(") == 2 and "opnd" not in source
    assert ready.report(ready.run()).ok
