"""The columnar engine's keys (tprules/datalog/engine/keys.py) against their plain definitions, on
random columns: narrow and wide types, negative values, spans too wide for one key."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tprules.datalog.engine.keys import KeyIndex, dedupe_rows, distinct_rows

DTYPES = [np.int16, np.int32, np.int64]


@st.composite
def tables(draw, max_rows=40):
    dtype = draw(st.sampled_from(DTYPES))
    info = np.iinfo(dtype)
    width = draw(st.integers(1, 3))
    wide = draw(st.booleans())  # values all over the type's range, or a few small ones
    values = st.integers(int(info.min), int(info.max)) if wide else st.integers(-3, 5)
    rows = draw(st.lists(st.lists(values, min_size=width, max_size=width), min_size=2, max_size=max_rows))
    return np.array(rows, dtype=dtype)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(tables())
def test_distinct_rows_are_the_deduplicated_rows_in_key_order(rows):
    found = distinct_rows(rows)
    assert found.dtype == rows.dtype
    assert np.array_equal(found, rows[dedupe_rows(list(rows.T))])
    assert sorted(map(tuple, found.tolist())) == sorted(set(map(tuple, rows.tolist())))


def test_distinct_rows_of_64_bit_spans_go_the_slower_way():
    rows = np.array([[np.iinfo(np.int64).max, 1], [np.iinfo(np.int64).min, 1], [np.iinfo(np.int64).max, 1]])
    assert distinct_rows(rows).tolist() == rows[dedupe_rows(list(rows.T))].tolist()


@pytest.mark.parametrize("views", [False, True])
@pytest.mark.parametrize("width", [1, 2])
@settings(max_examples=100, deadline=None, derandomize=True)
@given(here=tables(), other=tables())
def test_a_key_index_joins_and_finds_as_a_nested_loop(width, views, here, other):
    """Whether its positions are sorted for when it is made or on the first join (`views`)."""
    width = min(width, here.shape[1], other.shape[1])
    here, other = here[:, :width], other[:, :width].astype(np.int64)
    index = KeyIndex([here[:, i] for i in range(width)], views=views)
    found = index.contains([other[:, i] for i in range(width)])
    left, right = index.join([other[:, i] for i in range(width)])
    pairs = sorted(zip(left.tolist(), right.tolist()))
    assert pairs == [(i, j) for i in range(len(other)) for j in range(len(here))
                     if other[i].tolist() == here[j].tolist()]
    assert found.tolist() == [any(o.tolist() == h.tolist() for h in here) for o in other]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(tables(), st.booleans(), st.booleans(), st.booleans())
def test_unique_is_numpys_unique(rows, index, inverse, counts):
    """datalog/facts/columns.py's `unique` (one stable sort, no numpy.ma) answers as np.unique."""
    from tprules.datalog.facts.columns import unique

    values = rows[:, 0]
    ours = unique(values, return_index=index, return_inverse=inverse, return_counts=counts)
    theirs = np.unique(values, return_index=index, return_inverse=inverse, return_counts=counts)
    ours, theirs = (ours, theirs) if isinstance(theirs, tuple) else ((ours,), (theirs,))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and np.array_equal(a, b)
