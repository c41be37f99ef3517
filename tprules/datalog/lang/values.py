"""What every operator and functor computes, one value at a time, as Soufflé 2.5 built with
64-bit domains computes it: the living definition shared by the compiled and pyDatalog
engines (the fast engine vectorises the same, and falls back on these for strings).

Values: a `number` is a Python int in [-2^63, 2^63) that wraps around (two's complement),
an `unsigned` an int in [0, 2^64), a `float` a Python float, a `symbol` a str.
"""

from __future__ import annotations

import itertools
import math
import re
import struct
from contextlib import contextmanager
from contextvars import ContextVar
from functools import wraps

HALF = 1 << 63
MASK = (1 << 64) - 1
SHIFT_MASK = 63


class EvaluationError(ArithmeticError):
    """A value Soufflé cannot compute either (it stops): division by zero, a bad to_number."""


def wrap(x: int) -> int:
    """An integer as a 64-bit signed number (two's complement wrap-around)."""
    return x if -HALF <= x < HALF else ((x + HALF) & MASK) - HALF


def uwrap(x: int) -> int:
    return x & MASK


def truncating_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as C does."""
    if b == 0:
        raise EvaluationError("division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _float_to_int(x: float, unsigned: bool) -> int:
    """C's static_cast from double (out-of-range values as x86-64 gives them)."""
    if math.isnan(x) or math.isinf(x):
        return 0 if unsigned else -HALF
    value = int(x)
    if unsigned:
        return value & MASK if -HALF <= value < (1 << 64) else 0
    return value if -HALF <= value < HALF else -HALF


_NAN = -math.nan  # x86's default NaN has its sign bit set: C prints an invalid result as -nan


def _float_div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a == 0 or math.isnan(a):
            return _NAN
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _pow(a, b, kind: str):
    try:
        value = math.pow(a, b)
    except (OverflowError, ValueError):
        value = math.inf if a > 0 or float(b).is_integer() and int(b) % 2 == 0 else -math.inf
        if a < 0 and not float(b).is_integer():
            value = _NAN
    except ZeroDivisionError:
        value = math.inf
    if kind == "float":
        return value
    return _float_to_int(value, kind == "unsigned")


def binary(op: str, kind: str, a, b):
    """`a op b` for two values of type `kind` (number, unsigned or float)."""
    if kind == "float":
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return _float_div(a, b)
        if op == "^":
            return _pow(a, b, kind)
        raise EvaluationError(f"'{op}' on floats")
    if kind == "symbol":  # `+` on symbols concatenates
        return a + b
    fit = uwrap if kind == "unsigned" else wrap
    if op == "+":
        return fit(a + b)
    if op == "-":
        return fit(a - b)
    if op == "*":
        return fit(a * b)
    if op == "/":
        return fit(truncating_div(a, b))
    if op == "%":
        return fit(a - b * truncating_div(a, b))
    if op == "^":
        return _pow(a, b, kind)
    if op == "band":
        return a & b
    if op == "bor":
        return a | b
    if op == "bxor":
        return a ^ b
    if op == "bshl":  # shifted as unsigned, the count masked to 0..63 (as Soufflé)
        return fit((a & MASK) << (b & SHIFT_MASK))
    if op == "bshr":  # arithmetic for numbers, logical for unsigned
        return a >> (b & SHIFT_MASK)
    if op == "bshru":
        return fit((a & MASK) >> (b & SHIFT_MASK))
    if op == "land":
        return int(bool(a) and bool(b))
    if op == "lor":
        return int(bool(a) or bool(b))
    if op == "lxor":
        return int(bool(a) != bool(b))
    raise EvaluationError(f"unknown operator {op}")


def float_bits(x: float) -> int:
    """A float's 64 bits as a signed number (how the pyDatalog engine keeps floats: pyDatalog
    itself rounds floats and takes 1.0 for 1)."""
    return struct.unpack("<q", struct.pack("<d", x))[0]


