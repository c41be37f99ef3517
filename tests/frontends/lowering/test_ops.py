"""The op table's lowerings of issue 22's ops (frontends/lowering/), each traced from a small
torch function and evaluated with the class table's references against torch itself."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tprules.frontends.errors import ImportFailed  # noqa: E402

from .module import evaluate, lower_module  # noqa: E402


class Fn(torch.nn.Module):
    def __init__(self, fn, weight=None):
        super().__init__()
        self.fn = fn
        self.w = torch.nn.Parameter(weight) if weight is not None else None

    def forward(self, x):
        return self.fn(self, x)


def _write_slice(m, x):
    y = x * 1.5
    y[:, 1:3] = x[:, 0:2] * 2
    return y


def _write_into_zeros(m, x):
    y = x.new_zeros(2, 3, 8)
    y[..., :5] = x
    y[..., 5:] = x[..., :3] * 3
    return y


def _write_nested(m, x):  # a write into a slice of a selected row (MLA's k_pe into the key)
    y = x * 2
    y[0, 1:2, 2:4] = x[1, 0:1, 0:2]
    return y


def _causal_conv(m, x):  # Mamba's: depthwise, padded by K − 1, the first T outputs kept
    return torch.nn.functional.conv1d(x, m.w, padding=3, groups=3)[..., :5]


def _grouped_conv(m, x):
    return torch.nn.functional.conv1d(x.repeat(1, 2, 1), m.w.repeat(1, 2, 1), padding=1, groups=3)


def _complex_rotary(m, x):  # DeepSeek-V2's apply_rotary_emb: pairs as complex numbers, times a polar table
    table = torch.polar(torch.ones_like(m.w), m.w)[None, None]
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(z * table).flatten(2) * 2


class _Table(torch.nn.Module):
    """torchtitan's rotary table: a complex64 buffer from torch.polar, sliced to the sequence."""

    def __init__(self):
        super().__init__()
        angles = torch.outer(torch.arange(6.0), torch.tensor([1.0, 0.3]))
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles), persistent=False)


def _torchtitan_rotary(m, x):  # torchtitan's apply_rotary_emb: [..., -1, 2] pairs, a broadcast table, flatten(3)
    q = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2)[None])  # [1, 2, 3, 2]: seq 2, 3 heads
    table = m.table.freqs_cis[0:2].view(1, 2, 1, 2)
    return torch.view_as_real(q * table).flatten(3).type_as(x)[0]


