"""Ties at a top-k's boundary, decided at import from the graph, not from a sampled input
(issue 51). torch's top-k breaks ties in no documented order (its CPU kernel takes them as
std::nth_element or std::partial_sort leaves them: issue 51's masked keys 6, 5, 4 where the
program took 1, 2, 3); the program's `topk_indices` takes the lowest positions. So the
program gives torch's answer wherever torch's answer does not depend on the tie-break, and
an import whose answer could is refused, in one line naming the top-k and its module
(`refuse_ties`). For each top-k of k of n (k < n; torch's argmax, the first of equal
maxima, is documented and not judged):

1. the operand's elements that are the same for every input (fixed.py: a causal mask's
   −inf, a fill at constant positions, a zero router's logits) may tie at the boundary in a
   row (a query that sees fewer keys than k: the indexer of a sparse attention picks among
   masked keys). Such picks are harmless where they never reach the output: the indices
   only mark a mask (a `put_along` of a constant into a constant) that is then combined,
   position by position, with constants up to where it meets data, and there the tied
   positions give the same value picked or not (the mask applied again after the gather:
   DeepSeek-V3.2's `masked_fill(index_mask, min)` of a causal mask that is `min` there
   already). That is shown, not sampled: every statement between the indices and the data
   reads one mask position per element, so comparing the mask with every tied position
   picked and with none, the rest picked and not, covers every tie-break (`unreached`);
2. the operand's other elements may tie for a whole range of inputs (fixed.flat: a relu's
   zeros, as every DeepSeek sparse-attention indexer's scores Σ_h w_h·relu(q_h·k) have
   where no head's relu lets anything through): then which of them torch picks is its
   tie-break, and the import is refused.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from ...ops import ELEMENTWISE, Ops
from ..errors import ImportFailed
from .fixed import SENTINEL, Fixed

ARGMAX = "__argmax"  # reductions.over_axes' top-1 (torch's argmax: the first of equal maxima)
PER_POSITION = ELEMENTWISE | {Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.SLICE, Ops.CAT, Ops.TRANSPOSE}
INDEX_MAPS = ELEMENTWISE | {Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.TAKE_ALONG}


def refuse_ties(job, built) -> None:
    """Raise ImportFailed for the first top-k whose picks could depend on torch's tie-break."""
    graph = built.graph
    if not any(s.cls == Ops.TOPK_INDICES for s in graph.stmts):
        return
    fixed = Fixed(graph, constants(job.model, built))
    for s in graph.stmts:
        if s.cls == Ops.TOPK_INDICES and not s.name.endswith(ARGMAX):
            why = judge(fixed, s)
            if why is not None:
                raise ImportFailed(f"{_name(job.src)}: statement {s.name} (topk_indices) of {s.module or '(top)'}: "
                                   f"aten.topk.default item 1: {why}; "
                                   "torch's top-k breaks ties in no documented order (on the CPU as std::nth_element "
                                   "leaves them), so the program could pick what torch does not; nothing written",
                                   job.src.where())


def _name(src) -> str:
    return getattr(src, "architecture", None) or src.name


def judge(fixed: Fixed, s) -> str | None:
    """Why the top-k `s` could depend on torch's tie-break, or None."""
    x, k = s.reads[0], int(s.attr("k", "1"))
    n = fixed.shape(x)[-1]
    if k >= n:
        return None  # every element is picked
    got = fixed.of(x)
    tied, data = boundary(got, fixed.shape(x), k)
    if data and (cause := fixed.flat(x, -1)) is not None:
        return f"its operand can tie at the top-{k}'s boundary among elements that {cause} makes equal for a whole " \
               "range of inputs"
    if tied.any():
        reach = unreached(fixed, s, tied)
        if reach is not None:
            rows = np.flatnonzero(tied.reshape(-1, n).any(axis=-1))
            return f"its operand ties at the top-{k}'s boundary among elements that are the same for every input " \
                   f"(rows {_span(rows)} of {tied.size // n}), and which of them it picks reaches {reach}"
    return None


def boundary(got, shape: tuple[int, ...], k: int) -> tuple[np.ndarray, bool]:
    """(tied, data): the elements fixed for every input that can tie at the boundary (the
    k-th and the (k+1)-th largest equal), and whether the boundary can fall between two
    elements that are not fixed. Unfixed elements lie between the mask values (−SENTINEL
    and below, SENTINEL and above) and anywhere among the other fixed ones."""
    n = shape[-1]
    tied = np.zeros(shape, bool)
    if got is None:
        return tied, n > k
    value, known = (np.broadcast_to(a, shape).reshape(-1, n) for a in got)
    flat_tied = tied.reshape(-1, n)
    data = False
    for r in range(value.shape[0]):
        kv = value[r][known[r]]
        unknown = n - kv.size
        high = int(np.sum(kv >= SENTINEL))
        data = data or (high <= k - 1 and high + unknown >= k + 1)
        levels, counts = np.unique(kv, return_counts=True)
        for c, m in zip(levels, counts):
            if m < 2:
                continue
            above = int(np.sum(kv > c))
            lo = above + (unknown if c <= -SENTINEL else 0)
            hi = above + (0 if c >= SENTINEL else unknown)
            if lo <= k - 1 and hi >= k - m + 1:
                flat_tied[r] |= known[r] & (value[r] == c)
    return tied, data


