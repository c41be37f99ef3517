"""Print the IR back as rule text that parses to an equal program (round-trip tested)."""

from __future__ import annotations

from . import ast

# Binding strength of infix operators (Soufflé's precedence); prefix operators bind at
# _UNARY, and `^` (right-associative) binds tighter still.
_LEVEL = {"lor": 1, "lxor": 2, "land": 3, "bor": 4, "bxor": 5, "band": 6, "bshl": 7, "bshr": 7, "bshru": 7,
          "+": 8, "-": 8, "*": 9, "/": 9, "%": 9, "^": 11}
_UNARY = 10


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def print_term(term: ast.Term, level: int = 0) -> str:
    match term:
        case ast.Var(name):
            return name
        case ast.Wildcard():
            return "_"
        case ast.Num(value):
            text = str(value)
            return f"({text})" if value < 0 and level > 0 else text
        case ast.Unsigned(value):
            return f"{value}u"
        case ast.Float(value):
            text = _float(value)
            return f"({text})" if text.startswith("-") and level > 0 else text
        case ast.Str(value) if value.startswith("\x1e"):  # a record or ADT value (datalog/lang/record_values.py)
            from .record_values import written

            return written(value)
        case ast.Str(value):
            return _quote(value)
        case ast.Record(args):
            return f"[{', '.join(print_term(a) for a in args)}]"
        case ast.Nil():
            return "nil"
        case ast.Branch(name, args):
            return f"${name}({', '.join(print_term(a) for a in args)})" if args else f"${name}"
        case ast.BinOp("^", left, right):
            text = f"{print_term(left, _LEVEL['^'] + 1)} ^ {print_term(right, _UNARY)}"
            return f"({text})" if _LEVEL["^"] < level else text
        case ast.BinOp(op, left, right):
            mine = _LEVEL[op]
            text = f"{print_term(left, mine)} {op} {print_term(right, mine + 1)}"
            return f"({text})" if mine < level else text
        case ast.Negative(operand):
            text = f"-{print_term(operand, _UNARY)}"
            return f"({text})" if _UNARY < level else text
        case ast.Functor(name, (operand,)) if name in ("bnot", "lnot"):
            text = f"{name} {print_term(operand, _UNARY)}"
            return f"({text})" if _UNARY < level else text
        case ast.Functor(name, args):
            return f"{name}({', '.join(print_term(a) for a in args)})"
        case ast.Cast(operand, to):
            return f"as({print_term(operand)}, {to})"
        case ast.Aggregate(func, target, body):
            head = func if target is None else f"{func} {print_term(target, 0)}"
            text = f"{head} : {{ {print_body(body)} }}"
            return f"({text})" if level > 0 else text
    raise TypeError(term)


def print_literal(lit: ast.Literal) -> str:
    match lit:
        case ast.Atom(rel, args):
            return f"{rel}({', '.join(print_term(a) for a in args)})"
        case ast.Negation(atom):
            return "!" + print_literal(atom)
        case ast.Comparison(op, left, right) if op in ast.TESTS:
            return f"{op}({print_term(left)}, {print_term(right)})"
        case ast.Comparison(op, left, right):
            return f"{print_term(left)} {op} {print_term(right)}"
    raise TypeError(lit)


def _float(value: float) -> str:
    """A float as Soufflé reads one: digits, a point, digits (no exponent)."""
    text = repr(value)
    if "e" in text or "n" in text:  # 1e+20, inf, nan: spelled out, or computed
        if value != value:
            return "(0.0 / 0.0)"
        if value in (float("inf"), float("-inf")):
            return "(1.0 / 0.0)" if value > 0 else "(-1.0 / 0.0)"
        text = f"{value:.400f}".rstrip("0")
        text += "0" if text.endswith(".") else ""
    return text


def print_body(body: tuple[ast.Literal, ...]) -> str:
    return ", ".join(print_literal(lit) for lit in body)


def print_rule(rule: ast.Rule) -> str:
    head = print_literal(rule.head)
    if rule.dominating is not None:
        return f"{head} <= {print_literal(rule.dominating)} :- {print_body(rule.body)}."
    return f"{head}." if rule.is_fact else f"{head} :- {print_body(rule.body)}."


def print_rule_origin(rule: ast.Rule) -> str:
    """The rule as written (before records were desugared), and for a rule of a component,
    which instance of which component it is."""
    text = rule.written or print_rule(rule)
    return f"{text}  // {rule.origin}" if rule.origin else text


def print_item(item: ast.Item) -> str:
    match item:
        case ast.Decl(name, attrs, _, qualifiers):
            tail = "".join(f" {q}" for q in qualifiers)
            return f".decl {name}({', '.join(f'{a.name}: {a.type}' for a in attrs)}){tail}"
        case ast.Directive(kind, names, _, params):
            tail = f"({', '.join(f'{k}={_quote(v)}' for k, v in params)})" if params else ""
            return f".{kind} {', '.join(names)}{tail}"
        case ast.TypeDecl(name, "subtype", (base,)):
            return f".type {name} <: {base}"
        case ast.TypeDecl(name, _, bases):
            return f".type {name} = {' | '.join(bases)}"
        case ast.Pragma(key, value):
            return f".pragma {_quote(key)} {_quote(value)}" if value else f".pragma {_quote(key)}"
        case ast.Rule():
            return print_rule(item)
    raise TypeError(item)


def print_rules(program: ast.RuleSource) -> str:
    """Rules (a parsed file or folder) as rule text, one item per line."""
    return "".join(print_item(item) + "\n" for item in program.items)
