"""Compile each checked rule into a Python function that joins set-at-a-time.

A rule becomes nested loops over hash indexes, in a join order chosen once: the delta
atom first (semi-naive), then the atom with most bound columns, with negations,
comparisons, assignments and aggregates placed as soon as their variables are bound.
The generated source is kept (`--show=code`) and cached with the checked program.

Generated functions have the signature `rule(R, I, D) -> set` where `R` maps a relation
to its set of tuples, `I(rel, cols)` returns a hash index (key → tuples; the key is the
bare value for one column, a tuple for several), and `D` holds the deltas.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis.checks import bound_variables, outside_vars
from ..lang import ast
from ..lang.printer import print_rule


@dataclass(frozen=True)
class CompiledRule:
    rule: ast.Rule
    name: str
    delta: str | None  # the relation read as a delta, for semi-naive versions
    source: str


def _py(name: str) -> str:
    return "v_" + name.replace("?", "_q_")


class _Emitter:
    def __init__(self):
        self.lines: list[str] = []
        self.depth = 1
        self.counter = 0

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"


class _BodyCompiler:
    """Emits the loops of one body (a rule's, or an aggregate's) given the variables bound before it."""

    def __init__(self, out: _Emitter, context: "_RuleCompiler", rule_head: ast.Atom | None, body, bound):
        self.out, self.ctx, self.head, self.body = out, context, rule_head, body
        self.bound: set[str] = set(bound)
        self.scope = frozenset(bound)  # variables of the enclosing rule, for a nested aggregate
        self.matched: list[str] = []  # names of the tuple variables of scanned atoms
        self.scan_all = False  # scan even fully bound atoms (an aggregate counting tuples)

    def expr(self, term: ast.Term) -> str:
        match term:
            case ast.Var(name):
                return _py(name)
            case ast.Num(value):
                return repr(value)
            case ast.Str(value):
                return repr(value)
            case ast.BinOp("/", left, right):
                return f"_div({self.expr(left)}, {self.expr(right)})"
            case ast.BinOp("%", left, right):
                return f"_mod({self.expr(left)}, {self.expr(right)})"
            case ast.BinOp(op, left, right):
                return f"({self.expr(left)} {op} {self.expr(right)})"
            case ast.Negative(operand):
                return f"(-{self.expr(operand)})"
            case ast.Aggregate():
                return self.ctx.aggregate_values[id(term)]
        raise TypeError(term)

    def _is_bound(self, term: ast.Term) -> bool:
        if isinstance(term, ast.Wildcard):
            return False
        return ast.term_vars(term) <= self.bound and all(
            id(a) in self.ctx.aggregate_values for a in ast.aggregates_in(term)
        )

    # -- ordering -------------------------------------------------------------------

    def _ready(self, lit: ast.Literal) -> bool:
        match lit:
            case ast.Negation(atom):
                return ast.literal_vars(atom) <= self.bound
            case ast.Comparison(op, left, right):
                for agg in ast.literal_aggregates(lit):
                    if not self.ctx.aggregate_outer(agg, self.head, self.body, self.scope) <= self.bound:
                        return False
                if ast.term_vars(left) <= self.bound and ast.term_vars(right) <= self.bound:
                    return True
                if op == "=":
                    for var, other in ((left, right), (right, left)):
                        if isinstance(var, ast.Var) and var.name not in self.bound:
                            return ast.term_vars(other) <= self.bound
                return False
        return False

    def _score(self, atom: ast.Atom) -> int:
        return sum(1 for a in atom.args if not isinstance(a, ast.Wildcard) and ast.term_vars(a) <= self.bound)

    def compile(self, first: int | None, finish) -> None:
        """Emit loops for the body in a good join order, then `finish()` at the innermost level."""
        pending = list(range(len(self.body)))
        if first is not None:
            pending.remove(first)
            self._emit_literal(self.body[first], delta=True)
        while pending:
            ready = next((i for i in pending if not isinstance(self.body[i], ast.Atom) and self._ready(self.body[i])), None)
            if ready is not None:
                pending.remove(ready)
                self._emit_literal(self.body[ready])
                continue
            atoms = [i for i in pending if isinstance(self.body[i], ast.Atom)]
            if not atoms:
                raise AssertionError(f"unsafe body reached the compiler: {self.body}")
            best = max(atoms, key=lambda i: (self._score(self.body[i]), -i))
            pending.remove(best)
            self._emit_literal(self.body[best])
        finish()

    # -- literals -------------------------------------------------------------------

    def _emit_literal(self, lit: ast.Literal, delta: bool = False) -> None:
        match lit:
            case ast.Atom():
                self._emit_atom(lit, delta)
            case ast.Negation(atom):
                self.out.emit(f"if not ({self._membership(atom)}):")
                self.out.depth += 1
            case ast.Comparison():
                self._emit_comparison(lit)

    def _membership(self, atom: ast.Atom) -> str:
        """A Python test that some tuple of `atom` matches (all its variables bound)."""
        cols = [i for i, a in enumerate(atom.args) if not isinstance(a, ast.Wildcard)]
        values = [self.expr(atom.args[i]) for i in cols]
        if atom.arity == 0:
            return f"() in {self.ctx.relation(atom.rel)}"
        if len(cols) == atom.arity:
            return f"({', '.join(values)},) in {self.ctx.relation(atom.rel)}"
        if not cols:
            return f"{self.ctx.relation(atom.rel)}"
        key = values[0] if len(values) == 1 else f"({', '.join(values)})"
        return f"{key} in {self.ctx.index(atom.rel, tuple(cols))}"

    def _emit_atom(self, atom: ast.Atom, delta: bool) -> None:
        key_cols, key_values, binds, checks = [], [], [], []
        new: dict[str, int] = {}
        for i, arg in enumerate(atom.args):
            if isinstance(arg, ast.Wildcard):
                continue
            if isinstance(arg, ast.Var) and arg.name not in self.bound:
                if arg.name in new:
                    checks.append((i, _py(arg.name)))
                else:
                    new[arg.name] = i
                    binds.append((i, _py(arg.name)))
            else:
                key_cols.append(i)
                key_values.append(self.expr(arg))
        if not binds and not delta and not self.scan_all:
            self.out.emit(f"if {self._membership(atom)}:")
            self.out.depth += 1
            return
        row = self.out.fresh("t")
        self.matched.append(row)
        if delta:
            self.out.emit(f"for {row} in D[{atom.rel!r}]:")
            self.out.depth += 1
            checks = list(zip(key_cols, key_values)) + checks
        elif key_cols:
            key = key_values[0] if len(key_values) == 1 else f"({', '.join(key_values)})"
            self.out.emit(f"for {row} in {self.ctx.index(atom.rel, tuple(key_cols))}.get({key}, ()):")
            self.out.depth += 1
        else:
            self.out.emit(f"for {row} in {self.ctx.relation(atom.rel)}:")
            self.out.depth += 1
        for i, name in binds:
            self.out.emit(f"{name} = {row}[{i}]")
        self.bound |= set(new)
        if checks:
            self.out.emit("if " + " and ".join(f"{row}[{i}] == {value}" for i, value in checks) + ":")
            self.out.depth += 1

    def _emit_comparison(self, lit: ast.Comparison) -> None:
        for agg in ast.literal_aggregates(lit):
            value = self.ctx.emit_aggregate(self.out, agg, self.head, self.body, self.scope)
            self.out.emit(f"if {value} is not None:")
            self.out.depth += 1
        left, right = lit.left, lit.right
        if lit.op == "=":
            for var, other in ((left, right), (right, left)):
                if isinstance(var, ast.Var) and var.name not in self.bound:
                    self.out.emit(f"{_py(var.name)} = {self.expr(other)}")
                    self.bound.add(var.name)
                    return
        op = "==" if lit.op == "=" else lit.op
        self.out.emit(f"if {self.expr(left)} {op} {self.expr(right)}:")
        self.out.depth += 1


class _RuleCompiler:
    """Compiles one rule (one semi-naive version of it) into the source of one function."""

    def __init__(self, rule: ast.Rule, name: str, delta_index: int | None):
        self.rule, self.name, self.delta_index = rule, name, delta_index
        self.relations: dict[str, str] = {}
        self.indexes: dict[tuple[str, tuple[int, ...]], str] = {}
        self.aggregate_values: dict[int, str] = {}
        self.helpers: list[str] = []
        self._aggregate_names = 0  # counted before a helper is built: nested aggregates build theirs first
        self._outer_cache: dict[int, frozenset[str]] = {}

    def relation(self, rel: str) -> str:
        return self.relations.setdefault(rel, f"r{len(self.relations)}")

    def index(self, rel: str, cols: tuple[int, ...]) -> str:
        return self.indexes.setdefault((rel, cols), f"ix{len(self.indexes)}")

    def aggregate_outer(self, agg: ast.Aggregate, head, body, scope: frozenset[str]) -> frozenset[str]:
        """The variables an aggregate shares with what encloses it: its body, head, and outer scopes."""
        if id(agg) not in self._outer_cache:
            self._outer_cache[id(agg)] = frozenset(ast.aggregate_vars(agg) & (outside_vars(head, body, agg) | scope))
        return self._outer_cache[id(agg)]

    def emit_aggregate(self, out: _Emitter, agg: ast.Aggregate, head, body, scope: frozenset[str]) -> str:
        """Define a memoised helper for `agg`, emit a call to it, and return the value's name."""
        outer = sorted(self.aggregate_outer(agg, head, body, scope))
        helper = f"agg{self._aggregate_names}"
        self._aggregate_names += 1
        self.helpers.append(self._aggregate_helper(helper, agg, outer))
        value = out.fresh("a")
        args = ", ".join(_py(v) for v in outer)
        out.emit(f"{value} = {helper}({args})")
        self.aggregate_values[id(agg)] = value
        return value

    def _aggregate_helper(self, helper: str, agg: ast.Aggregate, outer: list[str]) -> str:
        body = _Emitter()
        body.depth = 2
        key = "(" + "".join(_py(v) + ", " for v in outer) + ")"
        body.emit(f"key = {key}")
        body.emit(f"if key in memo_{helper}: return memo_{helper}[key]")
        body.emit("acc = {}")
        compiler = _BodyCompiler(body, self, None, agg.body, outer)
        single_atom = one_positive_atom(agg.body)
        compiler.scan_all = single_atom
        # The body's own variables: those of an aggregate nested inside it are not bound here.
        local = sorted(set().union(*(ast.literal_vars(lit) for lit in agg.body)) - set(outer))

        def finish():
            # As in Soufflé: with one positive atom the aggregate runs over its matching
            # tuples; with several, over distinct bindings of the named variables.
            if single_atom and compiler.matched:
                witness = compiler.matched[0]
            else:
                witness = "(" + "".join(_py(v) + ", " for v in local) + ")"
            target = "1" if agg.target is None else compiler.expr(agg.target)
            body.emit(f"acc[{witness}] = {target}")

        compiler.compile(None, finish)
        body.depth = 2
        result = {
            "count": "len(acc)",
            "sum": "sum(acc.values())",
            "min": "min(acc.values()) if acc else None",
            "max": "max(acc.values()) if acc else None",
        }[agg.func]
        body.emit(f"result = memo_{helper}[key] = {result}")
        body.emit("return result")
        return f"    memo_{helper} = {{}}\n    def {helper}({', '.join(_py(v) for v in outer)}):\n" + "\n".join(body.lines)

    def compile(self) -> str:
        out = _Emitter()
        out.emit("out = set()")
        out.emit("add = out.add")
        head = self.rule.head
        compiler = _BodyCompiler(out, self, head, self.rule.body, ())

        def finish():
            out.emit(f"add(({''.join(compiler.expr(a) + ', ' for a in head.args)}))")

        compiler.compile(self.delta_index, finish)
        prologue = [f"    {var} = R[{rel!r}]" for rel, var in self.relations.items()]
        prologue += [f"    {var} = I({rel!r}, {cols!r})" for (rel, cols), var in self.indexes.items()]
        comment = "    # " + print_rule(self.rule).replace("\n", " ")
        lines = [f"def {self.name}(R, I, D):", comment, *prologue, *self.helpers, *out.lines, "    return out"]
        return "\n".join(lines) + "\n"


def one_positive_atom(body: tuple[ast.Literal, ...]) -> bool:
    return sum(isinstance(lit, ast.Atom) for lit in body) == 1


def compile_rule(rule: ast.Rule, name: str, delta_rel: str | None = None, delta_index: int | None = None) -> CompiledRule:
    """Compile one rule; with `delta_index`, that body atom reads only the new tuples `D[rel]`."""
    assert bound_variables(rule.body) is not None
    return CompiledRule(rule, name, delta_rel, _RuleCompiler(rule, name, delta_index).compile())


RUNTIME_HELPERS = '''
def _div(a, b):
    # Soufflé's integer division truncates toward zero, as C does.
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q

def _mod(a, b):
    return a - b * _div(a, b)
'''
