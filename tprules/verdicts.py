"""Verdicts out of an evaluated model (SPEC §3): legal, or refused with every reason that holds."""

from __future__ import annotations

from dataclasses import dataclass
from json.encoder import encode_basestring_ascii

from .errors import RuleError
from .program.facts import FactBase

# Relations the tools read from the model, besides `legal` and `refused`. They are defined
# in rules/place.dl; SPEC §3 fixes their meaning.
PLACE_RELATIONS = ("on_chip", "on_spine", "is_fold")


@dataclass(frozen=True)
class Verdict:
    fusion: str
    members: tuple[str, ...]  # in program order
    reasons: tuple[str, ...]  # sorted; empty when legal

    @property
    def legal(self) -> bool:
        return not self.reasons

    def to_json(self) -> dict:
        return {"fusion": self.fusion, "legal": self.legal, "reasons": list(self.reasons),
                "members": list(self.members)}

    def json_line(self) -> str:
        """`json.dumps(self.to_json())`, written directly (check prints tens of thousands)."""
        quote = encode_basestring_ascii
        return (f'{{"fusion": {quote(self.fusion)}, "legal": {"false" if self.reasons else "true"}, '
                f'"reasons": [{", ".join(map(quote, self.reasons))}], '
                f'"members": [{", ".join(map(quote, self.members))}]}}')


def candidates(facts: FactBase, position: dict[str, int], columns=None) -> dict[str, tuple[str, ...]]:
    """Each candidate's members in program order (sorted in one go over the encoded
    columns when the program has them: a model-sized program has tens of thousands)."""
    if columns is not None and columns.holds("member", facts.tuples("member")):
        return _candidates_from_columns(columns, position)
    members: dict[str, list[str]] = {}
    for f, o in facts.tuples("member"):
        members.setdefault(f, []).append(o)
    rank = position.__getitem__
    return {f: tuple(sorted(ms, key=rank)) for f, ms in members.items()}


def _candidates_from_columns(columns, position: dict[str, int]) -> dict[str, tuple[str, ...]]:
    import numpy as np

    member, names = columns["member"], columns.symbols.names
    if not len(member):
        return {}
    rank = np.zeros(len(names), dtype=np.int64)
    rank[np.fromiter(map(columns.symbols.ids.get, position), dtype=np.int64, count=len(position))] = \
        np.fromiter(position.values(), dtype=np.int64, count=len(position))
    order = np.lexsort((rank[member[:, 1]], member[:, 0]))
    fusions, stmts = member[order, 0], member[order, 1]
    starts = np.flatnonzero(np.concatenate(([True], fusions[1:] != fusions[:-1])))
    stmt_names = [names[i] for i in stmts.tolist()]
    bounds = starts.tolist() + [len(order)]
    return {names[f]: tuple(stmt_names[a:b]) for f, a, b in zip(fusions[starts].tolist(), bounds, bounds[1:])}


def judge(model, facts: FactBase, position: dict[str, int], columns=None) -> list[Verdict]:
    """One verdict per candidate, sorted by id. The rules must derive exactly one of
    legal(f) or refused(f, _) for each candidate; anything else is a rule error."""
    legal = {f for (f,) in model.tuples("legal")}
    reasons: dict[str, list[str]] = {}
    for f, reason in model.tuples("refused"):
        reasons.setdefault(f, []).append(reason)
    out = []
    for f, members in sorted(candidates(facts, position, columns).items()):
        mine = tuple(sorted(reasons.get(f, ())))
        if (f in legal) == bool(mine):
            both = "both legal and refused" if mine else "neither legal nor refused"
            first = next(t for t in facts.ordered("member") if t[0] == f)  # the candidate's first line
            raise RuleError(f"the rules derive {both} for candidate {f}; exactly one must hold (SPEC §3)",
                            facts.where("member", first))
        out.append(Verdict(f, members, mine))
    return out


def places(model) -> dict[str, str]:
    """Each statement's place as SPEC words: `chip:K`, `spine`, or `collective` for a fold."""
    found: dict[str, str] = {}
    for (o,) in model.tuples("on_spine"):
        found[o] = "spine"
    for o, chip in model.tuples("on_chip"):
        found[o] = f"chip:{chip}"
    for (o,) in model.tuples("is_fold"):
        found[o] = "collective"
    return found
