"""Column domains: which relation columns hold the same kind of value, read off the rules.

Two columns share a domain when one rule names the same variable in both (in its head,
its body, an aggregate's body, or an equality `X = Y`). In the TP rules, `legal`'s only
column joins `candidate`'s and `member`'s first column (fusion ids), and `on_chip`'s first
joins `member`'s second and `op`'s first (statement ids). The REPL completes a string
argument from the constants of its column's domain, so `legal("` offers fusion ids and
not every constant of the program.

>>> from tprules.datalog.lang.parser import parse_text
>>> rules = parse_text('.decl m(f: symbol, o: symbol)\\n.decl l(f: symbol)\\n.decl c(f: symbol)\\n'
...                    'c(F) :- m(F, _).\\nl(F) :- c(F), !m(F, "x").\\n').rules
>>> sorted(column_domains(rules)[("l", 0)])
[('c', 0), ('l', 0), ('m', 0)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

from ...pos import Pos
from ..lang import ast

Column = tuple[str, int]  # (relation, 0-based column)


def _atoms_and_equalities(node) -> Iterator[ast.Atom | ast.Comparison]:
    """Every atom and every `=` comparison inside a rule part, however deeply nested."""
    if isinstance(node, ast.Atom):
        yield node
    elif isinstance(node, ast.Comparison) and node.op == "=":
        yield node
    if isinstance(node, (tuple, list)):
        for item in node:
            yield from _atoms_and_equalities(item)
    elif dataclasses.is_dataclass(node) and not isinstance(node, (Pos, type)):
        for f in dataclasses.fields(node):
            yield from _atoms_and_equalities(getattr(node, f.name))


class _UnionFind:
    def __init__(self):
        self.parent: dict[object, object] = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b) -> None:
        self.parent[self.find(a)] = self.find(b)


def column_domains(rules: Iterable[ast.Rule]) -> dict[Column, frozenset[Column]]:
    """Each column that a rule names, mapped to every column of its domain (itself included)."""
    sets = _UnionFind()
    for rule in rules:
        seen: dict[str, object] = {}  # variable → a node of its domain

        def meet(var: str, node, seen=seen) -> None:
            sets.find(node)
            if var in seen:
                sets.union(node, seen[var])
            else:
                seen[var] = node

        for node in _atoms_and_equalities((rule.head, rule.body)):
            if isinstance(node, ast.Atom):
                for i, arg in enumerate(node.args):
                    sets.find((node.rel, i))
                    if isinstance(arg, ast.Var):
                        meet(arg.name, (node.rel, i))
            elif isinstance(node.left, ast.Var) and isinstance(node.right, ast.Var):
                meet(node.left.name, ("=", node.left.name, id(rule)))
                meet(node.right.name, ("=", node.left.name, id(rule)))
    groups: dict[object, set[Column]] = {}
    for key in list(sets.parent):
        if isinstance(key, tuple) and len(key) == 2:
            groups.setdefault(sets.find(key), set()).add(key)
    return {col: frozenset(group) for group in groups.values() for col in group}
