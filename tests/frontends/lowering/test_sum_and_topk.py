"""ATen ops the op table writes as several statements: a sum over one axis (slices and an
n-ary sum; a wide last axis as its mean times its size) and top-k (two statements)."""

from __future__ import annotations

import numpy as np
import pytest


def lowered(module, x):
    import torch

    from tprules.frontends.lowering.walk import Lowerer
    from tprules.frontends.source.constants import Constants
    from tprules.frontends.source.core_aten import decompositions

    program = torch.export.export(module, (x,), strict=False).run_decompositions(decompositions())
    return Lowerer(program, Constants(program, module), "Tiny").run()


def evaluate(graph, x):
    """The graph's statements by the reference semantics of their classes."""
    from tprules.runtime.values.semantics import apply

    values = {"input_ids": x}
    for s in graph.stmts:
        out = graph.values[s.writes]
        values[s.writes] = apply(s.cls, dict(s.attrs), [values[r] for r in s.reads], {}, out.dtype, out.shape)
    return values["logits"]


@pytest.mark.parametrize("axis, width", [(1, 3), (-1, 100)])
def test_a_sum_over_an_axis_is_slices_and_a_sum_or_a_scaled_mean(axis, width):
    import torch

    class Sum(torch.nn.Module):
        def forward(self, x):
            return (x.float() * 0.5).sum(dim=axis)

    x = np.arange(2 * 3 * width).reshape(2, 3, width) % 7
    graph = lowered(Sum(), torch.from_numpy(x))
    classes = [s.cls for s in graph.stmts]
    assert ("mean" in classes) == (width > 64) and ("sum" in classes) == (width <= 64)
    assert np.allclose(evaluate(graph, x), (x * 0.5).sum(axis=axis), rtol=1e-6)


def test_top_k_is_two_statements_values_and_indices():
    import torch

    class Route(torch.nn.Module):
        def forward(self, x):
            v, i = torch.topk(x.float(), 2, dim=-1)
            return v * i

    x = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])
    graph = lowered(Route(), torch.from_numpy(x))
    assert [s.cls for s in graph.stmts if s.cls.startswith("topk")] == ["topk_values", "topk_indices"]
    assert np.array_equal(evaluate(graph, x), np.array([[5 * 4, 4 * 2], [9 * 0, 6 * 2]]))
