"""Static checks of a rule program: declarations, arity, types and safety.

Each checker is one small function that appends `RuleError`s; `check_rules` runs them
in order and raises every problem found at once (lint prints them all).
"""

from __future__ import annotations

import dataclasses

from ...errors import RuleError, Unsupported
from ...pos import Pos
from ..lang import ast
from .types import Typer, resolve_types

TYPES = ast.PRIMITIVES


class _Problems(list):
    code = "rule"  # the check running now: each problem carries it as its code (the editor shows it)

    def add(self, message: str, pos: Pos) -> None:
        if any(p.message == message and p.pos == pos for p in self):  # one clause checked as several rules
            return
        self.append(RuleError(message, pos, self.code))


# ---- declarations ---------------------------------------------------------------


def check_decls(program: ast.RuleSource, typenames: dict[str, str], problems: _Problems) -> dict[str, ast.Decl]:
    """Every relation's declaration, each column's type resolved to its primitive."""
    decls: dict[str, ast.Decl] = {}
    declared = {t.name for t in program.types}
    for decl in program.decls:
        if decl.name in decls:
            problems.add(f"relation {decl.name} is declared twice (first at {decls[decl.name].pos})", decl.pos)
            continue
        seen: set[str] = set()
        attrs = []
        for attr in decl.attrs:
            kind = typenames.get(attr.type)
            if kind is None and attr.type not in declared:  # a declared one that failed is reported there
                problems.add(f"type {attr.type} of {decl.name}.{attr.name} is not declared (use number, unsigned, "
                             "float, symbol, or a .type)", attr.pos)
            if attr.name in seen:
                problems.add(f"attribute {attr.name} of {decl.name} is declared twice", attr.pos)
            seen.add(attr.name)
            attrs.append(dataclasses.replace(attr, kind=kind or ""))
        decl = dataclasses.replace(decl, attrs=tuple(attrs))
        for key in decl.choice:
            for name in key:
                if name not in seen:
                    problems.add(f"choice-domain of {decl.name} names {name}, which is not one of its attributes "
                                 f"({', '.join(a.name for a in decl.attrs)})", decl.pos)
        if "eqrel" in decl.qualifiers and (decl.arity != 2 or len(set(decl.types)) != 1):
            problems.add(f"eqrel relation {decl.name} must have two columns of one type", decl.pos)
        decls[decl.name] = decl
    for directive in program.directives:
        for name in directive.names:
            if name not in decls:
                problems.add(f".{directive.kind} of undeclared relation {name}{_did_you_mean(name, decls)}", directive.pos)
    return decls


def check_atoms(program: ast.RuleSource, decls: dict[str, ast.Decl], problems: _Problems) -> None:
    for rule in program.rules:
        for atom, _ in [(rule.head, "head"), *ast.body_atoms(rule.body)]:
            decl = decls.get(atom.rel)
            if decl is None:
                problems.add(f"relation {atom.rel} is used but not declared{_did_you_mean(atom.rel, decls)}", atom.pos)
            elif decl.arity != atom.arity:
                problems.add(f"relation {atom.rel} has {_columns(decl.arity)} (declared at {decl.pos}) "
                             f"but is used here with {atom.arity}", atom.pos)


def _columns(n: int) -> str:
    return f"{n} column" if n == 1 else f"{n} columns"


def _did_you_mean(name: str, decls: dict[str, ast.Decl]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(decls), n=1)
    return f" (did you mean {close[0]}?)" if close else " (add a .decl for it)"


# ---- types ----------------------------------------------------------------------


def check_types(program: ast.RuleSource, decls: dict[str, ast.Decl], problems: _Problems,
                typenames: dict[str, str] | None = None) -> ast.RuleSource:
    """Check every rule's types; the program with each term's type written in."""
    typenames = typenames if typenames is not None else {p: p for p in ast.PRIMITIVES}
    items = tuple(Typer(item, decls, typenames, problems).run() if isinstance(item, ast.Rule) else
                  decls.get(item.name, item) if isinstance(item, ast.Decl) else item
                  for item in program.items)
    return ast.RuleSource(items)