def bits_float(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<q", bits))[0]


def negative(kind: str, a):
    return -a if kind == "float" else wrap(-a)


# ---- conversions ---------------------------------------------------------------------

_INT_PREFIX = re.compile(r"\s*([+-]?)(0x[0-9a-fA-F]+|0b[01]+|[0-9]+)")
_FLOAT_PREFIX = re.compile(r"\s*[+-]?(inf(inity)?|nan|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)", re.IGNORECASE)


def parse_number(text: str, kind: str):
    """A symbol's leading number, as C's stoll/stoull/stod read it (base from a 0x or 0b
    prefix); EvaluationError when it holds none or it does not fit."""
    if kind == "float":
        found = _FLOAT_PREFIX.match(text)
        if not found:
            raise EvaluationError(f'to_float("{text}"): not a number')
        return float(found.group(0))
    found = _INT_PREFIX.match(text)
    if not found or kind == "unsigned" and found.group(1) == "-":
        raise EvaluationError(f'to_number("{text}"): not a number')
    digits = found.group(2)
    value = int(digits[2:], 16) if digits.startswith("0x") else int(digits[2:], 2) if digits.startswith("0b") \
        else int(digits)
    value = -value if found.group(1) == "-" else value
    low, high = (0, MASK) if kind == "unsigned" else (-HALF, HALF - 1)
    if not low <= value <= high:
        raise EvaluationError(f'to_number("{text}"): out of range')
    return value


def convert(value, source: str, target: str):
    """A value of type `source` as type `target` (C++'s static_cast between the numerics)."""
    if source == target:
        return value
    if target == "symbol":
        return to_string(value, source)
    if source == "symbol":
        return parse_number(value, target)
    if target == "float":
        return float(value)
    if source == "float":
        return _float_to_int(value, target == "unsigned")
    return uwrap(value) if target == "unsigned" else wrap(value)


def to_string(value, kind: str) -> str:
    if kind == "float":  # std::to_string(double): fixed, six decimals
        return "%f" % value if math.isfinite(value) else ("nan" if math.isnan(value) else
                                                           "inf" if value > 0 else "-inf")
    return str(value)


def render(value, kind: str) -> str:
    """A value as Soufflé writes it to a .csv (floats with 17 significant digits)."""
    if kind == "float":
        if math.isnan(value):
            return "nan" if math.copysign(1.0, value) > 0 else "-nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return "%.17g" % value
    if kind == "symbol" and value.startswith("\x1e"):  # a record or ADT value: Soufflé's printed form
        from .record_values import printed

        return printed(value)
    return str(value)


# ---- string functors -----------------------------------------------------------------


def substr(text: str, start: int, length: int) -> str:
    """std::string::substr over UTF-8 bytes: "" when start is past the end."""
    data = text.encode()
    start_u, length_u = start & MASK, length & MASK
    if start_u > len(data):
        return ""
    return data[start_u:start_u + length_u].decode(errors="replace")


def strlen(text: str) -> int:
    return len(text.encode())


_PATTERNS: dict[str, re.Pattern | None] = {}
_POSIX = {"alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z", "lower": "a-z",
          "space": r"\s", "xdigit": "0-9A-Fa-f", "punct": r"!-/:-@\[-`{-~", "word": r"\w", "blank": r" \t",
          "cntrl": r"\x00-\x1f\x7f", "print": r"\x20-\x7e", "graph": r"\x21-\x7e"}
_BAD_BRACE = re.compile(r"(?<!\\)\{(?!\d+(,\d*)?\})")


def regex(pattern: str) -> re.Pattern | None:
    """A std::regex (ECMAScript) pattern as a Python one; None if std::regex rejects it
    (a '{' that starts no valid repeat, say)."""
    try:
        return _PATTERNS[pattern]
    except KeyError:
        pass
    text = re.sub(r"\[:(\w+):\]", lambda m: _POSIX.get(m.group(1), m.group(0)), pattern)
    compiled: re.Pattern | None
    try:
        compiled = None if _BAD_BRACE.search(text) else re.compile(text)
    except re.error:
        compiled = None
    _PATTERNS[pattern] = compiled
    return compiled


def match(pattern: str, text: str) -> bool:
    """Does the whole text match the regular expression?"""
    compiled = regex(pattern)
    return compiled is not None and compiled.fullmatch(text) is not None


def contains(sub: str, text: str) -> bool:
    return sub in text


# ---- functors by name ----------------------------------------------------------------


def functor(name: str, kind: str, args: tuple, arg_kinds: tuple[str, ...]):
    """The value of a functor (not range, which yields several)."""
    if name.startswith("."):  # a record's functors (datalog/analysis/records.py)
        from .record_values import functor as record_functor

        return record_functor(name, kind, args, arg_kinds)
    if name == "cat":
        return "".join(args)
    if name == "strlen":
        return strlen(args[0])
    if name == "substr":
        return substr(*args)
    if name == "ord":
        return ordinal(args[0], arg_kinds[0])
    if name in ("to_number", "to_unsigned", "to_float", "to_string"):
        return convert(args[0], arg_kinds[0], kind)
    if name == "min":
        return min(args)
    if name == "max":
        return max(args)
    if name == "bnot":
        return uwrap(~args[0]) if kind == "unsigned" else ~args[0]
    if name == "lnot":
        return int(not args[0])
    if name in _MATH:
        try:
            return _MATH[name](args[0])
        except (ValueError, OverflowError):  # outside the function's domain: C's libm gives nan (or inf)
            return math.inf if name in ("exp", "sinh", "cosh") and args[0] > 0 else math.nan
    if name == "autoinc":
        return _current().autoinc()
    raise EvaluationError(f"unknown functor {name}")


_MATH = {name: getattr(math, name) for name in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
                                                 "asinh", "acosh", "atanh", "log", "exp")}


