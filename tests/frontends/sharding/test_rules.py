"""The sharding rules on their own (rules.py, views.py): placements through each class,
worked out by hand, and checked against what they mean (each chip's block of the whole
result is the result of its blocks of the operands)."""

from __future__ import annotations

import numpy as np
import pytest

from tprules.frontends.sharding.placement import PARTIAL, REPLICATE, Shard, Split, plain
from tprules.frontends.sharding.table import CutInside, NotShardable, rule

S = Shard


# name → (class, attrs, operand placements, operand shapes, result shape, tp, result placement)
CASES = {
    "colwise matmul": ("matmul", {"transpose_b": "1"}, [REPLICATE, S((plain(0, 2, 32),))], [(8, 64), (32, 64)], (8, 32), 2,
                       S((plain(1, 2, 32),))),
    "rowwise matmul is partial": ("matmul", {"transpose_b": "1"}, [S((plain(1, 2, 64),)), S((plain(1, 2, 64),))],
                                  [(8, 64), (64, 64)], (8, 64), 2, PARTIAL),
    "heads split out of the hidden axis": ("reshape", {}, [S((plain(2, 2, 64),))], [(1, 8, 64)], (1, 8, 4, 16), 2,
                                           S((plain(2, 2, 4),))),
    "heads merge back": ("reshape", {}, [S((plain(2, 2, 4),))], [(1, 8, 4, 16)], (1, 8, 64), 2, S((plain(2, 2, 64),))),
    "batch x heads keeps heads inside": ("reshape", {}, [S((plain(1, 2, 4),))], [(2, 4, 5, 16)], (8, 5, 16), 2,
                                         S((Split(0, 2, 4, 1),))),
    "and back out": ("reshape", {}, [S((Split(0, 2, 4, 1),))], [(8, 5, 16)], (2, 4, 5, 16), 2, S((plain(1, 2, 4),))),
    "kv heads and their copies become heads": ("reshape", {}, [S((plain(1, 2, 2), plain(2, 2, 2)))], [(1, 2, 2, 8, 16)],
                                               (1, 4, 8, 16), 4, S((plain(1, 4, 4),))),
    "a replicated block splits an expanded axis": ("expand", {}, [S((plain(1, 2, 2),))], [(1, 2, 1, 8, 16)],
                                                   (1, 2, 2, 8, 16), 4, S((plain(1, 2, 2), plain(2, 2, 2)))),
    "permute moves the split": ("permute", {"dims": "0,2,1,3"}, [S((plain(2, 2, 4),))], [(1, 8, 4, 16)], (1, 4, 8, 16), 2,
                                S((plain(1, 2, 4),))),
    "partial passes a reshape": ("reshape", {}, [PARTIAL], [(8, 64)], (1, 8, 64), 2, PARTIAL),
    "RoPE table broadcasts over heads": ("mul", {}, [S((plain(1, 2, 4),)), REPLICATE], [(1, 4, 8, 16), (1, 1, 8, 16)],
                                         (1, 4, 8, 16), 2, S((plain(1, 2, 4),))),
    "bmm over split heads": ("bmm", {}, [S((plain(0, 2, 4),))] * 2, [(4, 8, 16), (4, 16, 8)], (4, 8, 8), 2,
                             S((plain(0, 2, 4),))),
    "softmax of split rows": ("softmax", {}, [S((plain(1, 2, 4),))], [(1, 4, 8, 8)], (1, 4, 8, 8), 2, S((plain(1, 2, 4),))),
    "a gather along an axis that is not split": ("take_along", {"axis": "1"}, [S((plain(0, 2, 8),))] * 2,
                                                 [(8, 6), (8, 2)], (8, 2), 2, S((plain(0, 2, 8),))),
    "routing's scatter on the spine": ("put_along", {"axis": "1", "value": "1"}, [REPLICATE] * 2, [(8, 4), (8, 2)],
                                       (8, 4), 2, REPLICATE),
    "a scatter of a source placed alike": ("put_along", {"axis": "-1"}, [S((plain(0, 2, 8),))] * 3,
                                           [(8, 4), (8, 2), (8, 2)], (8, 4), 2, S((plain(0, 2, 8),))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_placement_flows_through_a_class(name):
    cls, attrs, ins, shapes, out, tp, want = CASES[name]
    assert rule(cls)(attrs, ins, shapes, out, tp, transpose_b=attrs.get("transpose_b") == "1") == want


REFUSED = {
    "heads that do not split": ("reshape", {}, [S((plain(2, 4, 48),))], [(1, 8, 48)], (1, 8, 3, 16), 4, "does not divide"),
    "a head cut in two": ("reshape", {}, [S((plain(2, 8, 32),))], [(1, 8, 32)], (1, 8, 4, 8), 8,
                          "is 4 groups of 8 in \\[1, 8, 4, 8\\]: a chip would hold part of a group"),
    "a row reduced over its split axis": ("softmax", {}, [S((plain(1, 2, 8),))], [(8, 8)], (8, 8), 2, "all-gather"),
    "a slice of a split axis": ("slice", {"axis": "1"}, [S((plain(1, 2, 8),))], [(4, 8)], (4, 4), 2, "which is split"),
    "a replicated operand as wide as a split one": ("add", {}, [S((plain(1, 2, 8),)), REPLICATE], [(4, 8), (4, 8)], (4, 8),
                                                    2, "needs a local slice"),
    "a vocabulary-parallel table": ("embedding", {}, [S((plain(0, 2, 8),)), REPLICATE], [(8, 4), (1, 3)], (1, 3, 4), 2,
                                    "vocabulary-parallel"),
    "heads split differently": ("bmm", {}, [S((plain(0, 2, 4),)), S((plain(0, 4, 4),))], [(4, 8, 16), (4, 16, 8)],
                                (4, 8, 8), 4, "split differently"),
    "a gather along its split axis": ("take_along", {"axis": "1"}, [S((plain(1, 2, 6),))] * 2, [(8, 6), (8, 6)],
                                      (8, 6), 2, "none split on that axis"),
    "a scatter whose index lives elsewhere": ("put_along", {"axis": "1", "value": "1"}, [S((plain(0, 2, 8),)), REPLICATE],
                                              [(8, 4), (8, 2)], (8, 4), 2, "placed alike"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_placement_no_rule_covers_is_refused(name):
    cls, attrs, ins, shapes, out, tp, words = REFUSED[name]
    with pytest.raises(NotShardable, match=words):
        rule(cls)(attrs, ins, shapes, out, tp)


@pytest.mark.parametrize("name", ["heads that do not split", "a head cut in two"])
def test_a_view_cutting_the_groups_of_a_split_says_what_it_cuts(name):
    # the Sharder names the style that split the factor from these (Sharder._cut_inside)
    cls, attrs, (x,), shapes, out, tp, _ = REFUSED[name]
    with pytest.raises(CutInside) as err:
        rule(cls)(attrs, [x], shapes, out, tp)
    assert (err.value.size, err.value.groups, err.value.parts) == (x.splits[0].factor, out[2], x.splits[0].parts)


def _blocks(shape, placement, tp, whole):
    """Each chip's block of a whole array under a placement (any split, by its definition)."""
    out = []
    for chip in range(tp):
        digits = placement.block(chip, tp)
        index = [np.arange(n) for n in shape]
        for split in placement.splits:
            n = shape[split.axis]
            outer = n // (split.factor * split.inner)
            per = split.factor // split.parts
            kept = [o * split.factor * split.inner + (digits[split.axis] * per + f) * split.inner + i
                    for o in range(outer) for f in range(per) for i in range(split.inner)]
            index[split.axis] = np.array(kept)
        out.append(whole[np.ix_(*index)])
    return out


@pytest.mark.parametrize("name", [n for n in sorted(CASES) if CASES[n][0] in ("reshape", "permute", "expand")
                                  and isinstance(CASES[n][2][0], Shard)])
def test_the_local_layout_op_of_each_chip_computes_its_block(name):
    cls, attrs, (x,), (shape,), out, tp, want = CASES[name]
    whole = np.arange(np.prod(shape)).reshape(shape)
    if cls == "reshape":
        result = whole.reshape(out)
    elif cls == "permute":
        result = np.transpose(whole, [int(d) for d in attrs["dims"].split(",")])
    else:
        result = np.broadcast_to(whole, out)
    for mine, theirs in zip(_blocks(shape, x, tp, whole), _blocks(out, want, tp, result)):
        local = want.local(out, tp)
        computed = mine.reshape(local) if cls == "reshape" else (
            np.transpose(mine, [int(d) for d in attrs["dims"].split(",")]) if cls == "permute"
            else np.broadcast_to(mine, local))
        np.testing.assert_array_equal(computed, theirs)
