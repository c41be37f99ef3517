"""Terms computed over numpy columns for the fast engine, with Soufflé's semantics.

A column is stored as int64: a number as itself, a symbol as its id, an unsigned and a
float as their 64 bits. A term's value is an array of its own dtype (int64, uint64,
float64; int64 ids for symbols); `storage` turns it back into an int64 column. Number
arithmetic wraps around at 64 bits, as numpy's does. String functors run per value in
Python (tprules.datalog.lang.values) and intern their results.
"""

from __future__ import annotations

import numpy as np

from ..lang import ast, values
from ..lang.constant import constant_value, kind_of

I64, U64, F64 = np.int64, np.uint64, np.float64
DTYPES = {"number": I64, "symbol": I64, "unsigned": U64, "float": F64}
_COMPARE = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
            ">=": np.greater_equal}


def load(column: np.ndarray, kind: str) -> np.ndarray:
    """A stored column as values of its type (a narrower stored integer column widened to int64)."""
    if column.dtype != I64:
        return column.astype(I64)
    if kind == "unsigned":
        return column.view(U64)
    if kind == "float":
        return column.view(F64)
    return column


def storage(value, kind: str, n: int) -> np.ndarray:
    """Values of a type as an int64 column of length n."""
    array = np.broadcast_to(np.asarray(value, dtype=DTYPES.get(kind, I64)), (n,))
    if kind in ("unsigned", "float"):
        array = np.ascontiguousarray(array).view(I64)
    return array


def stored_constant(value, kind: str, symbols) -> int:
    """A constant's int64 storage (a symbol's id)."""
    if kind == "symbol":
        return symbols.one(value)
    if kind == "unsigned":
        return values.wrap(int(value))
    if kind == "float":
        return int(np.asarray(float(value), dtype=F64).view(I64))
    return int(value)


def encode_typed(symbols, types: tuple[str, ...], tuples) -> np.ndarray:
    """Tuples of any primitive types as an (n, arity) int64 array."""
    tuples = list(tuples)
    if not types:
        return np.zeros((1 if tuples else 0, 0), dtype=I64)
    columns = []
    for i, kind in enumerate(types):
        column = [t[i] for t in tuples]
        if kind == "symbol":
            columns.append(symbols.encode(column, len(column)))
        else:
            columns.append(storage(np.asarray(column, dtype=DTYPES[kind]), kind, len(column)))
    return np.stack(columns, axis=1) if tuples else np.zeros((0, len(types)), dtype=I64)


def decode_column(column: np.ndarray, kind: str, names) -> list:
    if kind == "symbol":
        return [names[v] for v in column.tolist()]
    return load(column, kind).tolist()


