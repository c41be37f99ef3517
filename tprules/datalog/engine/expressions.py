"""Terms as Python expressions over tprules.datalog.lang.values: what the compiled engine's
generated joins and the pyDatalog engine's lambdas compute, written once."""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable

from ..lang import ast
from ..lang.constant import constant_value, kind_of

# What the generated code needs in its namespace.
HELPERS = '''
from tprules.datalog.lang.values import wrap as _w, uwrap as _uw, binary as _bin, negative as _neg, compare as _cmp
from tprules.datalog.lang.values import functor as _fn, range_values as _range, float_bits as _bf, bits_float as _fb
from tprules.datalog.engine.expressions import interpret as _interp
'''
_DEEP = 60  # terms nested deeper are interpreted (Python's parser allows 200 nested parentheses)
# The deep terms generated code interprets, by index, for as long as the term lives (its
# checked program holds it): the registry never outgrows the programs in use.
_DEEP_TERMS: weakref.WeakValueDictionary[int, ast.Term] = weakref.WeakValueDictionary()
_INDEX_OF: dict[int, int] = {}  # id(term) → its index, while the term lives
_NEXT = itertools.count()


def helper_namespace() -> dict:
    namespace: dict = {}
    exec(compile(HELPERS, "<tprules helpers>", "exec"), namespace)  # noqa: S102
    return namespace


def python_name(stem: str, name: str) -> str:
    """A variable's name in generated code: injective ('_' doubles, so '?' and '.' map apart)."""
    return stem + name.replace("_", "__").replace("?", "_q").replace(".", "_d")


def constant_text(value) -> str:
    text = repr(value)
    return f"float({text!r})" if text in ("inf", "-inf", "nan") else text


def python_expr(term: ast.Term, name_of: Callable[[ast.Var], str],
                aggregate: Callable[[ast.Aggregate], str] | None = None) -> str:
    """Python source computing the term (each variable written as `name_of(var)` says)."""
    if depth(term) > _DEEP and not ast.aggregates_in(term):
        index = _register(term)
        names: dict[str, str] = {}
        for var in _variables(term):
            names.setdefault(var.name, name_of(var))
        env = ", ".join(f"{name!r}: {text}" for name, text in sorted(names.items()))
        return f"_interp({index}, {{{env}}})"

    def expr(t: ast.Term) -> str:
        match t:
            case ast.Var():
                return name_of(t)
            case ast.Num() | ast.Unsigned() | ast.Float() | ast.Str():
                return constant_text(constant_value(t))
            case ast.BinOp(op, left, right):
                kind = kind_of(left)
                a, b = expr(left), expr(right)
                if op in ("+", "-", "*") and kind == "float":
                    return f"({a} {op} {b})"
                if op in ("+", "-", "*") and kind == "number":
                    return f"_w({a} {op} {b})"
                return f"_bin({op!r}, {kind!r}, {a}, {b})"
            case ast.Negative(operand):
                return f"_neg({kind_of(t)!r}, {expr(operand)})"
            case ast.Cast(operand):
                return expr(operand)
            case ast.Functor("range", args):
                return f"_range({kind_of(t)!r}, {', '.join(expr(a) for a in args)})"
            case ast.Functor(name, args):
                values = "".join(expr(a) + ", " for a in args)
                kinds = tuple(kind_of(a) for a in args)
                return f"_fn({name!r}, {kind_of(t)!r}, ({values}), {kinds!r})"
            case ast.Aggregate() if aggregate is not None:
                return aggregate(t)
        raise TypeError(t)

    return expr(term)


def python_test(op: str, left: str, right: str) -> str:
    """Python source for a comparison or string test of two computed values."""
    if op in ast.TESTS:
        return f"_cmp({op!r}, {left}, {right})"
    return f"({left} {'==' if op == '=' else op} {right})"


def depth(term: ast.Term) -> int:
    """How deeply a term nests (iteratively: a term may nest thousands deep)."""
    deepest, stack = 0, [(term, 1)]
    while stack:
        t, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((part, d + 1) for part in ast.subterms(t))
    return deepest


def _variables(term: ast.Term) -> list[ast.Var]:
    found, stack = [], [term]
    while stack:
        t = stack.pop()
        if isinstance(t, ast.Var):
            found.append(t)
        stack.extend(ast.subterms(t))
    return found


def _register(term: ast.Term) -> int:
    index = _INDEX_OF.get(id(term))
    if index is not None and _DEEP_TERMS.get(index) is term:
        return index
    index = next(_NEXT)
    _DEEP_TERMS[index] = term
    _INDEX_OF[id(term)] = index
    weakref.finalize(term, _INDEX_OF.pop, id(term), None)
    return index


def interpret(index: int, env: dict):
    """The value of a registered deep term, computed without recursion (post-order)."""
    from ..lang import values

    term = _DEEP_TERMS[index]
    done: dict[int, object] = {}
    stack = [(term, False)]
    while stack:
        t, expanded = stack.pop()
        parts = ast.subterms(t)
        if parts and not expanded:
            stack.append((t, True))
            stack.extend((p, False) for p in parts)
            continue
        args = [done[id(p)] for p in parts]
        match t:
            case ast.Var(name):
                value = env[name]
            case ast.BinOp(op, left):
                value = values.binary(op, kind_of(left), *args)
            case ast.Negative():
                value = values.negative(kind_of(t), args[0])
            case ast.Cast():
                value = args[0]
            case ast.Functor(name, parts_):
                value = values.functor(name, kind_of(t), tuple(args), tuple(kind_of(a) for a in parts_))
            case _:
                value = constant_value(t)
        done[id(t)] = value
    return done[id(term)]
