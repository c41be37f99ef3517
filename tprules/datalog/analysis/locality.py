"""Candidate locality: may many candidates be judged in one evaluation?

The planner asks about many proposed fusions at once. That is exact when every relation
that depends on `member` is keyed by the candidate in its first column and every rule
deriving such a tuple for candidate F reads member-dependent tuples of F only. Then a
batch gives each candidate the verdicts it would get alone. Rule sets that are not local
are still answered exactly, one candidate per evaluation.
"""

from __future__ import annotations

from ..lang import ast
from .strata import Stratum


def dependent_relations(strata: list[Stratum] | tuple[Stratum, ...], seed: str) -> frozenset[str]:
    """Relations whose contents can change with `seed`'s facts."""
    dependent = {seed}
    for stratum in strata:  # strata are in dependency order, so one pass suffices
        for rule in stratum.rules:
            if any(atom.rel in dependent for atom, _ in ast.body_atoms(rule.body)):
                dependent.update(stratum.relations)
                break
    return frozenset(dependent)


def _key(atom: ast.Atom) -> str | None:
    if atom.args and isinstance(atom.args[0], ast.Var):
        return atom.args[0].name
    return None


def is_candidate_local(strata, decls: dict[str, ast.Decl], seed: str = "member") -> bool:
    dependent = dependent_relations(strata, seed)
    for rel in dependent:
        decl = decls.get(rel)
        if decl is None or not decl.attrs or decl.attrs[0].type != "symbol":
            return False
    for stratum in strata:
        for rule in stratum.rules:
            if rule.head.rel not in dependent:
                continue
            key = _key(rule.head)
            if key is None:
                return False
            for atom, _ in ast.body_atoms(rule.body):
                if atom.rel in dependent and _key(atom) != key:
                    return False
    return True
