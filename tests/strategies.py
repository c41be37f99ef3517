"""Hypothesis strategies for random, well-formed TP programs (planner, runtime and engine tests).

Every activation is [rows, cols] so any statement can read any earlier tensor of its
place; weights are [cols, cols]. Statements on a chip read that chip's tensors and the
spine's; spine statements read the spine's only; folds sum one partial per chip.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tprules.program.builder import ProgramBuilder

UNARY = ("neg", "exp", "relu", "silu", "gelu", "scale")
BINARY = ("add", "sub", "mul")


@st.composite
def tp_programs(draw, max_statements: int = 14, max_chips: int = 3, rows: int = 2, cols: int = 4,
                candidates: bool = True, relocations: bool = True) -> ProgramBuilder:
    chips = draw(st.integers(1, max_chips))
    b = ProgramBuilder(chips=chips)
    shape = [rows, cols]
    home_tensors: dict[object, list[str]] = {"spine": [b.tensor("x", shape, spine=True)]}
    for c in range(chips):
        home_tensors[c] = [b.tensor(f"in{c}", shape, chip=c)]
    count = draw(st.integers(2, max_statements))
    for i in range(count):
        name = f"s{i}"
        kind = draw(st.sampled_from(["unary", "binary", "matmul", "fold"] if chips > 1 else ["unary", "binary", "matmul"]))
        if kind == "fold":
            partials = [draw(st.sampled_from(home_tensors[c])) for c in range(chips)]
            if len(set(partials)) == chips:
                out = b.tensor(f"t{i}", shape, spine=True)
                b.fold(name, partials, out, f"ar{i}")
                home_tensors["spine"].append(out)
                continue
            kind = "unary"
        home = draw(st.sampled_from(["spine"] + list(range(chips))))
        pool = home_tensors[home] + (home_tensors["spine"] if home != "spine" else [])
        out = b.tensor(f"t{i}", shape, spine=True) if home == "spine" else b.tensor(f"t{i}", shape, chip=home)
        if kind == "unary":
            cls = draw(st.sampled_from(UNARY))
            attrs = {"factor": "0.5"} if cls == "scale" else {}
            b.stmt(name, cls, [draw(st.sampled_from(pool))], out, **attrs)
        elif kind == "binary":
            b.stmt(name, draw(st.sampled_from(BINARY)), [draw(st.sampled_from(pool)), draw(st.sampled_from(pool))], out)
        else:
            where = {"spine": True} if home == "spine" else {"chip": home}
            weight = b.tensor(f"w{i}", [cols, cols], **where)
            b.stmt(name, "matmul", [draw(st.sampled_from(pool)), weight], out)
        home_tensors[home].append(out)
    statements = b.statements
    if relocations and chips > 1 and draw(st.booleans()):
        chosen = draw(st.lists(st.sampled_from(statements), min_size=1, max_size=3, unique=True))
        folds = {o for o, _ in b.facts["fold"]}
        chosen = [o for o in chosen if o not in folds]
        if chosen:
            b.section("moved", chosen, relocated_to=draw(st.integers(0, chips - 1)))
    if candidates:
        for j in range(draw(st.integers(0, 6))):
            members = draw(st.lists(st.sampled_from(statements), min_size=2, max_size=4, unique=True))
            b.candidate(f"f{j}", members)
    return b


# ---- random rule sets ------------------------------------------------------------------
#
# Small stratified Datalog programs over random small EDBs, for comparing engines on
# every relation. IDB relations sit on levels: a rule reads its own level and those below
# positively, and only lower levels through negation and aggregates, so every program is
# stratifiable. Rules that read their own level ("recursive") only copy values; only the
# others compute new ones (arithmetic, aggregates), so every fixpoint is finite.

import itertools  # noqa: E402
import re  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

TYPES = ("number", "symbol")
SYMBOL_VALUES = ("a", "b", "c")
NUMBER_VALUES = st.integers(-2, 3)


@dataclass
class RuleSet:
    text: str  # Soufflé rule text: decls, .input for the EDB, rules
    edb: dict[str, tuple[str, ...]]
    idb: dict[str, tuple[str, ...]]
    facts: dict[str, set[tuple]] = field(default_factory=dict)


def _value(kind: str):
    return NUMBER_VALUES if kind == "number" else st.sampled_from(SYMBOL_VALUES)


class _Rule:
    """Draws one rule's literals, keeping track of which variables are bound and their types."""

    def __init__(self, draw, edb, idb, level: int, souffle_compatible: bool = False):
        self.draw, self.edb, self.idb, self.level = draw, edb, idb, level
        # Soufflé 2.5 rejects `_` in a negation inside an aggregate ("Ungrounded variable").
        self.souffle_compatible = souffle_compatible
        self.bound: dict[str, str] = {}  # variable → type
        self.names = itertools.count()

    def fresh(self, stem: str = "V") -> str:
        return f"{stem}{next(self.names)}"

    def const(self, kind: str) -> str:
        v = self.draw(_value(kind))
        return str(v) if kind == "number" else f'"{v}"'

    def types(self, rel: str) -> tuple[str, ...]:
        return self.edb[rel] if rel in self.edb else self.idb[rel][0]

    def sources(self, same_level: bool) -> list[str]:
        lower = [r for r, (_, lvl) in self.idb.items() if lvl < self.level or (same_level and lvl == self.level)]
        return sorted(self.edb) + lower

    def atom(self, rel: str, pool: dict[str, str], new_stem: str | None, wildcards: bool = True,
             used: set[str] | None = None, exprs: bool | set[str] = True) -> str:
        """An atom over `rel`; new variables (named from `new_stem`) join `pool` as they appear;
        every variable it mentions joins `used`. A number column may get an expression over
        variables bound before (`e(X + 2, Y)`), which the engines compute, then look up."""
        args = []
        for kind in self.types(rel):
            choice = self.draw(st.sampled_from(("bound", "bound", "bound", "new", "new", "new", "const", "wild",
                                                "expr")))
            same = sorted(v for v, k in pool.items() if k == kind)
            numbers = {v: k for v, k in pool.items() if k == "number" and (exprs is True or exprs and v in exprs)}
            if choice == "expr" and numbers and kind == "number":
                expr = self.number_expr(numbers)
                args.append(expr)
                if used is not None:
                    used.update(v for v in pool if re.search(rf"\b{re.escape(v)}\b", expr))
                continue
            if choice == "bound" and same:
                args.append(self.draw(st.sampled_from(same)))
            elif choice in ("new", "bound") and new_stem is not None:
                v = self.fresh(new_stem)
                pool[v] = kind
                args.append(v)
            elif choice == "wild" and wildcards:
                args.append("_")
            else:
                args.append(self.const(kind))
        if used is not None:
            used.update(a for a in args if a in pool)
        return f"{rel}({', '.join(args)})"

    def number_expr(self, pool: dict[str, str]) -> str | None:
        numbers = sorted(v for v, k in pool.items() if k == "number")
        if not numbers:
            return None
        x = self.draw(st.sampled_from(numbers))
        form = self.draw(st.sampled_from(("+c", "-c", "*c", "/c", "%c", "+y", "-y", "neg")))
        c = self.draw(st.sampled_from((-3, -2, 2, 3))) if form in ("/c", "%c", "*c") else self.draw(st.integers(0, 3))
        y = self.draw(st.sampled_from(numbers))
        return {"+c": f"{x} + {c}", "-c": f"{x} - {c}", "*c": f"{x} * {c}", "/c": f"{x} / {c}",
                "%c": f"{x} % {c}", "+y": f"{x} + {y}", "-y": f"{x} - {y}", "neg": f"-{x}"}[form]

    def comparison(self, pool: dict[str, str]) -> str | None:
        kinds = sorted({k for k in pool.values()})
        if not kinds:
            return None
        kind = self.draw(st.sampled_from(kinds))
        same = sorted(v for v, k in pool.items() if k == kind)
        left = self.draw(st.sampled_from(same))
        if kind == "number" and self.draw(st.booleans()):
            left = self.number_expr({left: "number"}) or left
        others = [v for v in same if v != left]
        right = self.draw(st.sampled_from(others)) if others and self.draw(st.booleans()) else self.const(kind)
        op = self.draw(st.sampled_from(("=", "!=", "<", "<=", ">", ">=")))
        return f"{left} {op} {right}"

    def aggregate(self) -> tuple[str, str] | None:
        """`N = f ... : { ... }` over lower relations; returns (literal, N)."""
        sources = self.sources(same_level=False)
        inner: dict[str, str] = dict(self.bound)
        used: set[str] = set()  # variables of the aggregate's atoms
        # Expressions inside an aggregate are over its own variables: Soufflé 2.5 fails an
        # assertion (MaterializeAggregationQueries) on some over outer ones, and the pydatalog
        # engine refuses an outer variable that no atom inside binds.
        own: set[str] = set()
        atoms = []
        for _ in range(self.draw(st.integers(1, 2))):
            atoms.append(self.atom(self.draw(st.sampled_from(sources)), inner, "A", used=used,
                                   exprs=False if self.souffle_compatible else own))
            own.update(v for v in inner if v not in self.bound)
        body = list(atoms)
        in_atoms = {v: k for v, k in inner.items() if v in used}
        if self.draw(st.integers(0, 3)) == 0:  # negation and comparison over the atoms' variables only
            body.append("!" + self.atom(self.draw(st.sampled_from(sources)), in_atoms, None,
                                        wildcards=self.souffle_compatible is False))
        if self.draw(st.booleans()):
            found = self.comparison({v: k for v, k in in_atoms.items() if v not in self.bound})
            if found:
                body.append(found)
        func = self.draw(st.sampled_from(("count", "sum", "min", "max")))
        numbers = sorted(v for v, k in in_atoms.items() if k == "number")
        # A target variable bound outside the aggregate is refused (Soufflé 2.5 reads it as local).
        numbers = [v for v in numbers if v not in self.bound]
        if func != "count":
            if not numbers:
                func = "count"
            else:
                target = self.draw(st.sampled_from(numbers))
                if self.draw(st.integers(0, 3)) == 0:
                    target = f"{target} * 2"
                func = f"{func} {target}"
        n = self.fresh("N")
        braces = f"{{ {', '.join(body)} }}" if len(body) > 1 or self.draw(st.booleans()) else body[0]
        return f"{n} = {func} : {braces}", n

    def chain(self, head: str, head_types: tuple[str, ...]) -> str | None:
        """`head(A, C, ...) :- head(A, B, ...), s(B, C, ...)`: a transitive closure, for deep recursion."""
        if len(head_types) < 2 or head_types[0] != head_types[1]:
            return None
        kind = head_types[0]
        steps = [r for r in self.sources(same_level=True) if self.types(r)[:2] == (kind, kind)]
        if not steps:
            return None
        rest = [f"R{i}" for i in range(len(head_types) - 2)]
        step = self.draw(st.sampled_from(steps))
        step_rest = [self.const(k) if self.draw(st.booleans()) else "_" for k in self.types(step)[2:]]
        return (f"{head}({', '.join(['A', 'C'] + rest)}) :- {head}({', '.join(['A', 'B'] + rest)}), "
                f"{step}({', '.join(['B', 'C'] + step_rest)}).")

    def rule(self, head: str, head_types: tuple[str, ...], recursive: bool = True) -> str:
        if recursive and self.draw(st.integers(0, 3)) == 0:
            found = self.chain(head, head_types)
            if found:
                return found
        body = []
        same_level = False
        for _ in range(self.draw(st.integers(1, 3))):
            rel = self.draw(st.sampled_from(self.sources(same_level=recursive)))
            same_level |= rel in self.idb and self.idb[rel][1] == self.level
            body.append(self.atom(rel, self.bound, "V"))
        if self.draw(st.integers(0, 3)) == 0:
            body.append("!" + self.atom(self.draw(st.sampled_from(self.sources(same_level=False))), self.bound, None))
        for _ in range(self.draw(st.sampled_from((0, 0, 1, 2)))):
            found = self.comparison(self.bound)
            if found:
                body.append(found)
        if not same_level:  # only rules that do not recurse compute new values
            if self.draw(st.integers(0, 2)) == 0:
                expr = self.number_expr(self.bound)
                if expr:
                    z = self.fresh("Z")
                    body.append(f"{z} = {expr}")
                    self.bound[z] = "number"
            if self.draw(st.integers(0, 2)) == 0:
                literal, n = self.aggregate()
                body.append(literal)
                self.bound[n] = "number"
        args = []
        for kind in head_types:
            same = sorted(v for v, k in self.bound.items() if k == kind)
            if same and self.draw(st.integers(0, 4)) > 0:
                v = self.draw(st.sampled_from(same))
                if kind == "number" and not same_level and self.draw(st.integers(0, 4)) == 0:
                    v = f"{v} + 1"
                args.append(v)
            else:
                args.append(self.const(kind))
        return f"{head}({', '.join(args)}) :- {', '.join(body)}."


