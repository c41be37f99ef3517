"""Static checks of a rule program: declarations, arity, types and safety.

Each checker is one small function that appends `RuleError`s; `check_program` runs them
in order and raises every problem found at once (lint prints them all).
"""

from __future__ import annotations

from ..errors import RuleError
from ..lang import ast

TYPES = ("number", "symbol")


class _Problems(list):
    def add(self, message: str, pos: ast.Pos) -> None:
        self.append(RuleError(message, pos))


# ---- declarations ---------------------------------------------------------------


def check_decls(program: ast.Program, problems: _Problems) -> dict[str, ast.Decl]:
    decls: dict[str, ast.Decl] = {}
    for decl in program.decls:
        if decl.name in decls:
            problems.add(f"relation {decl.name} is declared twice (first at {decls[decl.name].pos})", decl.pos)
            continue
        seen: set[str] = set()
        for attr in decl.attrs:
            if attr.type not in TYPES:
                problems.add(f"type {attr.type} of {decl.name}.{attr.name} is not supported (use number or symbol)", attr.pos)
            if attr.name in seen:
                problems.add(f"attribute {attr.name} of {decl.name} is declared twice", attr.pos)
            seen.add(attr.name)
        decls[decl.name] = decl
    for directive in program.directives:
        for name in directive.names:
            if name not in decls:
                problems.add(f".{directive.kind} of undeclared relation {name}{_did_you_mean(name, decls)}", directive.pos)
    return decls


def check_atoms(program: ast.Program, decls: dict[str, ast.Decl], problems: _Problems) -> None:
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


def _constant_type(term: ast.Term) -> str | None:
    match term:
        case ast.Num():
            return "number"
        case ast.Str():
            return "symbol"
        case ast.BinOp() | ast.Negative() | ast.Aggregate():
            return "number"
    return None


class _Typer:
    """Infers each variable's type from the atoms it appears in, then checks every use."""

    def __init__(self, rule: ast.Rule, decls: dict[str, ast.Decl], problems: _Problems):
        self.rule, self.decls, self.problems = rule, decls, problems
        self.types: dict[str, tuple[str, ast.Pos, str]] = {}

    def run(self) -> None:
        atoms = [(self.rule.head, "head"), *ast.body_atoms(self.rule.body)]
        for atom, _ in atoms:
            self._bind_atom(atom)
        for atom, _ in atoms:
            self._check_atom(atom)
        self._check_literals(self.rule.body)

    def _columns(self, atom: ast.Atom):
        decl = self.decls.get(atom.rel)
        if decl is None or decl.arity != atom.arity:
            return []
        return list(zip(atom.args, decl.attrs))

    def _bind_atom(self, atom: ast.Atom) -> None:
        for term, attr in self._columns(atom):
            if isinstance(term, ast.Var) and attr.type in TYPES:
                known = self.types.get(term.name)
                where = f"{atom.rel}.{attr.name}"
                if known is None:
                    self.types[term.name] = (attr.type, term.pos, where)
                elif known[0] != attr.type:
                    self.problems.add(
                        f"variable {term.name} is a {known[0]} in {known[2]} but a {attr.type} in {where}", term.pos
                    )

    def _check_atom(self, atom: ast.Atom) -> None:
        for term, attr in self._columns(atom):
            if isinstance(term, ast.Var):
                continue  # a variable's conflicting uses are reported once, by _bind_atom
            found = self.term_type(term)
            if found is not None and attr.type in TYPES and found != attr.type:
                self.problems.add(f"{atom.rel}.{attr.name} is a {attr.type} but is given {_describe(term, found)}",
                                  term.pos)

    def term_type(self, term: ast.Term) -> str | None:
        match term:
            case ast.Var(name):
                known = self.types.get(name)
                return known[0] if known else None
            case ast.BinOp(op, left, right):
                for side in (left, right):
                    self._expect_number(side, f"operand of '{op}'")
                return "number"
            case ast.Negative(operand):
                self._expect_number(operand, "operand of '-'")
                return "number"
            case ast.Aggregate(func, target, body):
                if target is not None:
                    self._expect_number(target, f"target of {func}")
                self._check_literals(body)
                return "number"
        return _constant_type(term)

    def _expect_number(self, term: ast.Term, what: str) -> None:
        if isinstance(term, ast.Wildcard):
            self.problems.add(f"wildcard '_' as the {what}; expected a number", term.pos)
            return
        found = self.term_type(term)
        if found == "symbol":
            if isinstance(term, ast.Var):
                where = self.types[term.name][2]
                self.problems.add(f"the {what} is {term.name}, a symbol (from {where}); expected a number", term.pos)
            else:
                self.problems.add(f"the {what} is {_describe(term, found)}; expected a number", term.pos)

    def _check_literals(self, body: tuple[ast.Literal, ...]) -> None:
        for lit in body:
            match lit:
                case ast.Comparison(op, left, right):
                    self._check_comparison(lit, op, left, right)
                case ast.Atom(_, args) | ast.Negation(ast.Atom(_, args)):
                    for term in args:
                        if not isinstance(term, (ast.Var, ast.Wildcard)):
                            self.term_type(term)

    def _check_comparison(self, lit, op, left, right) -> None:
        for side in (left, right):
            if isinstance(side, ast.Wildcard):
                self.problems.add(f"wildcard '_' in comparison '{op}': a wildcard has no value to compare", side.pos)
                return
        lt, rt = self.term_type(left), self.term_type(right)
        if lt and rt and lt != rt:  # symbols compare alphabetically, as in Soufflé
            self.problems.add(f"comparison '{op}' between {_describe(left, lt)} and {_describe(right, rt)}; "
                              "both sides must be numbers or both symbols", lit.pos)