# ---- safety ---------------------------------------------------------------------


def bound_variables(body: tuple[ast.Literal, ...], outer: frozenset[str] = frozenset()) -> set[str]:
    """Variables a body binds: positive atoms, then `V = expr` equalities whose other side is bound."""
    bound = set(outer)
    for lit in body:
        if isinstance(lit, ast.Atom):  # only a bare variable argument binds; `p(X + 1)` does not
            bound |= {arg.name for arg in lit.args if isinstance(arg, ast.Var)}
    changed = True
    while changed:
        changed = False
        for lit in body:
            if isinstance(lit, ast.Comparison) and lit.op == "=":
                for var, other in ((lit.left, lit.right), (lit.right, lit.left)):
                    if isinstance(var, ast.Var) and var.name not in bound and _is_bound(other, bound):
                        bound.add(var.name)
                        changed = True
    return bound


def _is_bound(term: ast.Term, bound: set[str]) -> bool:
    match term:
        case ast.Aggregate():
            return True  # its outer variables are checked on their own
        case ast.Wildcard():
            return False
    return ast.term_vars(term) <= bound


def outside_vars(rule_head: ast.Atom | None, body: tuple[ast.Literal, ...], agg: ast.Aggregate) -> set[str]:
    """Variables of the enclosing rule outside one aggregate (which may be nested inside
    another: then the enclosing aggregate's own body and target count as outside too).
    A variable that only other aggregates mention is theirs, not shared with this one."""
    found = ast.literal_vars(rule_head) if rule_head is not None else set()
    for lit in body:
        found |= ast.literal_vars(lit)
        for other in ast.literal_aggregates(lit):
            if other is agg:
                continue
            if _holds(other, agg):
                found |= outside_vars(None, other.body, agg)
                if other.target is not None:
                    found |= ast.term_vars(other.target)
            # A sibling aggregate's variables are its own (Soufflé scopes each aggregate).
    return found


def _holds(outer: ast.Aggregate, agg: ast.Aggregate) -> bool:
    """Is `agg` somewhere inside `outer`?"""
    inner = [a for lit in outer.body for a in ast.literal_aggregates(lit)]
    if outer.target is not None:
        inner += ast.aggregates_in(outer.target)
    return any(a is agg or _holds(a, agg) for a in inner)


def check_safety(program: ast.RuleSource, problems: _Problems) -> None:
    for rule in program.rules:
        if rule.is_fact:
            for term in rule.head.args:
                if ast.term_vars(term) or isinstance(term, (ast.Wildcard, ast.Aggregate)):
                    what = (f"variable {sorted(ast.term_vars(term))[0]}" if ast.term_vars(term)
                            else "a wildcard '_'" if isinstance(term, ast.Wildcard) else "an aggregate")
                    problems.add(f"fact {rule.head.rel} has {what}; a fact holds constants only "
                                 "(a rule with a body binds variables)", term.pos)
            continue
        for term in rule.head.args:
            if isinstance(term, ast.Wildcard):
                problems.add(f"wildcard '_' in the head of {rule.head.rel}: a head gives every column a value",
                             term.pos)
        _check_body_safety(rule.head, rule.body, frozenset(), problems)


