"""Subsumption: `r(x, d1) <= r(x, d2) :- d2 <= d1.` deletes dominated tuples (Soufflé 2.5).

A subsumptive clause says when a tuple of r (the first head, dominated) is deleted: when
another tuple of r (the second head, dominating) exists and the body holds. It derives
nothing. tprules writes each clause as plain rules that find the dominated tuples, one
for each column in which the two heads may differ (a tuple never dominates itself):

    dist(x, d1) :- dist(x, d1), dist(x, d2), d2 <= d1, d1 != d2.

so that every check sees both heads as uses of r and types their variables. These rules
keep the clause's second head (`dominating`); the checked program leaves them out of its
rules and gives them to r's stratum (`Stratum.subsumptions`), where the engines delete
what they find after each round of a recursive stratum, and once after a plain one.
"""

from __future__ import annotations

import dataclasses

from ...errors import RuleError, raise_all
from ..lang import ast


def expand_subsumptions(program: ast.RuleSource) -> ast.RuleSource:
    """Each subsumptive clause as the rules that find its dominated tuples."""
    if not any(isinstance(i, ast.Rule) and i.dominating is not None for i in program.items):
        return program
    items: list[ast.Item] = []
    problems: list[RuleError] = []
    for item in program.items:
        if not isinstance(item, ast.Rule) or item.dominating is None:
            items.append(item)
            continue
        dominated, dominating = item.head, item.dominating
        if dominated.rel != dominating.rel:
            problems.append(RuleError(f"the two heads of a subsumptive clause name different relations "
                                      f"({dominated.rel} and {dominating.rel}); a tuple can only be subsumed by "
                                      f"another tuple of its own relation", dominating.pos))
            continue
        if dominated.arity != dominating.arity:
            items.append(dataclasses.replace(item, body=(dominated, dominating, *item.body)))  # the arity check names it
            continue
        # A '_' in either head (Soufflé takes both) matches any value: a variable of its own.
        fresh = iter(range(len(dominated.args) + len(dominating.args)))
        dominated, dominating = (_named_wildcards(atom, fresh) for atom in (dominated, dominating))
        item = dataclasses.replace(item, head=dominated, dominating=dominating)
        for left, right in zip(dominated.args, dominating.args):
            if left == right:  # the same variable or constant: never differs
                continue
            differs = ast.Comparison("!=", left, right, dominating.pos)
            items.append(dataclasses.replace(item, body=(dominated, dominating, *item.body, differs)))
    raise_all(problems)
    return ast.RuleSource(tuple(items))


def _named_wildcards(atom: ast.Atom, fresh) -> ast.Atom:
    args = tuple(ast.Var(f".w{next(fresh)}", a.pos) if isinstance(a, ast.Wildcard) else a for a in atom.args)
    return dataclasses.replace(atom, args=args)


def not_of_the_stand_ins(problems: list, program: ast.RuleSource) -> list:
    """The problems, less those of the `!=` tprules added (a type clash there is named
    where the heads' values are checked against r's columns)."""
    added = {r.body[-1].pos for r in program.rules if r.dominating is not None}
    return [p for p in problems if not (p.pos in added and p.message.startswith("comparison '!='"))]


def split_subsumptions(rules) -> tuple[tuple[ast.Rule, ...], tuple[ast.Rule, ...]]:
    """(the rules that derive, the rules that find dominated tuples)."""
    rules = tuple(rules)
    return (tuple(r for r in rules if r.dominating is None), tuple(r for r in rules if r.dominating is not None))


def stand_in(rule: ast.Rule) -> ast.Rule:
    """What a deleting rule of r depends on, for stratification: its body without r's own
    atoms (deleting after each round is no recursion through r)."""
    body = tuple(lit for lit in rule.body if not (isinstance(lit, ast.Atom) and lit.rel == rule.head.rel))
    return dataclasses.replace(rule, body=body)
