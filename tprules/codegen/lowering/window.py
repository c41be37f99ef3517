"""Window classes in a kernel. conv1d, a weighted sum over a short window of an operand, is
computed where it is read (like a layout member, it floats; lowering/schedule.py). The taps are a
loop over the window in the kernel's source, each reading the operand at the tap's index
in a scope of its own, so what one tap computes never leaks into another (or past a tap
outside x): for each channel i of the output channel's group and each offset k, the input
at t + k − padding when it lies in the sequence, times w[o, i, k]; then the bias.

put_along is lowered here to its description (ir.PutAlong), which a scatter stage writes
(codegen/render/put_along.py): x, then each entry of the index put where it names.
"""

from __future__ import annotations

from ... import ops
from ...ops import Ops
from ..ir import Expr, PutAlong, Window

NODES = (Window,)


def _conv1d(s, args, shape, dtype):
    x, w = args[:2]
    bias = args[2] if len(args) > 2 else None
    return Window(x, w, bias, int(s.attr("padding")), int(s.attr("groups")), shape, dtype)


def _put_along(s, args, shape, dtype):
    value = s.attr("value")
    return PutAlong(args[0], args[1], args[2] if len(args) > 2 else None, int(s.attr("axis")) % len(shape),
                    None if value is None else float(value), shape, dtype)


# Each window class's lowering over its operands' expressions
LOWERINGS = ops.require({Ops.CONV1D: _conv1d, Ops.PUT_ALONG: _put_along}, ops.WINDOW, "codegen's window lowerings")


def expression(s, args: tuple[Expr, ...], shape, dtype: str) -> Expr | PutAlong:
    """The expression of window statement `s` over its operands' expressions (a put_along's
    description: a scatter stage's)."""
    return LOWERINGS[s.cls](s, args, shape, dtype)


def at(scope, e: Window, idx: tuple[str, ...]) -> str:
    """Write the lines that compute `e` at `idx` into `scope`; returns the value."""
    return _conv(scope, e, idx)


def _conv(scope, e: Window, idx: tuple[str, ...]) -> str:
    """conv1d at `idx` = (b, o, t): the sum over its taps."""
    src = scope.src
    b, o, t = idx
    length = e.x.shape[2]
    per_group_in, k = e.w.shape[1], e.w.shape[2]
    per_group_out = e.shape[1] // e.groups
    acc, i, j, pos = src.fresh("acc"), src.fresh("ci"), src.fresh("tap"), src.fresh("pos")
    src.line(f"{acc} = f32(0)")
    with src.block(f"for {i} in range({per_group_in}):"):
        channel = src.fresh("c")
        src.line(f"{channel} = ({o} // {per_group_out}) * {per_group_in} + {i}")
        with src.block(f"for {j} in range({k}):"):
            src.line(f"{pos} = {t} + {j} - {e.padding}" if e.padding else f"{pos} = {t} + {j}")
            with src.block(f"if {pos} >= 0 and {pos} < {length}:"):
                inner = type(scope)(src, acc=scope.acc, row=scope.row)  # a tap's values stay in the tap
                w = inner.at(e.w, (o, i, j))
                x = inner.at(e.x, (b, channel, pos))
                src.line(f"{acc} += {w} * {x}")
    if e.bias is not None:
        bias = scope.at(e.bias, (o,))
        src.line(f"{acc} += {bias}")
    return acc
