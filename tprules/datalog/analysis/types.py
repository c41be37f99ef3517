"""Types: `.type` declarations resolved to primitives, every term's primitive inferred.

The primitives are Soufflé's: `number` (64-bit signed), `unsigned` (64-bit), `float`
(64-bit IEEE) and `symbol`. A `.type` is a subtype (`<:`), an alias or a union of types
of one primitive; tprules checks and evaluates by the primitive. An integer literal takes
the type its place wants (`1` is a float in a float column), a number by default.

`annotate_rule` returns the rule with `type` filled in on every term and comparison, so
the engines know how to compute (wrap-around number arithmetic, unsigned, float, symbol
order) without inferring anything themselves.
"""

from __future__ import annotations

import dataclasses

from ...pos import Pos
from ..lang import ast

PRIMITIVES = ast.PRIMITIVES
NUMERIC = ast.NUMERIC
INT = "int"  # an integer literal (or an expression of them) whose type its place decides
LOGIC = ("land", "lor", "lxor")
BITWISE = ("band", "bor", "bxor", "bshl", "bshr", "bshru")
_RANGES = {"number": (-(1 << 63), (1 << 63) - 1), "unsigned": (0, (1 << 64) - 1)}


def resolve_types(program: ast.RuleSource, problems) -> dict[str, str]:
    """Every type name → its primitive (primitives map to themselves)."""
    defs: dict[str, ast.TypeDecl] = {}
    for decl in program.types:
        if decl.name in PRIMITIVES:
            problems.add(f"type {decl.name} is a primitive type and cannot be declared", decl.pos)
        elif decl.name in defs:
            problems.add(f"type {decl.name} is declared twice (first at {defs[decl.name].pos})", decl.pos)
        else:
            defs[decl.name] = decl
    resolved = {p: p for p in PRIMITIVES}

    def resolve(name: str, seen: tuple[str, ...]) -> str | None:
        if name in resolved:
            return resolved[name]
        decl = defs.get(name)
        if decl is None or name in seen:
            return None
        if decl.kind in ("record", "adt"):  # held as interned symbols (datalog/lang/record_values.py)
            resolved[name] = "symbol"
            return "symbol"
        kinds = []
        for base in decl.bases:
            kind = resolve(base, seen + (name,))
            if kind is None:
                why = "is part of a cycle of types" if base in seen + (name,) or base in defs else "is not declared"
                problems.add(f"type {base} (used by .type {name}) {why}", decl.pos)
                return None
            kinds.append(kind)
        if len(set(kinds)) > 1:
            problems.add(f"union type {name} mixes {' and '.join(sorted(set(kinds)))}; "
                         "a union's types must share one primitive type", decl.pos)
            return None
        resolved[name] = kinds[0]
        return kinds[0]

    for name in defs:
        resolve(name, ())
    return resolved


def describe(term: ast.Term, type_: str) -> str:
    """A term for a message: `the symbol "one"`, `the number 7`, `X (a number)`, `a number expression`."""
    match term:
        case ast.Str(value):
            return f'the symbol "{value}"'
        case ast.Num(value) | ast.Float(value) | ast.Unsigned(value):
            return f"the {type_} {value}"
        case ast.Var(name):
            return f"{name} (a {type_})"
    return f"a{'n' if type_[0] in 'aeiou' else ''} {type_} expression"


