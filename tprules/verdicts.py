"""Verdicts out of an evaluated model (SPEC §3): legal, or refused with every reason that holds.

`judge` builds every candidate's verdict as columns (a `VerdictTable`) with group-bys over
the model's `legal` and `refused` rows and the program's `member` rows; strings are made
only for what is shown (`json_lines`, the text of `check`), and `Verdict` objects only
for code that asks for them one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from json.encoder import encode_basestring_ascii as quote

import numpy as np

from .datalog.facts.base import FactBase
from .datalog.facts.columns import I64, Symbols, encode_rows, unique
from .errors import RuleError, UsageError

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


@dataclass(frozen=True)
class MemberNotes:
    """What reports show beside a member's place: the collective of a fold whose program
    names its kind (`all-gather mlp_hidden`), and the model's module path (`attr module`
    of an imported program)."""

    collectives: dict[str, str]
    modules: dict[str, str]

    @classmethod
    def of(cls, facts) -> MemberNotes:
        kinds = dict(facts.tuples("collective"))
        collectives = {o: f"{kinds[c].replace('_', '-')} {c}" for o, c in facts.tuples("fold") if c in kinds}
        return cls(collectives, module_paths(facts))

    def note(self, statement: str) -> str:
        return " ".join(n for n in (self.collectives.get(statement), self.modules.get(statement)) if n)

    def shown(self, statement: str, place: str) -> str:
        """`mm@0 (chip:0) model.layers.0.self_attn.q_proj`, as check, why and the REPL show a member."""
        note = self.note(statement)
        return f"{statement} ({place})" + (f" {note}" if note else "")


NO_NOTES = MemberNotes({}, {})


class VerdictTable:
    """Every candidate's verdict, sorted by fusion id, as columns of symbol ids: `fusions`;
    each one's `members` (program order) and `reasons` (sorted) as runs of a flat array
    that start at `member_start[k]` / `reason_start[k]`."""

    def __init__(self, symbols: Symbols, fusions: np.ndarray, members: np.ndarray, member_start: np.ndarray,
                 reasons: np.ndarray, reason_start: np.ndarray):
        self.symbols, self.fusions = symbols, fusions
        self.members, self.member_start = members, member_start
        self.reasons, self.reason_start = reasons, reason_start

    def __len__(self) -> int:
        return len(self.fusions)

    @cached_property
    def legal(self) -> np.ndarray:
        return np.diff(self.reason_start) == 0

    def __iter__(self):
        names = self.symbols.names
        for fusion, members, reasons in zip(self._names(self.fusions), self._runs(self.members, self.member_start),
                                            self._runs(self.reasons, self.reason_start)):
            yield Verdict(fusion, tuple(map(names.__getitem__, members)), tuple(map(names.__getitem__, reasons)))

    def reason_counts(self) -> dict[str, int]:
        """reason → how many candidates it refuses."""
        ids, counts = unique(self.reasons, return_counts=True)
        return dict(zip(self._names(ids), counts.tolist()))

    def json_lines(self, notes: MemberNotes = NO_NOTES) -> list[str]:
        """Each verdict as one line of JSON (`Verdict.to_json`, written directly); an imported
        program's also carry each member's module path (`modules`, in the order of `members`)."""
        legal = np.where(self.legal, "true", "false").tolist()
        reasons = _joined(list(map(quote, self._names(self.reasons))), self.reason_start)
        names = self._names(self.members)
        members = _joined(list(map(quote, names)), self.member_start)
        lines = [f'{{"fusion": {f}, "legal": {lg}, "reasons": [{r}], "members": [{m}]'
                 for f, lg, r, m in zip(map(quote, self._names(self.fusions)), legal, reasons, members)]
        if notes.modules:
            modules = _joined([quote(notes.modules.get(o, "")) for o in names], self.member_start)
            lines = [f'{line}, "modules": [{m}]' for line, m in zip(lines, modules)]
        if notes.collectives:
            kinds = _joined([quote(notes.collectives.get(o, "")) for o in names], self.member_start)
            lines = [f'{line}, "collectives": [{k}]' for line, k in zip(lines, kinds)]
        return [line + "}" for line in lines]

    def json_chunks(self, notes: MemberNotes = NO_NOTES, size: int = 1024):
        """`json_lines` of `size` verdicts at a time (what is written need not be held whole)."""
        for start in range(0, len(self), size):
            yield self.part(start, start + size).json_lines(notes)

    def part(self, start: int, stop: int) -> VerdictTable:
        """Verdicts start to stop (views of these columns)."""
        stop = min(stop, len(self))
        members, reasons = self.member_start[start:stop + 1], self.reason_start[start:stop + 1]
        return VerdictTable(self.symbols, self.fusions[start:stop], self.members[members[0]:members[-1]],
                            members - members[0], self.reasons[reasons[0]:reasons[-1]], reasons - reasons[0])

    def keep(self, wanted: np.ndarray) -> VerdictTable:
        """The verdicts `wanted` (a boolean per fusion), as a table of their own."""
        idx = np.flatnonzero(wanted)
        m_runs = [np.arange(self.member_start[k], self.member_start[k + 1]) for k in idx.tolist()]
        r_runs = [np.arange(self.reason_start[k], self.reason_start[k + 1]) for k in idx.tolist()]
        m_take = np.concatenate(m_runs) if m_runs else np.zeros(0, dtype=I64)
        r_take = np.concatenate(r_runs) if r_runs else np.zeros(0, dtype=I64)
        m_start = np.concatenate(([0], np.cumsum([len(r) for r in m_runs]))).astype(I64)
        r_start = np.concatenate(([0], np.cumsum([len(r) for r in r_runs]))).astype(I64)
        return VerdictTable(self.symbols, self.fusions[idx], self.members[m_take], m_start,
                            self.reasons[r_take], r_start)

    def under_module(self, modules: dict[str, str], prefix: str) -> np.ndarray:
        """Per fusion: whether a member lies under module `prefix` (the path or one below it)."""
        names = self.symbols.names
        inside = [modules.get(names[i], "") for i in self.members.tolist()]
        hit = np.array([under(m, prefix) for m in inside], dtype=bool)
        counts = np.add.reduceat(hit.astype(I64), self.member_start[:-1]) if len(hit) else np.zeros(0, dtype=I64)
        return counts > 0 if len(self.fusions) else np.zeros(0, dtype=bool)

    def text_columns(self, place_of: dict[int, str],
                     notes: MemberNotes = NO_NOTES) -> tuple[list[str], list[str], list[str]]:
        """Fusion, reasons and members (with their places) of each verdict, as `check` shows them."""
        names = self.symbols.names
        statements, of = unique(self.members, return_inverse=True)
        shown = [notes.shown(names[i], place_of.get(i, "?")) for i in statements.tolist()]
        members = _joined(list(map(shown.__getitem__, of.reshape(-1).tolist())), self.member_start)
        reasons = [r or "-" for r in _joined(self._names(self.reasons), self.reason_start)]
        return self._names(self.fusions), reasons, members

    def _names(self, ids: np.ndarray) -> list[str]:
        return list(map(self.symbols.names.__getitem__, ids.tolist()))

    @staticmethod
    def _runs(values: np.ndarray, starts: np.ndarray):
        flat, bounds = values.tolist(), starts.tolist()
        return (flat[a:b] for a, b in zip(bounds, bounds[1:]))


def _joined(flat: list[str], starts: np.ndarray) -> list[str]:
    """Each run flat[starts[k]:starts[k + 1]] joined by ", "."""
    bounds = starts.tolist()
    return [", ".join(flat[a:b]) for a, b in zip(bounds, bounds[1:])]


def _model_rows(model, rel: str, width: int, symbols: Symbols) -> np.ndarray:
    """A verdict relation of the model as rows in `symbols`' ids (as they are, for the fast engine)."""
    if getattr(model, "symbols", None) is symbols:
        found = model.arrays.get(rel)
        if found is not None:
            return found
    return encode_rows(symbols, ("symbol",) * width, list(model.tuples(rel)))


