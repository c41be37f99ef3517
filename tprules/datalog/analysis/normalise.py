"""The rules the engines evaluate: the checked rules in a normal form, plus what `eqrel` means.

- An expression in a body atom (`b(x, y - 1)`, `b(x, max y : ...)`) becomes a fresh
  variable and an equality (`b(x, .e1), .e1 = y - 1`): every engine orders literals so
  that the expression is computed once its variables are bound, then looks up or filters,
  as Soufflé does, whatever order the literals were written in.
- `range(a, b[, step])` anywhere becomes a fresh variable bound by a generator literal
  `.r1 = range(a, b)`, which binds it to each value in turn.
- An `eqrel` relation gets the rules that make it an equivalence relation.

Fresh variables start with '.', which no rule can spell. A rule that needs none of this is
returned as it is (the TP rules all are).
"""

from __future__ import annotations

import dataclasses
import itertools

from ..lang import ast


class _Fresh:
    def __init__(self):
        self.count = itertools.count(1)

    def var(self, stem: str, term: ast.Term) -> ast.Var:
        return ast.Var(f".{stem}{next(self.count)}", term.pos, getattr(term, "type", ""))


def _is_plain(term: ast.Term) -> bool:
    return isinstance(term, (ast.Var, ast.Wildcard) + ast.CONSTANTS)


def _needs_lifting(term: ast.Term) -> bool:
    """An atom argument computed from variables, or holding an aggregate or a range."""
    if _is_plain(term):
        return False
    return bool(ast.term_vars(term) or ast.aggregates_in(term) or ast.functors_in(term, "range"))


def _lift_ranges(term: ast.Term, fresh: _Fresh, extra: list) -> ast.Term:
    """The term with every range(...) replaced by a fresh variable bound by a generator."""
    if isinstance(term, ast.Functor) and term.name == "range":
        args = tuple(_lift_ranges(a, fresh, extra) for a in term.args)
        var = fresh.var("r", term)
        extra.append(ast.Comparison("=", var, dataclasses.replace(term, args=args), term.pos, term.type))
        return var
    if isinstance(term, ast.Aggregate):
        return dataclasses.replace(term, body=_body(term.body, fresh))
    parts = ast.subterms(term)
    if not parts:
        return term
    new = tuple(_lift_ranges(p, fresh, extra) for p in parts)
    if all(a is b for a, b in zip(new, parts)):
        return term
    match term:
        case ast.BinOp():
            return dataclasses.replace(term, left=new[0], right=new[1])
        case ast.Negative():
            return dataclasses.replace(term, operand=new[0])
        case ast.Cast():
            return dataclasses.replace(term, term=new[0])
        case ast.Functor():
            return dataclasses.replace(term, args=new)
    return term


def _atom(atom: ast.Atom, fresh: _Fresh, extra: list, lift_all: bool) -> ast.Atom:
    args: list[ast.Term] = []
    for arg in atom.args:
        if lift_all and _needs_lifting(arg) or not lift_all and (ast.aggregates_in(arg) or ast.functors_in(arg, "range")):
            var = fresh.var("e", arg)
            extra.append(ast.Comparison("=", var, _lift_ranges(arg, fresh, extra), arg.pos, getattr(arg, "type", "")))
            args.append(var)
        else:
            args.append(arg)
    return atom if all(a is b for a, b in zip(args, atom.args)) else dataclasses.replace(atom, args=tuple(args))


def _body(body: tuple[ast.Literal, ...], fresh: _Fresh) -> tuple[ast.Literal, ...]:
    out: list[ast.Literal] = []
    extra: list[ast.Literal] = []
    for lit in body:
        match lit:
            case ast.Atom():
                out.append(_atom(lit, fresh, extra, lift_all=True))
            case ast.Negation(atom):  # all its variables are bound first: expressions are computed in place
                new = _atom(atom, fresh, extra, lift_all=False)
                out.append(lit if new is atom else dataclasses.replace(lit, atom=new))
            case ast.Comparison(_, ast.Var() as var, ast.Functor("range") as gen) if var.name.startswith("."):
                args = tuple(_lift_ranges(a, fresh, extra) for a in gen.args)
                out.append(dataclasses.replace(lit, right=dataclasses.replace(gen, args=args)))
            case ast.Comparison("=", left, right, _, "float"):
                # Float equality is a test (0.0 = -0.0), never a binding looked up by bits:
                # a variable an atom binds is compared, not assigned.
                atoms = {t.name for a in body if isinstance(a, ast.Atom) for t in a.args if isinstance(t, ast.Var)}
                sides = [ast.Cast(t, "float", t.pos, "float") if isinstance(t, ast.Var) and t.name in atoms else
                         _lift_ranges(t, fresh, extra) for t in (left, right)]
                same = sides[0] is left and sides[1] is right
                out.append(lit if same else dataclasses.replace(lit, left=sides[0], right=sides[1]))
            case ast.Comparison(_, left, right):
                new_left, new_right = _lift_ranges(left, fresh, extra), _lift_ranges(right, fresh, extra)
                out.append(lit if new_left is left and new_right is right
                           else dataclasses.replace(lit, left=new_left, right=new_right))
    if not extra and all(a is b for a, b in zip(out, body)):
        return body
    return tuple(out) + tuple(extra)