# name → (function, a class its statements must use)
CASES = {
    "ge": (lambda m, x: (x >= 0.1).float() * x, "greater_equal"),
    "logical": (lambda m, x: (((x > 0) & (x < 0.5)) | ~(x > -0.5)).float() * x, "where"),
    "lt_le": (lambda m, x: (x < 0.1).float() * x + (x <= -0.2).float(), "greater"),
    "log1p": (lambda m, x: torch.log1p(x * x), "log1p"),
    "log": (lambda m, x: torch.log(x * x), "log"),
    "clamp": (lambda m, x: x.clamp(-0.5, 0.7), "clamp"),
    "clamp_min": (lambda m, x: x.clamp(min=-0.5), "clamp"),
    "clamp_max": (lambda m, x: torch.clamp_max(x, 0.2), "clamp"),
    "reciprocal": (lambda m, x: torch.reciprocal(x) * 2, "div"),
    "amax_last_kept": (lambda m, x: x.amax(dim=-1, keepdim=True) + x, "amax"),
    "amax_middle": (lambda m, x: x.amax(dim=1), "amax"),
    "softmax_middle": (lambda m, x: torch.softmax(x, dim=1) * x, "softmax"),  # DeepSeek-V4's compressor, over its window
    "max_dim_values": (lambda m, x: x.max(dim=1).values, "amax"),
    "sum_two_axes": (lambda m, x: x.sum(dim=(0, 2)), "mean"),
    "mean_first_axis": (lambda m, x: x.mean(dim=0), "mean"),
    "sum_last_kept": (lambda m, x: x.sum(-1, keepdim=True) * x, "sum"),
    "sum_wide_last": (lambda m, x: x.repeat(1, 1, 13).sum(-1) * 2, "mean"),  # 65 wide: a scaled mean
    "vector_norm": (lambda m, x: torch.linalg.vector_norm(x, dim=-1, keepdim=True), "pow"),
    "repeat": (lambda m, x: x.repeat(2, 1, 3), "expand"),
    "select": (lambda m, x: x[:, 1] * 2, "slice"),
    "sqrt": (lambda m, x: (x * x).sqrt(), "pow"),
    "abs": (lambda m, x: x.abs() - x, "where"),
    "eq_ne": (lambda m, x: (x.clamp(0, 1) == 0).float() + 2 * (x.clamp(0, 1) != 1).float(), "mul"),
    "write_slice": (_write_slice, "cat"),
    "write_into_zeros": (_write_into_zeros, "cat"),
    "write_nested": (_write_nested, "cat"),
    "cumsum_middle": (lambda m, x: torch.cumsum(x, dim=1), "matmul"),
    "cumsum_last": (lambda m, x: torch.cumsum(x, dim=-1) * x, "matmul"),
    "pad_sequence": (lambda m, x: torch.nn.functional.pad(x, (1, 2, 0, 3)), "cat"),
    "pad_and_crop": (lambda m, x: torch.nn.functional.pad(x, (-1, 2), value=0.5), "cat"),
    "full_like": (lambda m, x: torch.full_like(x, 2.0) * x + torch.zeros_like(x), "mul"),
    "minus_inf_mask": (lambda m, x: x.masked_fill(x > 0.3, -torch.inf).exp(), "where"),
    "complex_rotary": (_complex_rotary, "sub"),
    "torchtitan_rotary": (_torchtitan_rotary, "sub"),
    "any_last_kept": (lambda m, x: (x > 0.3).any(-1, keepdim=True).float() * x, "amax"),
    "any_middle": (lambda m, x: (x > 0.3).any(dim=1).float(), "amax"),
    "any_all": (lambda m, x: (x > 2.5).any().float() + x, "amax"),
    "causal_sdpa": (lambda m, x: torch.nn.functional.scaled_dot_product_attention(x[None], x[None] * 2, x[None],
                                                                                  is_causal=True)[0], "softmax"),
    "repeat_interleave_heads": (lambda m, x: x.reshape(2, 3, 1, 5).repeat_interleave(2, dim=2).flatten(2) * 2,
                                "expand"),
    "causal_conv": (_causal_conv, "conv1d"),
    "grouped_conv": (_grouped_conv, "conv1d"),
    # routing: a max's index, a gather at the top-k, a scatter of a value or a source, a clamp to a tensor
    "clamp_to_tensor": (lambda m, x: x.abs().clamp(min=x.amax(-1, keepdim=True) * 0.5), "minimum"),
    "clamp_between_tensors": (lambda m, x: x.clamp(x.mean(0), x.amax(0) * 0.5), "minimum"),
    "maximum": (lambda m, x: torch.maximum(x, x.mean(-1, keepdim=True)), "minimum"),
    "argmax_kept": (lambda m, x: x.max(dim=-1, keepdim=True).indices.float() + x, "topk_indices"),
    "argmax_middle": (lambda m, x: x.argmax(dim=1).float(), "topk_indices"),
    "argmax_flat": (lambda m, x: x.argmax().float() * x, "topk_indices"),
    "gather_top_k": (lambda m, x: x.softmax(-1).gather(2, x.topk(2, dim=-1).indices), "take_along"),
    "gather_first_axis": (lambda m, x: x.gather(0, x.argmax(dim=0, keepdim=True)[..., :4]) * 2, "take_along"),
    "scatter_value": (lambda m, x: torch.zeros_like(x).scatter(2, x.topk(2, dim=-1).indices, 1.0) * x, "put_along"),
    "scatter_source": (lambda m, x: torch.full_like(x, -torch.inf).scatter(2, x.topk(2, dim=-1).indices,
                                                                            x.exp()).sigmoid(), "put_along"),
    "scatter_middle": (lambda m, x: torch.zeros_like(x).scatter(1, x.argmax(dim=1, keepdim=True), x.exp()) + x,
                       "put_along"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_lowering_computes_what_torch_computes(name):
    fn, cls = CASES[name]
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4) if "rotary" in name else torch.randn(2, 3, 5)
    weights = {"complex_rotary": torch.randn(3, 2) * 3}
    m = Fn(fn, weights.get(name, torch.randn(3, 1, 4) if "conv" in name else None))
    if name == "torchtitan_rotary":
        m.table = _Table()
    graph, program, want = lower_module(m, x)
    assert cls in {s.cls for s in graph.stmts}
    got = evaluate(graph, program, x)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_the_safe_softmax_zeros_are_one_broadcast_value():
    """SDPA's `where(fully masked row, full_like(p, 0), p)`: the zeros a constant of p's rank with
    every axis 1 (a chip holding a block of the heads needs no slice of a whole [.., S, S] copy)."""
    def fn(m, x):
        return torch.nn.functional.scaled_dot_product_attention(x[None], x[None], x[None], is_causal=True)[0]

    graph, _, _ = lower_module(Fn(fn), torch.randn(2, 3, 5))
    (zeros,) = [s.reads[1] for s in graph.stmts if s.cls == "where"]
    assert graph.values[zeros].role == "folded" and graph.values[zeros].shape == (1, 1, 1, 1)


def test_no_tensor_is_written_twice_by_a_slice_write():
    graph, _, _ = lower_module(Fn(_write_into_zeros), torch.randn(2, 3, 5))
    written = [s.writes for s in graph.stmts]
    assert len(written) == len(set(written))


def _edited(fn, target: str, **args):
    """The traced program of `fn` with the first `target` node's arguments changed (what a
    trace would hold for a write torch itself would refuse)."""
    from tprules.frontends.lowering.walk import Lowerer
    from tprules.frontends.source.constants import Constants
    from tprules.frontends.source.core_aten import decompositions

    m = Fn(fn).eval()
    x = torch.randn(2, 3, 5)
    program = torch.export.export(m, (x,), strict=False).run_decompositions(decompositions())
    node = next(n for n in program.graph_module.graph.nodes if str(n.target) == target)
    new = list(node.args)
    for i, v in args.items():
        new[int(i[1:])] = v
    node.args = tuple(new)
    return Lowerer(program, Constants(program, m), "test")


def test_a_slice_write_out_of_bounds_is_one_line():
    lowerer = _edited(_write_slice, "aten.slice_scatter.default", a3=2, a4=9)
    with pytest.raises(ImportFailed) as err:
        lowerer.run()
    text = str(err.value)
    assert "\n" not in text and "aten.slice_scatter.default" in text and "out of bounds" in text


def test_a_scatter_that_reduces_is_refused_in_one_line():
    def fn(m, x):
        return torch.zeros_like(x).scatter(2, x.topk(2, dim=-1).indices, x, reduce="add")

    with pytest.raises(ImportFailed) as err:
        lower_module(Fn(fn), torch.randn(2, 3, 5))
    assert "\n" not in str(err.value) and "aten.scatter" in str(err.value), str(err.value)


@pytest.mark.parametrize("conv, words", [
    (lambda m, x: torch.nn.functional.conv1d(x, m.w, stride=2, groups=3), "stride [2]"),
    (lambda m, x: torch.nn.functional.conv1d(x, m.w[..., :2], dilation=2, groups=3), "dilation [2]"),
    (lambda m, x: torch.nn.functional.conv2d(x[None], m.w[:2, :, :2].reshape(1, 2, 1, 2)), "input [1, 2, 3, 5]"),
])
def test_a_convolution_the_class_does_not_cover_is_one_line_naming_its_parameters(conv, words):
    with pytest.raises(ImportFailed) as err:
        lower_module(Fn(conv, torch.randn(3, 1, 4)), torch.randn(2, 3, 5))
    text = str(err.value)
    assert "\n" not in text and "aten.convolution.default" in text and words in text and "groups" in text


def test_a_complex_value_read_as_a_real_one_is_refused_in_one_line():
    with pytest.raises(ImportFailed) as err:
        lower_module(Fn(lambda m, x: torch.view_as_complex(x.reshape(2, 3, 2, 2)).exp()), torch.randn(2, 3, 4))
    assert "\n" not in str(err.value) and "aten.exp.default" in str(err.value)
