"""Records (`[a, b]`, `nil`) and algebraic data types (`$Int(1)`), desugared before the checks.

A record or ADT value is held as one interned symbol (datalog/lang/record_values.py), so the
engines and their columnar joins need nothing new. Each use becomes functors over it:

- built where its fields are known (a head, `r = [x, y]` with x, y bound):
  `.rec:T1|T2(x, y)`, `.adt:Int:number(1)`;
- taken apart where the value is known (`r = [x, y]` with r bound), as Soufflé unifies:
  a shape test `.tag(r) = "[2"`, then `x = .field:0:T1(r)` for each field (a test where
  the field is already bound, a constant or an expression);
- a record in a body atom (`e([x, y])`) is read from a relation derived beside `e` that
  holds the record's fields as columns too (`e.unpack0_2(r, x, y)`), so the engines join
  on a field as on any column (N-queens over lists of records: 78 s down to 1.7 s).

Which of the two an equality is follows from what the body's atoms bind, as Soufflé
decides; a record given the wrong number of fields, or an unknown ADT branch, is an error
at its line.

>>> from tprules.datalog.lang.parser import parse_text
>>> from tprules.datalog.lang.printer import print_rule
>>> p = desugar_records(parse_text('.type P = [a: number, b: number]\\n.decl e(p: P)\\n.decl s(x: number)\\n'
...                                's(x + y) :- e([x, y]).'), [])
>>> print(print_rule(p.rules[0]))
s(x + y) :- e.unpack0_2(.r1, x, y).
>>> print(print_rule(p.rules[1]))
e.unpack0_2(.c0, .g0, .g1) :- e(.c0), .tag(.c0) = "[2", .g0 = .field:0:number(.c0), .g1 = .field:1:number(.c0).
"""

from __future__ import annotations

import dataclasses
import itertools

from ...errors import RuleError
from ...pos import Pos
from ..lang import ast
from ..lang.printer import print_rule
from ..lang.record_values import NIL, RECORD

_SHAPES = (ast.Record, ast.Nil, ast.Branch)


def _has_records(node) -> bool:
    match node:
        case ast.Record() | ast.Nil() | ast.Branch():
            return True
        case ast.Rule(head, body):
            return _has_records(head) or any(_has_records(lit) for lit in body)
        case ast.Atom(_, args):
            return any(_has_records(a) for a in args)
        case ast.Negation(atom):
            return _has_records(atom)
        case ast.Comparison(_, left, right):
            return _has_records(left) or _has_records(right)
        case ast.Aggregate(_, target, body):
            return (target is not None and _has_records(target)) or any(_has_records(lit) for lit in body)
    return any(_has_records(t) for t in ast.subterms(node))


class _Types:
    """What the program declares about records and ADTs."""

    def __init__(self, program: ast.RuleSource, problems: list, grow: bool = True):
        self.decls = {d.name: d for d in program.decls}
        self.grow = grow  # may the desugaring add relations (a query's may not: the program is evaluated)
        self.types = {t.name: t for t in program.types}
        self.branches: dict[str, tuple[str, tuple[ast.Attribute, ...]]] = {}
        self.aux: dict[str, tuple[ast.Decl, ast.Rule]] = {}  # relations that hold a record's fields
        for t in program.types:
            for name, fields in t.branches:
                self.branches[name] = (t.name, fields)

    def shape(self, type_name: str) -> ast.TypeDecl | None:
        """The record or ADT declaration a type name stands for (through aliases)."""
        seen = set()
        while type_name in self.types and type_name not in seen:
            seen.add(type_name)
            decl = self.types[type_name]
            if decl.kind in ("record", "adt"):
                return decl
            if len(decl.bases) != 1:
                return None
            type_name = decl.bases[0]
        return None

    def column(self, rel: str, i: int) -> str:
        decl = self.decls.get(rel)
        return decl.attrs[i].type if decl is not None and i < decl.arity else ""


