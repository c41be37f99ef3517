"""The CUDA renderer's output, typed before anything runs it: what NVVM would refuse, or
silently widen, is an error here, on any machine.

Numba's CUDA simulator runs a kernel as Python, and Python indexes an array with a float32
as happily as with an int, and adds a float32 to an int as it likes. Numba on a GPU types
the same code and refuses a float index, or widens the sum to float64 (a slow, different
value). So `cuda.render` runs this checker over every kernel it writes, and the simulator
tests see the same class of bug that compiling for a GPU (`tprules compile`) sees:

- every subscript of a buffer or a shared array is by integers, one per axis;
- arithmetic and comparisons never mix an integer with a float, nor float32 with float64
  (a bare float literal is float64 in Numba): every conversion is written (`f32(...)`,
  `I64(...)`);
- `/` is never between integers (it is float64 division); `//` and `%` are;
- a store writes a buffer's own element type (`p3[i] = I64(v)` into an int64 buffer);
- a variable keeps one type (Numba would unify int and float32 to float64);
- a helper (`fexp`, `q8`, ...) takes float32 arguments.

The types: `int` (any integer width: they unify without loss for indices), `f32`, `f64`,
`bool`, and arrays of an element type. Only the kernel function is checked; the helpers
are fixed text: every argument and result float32 (their names read from `emit.HELPERS`).

>>> check("@cuda.jit\\ndef kernel(stage, p0):\\n    p0[f32(0)] = f32(1)\\n", {"p0": ("f32", 1)})
Traceback (most recent call last):
...
tprules.codegen.cuda.typed.KernelTypeError: line 3: subscript of p0 by f32 (an index must be an integer)
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import NoReturn

from ..render.emit import HELPERS as HELPER_SOURCE

INT, F32, F64, BOOL, NONE = "int", "f32", "f64", "bool", "none"
NUMERIC = (INT, F32, F64)

ELEMENT = {"f32": F32, "f16": F32, "bf16": F32, "i8": INT, "i32": INT, "i64": INT}  # a buffer's element type
CONVERSIONS = {"f32": F32, "I8": INT, "I32": INT, "I64": INT, "int": INT}
# the device functions of emit.HELPERS: every argument and the result float32
HELPERS = frozenset(re.findall(r"^def (\w+)\(", HELPER_SOURCE, re.M))
GLOBALS = {"T": INT, "BLOCK": INT, "INF": F32, "NAN": F32, "GELU_C": F32, "GELU_K": F32}
THREAD_INDEXES = ("threadIdx", "blockIdx", "gridDim", "blockDim")


class KernelTypeError(AssertionError):
    """The renderer wrote code a GPU compiler types differently from the simulator: a
    renderer bug, at `line` of the kernel's source."""

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message
        self.statement: str | None = None  # the member whose code it is (set by the renderer)


@dataclass(frozen=True)
class Array:
    element: str
    ndim: int

    def __str__(self) -> str:
        return f"array({self.element}, {self.ndim}d)"


def check(source: str, params: dict[str, tuple[str, int]]) -> None:
    """Type the function `kernel` of a rendered CUDA source; `params`: each buffer
    parameter's dtype and rank. Raises KernelTypeError at the first problem."""
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "kernel")
    env: dict[str, object] = {"stage": INT}
    for name, (dtype, ndim) in params.items():
        env[name] = Array(ELEMENT[dtype], ndim)
    _Checker(env).block(fn.body)


