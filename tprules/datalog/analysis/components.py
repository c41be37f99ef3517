"""Components (`.comp`, `.init`, inheritance, `.override`, type parameters), expanded
into plain declarations and rules before any check runs, as Soufflé's instantiation does.

`.init g = Graph<N>` copies what `Graph` holds, with every relation and type it declares
renamed `g.<name>` and every type parameter replaced by its argument:

- a base's content comes first (its own instances, then its declarations and rules),
  then the component's instances, then its own declarations and rules;
- `.override r` drops the rules for `r` that the bases themselves write (not those of
  instances inside them);
- a rule whose head the component does not declare is an *orphan*: it goes to the
  nearest enclosing scope that declares it (`A(x) :- X(x).` in a component instantiated
  inside `a` defines `a.A`), or to the program.

Every rule keeps its own file:line and says which instance it came from (`Rule.origin`),
so a proof names the component and the instance.

>>> from tprules.datalog.lang.parser import parse_text
>>> p = expand_components(parse_text('.comp C { .decl r(x: number) r(1). }\\n.init a = C'))
>>> [d.name for d in p.decls], [str(r.head.rel) for r in p.rules], p.rules[0].origin
(['a.r'], ['a.r'], 'instance a of component C (.init at <text>:2:7)')
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ...errors import RuleError, raise_all
from ...pos import Pos
from ..lang import ast

MAX_DEPTH = 100  # Soufflé's instantiation limit


@dataclass
class _Content:
    types: list[ast.TypeDecl] = field(default_factory=list)
    decls: list[ast.Decl] = field(default_factory=list)
    directives: list[ast.Directive] = field(default_factory=list)
    rules: list[ast.Rule] = field(default_factory=list)

    def extend(self, other: "_Content") -> None:
        self.types += other.types
        self.decls += other.decls
        self.directives += other.directives
        self.rules += other.rules


class _Scope:
    """One component (or the program) and what it declares."""

    def __init__(self, comp: ast.Component | None, parent: "_Scope | None"):
        self.comp, self.parent = comp, parent
        items = comp.items if comp is not None else ()
        self.children = {c.type.name: _Scope(c, self) for c in items if isinstance(c, ast.Component)}

    @property
    def items(self):
        return self.comp.items if self.comp is not None else ()

    @property
    def component(self) -> ast.Component:
        """The component of any scope but the program's."""
        assert self.comp is not None
        return self.comp


