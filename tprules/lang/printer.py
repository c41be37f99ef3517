"""Print the IR back as rule text that parses to an equal program (round-trip tested)."""

from __future__ import annotations

from . import ast

_LEVEL = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2}


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
        case ast.Str(value):
            return _quote(value)
        case ast.BinOp(op, left, right):
            mine = _LEVEL[op]
            text = f"{print_term(left, mine)} {op} {print_term(right, mine + 1)}"
            return f"({text})" if mine < level else text
        case ast.Negative(operand):
            return f"-{print_term(operand, 3)}"
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
        case ast.Comparison(op, left, right):
            return f"{print_term(left)} {op} {print_term(right)}"
    raise TypeError(lit)


def print_body(body: tuple[ast.Literal, ...]) -> str:
    return ", ".join(print_literal(lit) for lit in body)


def print_rule(rule: ast.Rule) -> str:
    head = print_literal(rule.head)
    return f"{head}." if rule.is_fact else f"{head} :- {print_body(rule.body)}."


def print_item(item: ast.Item) -> str:
    match item:
        case ast.Decl(name, attrs):
            return f".decl {name}({', '.join(f'{a.name}: {a.type}' for a in attrs)})"
        case ast.Directive(kind, names):
            return f".{kind} {', '.join(names)}"
        case ast.Rule():
            return print_rule(item)
    raise TypeError(item)


def print_program(program: ast.Program) -> str:
    """The program as rule text, one item per line."""
    return "".join(print_item(item) + "\n" for item in program.items)
