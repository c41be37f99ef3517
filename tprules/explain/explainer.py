"""The explanation service over one workspace: `why`, `whynot`, `subproof`, and the fusion context.

>>> ws = Workspace("facts/megatron-mlp-tp2")                                # doctest: +SKIP
>>> ex = Explainer.of(ws)                                                  # doctest: +SKIP
>>> ex.explain(read_atom('legal("mm1_gelu_0")', ws.checked)).holds         # doctest: +SKIP
True
"""

from __future__ import annotations

from functools import cached_property

from ..datalog.lang import ast
from ..datalog.lang.printer import print_literal
from .proof import Explanation, Fusion, Proof, WhyNot
from .prove import DEFAULT_DEPTH, Prover
from .terms import constant
from .whynot import WhyNotFinder

PROOFS_SHOWN = 8  # tuples proven when an atom with variables matches many


class Explainer:
    def __init__(self, checked, model, facts, position: dict[str, int] | None = None,
                 depth: int | None = DEFAULT_DEPTH):
        self.checked = checked
        self.prover = Prover(checked, model, facts, depth)
        self.finder = WhyNotFinder(self.prover)
        self.solver = self.prover.solver
        self.model = model
        self.position = position or {}

    @classmethod
    def of(cls, workspace, depth: int | None = DEFAULT_DEPTH) -> "Explainer":
        """An explainer over a workspace's full model (its engine must record rounds: fast or compiled)."""
        return cls(workspace.checked, workspace.model, workspace.program.facts, workspace.program.position, depth)

    @property
    def depth(self) -> int | None:
        return self.prover.depth

    @depth.setter
    def depth(self, value: int | None) -> None:
        self.prover.depth = value

    def holds(self, atom: ast.Atom) -> list[tuple]:
        return self.solver.matching(atom)

    def explain(self, atom: ast.Atom) -> Explanation:
        """Proofs of the tuples matching `atom` (up to PROOFS_SHOWN), or why none holds."""
        self.prover.begin()
        matches = self.solver.matching(atom)
        text = print_literal(atom)
        if not matches:
            named = [a.value for a in atom.args if isinstance(a, ast.Str)]
            return Explanation(text, False, why_not=self.finder.why_not(atom), fusions=self.fusions(named))
        shown = matches[:PROOFS_SHOWN]
        fusions = self.fusions([v for t in shown for v in t if isinstance(v, str)])
        proofs = tuple(self.prover.prove(atom.rel, t) for t in shown)
        return Explanation(text, True, proofs, max(0, len(matches) - PROOFS_SHOWN), fusions=fusions)

    def why_not(self, atom: ast.Atom) -> WhyNot:
        self.prover.begin()
        return self.finder.why_not(atom)

    def subproof(self, number: int) -> Proof | WhyNot:
        """Expand an elided subtree by its id; KeyError for an id not given out."""
        key = self.prover.elided[number]
        self.prover.begin()
        if key[0] == "proof":
            return self.prover.prove(key[1], key[2])
        return self.finder.why_not(key[1])

    # -- context for compiler engineers -------------------------------------------------

    def _holds(self, rel: str, *args) -> list[tuple]:
        if rel not in self.checked.decls:
            return []
        terms = tuple(ast.Wildcard() if a is None else constant(a) for a in args)
        return self.solver.matching(ast.Atom(rel, terms))

    def place(self, statement: str) -> str:
        """Where a statement runs, in SPEC words (as verdicts.places says it)."""
        if self._holds("is_fold", statement):
            return "collective"
        chips = self._holds("on_chip", statement, None)
        if chips:
            return f"chip:{chips[0][1]}"
        return "spine" if self._holds("on_spine", statement) else "?"

    @cached_property
    def notes(self):
        from ..verdicts import MemberNotes

        return MemberNotes.of(self.prover.facts)

    def fusions(self, names: list[str]) -> tuple[Fusion, ...]:
        """The candidate fusions among `names`, with their members' places and verdicts."""
        found = []
        for name in dict.fromkeys(names):
            members = self._holds("member", name, None)
            if members:
                ms = sorted({o for _, o in members}, key=lambda o: (self.position.get(o, 0), o))
                reasons = tuple(sorted({r for _, r in self._holds("refused", name, None)}))
                found.append(Fusion(name, tuple((o, self.place(o)) for o in ms), reasons,
                                    tuple(self.notes.note(o) for o in ms)))
        return tuple(found)
