"""Aggregate witnesses: a head variable bound only inside a `min` or `max`.

`tallest(s, n) :- n = max h : { student(s, h) }.` means, in Soufflé, the student whose
height is the max. It is rewritten before the checks into plain Datalog: the aggregate
(its own variables renamed, so that nothing outside selects its groups), then its body
again with the target equal to the result:

    tallest(s, n) :- n = max .w1h : { student(.w1s, .w1h) }, student(s, h), h = n.

Where several tuples give the min or max, this derives every one of them; Soufflé keeps
one (whichever its index meets first). A witness of `count`, `sum` or `mean` is an error
in Soufflé and stays an unsafe variable here.
"""

from __future__ import annotations

import dataclasses
import itertools

from ..lang import ast
from .checks import rename_term


def _outer_bound(body: tuple[ast.Literal, ...]) -> set[str]:
    """Variables the body mentions outside its aggregates."""
    found: set[str] = set()
    for lit in body:
        found |= ast.literal_vars(lit)
    return found


def _witnessed(rule: ast.Rule, fresh) -> ast.Rule:
    head_vars = ast.literal_vars(rule.head)
    outside = _outer_bound(rule.body)
    body = list(rule.body)
    extra: list[ast.Literal] = []
    for index, lit in enumerate(rule.body):
        if not isinstance(lit, ast.Comparison) or lit.op != "=":
            continue
        for result, agg in ((lit.left, lit.right), (lit.right, lit.left)):
            if not isinstance(agg, ast.Aggregate) or agg.func not in ("min", "max") or agg.target is None:
                continue
            witnesses = (head_vars & ast.aggregate_vars(agg)) - outside
            if not witnesses:
                continue
            number = next(fresh)
            own = ast.aggregate_vars(agg) - outside
            renamed = rename_term(agg, {v: f".w{number}{v}" for v in own})
            if isinstance(result, ast.Wildcard):
                result = ast.Var(f".w{number}", result.pos)
            body[index] = dataclasses.replace(lit, left=result, right=renamed)
            extra.extend(agg.body)
            extra.append(ast.Comparison("=", agg.target, result, agg.pos))
            break
    if not extra:
        return rule
    return dataclasses.replace(rule, body=tuple(body) + tuple(extra))


def expand_witnesses(program: ast.RuleSource) -> ast.RuleSource:
    """The program with every min/max witness written out (see the module's doc)."""
    fresh = itertools.count(1)
    items: list[ast.Item] = []
    changed = False
    for item in program.items:
        if isinstance(item, ast.Rule) and not item.is_fact:
            new = _witnessed(item, fresh)
            changed |= new is not item
            items.append(new)
        else:
            items.append(item)
    return ast.RuleSource(tuple(items)) if changed else program