class _Rule:
    def __init__(self, types: _Types, problems: list, fresh):
        self.types, self.problems, self.fresh = types, problems, fresh
        self.var_types: dict[str, str] = {}
        self.lifted: dict[str, tuple[int, int]] = {}  # a record an atom gives: (its literal, its column)

    def problem(self, message: str, pos: Pos) -> None:
        if not any(p.pos == pos for p in self.problems):  # one problem per place
            self.problems.append(RuleError(message, pos))

    def var(self, stem: str, pos: Pos) -> ast.Var:
        return ast.Var(f".{stem}{next(self.fresh)}", pos)

    # -- fields of a shape --------------------------------------------------------------------

    def fields(self, term, type_name: str) -> list[str] | None:
        """The field types of a record or branch term (as declared), reporting a mismatch."""
        if isinstance(term, ast.Branch):
            found = self.types.branches.get(term.name)
            if found is None:
                known = ", ".join(sorted(self.types.branches)) or "none is declared"
                self.problem(f"unknown ADT branch ${term.name} (branches: {known})", term.pos)
                return None
            adt, attrs = found
            if len(attrs) != len(term.args):
                self.problem(f"branch ${term.name} of {adt} has {len(attrs)} field{'s' if len(attrs) != 1 else ''}"
                             f" ({', '.join(f'{a.name}: {a.type}' for a in attrs)}) but is given {len(term.args)}",
                             term.pos)
                return None
            return [a.type for a in attrs]
        decl = self.types.shape(type_name)
        if decl is None or decl.kind != "record":
            return [""] * len(term.args)
        if len(decl.fields) != len(term.args):
            self.problem(f"record arity mismatch: {decl.name} has {len(decl.fields)} field"
                         f"{'s' if len(decl.fields) != 1 else ''} ({', '.join(f'{a.name}: {a.type}' for a in decl.fields)})"
                         f" but this record has {len(term.args)}", term.pos)
            return None
        return [a.type for a in decl.fields]

    def check_column(self, rel: str, i: int, term) -> None:
        """A record or ADT value given to a column of a primitive type."""
        decl = self.types.decls.get(rel)
        if decl is None or i >= decl.arity:
            return
        type_name = decl.attrs[i].type
        if type_name in ast.PRIMITIVES or (type_name in self.types.types and self.types.shape(type_name) is None
                                           and self.types.types[type_name].kind in ("subtype", "union")):
            what = "an ADT value" if isinstance(term, ast.Branch) else "a record"
            self.problem(f"{rel}.{decl.attrs[i].name} is a {type_name} but is given {what}", term.pos)

    # -- building -----------------------------------------------------------------------------

    def build(self, term: ast.Term, type_name: str) -> ast.Term:
        match term:
            case _ if isinstance(term, _SHAPES) and type_name in ast.PRIMITIVES:
                what = "an ADT value" if isinstance(term, ast.Branch) else "a record"
                self.problem(f"a {type_name} is expected here but is given {what}", term.pos)
                return term
            case ast.Nil():
                return ast.Str(NIL, term.pos)
            case ast.Record(args) | ast.Branch(_, args):
                kinds = self.fields(term, type_name)
                if kinds is None:
                    return ast.Str(NIL, term.pos)
                built = tuple(self.build(a, k) for a, k in zip(args, kinds))
                signature = "|".join(kinds)
                if isinstance(term, ast.Branch):
                    if not args:
                        return ast.Str(f"{RECORD}${term.name}", term.pos)
                    return ast.Functor(f".adt:{term.name}:{signature}", built, term.pos)
                return ast.Functor(f".rec:{signature}", built, term.pos)
        return term

    # -- taking apart --------------------------------------------------------------------------

    def take_apart(self, value: ast.Var, pattern, type_name: str, out: list, bound: set[str]) -> None:
        """Literals that hold when `value` (bound) has the pattern's shape and fields."""
        if isinstance(pattern, ast.Nil):
            out.append(ast.Comparison("=", value, ast.Str(NIL, pattern.pos), pattern.pos))
            return
        kinds = self.fields(pattern, type_name)
        if kinds is None:
            return
        shape = f"${pattern.name}" if isinstance(pattern, ast.Branch) else f"[{len(pattern.args)}"
        out.append(ast.Comparison("=", ast.Functor(".tag", (value,), pattern.pos), ast.Str(shape, pattern.pos),
                                  pattern.pos))
        for i, (arg, kind) in enumerate(zip(pattern.args, kinds)):
            if isinstance(arg, ast.Wildcard):
                continue
            got = ast.Functor(f".field:{i}:{kind}", (value,), arg.pos)
            if isinstance(arg, _SHAPES):
                inner = self.var("f", arg.pos)
                out.append(ast.Comparison("=", inner, got, arg.pos))
                bound.add(inner.name)
                self.take_apart(inner, arg, kind, out, bound)
                continue
            out.append(ast.Comparison("=", arg, got, arg.pos))
            if isinstance(arg, ast.Var):
                bound.add(arg.name)

    # -- a body ----------------------------------------------------------------------------------

    def body(self, body: tuple[ast.Literal, ...], outer: set[str]) -> tuple[ast.Literal, ...]:
        out: list[ast.Literal] = []
        equalities: list[tuple[ast.Term, ast.Term, str, Pos]] = []
        bound = set(outer)
        for lit in body:
            match lit:
                case ast.Atom(rel, args):
                    new_args = []
                    for i, arg in enumerate(args):
                        if isinstance(arg, _SHAPES):
                            self.check_column(rel, i, arg)
                            v = self.var("r", arg.pos)
                            equalities.append((v, arg, self.types.column(rel, i), arg.pos))
                            self.lifted[v.name] = (len(out), i)
                            arg = v
                        elif isinstance(arg, ast.Var):
                            self.var_types.setdefault(arg.name, self.types.column(rel, i))
                        new_args.append(arg)
                        if isinstance(arg, ast.Var):
                            bound.add(arg.name)
                    out.append(dataclasses.replace(lit, args=tuple(new_args)))
                case ast.Negation(atom):
                    args = tuple(self.build(a, self.types.column(atom.rel, i)) for i, a in enumerate(atom.args))
                    out.append(dataclasses.replace(lit, atom=dataclasses.replace(atom, args=args)))
                case ast.Comparison("=", left, right) if isinstance(left, _SHAPES) or isinstance(right, _SHAPES):
                    equalities.append((left, right, "", lit.pos))
                case ast.Comparison(_, left, right):
                    out.append(dataclasses.replace(lit, left=self.build(self.term(left, bound), ""),
                                                   right=self.build(self.term(right, bound), "")))
        out = [self.in_aggregates(lit, bound) for lit in out]
        self.settle(equalities, out, bound)
        return tuple(out)

    def term(self, term: ast.Term, bound: set[str]) -> ast.Term:
        if isinstance(term, ast.Aggregate):
            return dataclasses.replace(term, body=self.body(term.body, bound))
        return term

    def in_aggregates(self, lit: ast.Literal, bound: set[str]) -> ast.Literal:
        if not ast.literal_aggregates(lit):
            return lit
        for agg in ast.literal_aggregates(lit):
            new = dataclasses.replace(agg, body=self.body(agg.body, bound))
            match lit:
                case ast.Comparison(_, left, right):
                    lit = dataclasses.replace(lit, left=ast.replace_term(left, agg, new),
                                              right=ast.replace_term(right, agg, new))
                case ast.Atom(_, args):
                    lit = dataclasses.replace(lit, args=tuple(ast.replace_term(a, agg, new) for a in args))
        return lit

    def settle(self, equalities, out: list, bound: set[str]) -> None:
        """Each `a = b` with a record side: build what is known, take apart what is bound.

        A record in an atom (`e([x, y])`, lifted to `e(.r1), .r1 = [x, y]`) is built, so
        that the atom is looked up by it, when other literals bind its fields; it is taken
        apart, binding them, only when nothing else can (as few times as that needs)."""
        lifted = {left.name for left, *_ in equalities if isinstance(left, ast.Var) and left.name.startswith(".r")}
        bound -= lifted
        pending = list(equalities)
        for item in list(pending):  # a record an atom gives: read from its fields' relation where it has one
            if item[0].name in lifted if isinstance(item[0], ast.Var) else False:
                if self.unpack(item, out, bound, pending):
                    pending.remove(item)
                    bound.add(item[0].name)
        bound |= _assigned(out, bound)
        while pending:
            progress = False
            for item in list(pending):
                left, right, type_name, pos = item
                done = self.settle_one(left, right, type_name, pos, out, bound, pending)
                if done:
                    pending.remove(item)
                    progress = True
                    bound |= _assigned(out, bound)
            if progress:
                continue
            # nothing more can be built: take apart the first record an atom gives
            item = next((e for e in pending if isinstance(e[0], ast.Var) and e[0].name in lifted), None)
            if item is not None:
                bound.add(item[0].name)
                if self.unpack(item, out, bound, pending):
                    pending.remove(item)
                continue
            for left, right, type_name, pos in pending:  # the safety check names what is unbound
                out.append(ast.Comparison("=", self.build(left, type_name), self.build(right, type_name), pos))
            return

    def unpack(self, item, out: list, bound: set[str], pending: list) -> bool:
        """Take apart the record an atom gives by reading a relation that holds its fields as
        columns (`e.unpack0_2(r, f0, f1) :- e(r), ...`), so the engines join on them, as on
        any column, instead of testing each field one tuple at a time."""
        var, pattern, type_name, pos = item
        if isinstance(pattern, ast.Nil) or not pattern.args:
            return False
        index, column = self.lifted[var.name]
        atom = out[index]
        if atom.rel not in self.types.decls:  # one record of an atom is read this way; others by functors
            return False
        shape = pattern.name if isinstance(pattern, ast.Branch) else str(len(pattern.args))
        name = f"{atom.rel}.unpack{column}_{shape}"
        if not self.types.grow and name not in self.types.decls:  # a query reads what the rules derive
            return False
        kinds = self.fields(pattern, type_name)
        if kinds is None or "" in kinds:
            return False
        if name not in self.types.aux and name not in self.types.decls:
            decl = self.types.decls[atom.rel]
            attrs = decl.attrs + tuple(ast.Attribute(f".f{j}", k, pos) for j, k in enumerate(kinds))
            cols = [ast.Var(f".c{j}", pos) for j in range(decl.arity)]
            fields = [ast.Var(f".g{j}", pos) for j in range(len(kinds))]
            tag = f"${pattern.name}" if isinstance(pattern, ast.Branch) else f"[{len(pattern.args)}"
            body: tuple[ast.Literal, ...] = (ast.Atom(atom.rel, tuple(cols), pos),
                    ast.Comparison("=", ast.Functor(".tag", (cols[column],), pos), ast.Str(tag, pos), pos),
                    *(ast.Comparison("=", g, ast.Functor(f".field:{j}:{k}", (cols[column],), pos), pos)
                      for j, (g, k) in enumerate(zip(fields, kinds))))
            self.types.aux[name] = (ast.Decl(name, attrs, decl.pos),
                                    ast.Rule(ast.Atom(name, tuple(cols + fields), pos), body, pos))
        args = []
        for arg, kind in zip(pattern.args, kinds):
            if isinstance(arg, (ast.Var, ast.Wildcard) + ast.CONSTANTS):
                args.append(arg)
                if isinstance(arg, ast.Var):
                    bound.add(arg.name)
                continue
            inner = self.var("f", arg.pos)
            args.append(inner)
            bound.add(inner.name)
            if isinstance(arg, _SHAPES):
                pending.append((inner, arg, kind, arg.pos))
            else:
                out.append(ast.Comparison("=", arg, inner, arg.pos))
        out[index] = ast.Atom(name, atom.args + tuple(args), atom.pos)
        return True

    def settle_one(self, left, right, type_name, pos, out, bound, pending) -> bool:
        if isinstance(left, _SHAPES) and isinstance(right, _SHAPES):
            if isinstance(left, ast.Nil) or isinstance(right, ast.Nil) or type(left) is not type(right) or \
                    len(left.args) != len(right.args) or getattr(left, "name", "") != getattr(right, "name", ""):
                same = isinstance(left, ast.Nil) and isinstance(right, ast.Nil)
                out.append(ast.Comparison("=" if same else "!=", ast.Num(0, pos), ast.Num(0, pos), pos))
                return True
            pending.extend((a, b, "", pos) for a, b in zip(left.args, right.args)
                           if not isinstance(a, ast.Wildcard) and not isinstance(b, ast.Wildcard))
            return True
        if isinstance(left, _SHAPES):
            left, right = right, left
        value, pattern = left, right  # value: any term; pattern: a record, nil or branch
        type_name = type_name or (self.var_types.get(value.name, "") if isinstance(value, ast.Var) else "")
        if _vars(pattern) <= bound:
            out.append(ast.Comparison("=", value, self.build(pattern, type_name), pos))
            if isinstance(value, ast.Var):
                bound.add(value.name)
            return True
        if isinstance(value, ast.Var) and value.name in bound:
            self.take_apart(value, pattern, type_name, out, bound)
            return True
        return False

    def rule(self, rule: ast.Rule) -> ast.Rule:
        body = self.body(rule.body, set())
        head_args = tuple(self.build(a, self.types.column(rule.head.rel, i)) for i, a in enumerate(rule.head.args))
        return dataclasses.replace(rule, head=dataclasses.replace(rule.head, args=head_args), body=body,
                                   written=rule.written or print_rule(rule))


