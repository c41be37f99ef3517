"""The op table's functions of a position: in a decode step the rotary embedding's cos and sin
depend on the new token's position, an input, where a prefill folds them into constants.
Like a serving engine's cos/sin cache, the value is tabulated at import for every position
the cache holds (0 ≤ p < L, the Lowerer's `positions`) and gathered by the position: a
constant table [L, n] read by `embedding`.

Only a value that depends on the program's inputs through one integer of one element (the
position, however it is broadcast or offset) is tabulated; any other is refused naming the
op, as the table has no class for it.
"""

from __future__ import annotations

import operator

import numpy as np

from ...ops import Ops
from ..source.constants import map_nodes
from .table import MISSING, lowering


def _found_or_refused(ctx, n):
    """(the cache length, the position n depends on and the nodes between), or refused as an
    op the table has no lowering for (in a prefill, or where n is no function of the position)."""
    positions: int | None = getattr(ctx, "positions", None)
    found = _position_of(ctx, n) if positions else None
    if found is None or positions is None:
        return ctx.unsupported(n, f"{MISSING}; a function of the position alone is tabulated in a decode step only")
    return positions, found


@lowering("aten.cos.default", "aten.sin.default")
def tabulated(ctx, n):
    positions, found = _found_or_refused(ctx, n)
    rows, _ = _gathered(ctx, n, positions, found, "", lambda v: v)
    ctx.emit(n, Ops.RESHAPE, [rows])


@lowering("aten.polar.default")
def polar(ctx, n):
    """A complex function of the position (DeepSeek-V2's rotary, `polar(ones, freqs)`): its
    real and imaginary parts each tabulated, the complex value their pair (complex_pairs.py)."""
    positions, found = _found_or_refused(ctx, n)
    pair = []
    for part in ("real", "imag"):
        rows, shape = _gathered(ctx, n, positions, found, part, lambda v, part=part: getattr(v, part))
        pair.append(ctx.part(n, part, Ops.RESHAPE, [rows], shape, "f32"))
    ctx.pairs[n] = tuple(pair)


EXACT = 2 ** 24  # integers of at most this size are exact in a float32 table


def tabulate_failed(ctx, n) -> bool:
    """A node that the op table refuses, tabulated where it is a real function of the position
    alone (a strided write into the rotary's frequencies, Qwen3.5's interleaved M-RoPE; a
    floor division of the position; a chunked attention's mask): its value for every
    position, gathered by the position, an integer or boolean one cast back from the table's
    float32 (exact below 2^24). False where it is
    not such a function (the refusal stands)."""
    val = n.meta.get("val")
    if not hasattr(val, "shape") or val.is_complex():
        return False
    found = _position_of(ctx, n)
    if found is None:
        return False
    dtype = ctx.dtype(n)
    import torch

    def exact(v):
        if v.dtype == torch.bool:  # a mask (Llama 4's chunked attention): 0 or 1, cast back to the i8 it is kept as
            return v
        if not v.is_floating_point() and v.numel() and int(v.abs().max()) >= EXACT:
            ctx.unsupported(n, f"a function of the position with values of {EXACT} or more (tabulated in float32)")
        return v

    rows, shape = _gathered(ctx, n, ctx.positions, found, "", exact)
    if dtype == "f32":
        ctx.emit(n, Ops.RESHAPE, [rows])
    else:
        ctx.emit(n, Ops.CAST, [ctx.part(n, "shaped", Ops.RESHAPE, [rows], shape, "f32")])
    return True


def _gathered(ctx, n, positions: int, found, tag: str, value_at):
    """The rows of a table of `value_at(value at p)` (flattened, float32) for every position p,
    gathered by the position: (its value [1, numel], n's shape); `tag` names the parts."""
    source, cone = found
    shape = ctx.shape(n)
    width = int(np.prod(shape)) if shape else 1

    def make():
        import torch

        rows = [value_at(_evaluate(ctx.c, n, cone, source, p)).reshape(-1) for p in range(positions)]
        return torch.stack(rows).to(torch.float32)

    values = ctx.constant(("positions", ctx.c.key(n), positions, tag), "positions", make, "f32")
    ids = ctx.part(n, tag + "at", Ops.RESHAPE, [source], [1], ctx.dtype(source))
    rows = ctx.part(n, tag + "row", Ops.EMBEDDING, [values, ids], [1, width], "f32")
    return rows, shape


def _position_of(ctx, n) -> tuple | None:
    """(the one-element integer node that `n` depends on the inputs through, the nodes
    between them), or None where there is none."""
    dynamic = ctx.c.dynamic
    frontier = [a for a in n.all_input_nodes if a in dynamic]
    seen: list = []
    while frontier:
        node = frontier.pop(0)
        if node in seen:
            continue
        seen.append(node)
        val = node.meta.get("val")
        if hasattr(val, "shape") and val.numel() == 1 and not val.is_floating_point() and val.dtype.is_signed:
            cone = _cone(ctx, n, node)
            if cone is not None:
                return node, cone
        frontier.extend(a for a in node.all_input_nodes if a in dynamic)
    return None


def _cone(ctx, n, source):
    """The dynamic nodes from `source` to `n` (exclusive), or None where one of them reads
    another input than through `source`."""
    dynamic = ctx.c.dynamic
    cone, todo = set(), [n]
    while todo:
        node = todo.pop()
        for a in node.all_input_nodes:
            if a is source or a not in dynamic or a in cone:
                continue
            if a.op == "placeholder":
                return None
            cone.add(a)
            todo.append(a)
    return cone


def _evaluate(c, n, cone, source, position: int):
    """torch's value of `n` with `source` holding `position`."""
    import torch

    val = source.meta["val"]
    device = next(iter(c.model.parameters())).device  # meta under --no-data
    memo = {source: torch.full(tuple(val.shape), position, dtype=val.dtype, device=device)}

    def value(node):
        if node in memo:
            return memo[node]
        if node not in cone and node is not n:
            return c.value(node)
        args = map_nodes(node.args, value)
        kwargs = map_nodes(node.kwargs, value)
        out = node.target(*args, **kwargs) if node.target is not operator.getitem else args[0][args[1]]
        memo[node] = out
        return out

    return value(n)