def fold_constants(term: ast.Term) -> ast.Term:
    """The term with every part that has no variable computed (`1 + 1 + ... + 1` → one number)."""
    return _fold(term)[0]


def _fold(term: ast.Term) -> tuple[ast.Term, bool]:
    """(the folded term, whether it is ground: no variable, aggregate or range)."""
    if isinstance(term, ast.CONSTANTS):
        return term, True
    if isinstance(term, (ast.Var, ast.Wildcard, ast.Aggregate)):
        return term, False
    parts = ast.subterms(term)
    folded = [_fold(p) for p in parts]
    ground = all(g for _, g in folded) and not (isinstance(term, ast.Functor) and term.name in ("range", "autoinc"))
    new = tuple(t for t, _ in folded)
    if any(a is not b for a, b in zip(new, parts)):
        match term:
            case ast.BinOp():
                term = dataclasses.replace(term, left=new[0], right=new[1])
            case ast.Negative():
                term = dataclasses.replace(term, operand=new[0])
            case ast.Cast():
                term = dataclasses.replace(term, term=new[0])
            case ast.Functor():
                term = dataclasses.replace(term, args=new)
    if not ground:
        return term, False
    from ..lang.constant import constant_value, kind_of

    try:
        value = constant_value(term)
    except (ArithmeticError, TypeError):  # 1 / 0: left for the engines to report where it is
        return term, False
    kind = kind_of(term)
    node = {"symbol": ast.Str, "unsigned": ast.Unsigned, "float": ast.Float}.get(kind, ast.Num)
    return node(value, term.pos, kind), True


def _fold_atom(atom: ast.Atom) -> ast.Atom:
    new = tuple(fold_constants(a) for a in atom.args)
    return atom if all(a is b for a, b in zip(new, atom.args)) else dataclasses.replace(atom, args=new)


def _fold_literal(lit: ast.Literal) -> ast.Literal:
    match lit:
        case ast.Atom():
            return _fold_atom(lit)
        case ast.Negation(atom):
            folded = _fold_atom(atom)
            return lit if folded is atom else dataclasses.replace(lit, atom=folded)
        case ast.Comparison(_, left, right):
            a, b = fold_constants(left), fold_constants(right)
            return lit if a is left and b is right else dataclasses.replace(lit, left=a, right=b)
    return lit


def normalise_rule(rule: ast.Rule) -> ast.Rule:
    """The rule in the engines' normal form (the rule itself when nothing changes)."""
    head = _fold_atom(rule.head)
    body = tuple(_fold_literal(lit) for lit in rule.body)
    if head is not rule.head or any(a is not b for a, b in zip(body, rule.body)):
        rule = dataclasses.replace(rule, head=head, body=body)
    fresh = _Fresh()
    extra: list[ast.Literal] = []
    head_args = tuple(_lift_ranges(a, fresh, extra) for a in rule.head.args)
    body = _body(rule.body, fresh)
    if not extra and body is rule.body and all(a is b for a, b in zip(head_args, rule.head.args)):
        return rule
    head = dataclasses.replace(rule.head, args=head_args)
    return dataclasses.replace(rule, head=head, body=body + tuple(extra))


def eqrel_rules(decl: ast.Decl) -> tuple[ast.Rule, ...]:
    """Reflexive (on the values it holds), symmetric and transitive, as Soufflé's eqrel."""
    kind = decl.types[0]
    x, y, z = (ast.Var(f".{n}", decl.pos, kind) for n in "xyz")
    wild = ast.Wildcard(decl.pos, kind)

    def atom(a, b):
        return ast.Atom(decl.name, (a, b), decl.pos)

    return (ast.Rule(atom(x, x), (atom(x, wild),), decl.pos),
            ast.Rule(atom(y, x), (atom(x, y),), decl.pos),
            ast.Rule(atom(x, z), (atom(x, y), atom(y, z)), decl.pos))


def evaluation_rules(program: ast.RuleSource, decls: dict[str, ast.Decl]) -> tuple[ast.Rule, ...]:
    """Every rule the engines evaluate, in the normal form above."""
    rules = [normalise_rule(rule) for rule in program.rules]
    for decl in decls.values():
        if "eqrel" in decl.qualifiers:
            rules.extend(eqrel_rules(decl))
    return tuple(rules)
