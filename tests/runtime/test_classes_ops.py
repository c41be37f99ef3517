"""The classes of issue 22's remaining ATen ops (docs/classes.md): their kernels, fused as
the planner fuses them and one per statement, against the reference on cpu and sim."""

from __future__ import annotations

import pytest
from plans import spine_statement as _s
from plans import write_programs

from tprules.program.builder import ProgramBuilder
from tprules.runtime import Program, execute
from tprules.runtime.values.inputs import program_inputs
from tprules.runtime.values.reference import reference
from tprules.workspace import Workspace


def comparisons(b):
    """gemma3n's per-layer masks: x ≥ c, clamp, log1p of a square."""
    x = b.tensor("x", [4, 8], spine=True)
    ge = _s(b, "ge", "greater_equal", [x], [4, 8], "i8", value="0.25")
    c = _s(b, "c", "clamp", [x], [4, 8], min="-0.5", max="0.5")
    lo = _s(b, "lo", "clamp", [c], [4, 8], min="-0.25")
    sq = _s(b, "sq", "pow", [x], [4, 8], exponent="2.0")
    lg = _s(b, "lg", "log", [_s(b, "l1", "log1p", [sq], [4, 8])], [4, 8])
    _s(b, "out", "where", [ge, lg, lo], [4, 8])


def logsumexp(b):
    """A stable log-sum-exp over the last axis: amax, then its neighbours."""
    x = b.tensor("x", [3, 2, 8], spine=True)
    m = _s(b, "m", "amax", [x], [3, 2, 1])
    e = _s(b, "e", "exp", [_s(b, "d", "sub", [x, m], [3, 2, 8])], [3, 2, 8])
    s = _s(b, "s", "mean", [e], [3, 2, 1])
    _s(b, "out", "add", [_s(b, "l", "log1p", [s], [3, 2, 1]), m], [3, 2, 1])


def causal_conv(b):
    """Mamba's mixer: in_proj, its channels first, the depthwise conv padded by K − 1 with a
    bias, the first T outputs kept, then SiLU."""
    h = b.tensor("h", [6, 8], spine=True)
    xz = _s(b, "xz", "matmul", [h, b.tensor("w_in", [8, 8], spine=True)], [6, 8])
    x = _s(b, "x", "reshape", [xz], [1, 6, 8])
    xt = _s(b, "xt", "permute", [x], [1, 8, 6], dims="0,2,1")
    c = _s(b, "c", "conv1d", [xt, b.tensor("w", [8, 1, 4], spine=True), b.tensor("bias", [8], spine=True)],
           [1, 8, 9], padding="3", groups="8")
    k = _s(b, "k", "slice", [c], [1, 8, 6], axis=2, start=0, end=6)
    _s(b, "out", "silu", [k], [1, 8, 6])


def grouped_conv(b):
    """Two groups of two channels each, no bias, no padding."""
    x = b.tensor("x", [2, 4, 7], spine=True)
    c = _s(b, "c", "conv1d", [_s(b, "e", "exp", [x], [2, 4, 7]), b.tensor("w", [6, 2, 3], spine=True)],
           [2, 6, 5], padding="0", groups="2")
    _s(b, "out", "scale", [c], [2, 6, 5], factor="0.5")


def group_routing(b):
    """DeepSeek-V3's group-limited routing: each group's best score, the top-2 groups, their
    mask put into zeros (a boolean), the experts of other groups masked out, the top-2
    experts, and the router's weights taken at them."""
    import numpy as np

    x = b.tensor("x", [3, 8], spine=True)
    groups = _s(b, "groups", "reshape", [x], [3, 4, 2])
    best = _s(b, "best", "reshape", [_s(b, "gmax", "amax", [groups], [3, 4, 1])], [3, 4])
    top = _s(b, "top", "topk_indices", [best], [3, 2], "i64", k=2)
    zeros = b.tensor("zeros", [3, 4], "i8", spine=True, data=np.zeros((3, 4), np.int8))
    mask = _s(b, "mask", "put_along", [zeros, top], [3, 4], "i8", axis=1, value="1.0")
    wide = _s(b, "wide", "reshape", [_s(b, "spread", "expand", [_s(b, "m3", "reshape", [mask], [3, 4, 1], "i8")],
                                         [3, 4, 2], "i8")], [3, 8], "i8")
    kept = _s(b, "kept", "where", [wide, x, b.tensor("zero", [], spine=True, data=np.zeros((), np.float32))], [3, 8])
    ids = _s(b, "ids", "topk_indices", [kept], [3, 2], "i64", k=2)
    weights = _s(b, "weights", "take_along", [_s(b, "p", "softmax", [x], [3, 8]), ids], [3, 2], axis=1)
    _s(b, "out", "scale", [weights], [3, 2], factor="2.0")