def _vars(term) -> set[str]:
    if isinstance(term, ast.Var):
        return {term.name}
    found = set()
    for part in ast.subterms(term):
        found |= _vars(part)
    return found


def _assigned(out: list, bound: set[str]) -> set[str]:
    """Variables bound by `V = expr` (expr bound), repeatedly."""
    bound = set(bound)
    changed = True
    while changed:
        changed = False
        for lit in out:
            if isinstance(lit, ast.Comparison) and lit.op == "=":
                for var, other in ((lit.left, lit.right), (lit.right, lit.left)):
                    if isinstance(var, ast.Var) and var.name not in bound and _vars(other) <= bound:
                        bound.add(var.name)
                        changed = True
    return bound


def desugar_records(program: ast.RuleSource, problems: list) -> ast.RuleSource:
    """The program with every record, nil and ADT value written as functors over symbols."""
    if not any(isinstance(i, ast.Rule) and _has_records(i) for i in program.items):
        return program
    types = _Types(program, problems)
    fresh = itertools.count(1)
    items = [(_Rule(types, problems, fresh).rule(i) if isinstance(i, ast.Rule) and _has_records(i) else i)
             for i in program.items]
    for decl, rule in types.aux.values():
        items += [decl, rule]
    return ast.RuleSource(tuple(items))


