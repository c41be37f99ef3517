"""Ties at a top-k's boundary (issue 51): the import judges them from the graph, not from a
sampled input (frontends/drivers/ties.py). A sparse-attention indexer's top-k over causally
masked keys ties among the masked ones in every row that sees fewer keys than k: harmless
where the mask is applied again after the scatter (DeepSeek-V3.2's), refused where the
picks reach the output; ties a relu's zeros or a zero router make are refused.

Small graphs built by hand, each computed here in numpy with two tie-breaks: the program's
(the lowest positions first) and the opposite one (the highest first). An accepted graph
gives the same output under both; a refused one does not, which is why it is refused."""

from __future__ import annotations

import numpy as np
import pytest

from tprules.frontends.drivers import ties
from tprules.frontends.drivers.fixed import Fixed
from tprules.frontends.graph import Graph, Statement, Tensor

S, D, K = 8, 4, 4  # queries and keys, head width, the indexer's top-k
MIN = np.float32(np.finfo(np.float32).min)
CAUSAL = np.where(np.tril(np.ones((S, S), bool)), np.float32(0), MIN)[None]  # [1, S, S]: 0 seen, min masked


class Built:
    """A graph, its constants, and its value on given inputs under a tie-break."""

    def __init__(self):
        self.graph = Graph()
        self.consts: dict[str, np.ndarray] = {}

    def value(self, name, shape, role="activation", dtype="f32", data=None):
        self.graph.add_value(Tensor(name, tuple(shape), dtype, role=role, module="model.layers.0.self_attn.indexer"))
        if data is not None:
            self.consts[name] = np.asarray(data)
        return name

    def op(self, name, cls, reads, shape, dtype="f32", **attrs):
        self.value(name, shape, dtype=dtype)
        self.graph.stmts.append(Statement(name, cls, tuple(reads), name, tuple((k, str(v)) for k, v in attrs.items()),
                                          module="model.layers.0.self_attn.indexer"))
        return name

    def fixed(self):
        return Fixed(self.graph, self.consts.get)

    def run(self, inputs, highest_first=False, monkeypatch=None):
        """Every value, computed as the reference does; `highest_first`: ties broken the other way."""
        from tprules.ops import row
        from tprules.runtime.values.semantics import apply

        if highest_first:
            def order(attrs, x):
                flipped = np.argsort(-x[..., ::-1], axis=-1, kind="stable")[..., :int(attrs["k"])]
                return x.shape[-1] - 1 - flipped
            monkeypatch.setattr(row, "_topk_order", order)
        out = {**self.consts, **inputs}
        for s in self.graph.stmts:
            v = self.graph.values[s.writes]
            out[s.writes] = np.asarray(apply(s.cls, dict(s.attrs), [out[r] for r in s.reads], {}, v.dtype, v.shape))
        if highest_first:
            monkeypatch.undo()
        return out


def indexer(relu=False, mask_after=True) -> Built:
    """A DeepSeek-style sparse attention: index scores q·k (relu'd per head when `relu`) plus
    the causal mask, their top-K marked in a mask (put_along), the attention's scores masked
    where the indexer did not pick, and (`mask_after`) by the causal mask again."""
    b = Built()
    q, k, v = (b.value(n, (1, S, D), role="input") for n in ("q", "k", "v"))
    causal = b.value("causal", (1, S, S), role="folded", data=CAUSAL)
    b.value("ones", (1, S, S), role="folded", dtype="i8", data=np.ones((1, S, S), np.int8))
    b.value("minimum", (), role="folded", data=MIN)
    b.value("zeros", (1, S, S), role="folded", data=np.zeros((1, S, S), np.float32))
    kt = b.op("kt", "permute", [k], (1, D, S), dims="0,2,1")
    scores = b.op("scores", "matmul", [q, kt], (1, S, S))
    if relu:
        scores = b.op("relu", "relu", [scores], (1, S, S))
    masked = b.op("index_scores", "add", [scores, causal], (1, S, S))
    picked = b.op("topk", "topk_indices", [masked], (1, S, K), dtype="i64", k=K)
    unpicked = b.op("scatter", "put_along", ["ones", picked], (1, S, S), dtype="i8", axis=2, value=0.0)
    mask = b.op("index_mask", "where", [unpicked, "minimum", causal if mask_after else "zeros"], (1, S, S))
    att = b.op("attention", "matmul", [q, kt], (1, S, S))
    att = b.op("att_masked", "add", [att, mask], (1, S, S))
    probs = b.op("probs", "softmax", [att], (1, S, S))
    b.op("out", "matmul", [probs, v], (1, S, D))
    return b


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal((1, S, D)).astype(np.float32) for n in ("q", "k", "v")}