@st.composite
def rule_sets(draw, max_idb: int = 4, max_rules: int = 3, max_facts: int = 10,
              souffle_compatible: bool = False) -> RuleSet:
    """A random stratified rule set with recursion, negation, aggregates, arithmetic and
    comparisons, and random facts for its input relations. With `souffle_compatible`, only
    what Soufflé 2.5 also accepts."""
    edb = {f"e{i}": tuple(draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=3)))
           for i in range(draw(st.integers(1, 3)))}
    if draw(st.booleans()):  # an edge relation, for transitive closures
        edb["e0"] = (draw(st.sampled_from(TYPES)),) * 2
    edge = edb["e0"] if len(edb["e0"]) == 2 and edb["e0"][0] == edb["e0"][1] else None
    idb: dict[str, tuple[tuple[str, ...], int]] = {}
    closures: set[str] = set()
    level = 0
    for i in range(draw(st.integers(1, max_idb))):
        if i and draw(st.booleans()):
            level += 1
        if edge and draw(st.integers(0, 3)) == 0:
            closures.add(f"p{i}")
            idb[f"p{i}"] = (edge, level)
            continue
        arity = draw(st.sampled_from((0, 1, 1, 2, 2, 2, 3)))
        idb[f"p{i}"] = (tuple(draw(st.sampled_from(TYPES)) for _ in range(arity)), level)
    lines = []
    for rel, types in list(edb.items()) + [(r, t) for r, (t, _) in idb.items()]:
        lines.append(f".decl {rel}({', '.join(f'c{i}: {t}' for i, t in enumerate(types))})")
    lines += [f".input {rel}" for rel in edb]
    for rel, (types, lvl) in idb.items():
        rules = draw(st.integers(1, max_rules))
        if rel in closures:  # a transitive closure of the edges, and more
            lines.append(f"{rel}(X, Y) :- e0(X, Y).")
            lines.append(_Rule(draw, edb, idb, lvl, souffle_compatible).chain(rel, types))
            rules -= 1
        for i in range(rules):  # the first rule starts the relation off
            lines.append(_Rule(draw, edb, idb, lvl, souffle_compatible).rule(rel, types,
                                                                             recursive=i > 0 or rel in closures))
    facts = {rel: set(draw(st.lists(st.tuples(*(_value(t) for t in types)), min_size=1, max_size=max_facts)))
             for rel, types in edb.items()}
    return RuleSet("\n".join(lines) + "\n", edb, {r: t for r, (t, _) in idb.items()}, facts)
