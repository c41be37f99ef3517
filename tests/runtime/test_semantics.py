"""SPEC §4 in numpy (runtime/values/semantics.py), on values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tprules.runtime.values.semantics import apply, quantize_int8, round_bf16, store

F = np.float32


def test_quantized_read_rounds_half_to_even():
    # max |t| = 127, so s = 1 and t / s is t itself
    t = np.array([2.5, -2.5, 1.5, 0.5, 127.0, -3.49], F)
    assert quantize_int8(t).tolist() == [2.0, -2.0, 2.0, 0.0, 127.0, -3.0]


def test_quantized_read_has_one_scale_for_the_whole_tensor():
    t = np.array([[1.0, 0.01], [0.0, -0.5]], F)
    s = F(1.0) / F(127)
    np.testing.assert_array_equal(quantize_int8(t), (np.round(t / s) * s).astype(F))
    assert quantize_int8(t)[0, 1] != t[0, 1]  # 0.01 is not a multiple of 1/127


def test_quantized_read_of_zeros_is_zeros():
    assert not quantize_int8(np.zeros((2, 3), F)).any()


@pytest.mark.parametrize("dtype, value, kept", [
    ("f32", 1 + 2 ** -20, 1 + 2 ** -20),
    ("f16", 1 + 2 ** -12, 1.0),            # below half an f16 unit
    ("bf16", 1 + 2 ** -8, 1.0),            # a tie, to even
    ("bf16", 1 + 3 * 2 ** -8, 1 + 2 ** -6),  # a tie, to even (up)
    ("i32", -2.7, -2),                     # truncated, as a cast
    ("i8", 3.9, 3),
])
def test_store_keeps_a_dtype(dtype, value, kept):
    assert float(store(np.array([value], F), dtype)[0]) == kept


def test_bf16_keeps_infinities_and_nan():
    out = round_bf16(np.array([np.inf, -np.inf, np.nan], F))
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])


def test_gelu_is_the_tanh_approximation():
    x = 0.7
    want = 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    assert apply("gelu", {}, [np.array([x], F)], {}, "f32")[0] == pytest.approx(want, rel=1e-6)


def test_rmsnorm_scales_rows_to_unit_mean_square():
    x = np.array([[3.0, -3.0, 3.0, 3.0], [1.0, 2.0, 2.0, 4.0]], F)
    w = np.array([1.0, 2.0, 1.0, 1.0], F)
    out = apply("rmsnorm", {"eps": "0"}, [x, w], {}, "f32")
    np.testing.assert_allclose(out[0], [1.0, -2.0, 1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(np.mean((out[1] / w) ** 2), 1.0, rtol=1e-6)


def test_softmax_rows_sum_to_one_and_survive_big_values():
    x = np.array([[1000.0, 1000.0], [0.0, math.log(3.0)]], F)
    out = apply("softmax", {}, [x], {}, "f32")
    np.testing.assert_allclose(out, [[0.5, 0.5], [0.25, 0.75]], rtol=1e-6)


@pytest.mark.parametrize("cls, args, attrs, want", [
    ("add", [[1, 2], [10]], {}, [11, 12]),            # NumPy broadcasting
    ("sub", [[1, 2], [10, 20]], {}, [-9, -18]),
    ("mul", [[[1], [2]], [3, 4]], {}, [[3, 4], [6, 8]]),
    ("div", [[1, 3], [2]], {}, [0.5, 1.5]),
    ("sum", [[1], [2], [4]], {}, [7]),
    ("neg", [[1, -2]], {}, [-1, 2]),
    ("relu", [[-1, 2]], {}, [0, 2]),
    ("rsqrt", [[4, 0.25]], {}, [0.5, 2]),
    ("scale", [[2, -4]], {"factor": "0.25"}, [0.5, -1]),
    ("transpose", [[[1, 2, 3]]], {}, [[1], [2], [3]]),
    ("matmul", [[[1, 2]], [[3], [4]]], {}, [[11]]),
    ("matmul", [[[1, 2]], [[3, 4]]], {"transpose_b": "1"}, [[11]]),
    # the classes real models need (docs/classes.md)
    ("bmm", [[[[1, 2]], [[1, 0]]], [[[3], [4]], [[5], [6]]]], {}, [[[11]], [[5]]]),
    ("pow", [[2, -3]], {"exponent": "3"}, [8, -27]),
    ("pow", [[4, 0.25]], {"exponent": "0.5"}, [2, 0.5]),
    ("add_scalar", [[1, -2]], {"value": "0.5"}, [1.5, -1.5]),
    ("sigmoid", [[0, 100, -100]], {}, [0.5, 1, 0]),
    ("tanh", [[0, 100]], {}, [0, 1]),
    ("gelu_erf", [[0, 1]], {}, [0, 0.8413447460685429]),   # x * Phi(x)
    ("expm1", [[0, 1e-8]], {}, [0, 1e-8]),                 # exact near 0, unlike exp - 1
    ("minimum", [[1, 5], [3]], {}, [1, 3]),
    ("greater", [[-1, 0, 2]], {"value": "0"}, [0, 0, 1]),
    ("where", [[1, 0], [10, 20], [30, 40]], {}, [10, 40]),
    ("mean", [[[1, 2, 3], [4, 4, 4]]], {}, [[2], [4]]),
    ("layernorm", [[[1, 3]], [2, 1], [0, 10]], {"eps": "0"}, [[-2, 11]]),
    ("layernorm", [[[1, 3]]], {"eps": "0"}, [[-1, 1]]),
    ("permute", [[[[1, 2]], [[3, 4]]]], {"dims": "2,0,1"}, [[[1], [3]], [[2], [4]]]),
    ("slice", [[0, 1, 2, 3, 4]], {"axis": "0", "start": "1", "end": "5", "step": "2"}, [1, 3]),
    ("cat", [[[1, 2]], [[3]]], {"axis": "-1"}, [[1, 2, 3]]),
    ("embedding", [[[0, 1], [2, 3], [4, 5]], [[2, 0]]], {}, [[[4, 5], [0, 1]]]),
])
def test_class_meanings(cls, args, attrs, want):
    out = apply(cls, attrs, [np.array(a, F) for a in args], {}, "f32")
    np.testing.assert_allclose(out, np.array(want, F), rtol=1e-6)


@pytest.mark.parametrize("cls, x, shape", [
    ("reshape", [[1, 2, 3], [4, 5, 6]], (3, 2)),
    ("expand", [[1], [2]], (2, 3)),
])
def test_a_layout_class_takes_its_shape_from_the_destination(cls, x, shape):
    x = np.array(x, F)
    want = x.reshape(shape) if cls == "reshape" else np.broadcast_to(x, shape)
    np.testing.assert_array_equal(apply(cls, {}, [x], {}, "f32", shape), want)


def test_a_quantized_operand_is_read_in_two_passes():
    a = np.array([[0.3, -1.0]], F)
    b = np.array([[1.0], [0.0]], F)
    plain = apply("matmul", {}, [a, b], {}, "f32")
    quantized = apply("matmul", {}, [a, b], {0: "int8_two_pass"}, "f32")
    assert plain[0, 0] == F(0.3)
    assert quantized[0, 0] == F(38) * (F(1) / F(127))  # round(0.3 * 127) = 38