class TermValues:
    """Computes terms over a table of bindings (variable → stored int64 column)."""

    def __init__(self, symbols, error):
        self.symbols = symbols
        self.error = error  # message → the RuleError to raise

    def const(self, term: ast.Term) -> int:
        """A constant term's stored value."""
        try:
            return stored_constant(constant_value(term), kind_of(term), self.symbols)
        except (ZeroDivisionError, values.EvaluationError) as err:
            raise self.error(str(err) if isinstance(err, values.EvaluationError) else "division by zero") from None

    def value(self, term: ast.Term, cols: dict, n: int):
        """The term's values (an array of its type, or a scalar) over n rows."""
        kind = kind_of(term)
        match term:
            case ast.Var(name):
                return load(cols[name], kind)
            case ast.Num() | ast.Unsigned() | ast.Float() | ast.Str():
                value = constant_value(term)
                return self.symbols.one(value) if kind == "symbol" else np.asarray(value, dtype=DTYPES[kind])
            case ast.Cast(operand):
                return self.value(operand, cols, n)
            case ast.Negative(operand):
                with np.errstate(over="ignore"):
                    return -np.asarray(self.value(operand, cols, n), dtype=DTYPES[kind])
            case ast.BinOp(op, left, right) if kind_of(left) == "symbol":  # `+` concatenates
                return self._per_value(term, op, (left, right), cols, n)
            case ast.BinOp(op, left, right):
                operand_kind = kind_of(left)
                a = np.asarray(self.value(left, cols, n), dtype=DTYPES[operand_kind])
                b = np.asarray(self.value(right, cols, n), dtype=DTYPES[operand_kind])
                return self._binary(op, operand_kind, a, b, n)
            case ast.Functor(name, args):
                return self._functor(term, name, args, cols, n)
        raise TypeError(term)

    def stored(self, term: ast.Term, cols: dict, n: int) -> np.ndarray:
        """The term's values as an int64 column of length n."""
        return storage(self.value(term, cols, n), kind_of(term), n)

    # -- arithmetic ------------------------------------------------------------------

    def _binary(self, op: str, kind: str, a: np.ndarray, b: np.ndarray, n: int):
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if op == "/" and kind == "float":
                return a / b
            if op in ("/", "%"):
                if np.any(b == 0):
                    raise self.error("division by zero")
                if kind == "unsigned":
                    return a // b if op == "/" else a % b
                q = np.abs(a) // np.abs(b)
                q = np.where((a >= 0) == (b >= 0), q, -q)  # truncate toward zero, as C and Soufflé
                return q if op == "/" else a - b * q
            if op == "^":
                return _power(a, b, kind)
            if op in ("band", "bor", "bxor"):
                return {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op](a, b)
            shift = (np.asarray(b).view(U64) if kind == "number" else b) & U64(63)
            if op == "bshl":
                return (np.asarray(a).view(U64) << shift).view(DTYPES[kind])
            if op == "bshr":
                return a >> shift.astype(a.dtype)
            if op == "bshru":
                return (np.asarray(a).view(U64) >> shift).view(DTYPES[kind])
            x, y = a != 0, b != 0
            result = {"land": x & y, "lor": x | y, "lxor": x != y}[op]
            return result.astype(DTYPES[kind])

    def _functor(self, term: ast.Functor, name: str, args, cols: dict, n: int):
        kind = kind_of(term)
        if name in ("min", "max") and kind != "symbol":
            found = [np.asarray(self.value(a, cols, n), dtype=DTYPES[kind]) for a in args]
            fold = np.minimum if name == "min" else np.maximum
            result = found[0]
            for more in found[1:]:
                result = fold(result, more)
            return result
        if name == "bnot":
            return np.invert(np.asarray(self.value(args[0], cols, n), dtype=DTYPES[kind]))
        if name == "lnot":
            return (np.asarray(self.value(args[0], cols, n)) == 0).astype(DTYPES[kind])
        source = kind_of(args[0]) if args else ""
        if name in ("to_float", "to_number", "to_unsigned") and source != "symbol":
            return _convert(np.asarray(self.value(args[0], cols, n), dtype=DTYPES[source]), source, kind)
        return self._per_value(term, name, args, cols, n)

    def _per_value(self, term, name: str, args, cols: dict, n: int):
        """A functor computed one row at a time in Python (strings, ord)."""
        kinds = tuple(kind_of(a) for a in args)
        names = self.symbols.names
        columns = []
        for arg, kind in zip(args, kinds):
            column = np.broadcast_to(np.asarray(self.value(arg, cols, n)), (n,))
            columns.append([names[v] for v in column.tolist()] if kind == "symbol" else column.tolist())
        kind = kind_of(term)
        if not args:  # autoinc(): a new number for each row
            return np.fromiter((values.functor(name, kind, (), ()) for _ in range(n)), dtype=DTYPES[kind], count=n)
        try:
            if name == "+":
                out = [a + b for a, b in zip(*columns)]
            else:
                out = [values.functor(name, kind, row, kinds) for row in zip(*columns)]
        except values.EvaluationError as err:
            raise self.error(str(err)) from None
        if kind == "symbol":
            return self.symbols.encode(out, len(out))
        return np.asarray(out, dtype=DTYPES[kind]) if out else np.zeros(0, dtype=DTYPES[kind])

    # -- tests -----------------------------------------------------------------------

    def mask(self, lit: ast.Comparison, left: ast.Term, right: ast.Term, cols: dict, n: int) -> np.ndarray:
        """Where the comparison holds."""
        kind = lit.type or kind_of(left)
        a, b = self.value(left, cols, n), self.value(right, cols, n)
        if lit.op in ast.TESTS:
            names = self.symbols.names
            a = [names[v] for v in np.broadcast_to(np.asarray(a), (n,)).tolist()]
            b = [names[v] for v in np.broadcast_to(np.asarray(b), (n,)).tolist()]
            return np.fromiter((values.compare(lit.op, x, y) for x, y in zip(a, b)), dtype=bool, count=n)
        if kind == "symbol" and lit.op not in ("=", "!="):
            ranks = self.symbols.ranks()  # symbols compare alphabetically
            a, b = ranks[a], ranks[b]
        with np.errstate(invalid="ignore"):
            return np.broadcast_to(_COMPARE[lit.op](a, b), (n,))

    def generate(self, gen: ast.Functor, cols: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
        """range(...) over every row: (row of each value, the values)."""
        kind = kind_of(gen)
        bounds = [np.broadcast_to(np.asarray(self.value(a, cols, n), dtype=DTYPES[kind]), (n,)) for a in gen.args]
        if kind == "float" or len(bounds) == 3 or kind == "unsigned":  # rare: one row at a time
            at: list[int] = []
            found: list = []
            for i, args in enumerate(zip(*(b.tolist() for b in bounds))):
                got = values.range_values(kind, *args)
                at.extend([i] * len(got))
                found.extend(got)
            return np.asarray(at, dtype=I64), np.asarray(found, dtype=DTYPES[kind])
        start, stop = bounds
        step = np.where(start <= stop, 1, -1).astype(I64)
        counts = np.abs(stop - start)
        rows = np.repeat(np.arange(n, dtype=I64), counts)
        offsets = np.arange(len(rows), dtype=I64) - np.repeat(np.cumsum(counts) - counts, counts)
        return rows, start[rows] + offsets * step[rows]


def _power(a: np.ndarray, b: np.ndarray, kind: str):
    result = np.power(a.astype(F64), b.astype(F64))
    if kind == "float":
        return result
    return _convert(result, "float", kind)


def _convert(a: np.ndarray, source: str, target: str):
    """static_cast between the numeric types, vectorised (out of range as x86-64 gives it)."""
    if source == target:
        return a
    if target == "float":
        return a.astype(F64)
    if source == "float":
        with np.errstate(invalid="ignore"):
            if target == "number":
                ok = np.isfinite(a) & (a >= -2.0 ** 63) & (a < 2.0 ** 63)
                return np.where(ok, np.where(ok, a, 0).astype(I64), np.iinfo(I64).min)
            ok = np.isfinite(a) & (a > -2.0 ** 63) & (a < 2.0 ** 64)
            high = ok & (a >= 2.0 ** 63)
            low = np.where(ok & ~high, a, 0).astype(I64).view(U64)
            return np.where(high, (np.where(high, a, 0) - 2.0 ** 63).astype(U64) + U64(1 << 63), low)
    return np.asarray(a).view(DTYPES[target])