class Typer:
    """Infers each variable's type from the atoms it appears in (and from `X = expr`), then
    checks every use and writes the types into the rule."""

    def __init__(self, rule: ast.Rule, decls: dict[str, ast.Decl], typenames: dict[str, str], problems):
        self.rule, self.decls, self.typenames, self.problems = rule, decls, typenames, problems
        self.types: dict[str, tuple[str, Pos, str]] = {}
        self._inferred: dict[tuple[int, int], str | None] = {}
        self._pending = False  # inside the first pass over assignments (aggregate targets may wait)

    def run(self) -> ast.Rule:
        atoms = [(self.rule.head, "head"), *ast.body_atoms(self.rule.body)]
        for atom, _ in atoms:
            self._bind_atom(atom)
        self._bind_assignments(self.rule.body)
        head = self._atom(self.rule.head)
        return dataclasses.replace(self.rule, head=head, body=self._literals(self.rule.body))

    # -- inference ------------------------------------------------------------------

    def _columns(self, atom: ast.Atom):
        decl = self.decls.get(atom.rel)
        if decl is None or decl.arity != atom.arity:
            return []
        return list(zip(atom.args, decl.attrs))

    def _bind_atom(self, atom: ast.Atom) -> None:
        for term, attr in self._columns(atom):
            if isinstance(term, ast.Var) and attr.kind in PRIMITIVES:
                known = self.types.get(term.name)
                where = f"{atom.rel}.{attr.name}"
                if known is None:
                    self.types[term.name] = (attr.kind, term.pos, where)
                elif known[0] != attr.kind:
                    self.problems.add(
                        f"variable {term.name} is a {known[0]} in {known[2]} but a {attr.kind} in {where}", term.pos)

    def _bind_assignments(self, body) -> None:
        """`X = expr` gives X the type of expr (repeatedly: one binding may enable the next)."""
        pending = [lit for lit in _all_literals(body) if isinstance(lit, ast.Comparison) and lit.op == "="]
        self._pending = True
        self._bind_equalities(pending)
        self._pending = False
        self._inferred.clear()
        self._bind_equalities(pending)  # what is still unknown now takes the defaults
        for lit in pending:  # `X = 1 + 2`: a number, unless something above said otherwise
            for var, other in ((lit.left, lit.right), (lit.right, lit.left)):
                if isinstance(var, ast.Var) and var.name not in self.types and self.infer(other) == INT:
                    self.types[var.name] = ("number", var.pos, f"{var.name} = ...")

    def _bind_equalities(self, pending) -> None:
        """Give each `X = expr` of `pending` the type of expr (unless a bare number), until none binds more."""
        changed = True
        while changed:
            changed = False
            for lit in pending:
                for var, other in ((lit.left, lit.right), (lit.right, lit.left)):
                    if isinstance(var, ast.Var) and var.name not in self.types:
                        kind = self.infer(other)
                        if kind is not None and kind != INT:
                            self.types[var.name] = (kind, var.pos, f"{var.name} = ...")
                            changed = True

    def infer(self, term: ast.Term) -> str | None:
        """The term's type; INT for integer literals whose place decides; None if unknown."""
        key = (id(term), len(self.types))  # remembered: nested terms ask about their parts again
        if key not in self._inferred:
            self._inferred[key] = self._infer(term)
        return self._inferred[key]

    def _infer(self, term: ast.Term) -> str | None:
        match term:
            case ast.Var(name):
                known = self.types.get(name)
                return known[0] if known else None
            case ast.Num():
                return INT
            case ast.Unsigned():
                return "unsigned"
            case ast.Float():
                return "float"
            case ast.Str():
                return "symbol"
            case ast.BinOp(op, left, right):
                sides = (self.infer(left), self.infer(right))
                if "symbol" in sides:  # only `+` of two symbols is one (a concatenation)
                    return "symbol" if op == "+" and sides == ("symbol", "symbol") else "number"
                return _unify(*sides)
            case ast.Negative(operand):
                return self.infer(operand)
            case ast.Cast(_, to):
                return self.typenames.get(to)
            case ast.Aggregate("count"):
                return "number"
            case ast.Aggregate("mean"):
                return "float"
            case ast.Aggregate(_, target):
                found = self.infer(target) if target is not None else None
                if found is None and target is not None and ast.term_vars(target) and self._pending:
                    return None  # a target variable an assignment (a nested aggregate, say) types later
                return found if found in NUMERIC else "number"  # a symbol target is reported there
            case ast.Functor(name, args) if name.startswith("."):
                return self.typenames.get(name.split(":")[2]) or "number" if name.startswith(".field:") else "symbol"
            case ast.Functor(name, args):
                result = _RESULT.get(name)
                if result is not None:
                    return result
                return _unify(*(self.infer(a) for a in args)) if args else None  # min, max, range, bnot, lnot
        return None

    # -- checking and annotating ----------------------------------------------------

    def _atom(self, atom: ast.Atom) -> ast.Atom:
        columns = self._columns(atom)
        if not columns:
            return atom
        args: list[ast.Term] = []
        for term, attr in columns:
            if isinstance(term, (ast.Var, ast.Wildcard)):  # a variable's conflicting uses were reported once
                args.append(dataclasses.replace(term, type=attr.kind))
                continue
            found = self.infer(term)
            if found == _CLASH:  # its parts disagree: reported where they meet
                args.append(self.term(term, attr.kind))
                continue
            if found not in (None, INT) and found != attr.kind or found == INT and attr.kind == "symbol":
                self.problems.add(f"{atom.rel}.{attr.name} is a{_n(attr.kind)} {attr.kind} but is given "
                                  f"{describe(term, found if found != INT else 'number')}", term.pos)
            args.append(self.term(term, attr.kind))
        return dataclasses.replace(atom, args=tuple(args))

    def _literals(self, body) -> tuple[ast.Literal, ...]:
        out: list[ast.Literal] = []
        for lit in body:
            match lit:
                case ast.Atom():
                    out.append(self._atom(lit))
                case ast.Negation(atom):
                    out.append(dataclasses.replace(lit, atom=self._atom(atom)))
                case ast.Comparison():
                    out.append(self._comparison(lit))
        return tuple(out)

    def _comparison(self, lit: ast.Comparison) -> ast.Comparison:
        op, left, right = lit.op, lit.left, lit.right
        for side in (left, right):
            if isinstance(side, ast.Wildcard):
                what = f"comparison '{op}'" if op in ast.COMPARISONS else f"{op.lstrip('!')}(...)"
                self.problems.add(f"wildcard '_' in {what}: a wildcard has no value to compare", side.pos)
                return lit
        if op not in ast.COMPARISONS:  # contains(sub, s), match(pattern, s): two symbols
            return dataclasses.replace(lit, left=self.expect(left, ("symbol",), f"first argument of {op.lstrip('!')}"),
                                       right=self.expect(right, ("symbol",), f"second argument of {op.lstrip('!')}"),
                                       type="symbol")
        lt, rt = self.infer(left), self.infer(right)
        kind = _unify(lt, rt)
        if kind is _CLASH:
            both = ("both sides must be numbers or both symbols" if {lt, rt} <= {"number", "symbol", INT}
                    else "both sides must have one type (convert with to_number, to_unsigned, to_float, to_string)")
            self.problems.add(f"comparison '{op}' between {describe(left, _shown(lt))} and "
                              f"{describe(right, _shown(rt))}; {both}", lit.pos)
            return lit
        kind = "number" if kind in (None, INT) else kind
        return dataclasses.replace(lit, left=self.term(left, kind), right=self.term(right, kind), type=kind)

    def expect(self, term: ast.Term, kinds: tuple[str, ...], what: str) -> ast.Term:
        """The term annotated, reporting it if its type is none of `kinds`."""
        if isinstance(term, ast.Wildcard):
            self.problems.add(f"wildcard '_' as the {what}; expected a{_n(kinds[0])} {kinds[0]}", term.pos)
            return term
        found = self.infer(term)
        if found == INT:
            found = kinds[0] if kinds[0] in NUMERIC else "number"
        if found is not None and found not in kinds:
            words = [f"a{_n(k)} {k}" for k in kinds]
            expected = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
            if isinstance(term, ast.Var):
                where = self.types[term.name][2]
                self.problems.add(f"the {what} is {term.name}, a{_n(found)} {found} (from {where}); expected {expected}",
                                  term.pos)
            else:
                self.problems.add(f"the {what} is {describe(term, found)}; expected {expected}", term.pos)
            return term
        return self.term(term, found or kinds[0])

    def term(self, term: ast.Term, want: str) -> ast.Term:
        """Annotate a term whose place wants type `want` (its own type where it has one)."""
        match term:
            case ast.Var(name):
                known = self.types.get(name)
                return dataclasses.replace(term, type=known[0] if known else want)
            case ast.Wildcard():
                return dataclasses.replace(term, type=want)
            case ast.Num(value):
                kind = want if want in NUMERIC else "number"
                self._in_range(term, value, kind)
                return dataclasses.replace(term, type=kind)
            case ast.Unsigned(value):
                self._in_range(term, value, "unsigned")
                return dataclasses.replace(term, type="unsigned")
            case ast.Float():
                return dataclasses.replace(term, type="float")
            case ast.Str():
                return dataclasses.replace(term, type="symbol")
            case ast.BinOp(op, left, right):
                return self._binop(term, op, left, right, want)
            case ast.Negative(operand):
                kind = self._numeric(term, want)
                operand = self.expect(operand, ("number", "float") if kind != "float" else ("float",), "operand of '-'")
                return dataclasses.replace(term, operand=operand, type=kind)
            case ast.Functor():
                return self._functor(term, want)
            case ast.Cast(operand, to):
                to_kind = self.typenames.get(to)
                if to_kind is None:
                    self.problems.add(f"as(..., {to}): type {to} is not declared", term.pos)
                    return term
                found = self.infer(operand)
                if found not in (None, INT, to_kind):
                    self.problems.add(f"as(..., {to}) turns a{_n(found)} {found} into a{_n(to_kind)} {to_kind}; tprules "
                                      "supports as() within one primitive type only (use to_number, to_float, ...)",
                                      term.pos)
                    return term
                return dataclasses.replace(term, term=self.term(operand, to_kind), type=to_kind)
            case ast.Aggregate():
                return self._aggregate(term)
        return term

    def _numeric(self, term: ast.Term, want: str) -> str:
        found = self.infer(term)
        kind = want if found in (None, INT) else found
        return kind if kind in NUMERIC else "number"

    def _binop(self, term: ast.BinOp, op: str, left, right, want: str) -> ast.Term:
        if op == "+" and (self.infer(term) == "symbol" or want == "symbol" and self.infer(term) is None):
            left = self.expect(left, ("symbol",), "operand of '+'")  # `+` on symbols concatenates
            right = self.expect(right, ("symbol",), "operand of '+'")
            return dataclasses.replace(term, left=left, right=right, type="symbol")
        kind = self._numeric(term, want)
        kinds: tuple[str, ...]
        if op in LOGIC or op in BITWISE:
            kinds = ("number", "unsigned") if kind != "unsigned" else ("unsigned",)
            kind = kinds[0] if kind == "float" else kind
        elif op == "%" and kind == "float":
            kinds = ("number", "unsigned")
            kind = "number"
        else:
            kinds = (kind,) + tuple(k for k in NUMERIC if k != kind)
        left = self.expect(left, kinds, f"operand of '{op}'")
        right = self.expect(right, kinds, f"operand of '{op}'")
        lt, rt = getattr(left, "type", ""), getattr(right, "type", "")
        if lt and rt and lt != rt and lt in NUMERIC and rt in NUMERIC:
            self.problems.add(f"'{op}' between a{_n(lt)} {lt} and a{_n(rt)} {rt}; convert one side "
                              "(to_number, to_unsigned, to_float)", term.pos)
        return dataclasses.replace(term, left=left, right=right, type=lt if lt in NUMERIC else kind)

    def _functor(self, term: ast.Functor, want: str) -> ast.Term:
        name, args = term.name, term.args
        if name.startswith("."):  # a record's functors (records.py): field types in the name
            return self._record_functor(term)
        low, high = _ARITY[name]
        if not low <= len(args) <= high:
            count = f"{low}" if low == high else f"{low} to {high}" if high < 99 else f"at least {low}"
            self.problems.add(f"{name} takes {count} argument{'s' if high != 1 else ''}, not {len(args)}", term.pos)
            return term
        if name in _SIGNATURE:
            params, result = _SIGNATURE[name]
            typed = tuple(self.expect(a, params[min(i, len(params) - 1)], f"argument {i + 1} of {name}")
                          for i, a in enumerate(args))
            return dataclasses.replace(term, args=typed, type=result)
        # min, max, range, bnot, lnot: every argument of the result's type
        found = self.infer(term)
        kind = want if found in (None, INT) else found
        allowed = {"min": PRIMITIVES, "max": PRIMITIVES, "range": NUMERIC}.get(name, ("number", "unsigned"))
        if kind not in allowed:
            kind = allowed[0]
        typed = tuple(self.expect(a, (kind,), f"argument {i + 1} of {name}") for i, a in enumerate(args))
        return dataclasses.replace(term, args=typed, type=kind)

    def _record_functor(self, term: ast.Functor) -> ast.Term:
        """`.rec:T1|T2` and `.adt:Name:T1|T2` build a value from fields of those types (any
        where unknown); `.field:i:T` reads field i as a T; `.tag` names the shape."""
        name, args = term.name, term.args
        if name == ".tag":
            return dataclasses.replace(term, args=(self.expect(args[0], ("symbol",), "a record"),), type="symbol")
        if name.startswith(".field:"):
            kind = self.typenames.get(name.split(":")[2]) or "number"
            return dataclasses.replace(term, args=(self.expect(args[0], ("symbol",), "a record"),), type=kind)
        wanted = name.split(":")[-1].split("|") if ":" in name else []
        typed = []
        for i, arg in enumerate(args):
            field_kind = self.typenames.get(wanted[i]) if i < len(wanted) else None
            typed.append(self.expect(arg, (field_kind,) if field_kind else _ANY, f"field {i + 1} of a record"))
        return dataclasses.replace(term, args=tuple(typed), type="symbol")

    def _aggregate(self, term: ast.Aggregate) -> ast.Term:
        body = self._literals(term.body)
        if term.func == "count":
            return dataclasses.replace(term, body=body, type="number")
        # As Soufflé 2.5: a mean is of floats (convert a number with to_float)
        assert term.target is not None  # only a count has no target
        target = self.expect(term.target, ("float",) if term.func == "mean" else NUMERIC, f"target of {term.func}")
        kind = "float" if term.func == "mean" else (getattr(target, "type", "") or "number")
        return dataclasses.replace(term, target=target, body=body, type=kind)

    def _in_range(self, term: ast.Term, value: int, kind: str) -> None:
        bounds = _RANGES.get(kind)
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            self.problems.add(f"the literal {value} is out of range for a{_n(kind)} {kind} "
                              f"({bounds[0]} to {bounds[1]})", term.pos)