@dataclass
class _Picks:
    """A tensor computed from the picks, on the positions grid: each pick's position p stands for
    it along the last axis (n wide where the picks are k), its value where it is the same for
    every input (`known`), the tied positions, and whether it derives from the indices (a
    top-k's values alone are the same whatever the tie-break: equal values tie)."""

    value: np.ndarray
    known: np.ndarray
    tied: np.ndarray
    indices: bool


def unreached(fixed: Fixed, s, tied: np.ndarray) -> str | None:
    """None where the picks among `tied` never reach the output (the module's note, 1.);
    else the statement they reach, named."""
    graph = fixed.graph
    n = tied.shape[-1]
    picks = {s.writes: _Picks(np.broadcast_to(np.arange(n), tied.shape), np.ones(tied.shape, bool), tied, True)}
    got = fixed.of(s.reads[0])
    for v in graph.stmts:  # its values, where another statement takes them
        if v.cls == Ops.TOPK_VALUES and v.reads == s.reads and v.attr("k") == s.attr("k"):
            value, known = got if got is not None else (np.zeros(tied.shape, np.float32), np.zeros(tied.shape, bool))
            picks[v.writes] = _Picks(np.broadcast_to(value, tied.shape), np.broadcast_to(known, tied.shape), tied, False)
    masks: dict[str, list] = {}  # a marked mask in four worlds: (rest, tied) picked or not
    frontier: list[tuple[str, str]] = []
    for st in graph.stmts[graph.stmts.index(s) + 1:]:
        ours = [r for r in st.reads if r in picks or r in masks]
        if not ours or st.writes in picks:
            continue
        name = f"{st.name} ({st.cls}) of {st.module or '(top)'}"
        if any(not fixed.constant(r) for r in st.reads if r not in picks and r not in masks):
            if any(r in picks and picks[r].indices for r in ours):
                return name  # the positions themselves meet data (a gather of the chosen rows)
            frontier.extend((r, name) for r in ours if r in masks)
            continue
        try:
            if all(r in picks for r in ours) and st.cls == Ops.PUT_ALONG and st.reads[1] in picks \
                    and st.reads[0] not in picks:
                masks[st.writes] = _marked(fixed, st, picks[st.reads[1]])
            elif all(r in picks for r in ours) and st.cls in INDEX_MAPS:
                picks[st.writes] = _mapped(fixed, st, picks, n)
            elif all(r in masks for r in ours) and st.cls in PER_POSITION | {Ops.PUT_ALONG} and \
                    (st.cls != Ops.PUT_ALONG or all(r not in masks for r in st.reads[1:])):
                masks[st.writes] = [_apply(fixed, st, {r: w[i] for r, w in masks.items() if r in st.reads})
                                    for i in range(4)]
            else:
                return name
        except _NotShown:
            return name
    if graph.output in masks or (graph.output in picks and picks[graph.output].indices):
        return f"the output {graph.output}"
    for t, name in frontier:
        worlds = masks[t]
        if not (np.array_equal(worlds[0], worlds[1], equal_nan=True) and
                np.array_equal(worlds[2], worlds[3], equal_nan=True)):
            return name
    return None


class _NotShown(Exception):
    """A statement between the picks and the data that the per-position argument cannot follow."""


def _apply(fixed: Fixed, st, given: dict):
    from ...runtime.values.semantics import apply

    operands = [_known(given[r] if r in given else fixed.const(r)) for r in st.reads]
    shape = fixed.shape(st.writes)
    return np.asarray(apply(st.cls, dict(st.attrs), operands, {}, fixed.graph.values[st.writes].dtype, shape))


def _known(value: np.ndarray | None) -> np.ndarray:
    if value is None:
        raise _NotShown  # a constant without a value (--no-data)
    return np.asarray(value)


