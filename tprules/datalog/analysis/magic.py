"""Magic sets: Soufflé's `.pragma "magic-transform"`, so that a query with constants only
computes what it asks about.

`query() :- samegen(16384, 32767).` over `samegen(x, y) :- parent(x, a), samegen(a, b),
parent(y, b).` asks for one pair, but evaluating `samegen` first derives every pair of
nodes on a level. The transformation gives each use of a derived relation an
*adornment*, which of its arguments are bound when it is reached (b) or free (f), left to
right through the body as Soufflé's default strategy does, and writes:

- `samegen.bb(x, y) :- samegen.magic_bb(x, y), parent(x, a), samegen.bf(a, b), parent(y, b).`:
  the rules of each adorned relation, guarded by its magic relation;
- `samegen.magic_bf(a) :- samegen.magic_bb(x, y), parent(x, a).`: which bindings each
  use asks for, from what its rule has bound before it;
- `samegen.magic_bb(16384, 32767).`: the seed, from the query's constants.

Atoms under a negation or inside an aggregate keep the whole relation (so strata stay
as they are); inputs, `eqrel` and `choice-domain` relations, relations with subsumption
and relations whose rules aggregate are never adorned. The relations the program outputs keep their own rules.
"""

from __future__ import annotations

import dataclasses

from ..lang import ast


def wants_magic(program: ast.RuleSource) -> bool:
    return any(p.key == "magic-transform" and p.value.strip() for p in program.items if isinstance(p, ast.Pragma))


def _vars(term) -> set[str]:
    return ast.term_vars(term) if not isinstance(term, ast.Aggregate) else set()