_CLASH = "clash"


def _unify(*kinds):
    """The one type of several terms: the known one, INT if only literals, None if unknown,
    _CLASH if two known types differ."""
    known = {k for k in kinds if k not in (None, INT)}
    if _CLASH in known or len(known) > 1 or known == {"symbol"} and INT in kinds:
        return _CLASH
    if known:
        return known.pop()
    return INT if INT in kinds else None


def _shown(kind) -> str:
    return "number" if kind in (None, INT, _CLASH) else kind


def _n(kind: str) -> str:
    return "n" if kind[:1] in "aeiou" else ""


_ANY = PRIMITIVES
# Functors with fixed types: each argument's allowed types (the last repeats), and the result.
_SIGNATURE = {
    "cat": ((("symbol",),), "symbol"),
    "strlen": ((("symbol",),), "number"),
    "substr": ((("symbol",), ("number",), ("number",)), "symbol"),
    "ord": ((_ANY,), "number"),
    "to_number": ((("symbol", "float", "unsigned", "number"),), "number"),
    "to_unsigned": ((("symbol", "number", "float", "unsigned"),), "unsigned"),
    "to_float": ((("symbol", "number", "unsigned", "float"),), "float"),
    "to_string": ((_ANY,), "symbol"),
    "autoinc": ((), "number"),  # a new number each time it is computed
    **{name: ((("float",),), "float") for name in ast.MATH},  # Soufflé's math functors, on floats
}
_RESULT = {name: result for name, (_, result) in _SIGNATURE.items()}
_ARITY = {"cat": (1, 99), "strlen": (1, 1), "substr": (3, 3), "ord": (1, 1), "to_number": (1, 1),
          "to_unsigned": (1, 1), "to_float": (1, 1), "to_string": (1, 1), "min": (2, 99), "max": (2, 99),
          "range": (2, 3), "bnot": (1, 1), "lnot": (1, 1), "autoinc": (0, 0), **{name: (1, 1) for name in ast.MATH}}


def _all_literals(body):
    for lit in body:
        yield lit
        for agg in ast.literal_aggregates(lit):
            yield from _all_literals(agg.body)