def _judge(b):
    fixed = b.fixed()
    return ties.judge(fixed, next(s for s in b.graph.stmts if s.cls == "topk_indices"))


def test_masked_keys_picked_by_a_tie_never_reach_the_output_when_the_mask_follows_the_scatter(monkeypatch):
    b = indexer()
    fixed = b.fixed()
    topk = next(s for s in b.graph.stmts if s.cls == "topk_indices")
    tied, data = ties.boundary(fixed.of("index_scores"), (1, S, S), K)
    assert np.flatnonzero(tied[0].any(axis=-1)).tolist() == [0, 1, 2]  # queries seeing fewer than K keys
    assert data  # the later rows choose among the scores themselves: no flat region there
    assert ties.unreached(fixed, topk, tied) is None
    assert ties.judge(fixed, topk) is None
    for seed in range(5):  # the program's tie-break and the opposite one: the same output
        low = b.run(_inputs(seed))
        high = b.run(_inputs(seed), highest_first=True, monkeypatch=monkeypatch)
        assert not np.array_equal(low["topk"], high["topk"])  # the picks differ (among masked keys)
        np.testing.assert_array_equal(low["out"], high["out"])


def test_picks_among_masked_keys_that_reach_the_output_are_refused(monkeypatch):
    b = indexer(mask_after=False)  # the index mask alone: a masked key picked is attended
    why = _judge(b)
    assert why is not None and "same for every input (rows 0-2 of 8)" in why
    assert "reaches att_masked (add) of model.layers.0.self_attn.indexer" in why  # where the mask meets the scores
    low, high = b.run(_inputs(0)), b.run(_inputs(0), highest_first=True, monkeypatch=monkeypatch)
    assert not np.allclose(low["out"], high["out"])  # why it is refused


def test_an_indexer_whose_relu_makes_ties_among_visible_keys_is_refused_naming_the_relu():
    why = _judge(indexer(relu=True))
    assert why is not None and "among elements that relu (relu) of model.layers.0.self_attn.indexer makes equal" in why


def test_a_top_k_of_all_its_row_has_no_boundary():
    b = indexer(relu=True)
    b.graph.stmts[[s.name for s in b.graph.stmts].index("topk")] = Statement(
        "topk", "topk_indices", ("index_scores",), "topk", (("k", str(S)),), module="m")
    assert _judge(b) is None


def router(weight: np.ndarray) -> Built:
    """A mixture of experts' router: the top-2 of sigmoid(h @ W) + bias, its weights gathered at them."""
    b = Built()
    h = b.value("h", (S, 16), role="input")
    w = b.value("gate.weight", weight.shape, role="weight", data=weight)
    b.value("bias", (4,), role="weight", data=np.zeros(4, np.float32))
    logits = b.op("logits", "matmul", [h, w], (S, 4), transpose_b=1)
    scores = b.op("scores", "sigmoid", [logits], (S, 4))
    choice = b.op("choice", "add", [scores, "bias"], (S, 4))
    picked = b.op("picked", "topk_indices", [choice], (S, 2), dtype="i64", k=2)
    b.op("weights", "take_along", [scores, picked], (S, 2), axis=1)
    return b


def test_a_zero_router_ties_every_expert_and_is_refused():
    why = _judge(router(np.zeros((4, 16), np.float32)))
    assert why is not None and "same for every input (rows 0-7 of 8)" in why and "weights (take_along)" in why


def test_a_drawn_router_is_not_judged_tied():
    assert _judge(router(np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32))) is None


def test_two_equal_expert_rows_tie_for_every_input():
    w = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    w[3] = w[1]
    why = _judge(router(w))
    assert why is not None and "the constant gate.weight" in why


@pytest.mark.parametrize("k, n, fixed_row, unknown, tied", [
    (4, 8, [0.0] + [-np.inf] * 7, 0, True),      # one key seen of 8, top-4: the masked ones tie
    (4, 8, [-np.inf] * 4, 4, False),              # four seen, top-4: the boundary falls below them
    (4, 8, [-np.inf] * 3, 5, False),              # five seen: the boundary among the scores
    (2, 4, [np.inf, -np.inf, -np.inf, -np.inf], 0, True),  # a local block (+inf), then masked ones
    (1, 4, [np.inf, np.inf], 2, True),            # two +inf for one place
])
def test_the_boundary_is_found_from_the_fixed_elements(k, n, fixed_row, unknown, tied):
    value = np.zeros((1, n), np.float32)
    known = np.zeros((1, n), bool)
    value[0, :len(fixed_row)] = fixed_row
    known[0, :len(fixed_row)] = True
    got, data = ties.boundary((value, known), (1, n), k)
    assert bool(got.any()) == tied
    assert data == (unknown > k - int(np.sum(np.isposinf(fixed_row))) and np.sum(np.isposinf(fixed_row)) < k)