class _Expander:
    def __init__(self, top: _Scope):
        self.top = top
        self.problems: list[RuleError] = []
        self.scope_of: dict[int, _Scope] = {}
        self.cycles: set[frozenset[str]] = set()
        self._index(top)

    def _index(self, scope: _Scope) -> None:
        for child in scope.children.values():
            self.scope_of[id(child.comp)] = child
            self._index(child)

    def problem(self, message: str, pos: Pos) -> None:
        self.problems.append(RuleError(message, pos))

    def lookup(self, scope: _Scope | None, name: str, binding: dict[str, str]) -> _Scope | None:
        """A component by name, as seen from a scope: its nested ones, then outward."""
        name = binding.get(name, name)
        while scope is not None:
            if name in scope.children:
                return scope.children[name]
            scope = scope.parent
        return None

    def bind(self, target: _Scope, given: ast.CompType, binding: dict[str, str]) -> dict[str, str] | None:
        formal = target.component.type.params
        if len(formal) != len(given.params):
            want = f"{len(formal)} type parameter{'s' if len(formal) != 1 else ''}"
            self.problem(f"component {target.component.type.name} takes {want}"
                         f"{' (' + ', '.join(formal) + ')' if formal else ''} but is given {len(given.params)}",
                         given.pos)
            return None
        return {**binding, **{f: binding.get(a, a) for f, a in zip(formal, given.params)}}

    # -- Soufflé's instantiation ----------------------------------------------------------

    def instantiate(self, init: ast.Init, scope: _Scope, orphans: list[ast.Rule], overridden: frozenset[str],
                    binding: dict[str, str], depth: int, path: str) -> _Content:
        content = _Content()
        if depth > MAX_DEPTH:
            self.problem(f"components are instantiated more than {MAX_DEPTH} deep (does {init.comp.name} "
                         "instantiate itself?)", init.pos)
            return content
        target = self.lookup(scope, init.comp.name, binding)
        if target is None:
            self.problem(f"component {init.comp.name} is not declared{_known(scope)}", init.comp.pos)
            return content
        active = self.bind(target, init.comp, binding)
        if active is None:
            return content
        here = f"{path}{init.instance}"
        origin = f"instance {here} of component {init.comp} (.init at {init.pos})"
        for nested in _of(target, ast.Init):
            content.extend(self.instantiate(nested, target, orphans, overridden, active, depth + 1, here + "."))
        self.collect(target, active, content, orphans, overridden, depth, here, origin)
        return _renamed(content, orphans, init.instance)

    def collect(self, scope: _Scope, binding: dict[str, str], content: _Content, orphans: list[ast.Rule],
                overridden: frozenset[str], depth: int, path: str, origin: str) -> None:
        comp = scope.component
        below = overridden | {o.rel for o in _of(scope, ast.Override)}
        for base in comp.bases:
            found = self.lookup(scope.parent, base.name, binding) if scope.parent is not None else None
            if found is None:
                continue  # reported once by check_bases
            active = self.bind(found, base, binding)
            if active is None:
                continue
            for nested in _of(found, ast.Init):
                content.extend(self.instantiate(nested, found, orphans, frozenset(), active, depth + 1, path + "."))
            self.collect(found, active, content, orphans, below, depth, path, origin)
        for item in comp.items:
            match item:
                case ast.TypeDecl():
                    content.types.append(dataclasses.replace(item, bases=tuple(binding.get(b, b) for b in item.bases)))
                case ast.Decl():
                    attrs = tuple(dataclasses.replace(a, type=binding.get(a.type, a.type)) for a in item.attrs)
                    content.decls.append(dataclasses.replace(item, attrs=attrs))
                case ast.Directive():
                    content.directives.append(item)
        declared = {d.name for d in content.decls}
        for rule in _of(scope, ast.Rule):
            if rule.head.rel.split(".")[0] in overridden:
                continue
            rule = _with_types(rule, binding)
            if rule.head.rel in declared:
                content.rules.append(dataclasses.replace(rule, origin=origin))
            else:
                orphans.append(dataclasses.replace(rule, origin=origin))
        for orphan in list(orphans):
            if orphan.head.rel in declared:
                content.rules.append(orphan)
                orphans.remove(orphan)

    # -- checks ---------------------------------------------------------------------------

    def check_bases(self, scope: _Scope) -> None:
        """Unknown bases, and inheritance cycles."""
        for child in scope.children.values():
            for base in child.component.bases:
                if self.lookup(scope, base.name, {}) is None and base.name not in child.component.type.params:
                    self.problem(f"base component {base.name} of {child.component.type.name} is not declared"
                                 f"{_known(scope)}", base.pos)
            cycle = self.cycle(child, [])
            if cycle and frozenset(cycle) not in self.cycles:  # one line per cycle, at its first component
                self.cycles.add(frozenset(cycle))
                self.problem("inheritance cycle: " + " : ".join(cycle), child.component.type.pos)
            self.check_bases(child)

    def cycle(self, scope: _Scope, seen: list[str]) -> list[str] | None:
        name = scope.component.type.name
        if name in seen:
            return seen + [name] if seen[0] == name else None
        for base in scope.component.bases:
            found = self.lookup(scope.parent, base.name, {})
            if found is not None:
                loop = self.cycle(found, seen + [name])
                if loop:
                    return loop
        return None


def _of(scope: _Scope, kind) -> list:
    return [i for i in scope.items if isinstance(i, kind)]


def _known(scope: _Scope | None) -> str:
    names = set()
    while scope is not None:
        names |= set(scope.children)
        scope = scope.parent
    return f" (components: {', '.join(sorted(names))})" if names else " (no component is declared)"


# -- renaming -----------------------------------------------------------------------------


