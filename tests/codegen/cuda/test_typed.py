"""The CUDA renderer types what it writes (codegen/cuda/typed.py): what NVVM refuses or widens
fails in the simulator's runs too, on machines without NVVM."""

from __future__ import annotations

import numpy as np
import pytest
from plans import EXAMPLES, example

from tprules.codegen import lower
from tprules.codegen.cuda import kernel as cuda
from tprules.codegen.cuda import typed
from tprules.planner import plan as make_plan
from tprules.program.builder import ProgramBuilder
from tprules.runtime import Program, execute
from tprules.runtime.plan.groups import unfused
from tprules.workspace import Workspace

PARAMS = {"p0": ("f32", 2), "p1": ("i64", 1), "p2": ("f32", 1)}

# (kernel body, the message's fragment); every body is one a renderer bug could write
REFUSED = [
    ("v = f32(p2[0])\np2[v] = f32(0)", "subscript of p2 by f32 (an index must be an integer)"),
    ("p0[0] = f32(0)", "subscript of p0 (array(f32, 2d)) by 1 indices"),
    ("p2[0] = f32(p2[0]) + 1", "+ of f32 and int: an implicit conversion"),
    ("p2[0] = f32(p2[0]) * 0.5", "a bare float literal is float64"),
    ("i = tid / 2", "/ between integers is float64 division"),
    ("p1[0] = f32(1)", "store of f32 into p1, whose elements are int"),
    ("p2[0] = p1[0]", "store of int into p2, whose elements are f32"),
    ("v = f32(0)\nv = I64(1)", "v is f32 and then int"),
    ("p2[0] = fexp(p1[0])", "fexp takes float32; given int"),
    ("p2[0] = (f32(1) if tid > 0 else I64(0))", "the branches of a conditional are f32 and int"),
    ("while f32(p2[0]) > 0:\n    pass", "comparison of f32 and int"),
    ("p2[0] = w", "w is read before it is assigned"),
]
ACCEPTED = [
    "ix = p1[tid]\np2[ix] = f32(p2[ix]) + f32(1)",
    "for j in range(bid * nt + tid, 8, nb * nt):\n    p1[j % 2] = I64(f32(p2[j // 2]))",
    "red = cuda.shared.array(BLOCK, f32)\nred[tid] = f32(p0[tid // 2, tid % 2])\ncuda.syncthreads()",
    "cuda.atomic.max(p2, 0, abs(f32(p2[1])) / f32(127))",
]


def _source(body: str) -> str:
    lines = ["@cuda.jit", "def kernel(stage, p0, p1, p2):", "    tid = cuda.threadIdx.x", "    bid = cuda.blockIdx.x",
             "    nb = cuda.gridDim.x", "    nt = cuda.blockDim.x"]
    return "\n".join(lines + ["    " + ln for ln in body.splitlines()]) + "\n"


@pytest.mark.parametrize("body, message", REFUSED, ids=[m for _, m in REFUSED])
def test_the_checker_refuses_what_a_gpu_compiler_types_differently(body, message):
    with pytest.raises(typed.KernelTypeError) as err:
        typed.check(_source(body), PARAMS)
    assert message in str(err.value)
    assert err.value.line == 7 + body.rstrip().count("\n") - ("while" in body)  # the line that goes wrong


@pytest.mark.parametrize("body", ACCEPTED)
def test_the_checker_accepts_what_the_renderer_writes(body):
    typed.check(_source(body), PARAMS)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_kernel_of_the_examples_types_for_a_gpu_and_the_simulator(name):
    ws, prog = example(name)
    groups = list(unfused(prog).groups) + list(make_plan(ws).groups)
    for target in (cuda.Target(16), cuda.Target(8, simulator=True)):
        for g in groups:
            cuda.render(lower(g, prog), target)  # raises KernelTypeError on a bad line


def test_a_float_index_fails_in_the_simulator_naming_group_and_statement(tmp_path, monkeypatch):
    """The bug of issue 23: an embedding's ids read as float32 and used as a row index.
    The simulator would index with the float; the renderer's typing refuses it."""
    from tprules.codegen.render.emit import Scope

    b = ProgramBuilder(chips=1)
    ids = b.tensor("ids", [2, 3], "i64", spine=True, data=np.array([[4, 0, 2], [2, 2, 1]], np.int64))
    b.stmt("e", "embedding", [b.tensor("table", [5, 4], spine=True), ids], b.tensor("e", [2, 3, 4], spine=True))
    ws = Workspace(b.write(tmp_path / "p"))
    assert execute(ws, device="sim").ok
    monkeypatch.setattr(Scope, "index", lambda self, e, idx: self.at(e, idx))  # the ids as float32 again
    with pytest.raises(typed.KernelTypeError) as err:
        execute(ws, device="sim")
    assert "group g0, statement e" in str(err.value) and "by f32 (an index must be an integer)" in str(err.value)


def test_the_statement_is_the_member_whose_code_is_on_the_line(tmp_path):
    """A fused group's error names the member that computes the failing line."""
    from tprules.codegen.render.emit import origin
    from tprules.planner.plan import Group

    b = ProgramBuilder(chips=1)
    x = b.stmt("a", "exp", [b.tensor("x", [4], spine=True)], b.tensor("a", [4], spine=True))
    b.stmt("c", "neg", [x], b.tensor("c", [4], spine=True))
    prog = Program.from_workspace(Workspace(b.write(tmp_path / "p")))
    kernel = lower(Group("g0", ("a", "c"), "spine"), prog)
    text, _, marks = cuda.render_marked(kernel, cuda.Target(8, simulator=True))
    lines = text.splitlines()
    exp_line = next(n for n, ln in enumerate(lines, 1) if "fexp(" in ln and "=" in ln and "def" not in ln
                    and ln.startswith("            "))
    neg_line = next(n for n, ln in enumerate(lines, 1) if "= -v" in ln)
    assert origin(kernel, marks, exp_line) == "a"
    assert origin(kernel, marks, neg_line) == "c"
