"""Layout classes in a kernel: each element of the result is one element of an operand,
read at another index. Nothing is copied: a layout member floats (lowering/schedule.py) and is
evaluated where it is read, by mapping the reader's index to the operand's.

- reshape: axis groups whose sizes multiply to the same number are matched; an index is
  carried over where a group is one axis on each side, else flattened and split again;
- permute: operand axis dims[a] takes the index of result axis a;
- expand: NumPy broadcasting (a size-1 axis reads index 0);
- slice: start + step * index on its axis;
- cat: the operand whose range holds the index on the axis, read at the offset index;
- embedding: row ids[lead] of the table, at the last index (less `offset`, zero outside
  the table, for a vocabulary-parallel slice);
- take_rows: row ids[lead] of a table of any rank, at the result's other indices;
- take_along: the operand at the result's index, its `axis` index replaced by the id
  there (torch's gather).
The ids are integers from the buffer to the subscript (`Scope.index`): layout classes over
them map indices and carry the stored integers, never a float32 copy.
"""

from __future__ import annotations

from math import prod

from ... import ops
from ...ops import Ops, dims
from ...program.axes import axis_groups
from ..ir import Concat, Expr, Gather, Remap

NODES = (Remap, Concat, Gather)


def _slice(s, args, shape, dtype):
    axis = int(s.attr("axis")) % len(args[0].shape)
    return Remap(Ops.SLICE.value, args[0], shape, dtype, (axis, int(s.attr("start")), int(s.attr("step", "1"))))


# Each layout class's lowering over its operands' expressions (a Remap's kind is its class).
LOWERINGS = ops.require({
    Ops.RESHAPE: lambda s, args, shape, dtype: Remap(Ops.RESHAPE.value, args[0], shape, dtype),
    Ops.EXPAND: lambda s, args, shape, dtype: Remap(Ops.EXPAND.value, args[0], shape, dtype),
    Ops.PERMUTE: lambda s, args, shape, dtype: Remap(Ops.PERMUTE.value, args[0], shape, dtype,
                                                     tuple(dims(s.attr("dims")))),
    Ops.SLICE: _slice,
    Ops.CAT: lambda s, args, shape, dtype: Concat(args, int(s.attr("axis")) % len(shape), shape, dtype),
    Ops.EMBEDDING: lambda s, args, shape, dtype: Gather(args[0], args[1], shape, dtype,
                                                        None if s.attr("offset") is None else int(s.attr("offset"))),
    Ops.TAKE_ROWS: lambda s, args, shape, dtype: Gather(args[0], args[1], shape, dtype),
    Ops.TAKE_ALONG: lambda s, args, shape, dtype: Gather(args[0], args[1], shape, dtype,
                                                         axis=int(s.attr("axis")) % len(shape)),
}, ops.LAYOUT - {Ops.TRANSPOSE}, "codegen's layout lowerings")  # a transpose is a stage's flip (lowering/lower.py)


def expression(s, args: tuple[Expr, ...], shape, dtype: str) -> Expr:
    """The expression of layout statement `s` over its operands' expressions."""
    if s.cls not in LOWERINGS:
        raise ValueError(f"{s.cls} is not a layout class")
    return LOWERINGS[s.cls](s, args, shape, dtype)


def at(scope, e, idx: tuple[str, ...], integer: bool = False) -> str:
    """Write the lines that read `e` at `idx` into `scope`; returns the value's text: a
    float32, or with `integer` the operand's stored integer (`Scope.index`)."""
    src = scope.src
    read = scope.index if integer else scope.at
    if isinstance(e, Gather) and e.axis is not None:
        at_id = list(idx)
        at_id[e.axis] = scope.index(e.ids, idx)  # an integer from the ids' buffer to here
        return read(e.table, tuple(at_id))
    if isinstance(e, Gather):
        lead = len(e.ids.shape)  # the ids' axes lead the result's; the table's other axes follow
        ids = scope.index(e.ids, idx[:lead])  # an integer from the ids' buffer to here
        if e.offset is None:
            return read(e.table, (ids,) + tuple(idx[lead:]))
        rows, row, inside = e.table.shape[0], src.fresh("row"), src.fresh("inside")
        src.line(f"{row} = {ids} - {e.offset}")
        src.line(f"{inside} = {row} >= 0 and {row} < {rows}")
        src.line(f"{row} = {row} if {inside} else 0")  # read in bounds; the value is dropped outside
        zero = "0" if integer else "f32(0.0)"
        return f"({read(e.table, (row,) + tuple(idx[lead:]))} if {inside} else {zero})"
    if isinstance(e, Concat):
        return _concat(scope, e, idx, integer)
    if e.kind == Ops.PERMUTE:
        child = [""] * len(idx)
        for a, d in enumerate(e.params):
            child[d] = idx[a]
    elif e.kind == Ops.EXPAND:
        child = _broadcast(idx, e.shape, e.arg.shape)
    elif e.kind == Ops.SLICE:
        axis, start, step = e.params
        child = list(idx)
        child[axis] = _var(src, f"{start} + {step} * {idx[axis]}" if step != 1 else f"{start} + {idx[axis]}") \
            if (start, step) != (0, 1) else idx[axis]
    else:
        child = _reshape(src, idx, e.shape, e.arg.shape)
    return read(e.arg, tuple(child))


def _var(src, text: str) -> str:
    name = src.fresh("i")
    src.line(f"{name} = {text}")
    return name


def _broadcast(idx, shape, child) -> list[str]:
    off = len(shape) - len(child)
    return ["0" if c == 1 and shape[off + d] != 1 else idx[off + d] for d, c in enumerate(child)]


def _concat(scope, e: Concat, idx, integer: bool) -> str:
    src, axis = scope.src, e.axis
    out = src.fresh(Ops.CAT.value)  # named for its class
    src.line(f"{out} = {'I64(0)' if integer else 'f32(0)'}")
    offset = 0
    for n, arg in enumerate(e.args):
        size = arg.shape[axis]
        last = n == len(e.args) - 1
        header = "else:" if last and n else f"{'if' if n == 0 else 'elif'} {idx[axis]} < {offset + size}:"
        with src.block(header):
            child = list(idx)
            if offset:
                child[axis] = _var(src, f"{idx[axis]} - {offset}")
            inner = type(scope)(src, acc=scope.acc, row=scope.row)  # what a branch computes stays in it
            value = f"I64({inner.index(arg, tuple(child))})" if integer else inner.at(arg, tuple(child))
            src.line(f"{out} = {value}")
        offset += size
    return out


def _reshape(src, idx, out, into) -> list[str]:
    """The operand's index (shape `into`) for index `idx` of the reshaped result (shape `out`)."""
    child: list[str] = []
    for group_in, group_out in axis_groups(into, out):
        if not group_out:  # an axis of size 1
            child.append("0")
            continue
        if len(group_out) == 1 and len(group_in) == 1:
            child.append(idx[group_out[0]])
            continue
        terms, stride = [], 1
        for d in reversed(group_out):
            if out[d] != 1:
                terms.append(idx[d] if stride == 1 else f"{idx[d]} * {stride}")
            stride *= out[d]
        flat = _var(src, " + ".join(reversed(terms)))
        stride = prod(into[d] for d in group_in)
        for d in group_in:
            stride //= into[d]
            if into[d] == 1:
                child.append("0")
            elif stride == 1:
                child.append(_var(src, f"{flat} % {into[d]}"))
            else:
                child.append(_var(src, f"({flat} // {stride}) % {into[d]}"))
    return child