class Evaluation:
    """The state one evaluation's functors share, and nothing outside it: ord's symbol table
    (seeded symbols first, in their order, then others as they are asked for) and autoinc()'s
    counter, which starts at 0 in every evaluation, as in a fresh Soufflé run. An evaluation
    on top of an earlier model goes on with that model's counter (`counter`), so the numbers
    in the relations it keeps stay unique."""

    def __init__(self, symbols=(), counter: itertools.count | None = None):
        self.ordinals: dict[str, int] = {}
        for symbol in symbols:
            self.ordinals.setdefault(symbol, len(self.ordinals))
        self._counter = counter if counter is not None else itertools.count()

    def ordinal(self, symbol: str) -> int:
        return self.ordinals.setdefault(symbol, len(self.ordinals))

    def autoinc(self) -> int:
        return next(self._counter)


# The evaluation running in this context: set by `evaluation` for its span (a context
# variable, as the compiled rules' code is shared by every evaluation of an engine, so two
# evaluations never share one), None outside any.
_EVALUATION: ContextVar[Evaluation | None] = ContextVar("tprules_evaluation", default=None)


def _current() -> Evaluation:
    """The running evaluation; asked outside any, an evaluation of this one call."""
    running = _EVALUATION.get()
    return running if running is not None else Evaluation()


def ordinal(value, kind: str) -> int:
    """ord(x): the value itself for a number; for a symbol its index in the evaluation's
    symbol table, as in Soufflé: symbols seeded by `evaluation` (tprules eval: the
    program's constants, then the facts in the order read), then others in the order they
    are asked for."""
    if kind != "symbol":
        return wrap(value) if kind == "unsigned" else value
    return _current().ordinal(value)


@contextmanager
def evaluation(symbols=()):
    """One evaluation's state (`Evaluation`) for the engines' evaluations inside: ord's
    symbol table with these symbols first, in this order, and autoinc() from 0."""
    state = Evaluation(symbols)
    token = _EVALUATION.set(state)
    try:
        yield state
    finally:
        _EVALUATION.reset(token)


def one_evaluation(evaluate):
    """An engine's `evaluate`, given an evaluation of its own unless the caller set one; over
    a `base` model, autoinc() goes on from the base's evaluation. The model keeps its
    evaluation (`model.evaluation`)."""
    @wraps(evaluate)
    def run(*args, **kwargs):
        running = _EVALUATION.get()
        if running is None:
            earlier = getattr(kwargs.get("base"), "evaluation", None)
            running = Evaluation(counter=earlier._counter if earlier is not None else None)
        token = _EVALUATION.set(running)
        try:
            model = evaluate(*args, **kwargs)
        finally:
            _EVALUATION.reset(token)
        model.evaluation = running
        return model
    return run


def range_values(kind: str, start, stop, step=None) -> list:
    """The values of range(start, stop[, step]): upward or downward, stop excluded; a zero
    step gives start alone (if start != stop)."""
    if step is None:
        step = 1 if start <= stop or kind == "unsigned" and start <= stop else -1
        if kind == "float":
            step = float(step)
        if kind == "unsigned" and start > stop:
            return list(range(start, stop, -1))
    out = []
    x = start
    if step > 0:
        while x < stop:
            out.append(x)
            x = x + step
    elif step < 0:
        while stop < x:
            out.append(x)
            x = x + step
    elif start != stop:
        out.append(start)
    return out


def compare(op: str, a, b) -> bool:
    if op == "=":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    if op == "contains":
        return contains(a, b)
    if op == "!contains":
        return not contains(a, b)
    if op == "match":
        return match(a, b)
    if op == "!match":  # as in Soufflé, a pattern it rejects makes the test fail either way
        return regex(a) is not None and not match(a, b)
    raise EvaluationError(f"unknown comparison {op}")
