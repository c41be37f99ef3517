"""Shared by both renderers: write Python lines that compute an expression at an index.

The same source text runs under Numba on the CPU, Numba-CUDA on a GPU and Numba's CUDA
simulator, so the helpers below are written once, in plain Python arithmetic on float32.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

from ... import ops
from ...ops import Ops
from ..ir import Acc, Expr, Load, Op, Param, Quant, RowOut, Transpose
from ..lowering import layout, window

INTEGER = ("i8", "i32", "i64")

# A class's formula over its operands' variables (its entry in tprules/ops); the helpers
# they call are defined in HELPERS.
FORMULAS = ops.require({op: c.formula for op, c in ops.CLASSES.items() if c.formula is not None},
                       ops.ELEMENTWISE, "codegen's formulas")

# Device functions, decorated by each renderer. Written to behave the same compiled and
# interpreted (the simulator runs them as Python: math.exp and math.sqrt would raise there).
HELPERS = '''
GELU_C = f32(0.7978845608028654)
GELU_K = f32(0.044715)
INF = f32(math.inf)
NAN = f32(math.nan)


@DEVICE
def fexp(x):
    if x > f32(88.72283):
        return INF
    return f32(math.exp(x))


@DEVICE
def fsqrt(x):
    if x >= f32(0):
        return f32(math.sqrt(x))
    return NAN


@DEVICE
def relu(x):
    if x < f32(0):
        return f32(0)
    return x


@DEVICE
def silu(x):
    return x / (f32(1) + fexp(-x))


@DEVICE
def gelu(x):
    # (1 + tanh(u)) / 2 is 1 / (1 + exp(-2u)): one exp, about half a tanh's time on a CPU
    # (the imported Gemma layer's MLP 12.4 -> 8 ms); exp(-2u) overflowing gives x / inf = -0
    return x / (f32(1) + fexp(f32(-2) * GELU_C * (x + GELU_K * x * x * x)))


@DEVICE
def sigmoid(x):
    return f32(1) / (f32(1) + fexp(-x))


@DEVICE
def gelu_erf(x):
    return f32(0.5) * x * (f32(1) + f32(math.erf(x * f32(0.7071067811865476))))


@DEVICE
def fexpm1(x):
    if x > f32(88.72283):
        return INF
    return f32(math.expm1(x))


@DEVICE
def flog1p(x):
    if x < f32(-1) or not (x == x):
        return NAN
    if x == f32(-1):
        return -INF
    return f32(math.log1p(x))


@DEVICE
def flog(x):
    if x < f32(0) or not (x == x):
        return NAN
    if x == f32(0):
        return -INF
    return f32(math.log(x))


@DEVICE
def fmin(a, b):
    if not (a == a) or not (b == b):
        return NAN
    if a < b:
        return a
    return b


@DEVICE
def fpow(x, e):
    if x < f32(0) and e != f32(math.floor(e)):
        return NAN
    if x == f32(0) and e < f32(0):
        return INF
    return f32(math.pow(x, e))


@DEVICE
def rsqrt(x):
    return f32(1) / fsqrt(x)


@DEVICE
def q8(x, s):
    # int8 with scale s: clip(round(x / s), -127, 127) * s, round half to even
    if s == f32(0):
        return f32(0)
    y = x / s
    if not (y == y):
        return y
    if y > f32(127):
        y = f32(127)
    elif y < f32(-127):
        y = f32(-127)
    f = f32(math.floor(y))
    d = y - f
    if d > f32(0.5) or (d == f32(0.5) and f - f32(2) * f32(math.floor(f / f32(2))) != f32(0)):
        f = f + f32(1)
    return f * s


@DEVICE
def rbf16(x):
    # round to 8 significant bits (Veltkamp's split)
    c = x * f32(65537)
    return c - (c - x)


@DEVICE
def rf16(x):
    c = x * f32(8193)
    return c - (c - x)
'''


constant = ops.constant  # a float32 constant, exactly


def reduction(cls: str) -> str:
    """How a row class reduces its row (its entry's `reduction`)."""
    found = ops.CLASSES[cls].reduction
    assert found is not None  # every row class has one (checked at import, ops/base.py)
    return found

def convert(text: str, dtype: str) -> str:
    """A float32 value as its destination dtype keeps it (still a float32)."""
    return {"f32": text, "f16": f"rf16({text})", "bf16": f"rbf16({text})",
            "i32": f"f32(I32({text}))", "i8": f"f32(I8(I32({text})))", "i64": f"f32(I64({text}))"}[dtype]


def store_cast(text: str, dtype: str) -> str:
    return {"i32": f"I32({text})", "i8": f"I8(I32({text}))", "i64": f"I64({text})"}.get(dtype, text)


def child_index(idx: tuple[str, ...], shape, child) -> tuple[str, ...]:
    """NumPy broadcasting: the operand's index for the result's index `idx`."""
    off = len(shape) - len(child)
    return tuple("0" if c == 1 and shape[off + d] != 1 else idx[off + d] for d, c in enumerate(child))


def subscript(param: str, idx: tuple[str, ...]) -> str:
    return f"{param}[{', '.join(idx) if idx else '0'}]"


# A buffer a CPU kernel computes a matmul operand into is allocated by the runtime, as a
# scratch parameter, from this size up, rather than by the kernel: Numba's allocation above
# glibc's mmap threshold (64 MiB here, runtime/devices/cpu.py) is a fresh mapping faulted in
# 4 KiB page by page at every launch (a gathered expert's weights of 92 MiB: 40 ms where
# filling it takes 12), where numpy's (the runtime's) asks for huge pages from 4 MiB up.
RUNTIME_BUFFER_BYTES = 4 << 20


class Source:
    """Lines with indentation, and a counter for fresh variable names."""

    def __init__(self, params=()):
        self.lines: list[str] = []
        self.depth = 0
        self.count = 0
        self.marks: dict[int, object] = {}  # line number (1-based) -> the expression or stored parameter it computes
        self.param_dtypes = {p.name: p.dtype for p in params}  # the kernel's parameters' dtypes
        self.scratch: list[Param] = []  # parameters the rendering added (`buffer`)

    def buffer(self, stem: str, shape: tuple[int, ...]) -> str:
        """A new float32 buffer of `shape` for the kernel's own use: allocated in the kernel,
        or, of RUNTIME_BUFFER_BYTES or more, a scratch parameter added to `scratch`."""
        name = self.fresh(stem)
        if 4 * math.prod(shape) < RUNTIME_BUFFER_BYTES:
            dims = str(shape[0]) if len(shape) == 1 else f"({', '.join(map(str, shape))})"
            self.line(f"{name} = np.empty({dims}, np.float32)")
        else:
            self.scratch.append(Param(name, "scratch", tuple(shape), "f32"))
            self.param_dtypes[name] = "f32"
        return name

    def line(self, text: str = "") -> None:
        self.lines.append("    " * self.depth + text if text else "")

    def mark(self, what) -> None:
        """The last line computes `what` (an expression, or a stored parameter's name)."""
        self.marks[len(self.lines)] = what

    @contextmanager
    def block(self, header: str):
        self.line(header)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def fresh(self, stem: str = "v") -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class Scope:
    """Computes expressions into variables at the current indentation, each (expression,
    index) once. `acc` and `row` name a stage's matmul results and row op outputs."""

    def __init__(self, src: Source, acc=None, row=None):
        self.src = src
        self.acc = acc
        self.row = row
        self.memo: dict[tuple, str] = {}

    def again(self, acc=None, row=None) -> "Scope":
        """A fresh scope of the same kind, reading and writing the same places."""
        return Scope(self.src, acc, row)

    def element(self, param: str, idx: tuple[str, ...]) -> str:
        """The subscript of parameter `param`'s element `idx`, read or written."""
        return subscript(param, idx)

    def at(self, e: Expr, idx: tuple[str, ...]) -> str:
        key = (e, idx)
        if key in self.memo:
            return self.memo[key]
        if isinstance(e, Load):
            text = f"f32({self.element(e.param, idx)})"
        elif isinstance(e, Op):
            args = [self.at(a, child_index(idx, e.shape, a.shape)) for a in e.args]
            text = FORMULAS[e.cls](args, dict(e.attrs))
            text = convert(text, e.dtype)
        elif isinstance(e, Transpose):
            text = convert(self.at(e.arg, (idx[1], idx[0])), e.dtype)
        elif isinstance(e, Quant):
            text = f"q8({self.at(e.arg, idx)}, {e.scale}[0])"
        elif isinstance(e, Acc):
            text = convert(self.acc(e.index), e.dtype)
        elif isinstance(e, RowOut):
            text = convert(self.row(e.index, idx, self), e.dtype)
        elif isinstance(e, layout.NODES):
            text = convert(layout.at(self, e, idx), e.dtype)
        elif isinstance(e, window.NODES):
            text = convert(window.at(self, e, idx), e.dtype)
        else:
            raise TypeError(f"not an expression: {e!r}")
        name = self.src.fresh()
        self.src.line(f"{name} = {text}")
        self.src.mark(e)
        self.memo[key] = name
        return name

    def index(self, e: Expr, idx: tuple[str, ...]) -> str:
        """An integer value of `e` at `idx`, for a subscript (an embedding's ids): the stored
        integers of an integer buffer, carried through layout classes as integers; anything
        computed is computed in float32 (as `at`) and converted, as its destination keeps it."""
        key = ("index", e, idx)
        if key in self.memo:
            return self.memo[key]
        if isinstance(e, Load) and self.dtype_of(e.param) in INTEGER:
            text = subscript(e.param, idx)
        elif isinstance(e, layout.NODES) and e.dtype in INTEGER:
            text = layout.at(self, e, idx, integer=True)
        else:
            text = f"I64({self.at(e, idx)})"
        name = self.src.fresh("ix")
        self.src.line(f"{name} = {text}")
        self.src.mark(e)
        self.memo[key] = name
        return name

    def moves_integers(self, e: Expr) -> bool:
        """Whether `e` is an integer buffer's elements, moved by layout classes only."""
        if isinstance(e, Load):
            return self.dtype_of(e.param) in INTEGER
        return isinstance(e, layout.NODES) and e.dtype in INTEGER

    def dtype_of(self, param: str) -> str:
        return self.src.param_dtypes.get(param, "f32")


class RowValues:
    """A row stage's row op outputs, from the row statistics computed before the store pass:
    rmsnorm x / d * w with d = sqrt(mean(x²) + eps); softmax exp(x - max) / sum; mean the
    mean; layernorm (x - mean) / d * w + b with d = sqrt(mean((x - mean)²) + eps)."""

    def __init__(self, stage):
        self.stage = stage
        self.stats: dict[int, dict[str, str]] = {}

    def value(self, n: int, idx: tuple[str, ...], scope: Scope) -> str:
        op = self.stage.rows[n]
        how = reduction(op.cls)
        if how == "select":
            return self.select(op, idx, scope)
        if how == "count":
            if "rank" in self.stats.get(n, {}):  # the row sorted once before the store pass: cpu.rank_row, sort_cuda
                return f"f32({self.stats[n]['rank'].format(idx[-1])})"
            return self.count(op, idx, scope)
        stats = self.stats[n]
        if how == "average":
            return stats["m"]
        if how == "max":
            return stats["mx"]
        if how == "moments":
            text = f"({scope.at(op.x, idx)} - {stats['m']}) / {stats['d']}"
            if op.w is not None:
                text = f"{text} * {scope.at(op.w, idx[-1:])}"
            return f"{text} + {scope.at(op.b, idx[-1:])}" if op.b is not None else text
        if how == "max_exp" and "kept" in stats:  # the sum's pass left exp(x - max) there (cpu.kept_exp)
            return f"{scope.element(stats['kept'], idx)} / {stats['se']}"
        x = scope.at(op.x, idx)
        if how == "rms":
            text = f"{x} / {stats['d']}"
            return f"{text} * {scope.at(op.w, idx[-1:])}" if op.w is not None else text
        if how == "max_exp":
            return f"fexp({x} - {stats['mx']}) / {stats['se']}"
        raise AssertionError(f"row class {op.cls} reduces by {how!r}: no store pass for it")

    def select(self, op, idx: tuple[str, ...], scope: Scope) -> str:
        """Top-k: the idx[-1]-th largest of the row (ties: the lower index first), or its
        index, found again for each stored element by idx[-1] + 1 selection passes over the
        row: no state between elements, so any thread may store any of them."""
        src = scope.src
        h = op.x.shape[-1]
        pv, pi, bv, bi = src.fresh("pv"), src.fresh("pi"), src.fresh("bv"), src.fresh("bi")
        s, q = src.fresh("s"), src.fresh("q")
        src.line(f"{pv} = INF")
        src.line(f"{pi} = -1")
        with src.block(f"for {s} in range({idx[-1]} + 1):"):
            src.line(f"{bv} = -INF")
            src.line(f"{bi} = -1")
            with src.block(f"for {q} in range({h}):"):
                x = scope.again(row=self.value).at(op.x, idx[:-1] + (q,))
                below = f"({x} < {pv} or ({x} == {pv} and {q} > {pi}))"
                with src.block(f"if {below} and ({bi} < 0 or {x} > {bv}):"):
                    src.line(f"{bv} = {x}")
                    src.line(f"{bi} = {q}")
            src.line(f"{pv} = {bv}")
            src.line(f"{pi} = {bi}")
        return pv if op.cls == Ops.TOPK_VALUES else f"f32({pi})"

    def count(self, op, idx: tuple[str, ...], scope: Scope) -> str:
        """A stable sort's rank: how many elements of the row sort before element idx[-1]
        (smaller, or equal and earlier; NaN after every number, NaNs in their order), counted
        again for each stored element: no state between elements. O(h²) a row: only where
        the row was not sorted once before the store pass (cpu.rank_row, cuda/sort.py)."""
        src = scope.src
        n, q = src.fresh("n"), src.fresh("q")
        x = scope.again(row=self.value).at(op.x, idx)
        src.line(f"{n} = 0")
        with src.block(f"for {q} in range({op.x.shape[-1]}):"):
            y = scope.again(row=self.value).at(op.x, idx[:-1] + (q,))
            before = (f"({y} < {x} or ({x} != {x} and {y} == {y}) or ({q} < {idx[-1]} and "
                      f"({y} == {x} or ({x} != {x} and {y} != {y}))))")
            with src.block(f"if {before}:"):
                src.line(f"{n} += 1")
        return f"f32({n})"


def origin(kernel, marks: dict[int, object], line: int | None) -> str | None:
    """The member statement whose code is at `line` (1-based) of a rendered source: that of
    the first marked line at or after it (a load is marked by the value that reads it)."""
    if line is None:
        return None
    for n in sorted(marks):
        if n >= line:
            who = kernel.origins.get(marks[n])
            if who is not None:
                return who
    return None


def unflatten(src: Source, flat: str, shape) -> tuple[str, ...]:
    """Index names for position `flat` of a C-ordered array of `shape`."""
    names = [src.fresh("i") for _ in shape]
    rest = flat
    for d in range(len(shape) - 1, -1, -1):
        if d == 0:
            src.line(f"{names[d]} = {rest}")
        else:
            src.line(f"{names[d]} = {rest} % {shape[d]}")
            nxt = src.fresh("q")
            src.line(f"{nxt} = {rest} // {shape[d]}")
            rest = nxt
    return tuple(names)


def store(src: Source, scope: Scope, stage, idx: tuple[str, ...], kernel) -> None:
    """Write a stage's stores at index `idx` (a flipped store at the swapped index)."""
    for st in stage.stores:
        dtype = kernel.param(st.param).dtype
        # integers moved by layout classes stay integers (an id above 2**24 is itself)
        v = scope.index(st.value, idx) if dtype in INTEGER and scope.moves_integers(st.value) else scope.at(st.value, idx)
        where = (idx[1], idx[0]) if st.flip else idx
        src.line(f"{scope.element(st.param, where)} = {store_cast(v, dtype)}")
        src.mark(st.param)