class _Magic:
    def __init__(self, program: ast.RuleSource):
        self.program = program
        self.decls = {d.name: d for d in program.decls}
        inputs = {n for d in program.directives if d.kind == "input" for n in d.names}
        rules: dict[str, list[ast.Rule]] = {}
        for rule in program.rules:
            rules.setdefault(rule.head.rel, []).append(rule)
        self.rules = rules
        self.adornable = {rel for rel, rs in rules.items()
                          if rel in self.decls and rel not in inputs and "eqrel" not in self.decls[rel].qualifiers
                          and not self.decls[rel].choice
                          and not any(r.dominating is not None for r in rs)  # subsumption deletes: computed whole
                          and not any(ast.literal_aggregates(lit) for r in rs for lit in r.body)
                          and not any(ast.aggregates_in(a) for r in rs for a in r.head.args)}
        # As Soufflé: a relation read under a negation or inside an aggregate, and every
        # relation it depends on, is computed whole (else a magic relation could depend on
        # that negation and break the strata).
        depends: dict[str, set[str]] = {}
        whole: set[str] = set()
        for rule in program.rules:
            for atom, use in ast.body_atoms(rule.body):
                depends.setdefault(rule.head.rel, set()).add(atom.rel)
                if use != "positive":
                    whole.add(atom.rel)
            for term in rule.head.args:
                for agg in ast.aggregates_in(term):
                    whole |= {a.rel for a, _ in ast.body_atoms(agg.body)}
        stack = list(whole)
        while stack:
            for other in depends.get(stack.pop(), ()):
                if other not in whole:
                    whole.add(other)
                    stack.append(other)
        self.adornable -= whole
        self.done: set[tuple[str, str]] = set()
        self.todo: list[tuple[str, str]] = []
        self.items: list[ast.Item] = []

    # -- adornments -------------------------------------------------------------------------

    def adorn_body(self, body, bound: set[str], guard: ast.Atom | None) -> tuple[tuple, list[ast.Rule]]:
        """The body with each positive derived atom adorned (left to right), and the magic
        rules that say what each adorned atom asks for."""
        bound = set(bound)
        out, magic_rules = [], []
        before: list[ast.Literal] = [guard] if guard is not None else []
        for lit in body:
            if isinstance(lit, ast.Atom) and lit.rel in self.adornable:
                # Bound: a constant or a bound variable. Not an expression: `gen(x + 1)` would
                # ask for x + 1, x + 2, ... without end (Soufflé's magic_infbinding).
                pattern = "".join("b" if isinstance(a, ast.CONSTANTS) or isinstance(a, ast.Var) and a.name in bound
                                  else "f" for a in lit.args)
                if "b" in pattern:
                    self.want(lit.rel, pattern)
                    keys = tuple(a for a, p in zip(lit.args, pattern) if p == "b")
                    head = ast.Atom(_magic(lit.rel, pattern), keys, lit.pos)
                    magic_rules.append(ast.Rule(head, tuple(before), lit.pos))
                    lit = dataclasses.replace(lit, rel=_adorned(lit.rel, pattern))
            out.append(lit)
            before.append(lit)
            bound |= _binds(lit, bound)
        return tuple(out), magic_rules

    def want(self, rel: str, pattern: str) -> None:
        if (rel, pattern) not in self.done:
            self.done.add((rel, pattern))
            self.todo.append((rel, pattern))

    def adorned_rules(self, rel: str, pattern: str) -> None:
        decl = self.decls[rel]
        self.items.append(dataclasses.replace(decl, name=_adorned(rel, pattern), qualifiers=()))
        keys = tuple(a for a, p in zip(decl.attrs, pattern) if p == "b")
        self.items.append(ast.Decl(_magic(rel, pattern), keys, decl.pos))
        for rule in self.rules[rel]:
            # The guard binds the head's bound arguments; one that is an expression (`n + 1`)
            # is given a variable of its own, tested once the body has bound the expression.
            guard_args, tests = [], []
            for i, (arg, p) in enumerate(zip(rule.head.args, pattern)):
                if p != "b":
                    continue
                if isinstance(arg, ast.Var) or isinstance(arg, ast.CONSTANTS):
                    guard_args.append(arg)
                else:
                    fresh = ast.Var(f".m{i}", arg.pos)
                    guard_args.append(fresh)
                    tests.append(ast.Comparison("=", fresh, arg, arg.pos))
            guard = ast.Atom(_magic(rel, pattern), tuple(guard_args), rule.pos)
            bound = {a.name for a in guard_args if isinstance(a, ast.Var)}
            body, magic_rules = self.adorn_body(rule.body, bound, guard)
            head = dataclasses.replace(rule.head, rel=_adorned(rel, pattern))
            self.items.append(dataclasses.replace(rule, head=head, body=(guard,) + body + tuple(tests)))
            self.items.extend(magic_rules)

    def run(self) -> ast.RuleSource:
        # The relations asked for whole: what the program outputs, and from there every
        # relation a rule of one of them reads with nothing bound, negates or aggregates.
        whole = [n for d in self.program.directives if d.kind in ("output", "printsize") for n in d.names]
        if not whole:
            return self.program
        rewritten: dict[int, tuple[ast.Rule, list[ast.Rule]]] = {}
        seen = set(whole)
        while whole:
            rel = whole.pop()
            for rule in self.rules.get(rel, ()):
                if rule.is_fact:
                    continue
                body, magic_rules = self.adorn_body(rule.body, set(), None)
                rewritten[id(rule)] = (dataclasses.replace(rule, body=body), magic_rules)
                for other in _read_whole(body):
                    if other not in seen:
                        seen.add(other)
                        whole.append(other)
        items: list[ast.Item] = []
        for item in self.program.items:
            if id(item) in rewritten:
                rule, magic_rules = rewritten[id(item)]
                items.append(rule)
                items.extend(magic_rules)
            else:
                items.append(item)
        while self.todo:
            self.adorned_rules(*self.todo.pop())
        return ast.RuleSource(tuple(items + self.items))


def _read_whole(body) -> set[str]:
    """Relations a body reads unadorned: plain atoms, negations, aggregates."""
    found = set()
    for atom, _ in ast.body_atoms(body):
        found.add(atom.rel)
    return found


def _binds(lit: ast.Literal, bound: set[str]) -> set[str]:
    match lit:
        case ast.Atom(_, args):
            return {a.name for a in args if isinstance(a, ast.Var)}
        case ast.Comparison("=", left, right):
            for var, other in ((left, right), (right, left)):
                if isinstance(var, ast.Var) and _vars(other) <= bound:
                    return {var.name}
    return set()


def _adorned(rel: str, pattern: str) -> str:
    return f"{rel}.{pattern}"


def _magic(rel: str, pattern: str) -> str:
    return f"{rel}.magic_{pattern}"


def magic_transform(program: ast.RuleSource) -> ast.RuleSource:
    """The program with magic sets where `.pragma "magic-transform"` asks for them."""
    if not wants_magic(program):
        return program
    return _Magic(program).run()