def along_other_axes(b):
    """A gather and a scatter along the first axis, their index shorter than x on the others
    (x's elements outside the index's extent are kept by the scatter, never read by the gather)."""
    import numpy as np

    x = _s(b, "e", "exp", [b.tensor("x", [4, 3, 5], spine=True)], [4, 3, 5])
    index = b.tensor("index", [2, 3, 2], "i64", spine=True,
                     data=np.array([[[3, 0], [1, 1], [2, 3]], [[0, 0], [3, 2], [1, 0]]], np.int64))
    _s(b, "taken", "take_along", [x, index], [2, 3, 2], axis=0)
    _s(b, "put", "put_along", [x, index], [4, 3, 5], axis=-3, value="-inf")


def scores_put_into_minus_inf(b):
    """Llama 4's router: the top-2 scores put back at their experts into −inf, then a sigmoid;
    and a source put at ids that repeat along the axis (the last one wins)."""
    import numpy as np

    x = b.tensor("x", [4, 6], spine=True)
    top = _s(b, "top", "topk_values", [x], [4, 2], k=2)
    ids = _s(b, "ids", "topk_indices", [x], [4, 2], "i64", k=2)
    low = b.tensor("low", [4, 6], spine=True, data=np.full((4, 6), -np.inf, np.float32))
    _s(b, "scores", "sigmoid", [_s(b, "put", "put_along", [low, ids, top], [4, 6], axis=1)], [4, 6])
    twice = b.tensor("twice", [2, 3], "i64", spine=True, data=np.array([[1, 1, 0], [2, 0, 2]], np.int64))
    _s(b, "last", "put_along", [_s(b, "e", "exp", [x], [4, 6]), twice, b.tensor("src", [2, 4], spine=True)], [4, 6],
       axis=1)


CASES = {f.__name__: f for f in (comparisons, logsumexp, causal_conv, grouped_conv, group_routing, along_other_axes,
                                 scores_put_into_minus_inf)}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return write_programs(CASES, tmp_path_factory)


@pytest.mark.parametrize("device, unfused", [("cpu", False), ("sim", False), ("sim", True)])
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernels_match_the_reference(programs, name, device, unfused):
    report = execute(Workspace(programs[name]), device=device, baseline=unfused)
    assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs]


def test_amax_is_the_maximum_and_keeps_a_nan(tmp_path):
    import numpy as np

    b = ProgramBuilder(chips=1)
    x = b.tensor("x", [2, 4], spine=True, data=np.array([[1, 5, -2, 3], [0, np.nan, 9, 1]], np.float32))
    _s(b, "out", "amax", [x], [2, 1])
    ws = Workspace(b.write(tmp_path / "p"))
    prog = Program.from_workspace(ws)
    out = reference(prog, program_inputs(prog)).get("out")
    assert out[0, 0] == 5 and np.isnan(out[1, 0])
    for device in ("cpu", "sim"):  # the kernels keep the NaN too (a NaN against a number is a mismatch)
        assert execute(ws, device=device).ok


def test_put_along_and_take_along_mean_torch_s_scatter_and_gather(programs):
    """The reference of the routing classes against values worked by hand: the group mask,
    the weights taken at the experts, a source put where ids repeat (the last one wins)."""
    import numpy as np

    prog = Program.from_workspace(Workspace(programs["scores_put_into_minus_inf"]))
    inputs = program_inputs(prog)
    got = reference(prog, inputs)
    x, src = inputs["x"], inputs["src"]
    e = np.exp(x)
    want = e.copy()
    want[0, 1], want[0, 0] = src[0, 1], src[0, 2]  # row 0 puts at 1, 1, 0: position 1 wins at 1
    want[1, 2], want[1, 0] = src[1, 2], src[1, 1]  # row 1 puts at 2, 0, 2: position 2 wins at 2
    assert np.array_equal(got.get("last"), want)
    order = np.argsort(-x, axis=1, kind="stable")[:, :2]
    put = np.full((4, 6), -np.inf, np.float32)
    np.put_along_axis(put, order, np.take_along_axis(x, order, 1), 1)
    assert np.array_equal(got.get("put"), put)

    prog = Program.from_workspace(Workspace(programs["group_routing"]))
    inputs = program_inputs(prog)
    got = reference(prog, inputs)
    x = inputs["x"]
    best = x.reshape(3, 4, 2).max(axis=2)
    groups = np.argsort(-best, axis=1, kind="stable")[:, :2]
    mask = np.zeros((3, 4), np.int8)
    for row, (g, h) in enumerate(groups):
        mask[row, [g, h]] = 1
    assert np.array_equal(got.get("mask"), mask)
    kept = np.where(np.repeat(mask, 2, axis=1) != 0, x, 0)
    ids = np.argsort(-kept, axis=1, kind="stable")[:, :2]
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    assert np.allclose(got.get("weights"), p[np.arange(3)[:, None], ids], rtol=1e-6)