def _starts(groups: np.ndarray, count: int) -> np.ndarray:
    """Where each group's run starts in rows sorted by group (and where the last ends)."""
    return np.concatenate(([0], np.cumsum(np.bincount(groups, minlength=count)))).astype(I64)


def _distinct(values: np.ndarray) -> np.ndarray:
    values = np.sort(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))] if len(values) else values


def judge(model, facts: FactBase) -> VerdictTable:
    """Every candidate's verdict, sorted by id, its members in program order (the computed
    `topo` facts). The rules must derive exactly one of legal(f) or refused(f, _) for each
    candidate; anything else is a rule error."""
    symbols = facts.symbols
    member, topo = facts.rows("member"), facts.rows("topo")
    member = member if member is not None else np.zeros((0, 2), dtype=I64)
    topo = topo if topo is not None else np.zeros((0, 2), dtype=I64)
    legal = _model_rows(model, "legal", 1, symbols)
    refused = _model_rows(model, "refused", 2, symbols)
    size = len(symbols.names) + 1
    rank = np.full(size, len(topo), dtype=I64)  # program order of statements
    rank[topo[:, 0]] = topo[:, 1]
    ids = _distinct(member[:, 0])
    by_name = sorted(range(len(ids)), key=[symbols.names[i] for i in ids.tolist()].__getitem__)
    fusions = ids[np.asarray(by_name, dtype=I64)]
    slot = np.full(size, -1, dtype=I64)  # each candidate's place in the table
    slot[fusions] = np.arange(len(fusions))

    of = slot[member[:, 0]]
    ordered = np.lexsort((rank[member[:, 1]], of))
    members, member_start = member[ordered, 1], _starts(of, len(fusions))

    refused = refused[slot[refused[:, 0]] >= 0]
    kinds = _distinct(refused[:, 1])
    reason_rank = np.zeros(size, dtype=I64)
    reason_rank[kinds[np.asarray(sorted(range(len(kinds)), key=lambda k: symbols.names[kinds[k]]), dtype=I64)]] = \
        np.arange(len(kinds))
    of = slot[refused[:, 0]]
    ordered = np.lexsort((reason_rank[refused[:, 1]], of))
    table = VerdictTable(symbols, fusions, members, member_start, refused[ordered, 1], _starts(of, len(fusions)))

    said_legal = np.zeros(len(fusions), dtype=bool)
    said_legal[slot[legal[:, 0]][slot[legal[:, 0]] >= 0]] = True
    wrong = np.flatnonzero(said_legal != table.legal)
    if len(wrong):
        f = symbols.names[int(fusions[wrong[0]])]
        both = "both legal and refused" if said_legal[wrong[0]] else "neither legal nor refused"
        first = next(t for t in facts.ordered("member") if t[0] == f)  # the candidate's first line
        raise RuleError(f"the rules derive {both} for candidate {f}; exactly one must hold (SPEC §3)",
                        facts.where("member", first))
    return table


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


