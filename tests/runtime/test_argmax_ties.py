"""`topk_indices` with k = 1 is torch's argmax (`max.dim`'s indices, `argmax`), ties included:
both give the first of equal maxima, in the class's reference and in the CPU kernel. The
op table lowers an argmax onto it for that reason (torch.topk itself does not promise the
first of equal values, so the class follows max.dim, not topk, on ties)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tprules import ops  # noqa: E402
from tprules.program.builder import ProgramBuilder  # noqa: E402
from tprules.runtime import execute  # noqa: E402
from tprules.workspace import Workspace  # noqa: E402


def _tied(seed: int) -> np.ndarray:
    """Rows of 7 values from {0, 1, 2}: most rows hold their maximum more than once."""
    return np.random.default_rng(seed).integers(0, 3, size=(6, 7)).astype(np.float32)


@pytest.mark.parametrize("seed", range(4))
def test_the_reference_gives_torchs_first_maximum(seed):
    x = _tied(seed)
    want = torch.from_numpy(x).max(dim=-1, keepdim=True).indices.numpy()
    got = ops.CLASSES["topk_indices"].reference({"k": "1"}, x)
    np.testing.assert_array_equal(got, want)
    assert (np.sum(x == x.max(-1, keepdims=True), axis=-1) > 1).any()  # ties are there to break


def test_the_cpu_kernel_gives_torchs_first_maximum(tmp_path):
    x = _tied(7)
    b = ProgramBuilder(chips=1)
    b.stmt("first", "topk_indices", [b.tensor("x", [6, 7], spine=True, data=x)],
           b.tensor("i", [6, 1], "i64", spine=True), k=1)
    report = execute(Workspace(b.write(tmp_path / "p")), device="cpu")
    assert report.ok
    np.testing.assert_array_equal(report.values["i"], torch.from_numpy(x).argmax(dim=-1, keepdim=True).numpy())