def desugar_query(body: tuple[ast.Literal, ...], program: ast.RuleSource) -> tuple[ast.Literal, ...]:
    """A query's body with its records, nil and ADT values written as a rule body's are, over
    the relations of the (desugared, evaluated) program; raises the first problem.

    >>> from tprules.datalog.analysis.checked import check_rules
    >>> from tprules.datalog.lang.parser import parse_body, parse_text
    >>> p = check_rules(parse_text('.type P = [a: number, b: number]\\n.decl e(p: P)\\ne([1, 2]).')).program
    >>> from tprules.datalog.lang.printer import print_body
    >>> print(print_body(desugar_query(parse_body('e([x, 2])'), p)))
    e(.r1), .tag(.r1) = "[2", x = .field:0:number(.r1), 2 = .field:1:number(.r1)
    """
    if not any(_has_records(lit) for lit in body):
        return body
    problems: list[RuleError] = []
    out = _Rule(_Types(program, problems, grow=False), problems, itertools.count(1)).body(body, set())
    if problems:
        raise problems[0]
    return out


def record_constant(term: ast.Term, type_name: str, program: ast.RuleSource) -> str:
    """The symbol a record, nil or ADT value without variables is held as, given as a value
    of `type_name` (an atom to explain names a tuple by it); raises the first problem.

    >>> from tprules.datalog.lang.record_values import make_record
    >>> from tprules.datalog.lang.parser import parse_atom, parse_text
    >>> p = parse_text('.type P = [a: number, b: symbol]')
    >>> record_constant(parse_atom('e([1, "x"])').args[0], "P", p) == make_record(("number", "symbol"), (1, "x"))
    True
    """
    from ..lang.constant import constant_value
    from ..lang.record_values import functor
    from .types import resolve_types

    problems: list[RuleError] = []
    built = _Rule(_Types(program, problems, grow=False), problems, itertools.count(1)).build(term, type_name)
    if problems:
        raise problems[0]
    typenames = resolve_types(ast.RuleSource(program.types), problems)

    def value(t: ast.Term):
        if isinstance(t, ast.Functor) and t.name.startswith((".rec", ".adt:")):
            signature = t.name.split(":")[-1].split("|")
            kinds = tuple(typenames.get(k, "symbol") for k in signature)
            return functor(t.name, "symbol", tuple(value(a) for a in t.args), kinds)
        return constant_value(t)

    return value(built)