def _check_body_safety(head, body, outer: frozenset[str], problems: _Problems) -> None:
    bound = bound_variables(body, outer)
    where = f"rule for {head.rel}" if head is not None else "aggregate"
    unsafe: dict[str, Pos] = {}
    if head is not None:
        for term in head.args:
            for name in ast.term_vars(term) - bound:
                unsafe.setdefault(name, term.pos)
    for lit in body:
        if isinstance(lit, (ast.Atom, ast.Negation, ast.Comparison)):
            for name in ast.literal_vars(lit) - bound:
                unsafe.setdefault(name, lit.pos)
    in_aggregates = set().union(*(ast.aggregate_vars(a) for lit in body for a in ast.literal_aggregates(lit)))
    in_expressions = {n for lit in body if isinstance(lit, ast.Atom)
                      for arg in lit.args if not isinstance(arg, ast.Var) for n in ast.term_vars(arg)}
    head_vars = ast.literal_vars(head) if head is not None else set()
    # A head variable bound only inside a min or max: Soufflé binds it to the tuple that
    # gives the min or max (a witness; Soufflé rejects one of count, sum or mean).
    extremes = [a for lit in body for a in ast.literal_aggregates(lit) if a.func in ("min", "max")]
    witnesses = sorted(n for n in unsafe if n in head_vars and n not in in_expressions
                       and any(n in ast.aggregate_vars(a) for a in extremes))
    if witnesses:
        agg = next(a for a in extremes if set(witnesses) & ast.aggregate_vars(a))
        problems.append(Unsupported(f"tprules does not support aggregate witnesses (head variable"
                                    f"{'s' if len(witnesses) > 1 else ''} {', '.join(witnesses)} bound only inside "
                                    f"the {agg.func} aggregate at {agg.pos})", unsafe[witnesses[0]]))
        for name in witnesses:
            del unsafe[name]
    for name, pos in unsafe.items():
        if name in in_expressions:
            problems.add(f"unsafe variable {name} in {where}: it appears in positive atoms only inside "
                         "expressions, which do not bind it (bind it with a plain variable, then compute)", pos)
        elif name in in_aggregates:  # bound inside an aggregate only: that binding stays inside
            problems.add(f"unsafe variable {name} in {where}: no positive atom outside the aggregate binds it "
                         "(an aggregate's body binds variables for itself only)", pos)
        else:
            problems.add(f"unsafe variable {name} in {where}: no positive atom binds it", pos)
    for lit in body:
        for agg in ast.literal_aggregates(lit):
            inner = ast.aggregate_vars(agg)
            shared = inner & (outside_vars(head, body, agg) | outer)  # outer: a nested aggregate's scope
            for name in sorted(shared - bound - set(unsafe) - set(witnesses)):
                problems.add(f"unsafe variable {name} in {where}: used in an aggregate but not bound outside it", agg.pos)
            local_bound = bound_variables(agg.body, frozenset(shared))
            if agg.target is not None:
                for name in sorted(ast.term_vars(agg.target) - local_bound):
                    problems.add(f"unsafe variable {name} in the target of {agg.func}: its body does not bind it", agg.pos)
            _check_body_safety(None, agg.body, frozenset(shared & bound), problems)


def check_no_nested_aggregates(program: ast.RuleSource, problems: _Problems) -> None:
    for rule in program.rules:
        for lit in rule.body:
            for agg in ast.literal_aggregates(lit):
                inside = [a for inner in agg.body for a in ast.literal_aggregates(inner)]
                inside += ast.aggregates_in(agg.target) if agg.target is not None else []
                for nested in inside:
                    problems.add(f"a {nested.func} inside a {agg.func} is not supported: derive the inner "
                                 "aggregate into a relation of its own with a rule, and use that relation here",
                                 nested.pos)


def check_program_items(program: ast.RuleSource) -> tuple[dict[str, ast.Decl], ast.RuleSource, list[RuleError]]:
    """Run every item-level checker; return the declarations, the program with its types
    written in, and the problems found."""
    problems = _Problems()
    program = shadow_aggregate_targets(lift_head_aggregates(program))
    problems.code = "types"
    typenames = resolve_types(program, problems)
    problems.code = "declaration"
    decls = check_decls(program, typenames, problems)
    problems.code = "relation"
    check_atoms(program, decls, problems)
    problems.code = "types"
    typed = check_types(program, decls, problems, typenames)
    problems.code = "safety"
    check_safety(program, problems)
    return decls, typed, list(problems)


# ---- scopes ---------------------------------------------------------------------


