"""Small programs beyond the examples: other dtypes, scalars, 3-D rows, broadcasting; each
run unfused and as one fused group, on cpu and on the simulator."""

from __future__ import annotations

import pytest
from plans import fused_plan

from tprules.program.builder import ProgramBuilder
from tprules.runtime import Program, execute
from tprules.runtime.plan.groups import unfused
from tprules.workspace import Workspace


def dtypes() -> ProgramBuilder:
    b = ProgramBuilder(chips=1)
    x = b.tensor("x", [4, 8], spine=True)
    h = b.stmt("to_bf16", "cast", [x], b.tensor("h", [4, 8], "bf16", spine=True))
    g = b.stmt("gelu", "gelu", [h], b.tensor("g", [4, 8], "bf16", spine=True))
    f = b.stmt("to_f16", "cast", [g], b.tensor("f", [4, 8], "f16", spine=True))
    m = b.stmt("mm", "matmul", [f, b.tensor("w", [8, 8], spine=True)], b.tensor("m", [4, 8], "f16", spine=True))
    s = b.stmt("scale", "scale", [m], b.tensor("s", [4, 8], spine=True), factor="10")
    b.stmt("to_i32", "cast", [s], b.tensor("n", [4, 8], "i32", spine=True))
    k = b.tensor("k", [4, 8], "i8", spine=True)
    b.stmt("widen", "add", [k, b.tensor("one", [1], "i32", spine=True)], b.tensor("kk", [4, 8], "i32", spine=True))
    return b


def shapes() -> ProgramBuilder:
    b = ProgramBuilder(chips=2)
    x = b.tensor("x", [2, 3, 8], spine=True)
    s = b.tensor("s", [], spine=True)  # a scalar: no shape facts
    y = b.stmt("shift", "add", [x, s], b.tensor("y", [2, 3, 8], spine=True))
    n = b.stmt("norm", "rmsnorm", [y, b.tensor("w", [8], spine=True)], b.tensor("n", [2, 3, 8], spine=True), eps="1e-5")
    p = b.stmt("probs", "softmax", [n], b.tensor("p", [2, 3, 8], spine=True))
    col = b.tensor("col", [3, 1], spine=True)
    b.stmt("weigh", "mul", [p, col], b.tensor("q", [2, 3, 8], spine=True))
    parts = []
    for c in range(2):
        v = b.stmt(f"sq{c}", "mul", [s, s], b.tensor(f"sq{c}", [], chip=c))
        parts.append(b.stmt(f"e{c}", "exp", [v], b.tensor(f"e{c}", [], chip=c)))
    b.fold("ar", parts, b.tensor("total", [], spine=True), "c")
    return b


def attention_t() -> ProgramBuilder:
    """transpose_b, a softmax over a transposed input, an elementwise op after a row op."""
    b = ProgramBuilder(chips=1)
    q = b.tensor("q", [4, 8], spine=True)
    k = b.tensor("k", [6, 8], spine=True)
    s = b.stmt("qk", "matmul", [q, k], b.tensor("s", [4, 6], spine=True), transpose_b="1")
    t = b.stmt("flip", "transpose", [s], b.tensor("t", [6, 4], spine=True))
    p = b.stmt("sm", "softmax", [t], b.tensor("p", [6, 4], spine=True))
    b.stmt("neg", "neg", [p], b.tensor("out", [6, 4], spine=True))
    return b


PROGRAMS = {"dtypes": dtypes, "shapes": shapes, "attention_t": attention_t}


@pytest.mark.parametrize("device", ["cpu", "sim"])
@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_small_programs(tmp_path, name, fused, device):
    ws = Workspace(PROGRAMS[name]().write(tmp_path / name))
    prog = Program.from_workspace(ws)
    if fused:  # every statement but the folds in one group
        plan = fused_plan(prog, [[s.name for s in prog.statements if not s.fold]])
    else:
        plan = unfused(prog)
    report = execute(ws, plan, device=device, prog=prog)
    assert report.kernels == len(plan.groups)
    assert report.ok, [(o.tensor, o.max_abs_err, o.max_rel_err) for o in report.outputs if not o.ok]