def _describe(term: ast.Term, type_: str) -> str:
    """A term for a message: `the symbol "one"`, `the number 7`, `X (a number)`, `a number expression`."""
    match term:
        case ast.Str(value):
            return f'the symbol "{value}"'
        case ast.Num(value):
            return f"the number {value}"
        case ast.Var(name):
            return f"{name} (a {type_})"
    return f"a {type_} expression"


def check_types(program: ast.Program, decls: dict[str, ast.Decl], problems: _Problems) -> None:
    for rule in program.rules:
        _Typer(rule, decls, problems).run()


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
    """Variables of the enclosing rule outside one aggregate."""
    found = ast.literal_vars(rule_head) if rule_head is not None else set()
    for lit in body:
        found |= ast.literal_vars(lit)
        for other in ast.literal_aggregates(lit):
            if other is not agg:
                found |= ast.aggregate_vars(other)
    return found


def check_safety(program: ast.Program, problems: _Problems) -> None:
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
            if ast.aggregates_in(term):
                problems.add(f"aggregate in the head of {rule.head.rel}: bind it in the body "
                             "(N = count : {...}) and put N in the head", term.pos)
        _check_body_safety(rule.head, rule.body, frozenset(), problems)


def _check_body_safety(head, body, outer: frozenset[str], problems: _Problems) -> None:
    bound = bound_variables(body, outer)
    where = f"rule for {head.rel}" if head is not None else "aggregate"
    unsafe: dict[str, ast.Pos] = {}
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
            for name in sorted(shared - bound - set(unsafe)):
                problems.add(f"unsafe variable {name} in {where}: used in an aggregate but not bound outside it", agg.pos)
            local_bound = bound_variables(agg.body, frozenset(shared))
            if agg.target is not None:
                for name in sorted(ast.term_vars(agg.target) - local_bound):
                    problems.add(f"unsafe variable {name} in the target of {agg.func}: its body does not bind it", agg.pos)
                for name in sorted(ast.term_vars(agg.target) & shared):
                    # Soufflé 2.5 reads a target variable as the aggregate's own even when the
                    # rule binds it outside, so the two would answer differently.
                    problems.add(f"the target {name} of {agg.func} is also a variable of the rule outside the "
                                 f"aggregate; Soufflé reads it as the aggregate's own, so rename it inside the "
                                 "aggregate", agg.pos)
            _check_body_safety(None, agg.body, frozenset(shared & bound), problems)


def check_no_nested_aggregates(program: ast.Program, problems: _Problems) -> None:
    for rule in program.rules:
        for lit in rule.body:
            for agg in ast.literal_aggregates(lit):
                inside = [a for inner in agg.body for a in ast.literal_aggregates(inner)]
                inside += ast.aggregates_in(agg.target) if agg.target is not None else []
                for nested in inside:
                    problems.add(f"a {nested.func} inside a {agg.func} is not supported: derive the inner "
                                 "aggregate into a relation of its own with a rule, and use that relation here",
                                 nested.pos)


def check_program_items(program: ast.Program) -> tuple[dict[str, ast.Decl], list[RuleError]]:
    """Run every item-level checker; return the declarations and the problems found."""
    problems = _Problems()
    decls = check_decls(program, problems)
    check_atoms(program, decls, problems)
    check_types(program, decls, problems)
    check_safety(program, problems)
    check_no_nested_aggregates(program, problems)
    return decls, list(problems)