def _renamed(content: _Content, orphans: list[ast.Rule], instance: str) -> _Content:
    """Prefix every relation and type the content declares with `instance.`, everywhere."""
    rels = {d.name: f"{instance}.{d.name}" for d in content.decls}
    types = {t.name: f"{instance}.{t.name}" for t in content.types}
    out = _Content()
    out.types = [dataclasses.replace(t, name=types[t.name], bases=tuple(types.get(b, b) for b in t.bases))
                 for t in content.types]
    out.decls = [dataclasses.replace(d, name=rels[d.name],
                                     attrs=tuple(dataclasses.replace(a, type=types.get(a.type, a.type))
                                                 for a in d.attrs)) for d in content.decls]
    out.directives = [dataclasses.replace(d, names=tuple(rels.get(n, n) for n in d.names)) for d in content.directives]
    out.rules = [_rename_rule(r, rels, types) for r in content.rules]
    orphans[:] = [_rename_rule(r, rels, types) for r in orphans]
    return out


def _rename_rule(rule: ast.Rule, rels: dict[str, str], types: dict[str, str]) -> ast.Rule:
    head = _rename_atom(rule.head, rels, types)
    body = tuple(_rename_literal(lit, rels, types) for lit in rule.body)
    dominating = _rename_atom(rule.dominating, rels, types) if rule.dominating is not None else None
    return dataclasses.replace(rule, head=head, body=body, dominating=dominating)


def _with_types(rule: ast.Rule, binding: dict[str, str]) -> ast.Rule:
    return _rename_rule(rule, {}, binding) if binding else rule


def _rename_atom(atom: ast.Atom, rels, types) -> ast.Atom:
    return dataclasses.replace(atom, rel=rels.get(atom.rel, atom.rel),
                               args=tuple(_rename_term(t, rels, types) for t in atom.args))


def _rename_literal(lit: ast.Literal, rels, types) -> ast.Literal:
    match lit:
        case ast.Atom():
            return _rename_atom(lit, rels, types)
        case ast.Negation(atom):
            return dataclasses.replace(lit, atom=_rename_atom(atom, rels, types))
        case ast.Comparison(_, left, right):
            return dataclasses.replace(lit, left=_rename_term(left, rels, types), right=_rename_term(right, rels, types))
    return lit


def _rename_term(term: ast.Term, rels, types) -> ast.Term:
    match term:
        case ast.BinOp(_, left, right):
            return dataclasses.replace(term, left=_rename_term(left, rels, types), right=_rename_term(right, rels, types))
        case ast.Negative(operand):
            return dataclasses.replace(term, operand=_rename_term(operand, rels, types))
        case ast.Cast(inner, to):
            return dataclasses.replace(term, term=_rename_term(inner, rels, types), to=types.get(to, to))
        case ast.Functor(_, args) | ast.Record(args) | ast.Branch(_, args):
            return dataclasses.replace(term, args=tuple(_rename_term(a, rels, types) for a in args))
        case ast.Aggregate(_, target, body):
            return dataclasses.replace(term, target=_rename_term(target, rels, types) if target is not None else None,
                                       body=tuple(_rename_literal(lit, rels, types) for lit in body))
    return term


# -- the pass -------------------------------------------------------------------------------


def has_components(program: ast.RuleSource) -> bool:
    return any(isinstance(i, (ast.Component, ast.Init, ast.Override)) for i in program.items)


def expand_components(program: ast.RuleSource) -> ast.RuleSource:
    """The program with every component instantiated and every `.comp`/`.init` gone."""
    if not has_components(program):
        return program
    top_comp = ast.Component(ast.CompType("<program>"), (), program.items)
    top = _Scope(top_comp, None)
    expander = _Expander(top)
    for item in program.items:
        if isinstance(item, ast.Override):
            expander.problem(f".override {item.rel} outside a component", item.pos)
    expander.check_bases(top)
    items: list[ast.Item] = []
    for item in program.items:
        if isinstance(item, ast.Init):
            if expander.problems:
                continue
            orphans: list[ast.Rule] = []
            content = expander.instantiate(item, top, orphans, frozenset(), {}, 1, "")
            items += [*content.types, *content.decls, *content.rules, *orphans, *content.directives]
        elif not isinstance(item, (ast.Component, ast.Override)):
            items.append(item)
    raise_all(expander.problems)
    return ast.RuleSource(tuple(items))