def lift_head_aggregates(program: ast.RuleSource) -> ast.RuleSource:
    """`h(count : {...}) :- body.` means `h(N) :- body, N = count : {...}.` (as in Soufflé)."""
    items = []
    for item in program.items:
        if isinstance(item, ast.Rule) and any(ast.aggregates_in(t) for t in item.head.args):
            extra: list[ast.Literal] = []
            args: list[ast.Term] = []
            for term in item.head.args:
                for agg in ast.aggregates_in(term):
                    var = ast.Var(f".h{len(extra) + 1}", agg.pos)
                    extra.append(ast.Comparison("=", var, agg, agg.pos))
                    term = ast.replace_term(term, agg, var)
                args.append(term)
            item = dataclasses.replace(item, head=dataclasses.replace(item.head, args=tuple(args)),
                                       body=item.body + tuple(extra))
        items.append(item)
    return ast.RuleSource(tuple(items))


def shadow_aggregate_targets(program: ast.RuleSource) -> ast.RuleSource:
    """As Soufflé 2.5: a variable of an aggregate's target is the aggregate's own, even
    where the rule uses the same name outside it (`Y = min Z + Y : { a(Z), b(Y) }`). Such
    a variable is renamed inside the aggregate (`Y.1`), so every later pass sees two."""
    items: list[ast.Item] = []
    changed = False
    for item in program.items:
        if isinstance(item, ast.Rule) and not item.is_fact:
            new = _shadow_rule(item)
            changed |= new is not item
            items.append(new)
        else:
            items.append(item)
    return ast.RuleSource(tuple(items)) if changed else program


def _shadow_rule(rule: ast.Rule) -> ast.Rule:
    counter = [0]
    body = list(rule.body)
    for i, lit in enumerate(body):
        for agg in ast.literal_aggregates(lit):
            if agg.target is None:
                continue
            clash = ast.term_vars(agg.target) & outside_vars(rule.head, tuple(body), agg)
            if not clash:
                continue
            counter[0] += 1
            renamed = _rename_aggregate(agg, {n: f"{n}.{counter[0]}" for n in clash})
            body[i] = _replace_in_literal(body[i], agg, renamed)
    if all(a is b for a, b in zip(body, rule.body)):
        return rule
    return dataclasses.replace(rule, body=tuple(body))


def rename_term(term, names: dict[str, str]):
    match term:
        case ast.Var(name) if name in names:
            return dataclasses.replace(term, name=names[name])
        case ast.BinOp(_, left, right):
            return dataclasses.replace(term, left=rename_term(left, names), right=rename_term(right, names))
        case ast.Negative(operand):
            return dataclasses.replace(term, operand=rename_term(operand, names))
        case ast.Cast(operand):
            return dataclasses.replace(term, term=rename_term(operand, names))
        case ast.Functor(_, args):
            return dataclasses.replace(term, args=tuple(rename_term(a, names) for a in args))
        case ast.Aggregate():
            return _rename_aggregate(term, names)
    return term


def rename_literal(lit, names: dict[str, str]):
    match lit:
        case ast.Atom(_, args):
            return dataclasses.replace(lit, args=tuple(rename_term(a, names) for a in args))
        case ast.Negation(atom):
            return dataclasses.replace(lit, atom=rename_literal(atom, names))
        case ast.Comparison(_, left, right):
            return dataclasses.replace(lit, left=rename_term(left, names), right=rename_term(right, names))
    return lit


def _rename_aggregate(agg: ast.Aggregate, names: dict[str, str]) -> ast.Aggregate:
    target = rename_term(agg.target, names) if agg.target is not None else None
    return dataclasses.replace(agg, target=target, body=tuple(rename_literal(lit, names) for lit in agg.body))


def _replace_in_literal(lit, old, new):
    match lit:
        case ast.Comparison(_, left, right):
            return dataclasses.replace(lit, left=ast.replace_term(left, old, new), right=ast.replace_term(right, old, new))
        case ast.Atom(_, args):
            return dataclasses.replace(lit, args=tuple(ast.replace_term(a, old, new) for a in args))
    return lit
