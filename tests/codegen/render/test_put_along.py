"""put_along as a scatter (codegen/render/put_along.py): x copied, then one pass over the index, the
last entry naming a place winning; written into x's own buffer where x is an input that the
put_along alone reads, its stored reshape a view of that buffer (issues 36 and 38)."""

from __future__ import annotations

import numpy as np
import pytest
from plans import spine_statement as _s

from tprules.codegen import lower
from tprules.planner.plan import Group
from tprules.program.builder import ProgramBuilder
from tprules.runtime import Prepared, Program, run_plan
from tprules.runtime.plan.groups import unfused
from tprules.workspace import Workspace

# along axis 0, ids that repeat (the last wins), the index shorter than x on axes 1 and 2
INDEX = np.array([[[3, 0, 3], [1, 1, 2]], [[3, 2, 1], [1, 0, 2]], [[0, 2, 3], [1, 3, 2]]], np.int64)


def _program(folder, shared: bool):
    """x [4, 3, 5] with a source put at INDEX along axis 0, its reshape an output, exp of it
    another; `shared`: x is read by another statement too (then it is copied, never written)."""
    rng = np.random.default_rng(0)
    b = ProgramBuilder(chips=1)
    x = b.tensor("x", [4, 3, 5], spine=True, data=rng.standard_normal((4, 3, 5)).astype(np.float32))
    index = b.tensor("index", [3, 2, 3], "i64", spine=True, data=INDEX)
    src = _s(b, "src", "exp", [b.tensor("s", [3, 2, 4], spine=True)], [3, 2, 4])
    put = _s(b, "put", "put_along", [x, index, src], [4, 3, 5], axis=0)
    _s(b, "flat", "reshape", [put], [12, 5])
    _s(b, "e", "tanh", [put], [4, 3, 5])
    if shared:
        _s(b, "other", "scale", [x], [4, 3, 5], factor="2.0")
    return b.write(folder)


def _expected(prog: Program, inputs) -> np.ndarray:
    out = np.array(inputs["x"], copy=True)
    src = np.exp(inputs["s"])
    for j in range(INDEX.shape[0]):  # in order along the axis: the last wins
        for a in range(INDEX.shape[1]):
            for c in range(INDEX.shape[2]):
                out[INDEX[j, a, c], a, c] = src[j, a, c]
    return out


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("device", ["cpu", "sim"])
@pytest.mark.parametrize("planned", [True, False])
def test_the_scatter_matches_the_reference_and_leaves_its_input_alone(tmp_path, device, planned, shared):
    """Twice in a row on the same inputs, the same outputs, which are the reference's and the
    values worked by hand; the input x is what it was before, in place or not."""
    ws = Workspace(_program(tmp_path / "p", shared))
    prog = Program.from_workspace(ws)
    prepared = Prepared(prog, run_plan(ws, prog, device) if planned else unfused(prog), device)
    before = {t: np.array(v, copy=True) for t, v in prepared.executor.inputs.items()}
    first, second = prepared.run(), prepared.run()
    for t, v in before.items():
        assert np.array_equal(prepared.executor.inputs[t], v), t
    report = prepared.report(first)
    assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs]
    want = _expected(prog, before)
    for done in (first, second):
        assert np.allclose(done.outputs["flat"][0], want.reshape(12, 5), rtol=1e-6)
        assert np.allclose(done.outputs["e"][0], np.tanh(want), rtol=1e-6)


@pytest.mark.parametrize("shared", [False, True])
def test_the_put_along_writes_its_input_s_buffer_only_where_it_alone_reads_it(tmp_path, shared):
    """In place (no copy stage, the put_along's parameter x's buffer) where only the
    put_along reads x; copied first where another statement reads it. The stored reshape is
    the put_along's buffer either way."""
    prog = Program.from_workspace(Workspace(_program(tmp_path / "p", shared)))
    kernel = lower(Group("g", ("src", "put", "flat", "e"), "spine"), prog)
    params = {p.tensor: p for p in kernel.params if p.tensor}
    assert kernel.kind == ("pointwise+scatter+pointwise" if shared else "scatter+pointwise")
    assert params["put"].alias == (None if shared else params["x"].name)
    assert params["flat"].alias == params["put"].name


def test_a_scatter_costs_its_index_not_its_result(tmp_path):
    """The estimate of a put_along of k entries into n elements in place grows with k only."""
    from tprules.codegen.cost import estimate

    ops = {}
    for n in (64, 4096):
        b = ProgramBuilder(chips=1)
        x = b.tensor("x", [n], spine=True)
        index = b.tensor("index", [8], "i64", spine=True, data=np.arange(8, dtype=np.int64))
        _s(b, "put", "put_along", [x, index], [n], axis=0, value="1.0")
        prog = Program.from_workspace(Workspace(b.write(tmp_path / f"n{n}")))
        ops[n] = estimate(lower(Group("g", ("put",), "spine"), prog))
    assert ops[64] == ops[4096]