@pytest.mark.parametrize("cls, reads, shape, attrs, message", [
    ("take_along", [[4, 3], [2]], [2], {"axis": "0"}, "reads x and an index of the same rank"),
    ("take_along", [[4, 3], [2, 5]], [2, 5], {"axis": "0"}, "longer than x [4, 3] on axis 1"),
    ("take_along", [[4, 3], [2, 3]], [2, 3], {"axis": "2"}, "axis 2 is out of range for rank 2"),
    ("put_along", [[4, 3], [2, 3]], [4, 3], {"axis": "0"}, "either a source (operand 2) or attr value"),
    ("put_along", [[4, 3], [2, 3], [2, 3]], [4, 3], {"axis": "0", "value": "1"}, "not both"),
    ("put_along", [[4, 3], [2, 3], [1, 3]], [4, 3], {"axis": "0"}, "the source [1, 3] does not cover the index"),
    ("put_along", [[4, 3], [2, 3]], [2, 3], {"axis": "0", "value": "1"}, "computes shape [4, 3]"),
])
def test_a_gather_or_scatter_that_does_not_fit_is_ill_formed(tmp_path, cls, reads, shape, attrs, message):
    from tprules.errors import IllFormed

    b = ProgramBuilder(chips=1)
    operands = [b.tensor(f"in{i}", s, "i64" if i == 1 else "f32", spine=True) for i, s in enumerate(reads)]
    b.stmt("bad", cls, operands, b.tensor("out", shape, spine=True), **attrs)
    with pytest.raises(IllFormed, match="bad") as err:
        Program.from_workspace(Workspace(b.write(tmp_path / "p")))
    assert message in str(err.value) and "op.facts:1" in str(err.value)


@pytest.mark.parametrize("cls", ["take_along", "put_along", "take_rows"])
def test_an_id_out_of_range_is_one_line_at_the_statement(tmp_path, cli, cls):
    """Ids from a data file that lie outside the axis they index: `run` says so in one line
    naming the statement's op.facts line, and exits 2."""
    import numpy as np

    b = ProgramBuilder(chips=1)
    x = b.tensor("x", [4, 3], spine=True)
    ids = b.tensor("ids", [2, 3] if cls != "take_rows" else [2], "i64", spine=True,
                   data=np.array([[0, 4, 1], [2, 2, 3]] if cls != "take_rows" else [1, -1], np.int64))
    _s(b, "first", "exp", [x], [4, 3])
    attrs = {"take_along": {"axis": "0"}, "put_along": {"axis": "0", "value": "0.5"}, "take_rows": {}}[cls]
    shape = {"take_along": [2, 3], "put_along": [4, 3], "take_rows": [2, 3]}[cls]
    _s(b, "pick", cls, [x, ids], shape, **attrs)
    folder = b.write(tmp_path / "p")
    status, out, err = cli("run", folder, "--device", "cpu")
    bad = "id 4 at [0, 1] lies outside 0..3" if cls != "take_rows" else "id -1 at [1] lies outside 0..3"
    assert (status, out) == (2, "")
    assert err == f"{folder}/op.facts:2: ill-formed: pick ({cls}) reads ids ids: {bad} (the 4 positions it indexes)\n"


def test_a_scatter_costs_two_operations_per_entry_of_its_index(tmp_path):
    """The cost model's put_along is a scatter: 2 operations (a bounds check, a store) per
    entry of the index, after one copy of x: linear in the index, not x's elements times
    the index's axis."""
    from tprules.codegen import lower
    from tprules.codegen.cost import estimate
    from tprules.planner.plan import Group

    counts = {}
    for k in (1, 3):
        b = ProgramBuilder(chips=1)
        x = b.tensor("x", [4, 6], spine=True)
        index = b.tensor("index", [4, k], "i64", spine=True)
        put = _s(b, "put", "put_along", [_s(b, "e", "exp", [x], [4, 6]), index], [4, 6], axis=1, value="1.0")
        _s(b, "out", "take_along", [put, index], [4, k], axis=1)
        prog = Program.from_workspace(Workspace(b.write(tmp_path / f"k{k}")))
        kernel = lower(Group("g", ("e", "put"), "spine"), prog)
        counts[k] = estimate(kernel).ops
    assert counts[3] - counts[1] == 4 * 2 * (3 - 1)


def test_group_limited_routing_is_one_kernel_where_the_shim_fuses_its_classes(programs):
    """Every shim answers take_along and put_along `fused`: the planner puts the 13 statements
    of DeepSeek's routing into one group, one kernel (two row stages, the mask's scatter,
    written into the zeros' own buffer (an input only it reads), two row stages, then the gather)."""
    report = execute(Workspace(programs["group_routing"]), device="cpu")
    assert report.ok and report.groups == 1 and report.kinds == {"row+row+scatter+row+row+pointwise": 1}