def _mapped(fixed: Fixed, st, picks: dict, n: int) -> _Picks:
    """A statement over the picks (and constants) on the positions grid: moved, gathered from a
    constant or computed elementwise, the picks' axis kept last."""
    from ...runtime.values.semantics import apply

    x = next(r for r in st.reads if r in picks)
    p = picks[x]
    out = fixed.shape(st.writes)
    wide = out[:-1] + (n,)
    last = fixed.shape(x)[-1] == out[-1]
    if st.cls in (Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE):
        dims = [int(d) for d in st.attr("dims").split(",")] if st.cls == Ops.PERMUTE else None
        if not (last and (dims is None or dims[-1] == len(out) - 1)):
            raise _NotShown

        def move(a):
            return np.transpose(a, dims) if dims else a.reshape(wide) if st.cls == Ops.RESHAPE \
                else np.broadcast_to(a, wide)

        return _Picks(move(p.value), move(p.known), move(p.tied), p.indices)
    if st.cls == Ops.TAKE_ALONG:
        table = fixed.const(st.reads[0])
        if st.reads[1] != x or int(st.attr("axis")) % len(out) != len(out) - 1 or table is None or \
                not p.known.all():
            raise _NotShown
        table = np.broadcast_to(table, p.value.shape[:-1] + np.shape(table)[-1:])
        return _Picks(np.take_along_axis(table, p.value.astype(np.int64), axis=-1), p.known, p.tied, p.indices)
    width = fixed.shape(x)[-1]
    if any(r not in picks and width != 1 and fixed.shape(r)[-1:] not in ((), (1,)) for r in st.reads):
        raise _NotShown  # a constant per pick slot: the picks' order would matter
    operands = [picks[r] if r in picks else None for r in st.reads]
    values = [o.value if o is not None else _known(fixed.const(r)) for o, r in zip(operands, st.reads)]
    knowns = [o.known if o is not None else np.ones(v.shape, dtype=np.bool_) for o, v in zip(operands, values)]
    value = np.asarray(apply(st.cls, dict(st.attrs), values, {}, fixed.graph.values[st.writes].dtype))
    known = Fixed.elementwise(st.cls, dict(st.attrs), value.shape, values, knowns)
    return _Picks(value, known, np.broadcast_to(p.tied, value.shape),
                  any(o is not None and o.indices for o in operands))


def _marked(fixed: Fixed, st, p: _Picks) -> list:
    """The mask a put_along writes at the picked positions, in four worlds: the untied
    positions all picked or none, the tied ones all or none."""
    where, tied = p.value, p.tied
    base = fixed.const(st.reads[0])
    source = fixed.const(st.reads[2]) if len(st.reads) > 2 else None
    axis = int(st.attr("axis")) % len(fixed.shape(st.writes))
    if base is None or axis != len(fixed.shape(st.writes)) - 1 or where.shape[:-1] != np.shape(base)[:-1] or \
            not p.known.all() or (len(st.reads) > 2 and source is None):
        raise _NotShown
    if source is not None:
        source = np.asarray(source)
        if np.any(source != source[..., :1]):
            raise _NotShown  # a value per pick slot: the order of the picks would matter
        value = np.broadcast_to(source[..., :1], where.shape)
    else:
        value = np.full(where.shape, float(st.attr("value", "0")))
    m = np.shape(base)[-1]
    if np.any((where < 0) | (where >= m)):
        raise _NotShown
    out = []
    for rest in (True, False):
        for chosen in (True, False):
            picked = (tied & chosen) | (~tied & rest)
            wide = np.concatenate([np.asarray(base), np.zeros(np.shape(base)[:-1] + (1,), np.asarray(base).dtype)], -1)
            np.put_along_axis(wide, np.where(picked, where, m).astype(np.int64), value.astype(wide.dtype), axis=-1)
            out.append(wide[..., :m])
    return out


def _span(rows: np.ndarray) -> str:
    return f"{rows[0]}" if len(rows) == 1 else f"{rows[0]}-{rows[-1]}" if rows[-1] - rows[0] == len(rows) - 1 \
        else ", ".join(map(str, rows[:8])) + (" ..." if len(rows) > 8 else "")


def constants(model, built):
    """Each constant input's value (a weight by its path, a folded subgraph computed), as
    verify.py reads them; None where the model holds no values (--no-data)."""
    from ..source.arrays import as_numpy

    c, graph = built.constants, built.graph
    memo: dict = {}
    context = built.reduce if built.reduce is not None else nullcontext
    with context():
        named = dict(model.named_parameters(remove_duplicate=False))
        named.update(model.named_buffers(remove_duplicate=False))
        named.update(c.program.constants)

    def value(name: str):
        if name not in memo:
            memo[name] = None
            v = graph.values.get(name)
            try:
                if v is not None and v.role == "weight":
                    memo[name] = as_numpy(named[name], stored=True)
                elif v is not None and v.role == "folded":
                    with context():
                        memo[name] = as_numpy(c.value(graph.folded[name]), stored=True)
            except Exception:  # noqa: BLE001 - no value (a meta tensor): nothing is known of it
                memo[name] = None
        return memo[name]

    return value


__all__ = ["boundary", "constants", "judge", "refuse_ties", "unreached"]