def place_ids(model, symbols: Symbols) -> dict[int, str]:
    """`places`, keyed by symbol id (read off the fast engine's rows without decoding them)."""
    if getattr(model, "symbols", None) is not symbols:
        return {symbols.ids[o]: p for o, p in places(model).items() if o in symbols.ids}
    found: dict[int, str] = {}
    for rel, label in (("on_spine", None), ("on_chip", "chip"), ("is_fold", "collective")):
        rows = model.arrays.get(rel)
        if rows is None:
            continue
        if label == "chip":
            found.update(zip(rows[:, 0].tolist(), [f"chip:{c}" for c in rows[:, 1].tolist()]))
        else:
            found.update(dict.fromkeys(rows[:, 0].tolist(), label or "spine"))
    return found


def module_paths(facts) -> dict[str, str]:
    """Statement → module path, an imported model's `attr module` (empty for other programs)."""
    return {o: v for o, _, v in facts.matching("attr", 1, "module")}


def under(module: str, prefix: str) -> bool:
    """Whether a module path is `prefix` or lies below it."""
    return module == prefix or module.startswith(prefix + ".")


def known_module(modules: dict[str, str], prefix: str) -> dict[str, str]:
    """`modules` (statement → module path) when some statement lies under `prefix`; else a
    usage error naming the prefix (a typo would otherwise show an empty table)."""
    if not any(under(m, prefix) for m in modules.values()):
        what = "the program names no module paths (attr module)" if not modules else \
            "no statement lies under it"
        raise UsageError(f"--module {prefix}: {what}")
    return modules