class _Checker:
    def __init__(self, env: dict[str, object]):
        self.env = env

    def fail(self, node, message: str) -> NoReturn:
        raise KernelTypeError(getattr(node, "lineno", 0), message)

    # -- statements ------------------------------------------------------------------------

    def block(self, body) -> None:
        for node in body:
            self.stmt(node)

    def stmt(self, node) -> None:
        if isinstance(node, ast.Assign):
            (target,) = node.targets
            self.assign(target, self.expr(node.value), node)
        elif isinstance(node, ast.AugAssign):
            kind = self.binop(node.op, self.expr(node.target), self.expr(node.value), node)
            self.assign(node.target, kind, node)
        elif isinstance(node, ast.For):
            it = node.iter
            if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"):
                self.fail(node, "a loop is over range(...) only")
            for a in it.args:
                if self.expr(a) != INT:
                    self.fail(node, f"range over {self.expr(a)} (its bounds must be integers)")
            self.assign(node.target, INT, node)
            self.block(node.body)
        elif isinstance(node, (ast.If, ast.While)):
            self.expr(node.test)
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, ast.Expr):
            self.expr(node.value)
        elif isinstance(node, (ast.Pass, ast.Return)):
            pass
        else:
            self.fail(node, f"{type(node).__name__} is not written by the renderer")

    def assign(self, target, kind, node) -> None:
        if isinstance(target, ast.Name):
            old = self.env.get(target.id)
            if old is not None and old != kind:
                self.fail(node, f"{target.id} is {old} and then {kind} (Numba would unify them)")
            self.env[target.id] = kind
        elif isinstance(target, ast.Subscript):
            element = self.subscript(target)
            if element != kind:
                self.fail(node, f"store of {kind} into {ast.unparse(target.value)}, whose elements are {element} "
                                "(write the conversion)")
        else:
            self.fail(node, "an assignment to a name or an element only")

    # -- expressions -----------------------------------------------------------------------

    def expr(self, node):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return BOOL
            if isinstance(node.value, int):
                return INT
            if isinstance(node.value, float):
                return F64
            self.fail(node, f"constant {node.value!r}")
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id in GLOBALS:
                return GLOBALS[node.id]
            self.fail(node, f"{node.id} is read before it is assigned")
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.BinOp):
            return self.binop(node.op, self.expr(node.left), self.expr(node.right), node)
        if isinstance(node, ast.UnaryOp):
            kind = self.expr(node.operand)
            if isinstance(node.op, ast.Not):
                return BOOL
            if kind not in NUMERIC:
                self.fail(node, f"{type(node.op).__name__} of {kind}")
            return kind
        if isinstance(node, ast.Compare):
            kinds = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
            for a, b in zip(kinds, kinds[1:]):
                self.same_family(a, b, node, "comparison")
            return BOOL
        if isinstance(node, ast.BoolOp):
            for v in node.values:
                self.expr(v)
            return BOOL
        if isinstance(node, ast.IfExp):
            self.expr(node.test)
            a, b = self.expr(node.body), self.expr(node.orelse)
            if a != b:
                self.fail(node, f"the branches of a conditional are {a} and {b}")
            return a
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Tuple):
            return tuple(self.expr(e) for e in node.elts)
        self.fail(node, f"{type(node).__name__} is not written by the renderer")

    def attribute(self, node):
        text = ast.unparse(node)
        parts = text.split(".")
        if parts[0] == "cuda" and len(parts) == 3 and parts[1] in THREAD_INDEXES:
            return INT
        if parts[0] == "math" and parts[1] in ("inf", "nan", "pi"):
            return F64
        self.fail(node, f"{text} is not written by the renderer")

    def subscript(self, node):
        base = self.expr(node.value)
        name = ast.unparse(node.value)
        if not isinstance(base, Array):
            self.fail(node, f"subscript of {name}, a {base}")
        index = node.slice
        kinds = self.expr(index)
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        for k in kinds:
            if k != INT:
                self.fail(node, f"subscript of {name} by {k} (an index must be an integer)")
        if len(kinds) != base.ndim:
            self.fail(node, f"subscript of {name} ({base}) by {len(kinds)} indices")
        return base.element

    def binop(self, op, a, b, node):
        symbol = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}.get(type(op))
        if symbol is None or a not in NUMERIC or b not in NUMERIC:
            self.fail(node, f"{type(op).__name__} of {a} and {b}")
        self.same_family(a, b, node, symbol)
        if symbol == "/" and a == INT:
            self.fail(node, "/ between integers is float64 division (write // or convert first)")
        return a

    def same_family(self, a, b, node, what: str) -> None:
        if a == BOOL or b == BOOL:
            return
        if a != b:
            hint = " (a bare float literal is float64: write f32(...))" if F64 in (a, b) else " (write the conversion)"
            self.fail(node, f"{what} of {a} and {b}: an implicit conversion{hint}")

    def call(self, node):
        fn = ast.unparse(node.func)
        if fn == "cuda.shared.array":
            shape, element = node.args
            rank = len(shape.elts) if isinstance(shape, ast.Tuple) else 1
            if ast.unparse(element) != "f32":
                self.fail(node, f"a shared array of {ast.unparse(element)}")
            return Array(F32, rank)
        args = [self.expr(a) for a in node.args]
        if fn in CONVERSIONS:
            if len(args) != 1 or args[0] not in NUMERIC + (BOOL,):
                self.fail(node, f"{fn} of {args}")
            return CONVERSIONS[fn]
        if fn in HELPERS:
            for a in args:
                if a != F32:
                    self.fail(node, f"{fn} takes float32; given {a}")
            return F32
        if fn == "abs":
            return args[0]
        if fn in ("min", "max"):  # of integers (a grouped matmul's row bounds)
            if len(args) != 2 or any(a != INT for a in args):
                self.fail(node, f"{fn} of {args} (written for integers)")
            return INT
        if fn.startswith("math."):  # float32 in, float32 out (float64 in, float64 out)
            if any(a not in (F32, F64) for a in args):
                self.fail(node, f"{fn} of {args}")
            return F64 if F64 in args else F32
        if fn == "cuda.atomic.max":
            array, _, value = args
            if not isinstance(array, Array) or array.element != value:
                self.fail(node, f"atomic max of {value} into {array}")
            return NONE
        if fn in ("cuda.syncthreads", "SHARED_LOCK.acquire", "SHARED_LOCK.release"):
            return NONE
        self.fail(node, f"a call of {fn} is not written by the renderer")
