"""The unfused reference on the bundled examples, against numpy written out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from plans import example

from tprules.program.builder import ProgramBuilder
from tprules.runtime import Program
from tprules.runtime.values.inputs import program_inputs
from tprules.runtime.values.reference import reference
from tprules.runtime.values.semantics import apply
from tprules.workspace import Workspace


def gelu(x):
    return apply("gelu", {}, [x], {}, "f32")


def test_megatron_mlp_is_the_sum_of_its_chips_halves():
    _, prog = example("megatron-mlp-tp2")
    v = program_inputs(prog)
    ref = reference(prog, v)
    x = v["x"]
    y = sum(gelu(x @ v[f"w1_{c}"]) @ v[f"w2_{c}"] for c in range(2))
    np.testing.assert_allclose(ref.get("out"), y + v["b"] + x, rtol=1e-5, atol=1e-5)


def test_chip_tensors_live_on_their_chip_and_spine_tensors_once():
    _, prog = example("megatron-mlp-tp2")
    ref = reference(prog, program_inputs(prog))
    assert "h_0" in ref.chips[0] and "h_0" not in ref.chips[1]
    assert "y" in ref.spine and all("y" not in chip for chip in ref.chips)


def test_inputs_are_reproducible_and_suit_their_readers():
    _, prog = example("int8-mlp-tp2")
    a, b = program_inputs(prog), program_inputs(prog)
    assert all(np.array_equal(a[t], b[t]) for t in a)
    assert (a["var"] >= 0.5).all()  # read by rsqrt


def test_inputs_come_from_data_files(tmp_path):
    b = ProgramBuilder(chips=1)
    x = b.tensor("x", [2, 3], spine=True, data=np.arange(6, dtype=np.float32).reshape(2, 3) - 2)
    b.stmt("r", "relu", [x], b.tensor("y", [2, 3], spine=True))
    ws = Workspace(b.write(tmp_path / "p"))
    prog = Program.from_workspace(ws)
    ref = reference(prog, program_inputs(prog))
    assert ref.get("y").tolist() == [[0, 0, 0], [1, 2, 3]]


@pytest.mark.parametrize("bad, message", [
    (lambda b: b.stmt("m", "matmul", ["x", "x"], b.tensor("y", [2, 2], spine=True)), "inner sizes 3 and 2 differ"),
    (lambda b: b.stmt("a", "add", ["x", b.tensor("z", [4], spine=True)], b.tensor("y", [2, 3], spine=True)),
     "do not broadcast"),
    (lambda b: b.stmt("n", "neg", ["x"], b.tensor("y", [3, 2], spine=True)), "computes shape [2, 3] but writes y"),
    (lambda b: b.stmt("t", "transpose", [b.tensor("v", [4], spine=True)], b.tensor("y", [4], spine=True)),
     "transpose is 2-D"),
])
def test_shapes_are_checked_with_file_and_line(tmp_path, cli, bad, message):
    b = ProgramBuilder(chips=1)
    b.tensor("x", [2, 3], spine=True)
    b.stmt("ok", "neg", ["x"], b.tensor("fine", [2, 3], spine=True))
    bad(b)
    status, out, err = cli("run", b.write(tmp_path / "p"))
    assert status == 2 and out == ""
    assert "op.facts:2: ill-formed:" in err and message in err


def test_a_destination_given_as_an_input_is_taken_not_computed():
    """The import's check on several inputs passes what does not depend on them, computed once."""
    _, prog = example("megatron-mlp-tp2")
    v = program_inputs(prog)
    whole = reference(prog, v)
    given = np.full(whole.get("h_0", 0).shape, 7.0, np.float32)
    again = reference(prog, {**v, "h_0": given})
    assert np.array_equal(again.get("h_0", 0), given) and not np.array_equal(again.get("out"), whole.get("out"))
