"""`:kernels`: which collectives could become collective kernels under this shim, and why not
the others (SPEC §3 "Collective kernels"; rules/collective.dl).

Each fold of the program heads the pattern of its collective's kind. The answer for it is
one of: the shim does not declare that pattern; no candidate is exactly the pattern; or
each candidate that is, legal or refused, a refusal with the tuple the rules name (the
rule's bindings in the proof of `refused(F, reason)`: which matmul's partial is read
outside and by what, or which chip's block is how narrow).
"""

from __future__ import annotations

import json

from rich.console import Group
from rich.text import Text

from ..program.schema import PATTERNS

PATTERN_OF = {kind: pattern for pattern, kind in PATTERNS.items()}
# What each guard's proof names: the variables of its rule (rules/collective.dl) worth showing.
BLOCKING = {"shared_partial": ("M", "T", "X"), "too_narrow": ("O", "B", "L")}


def _blocking(explainer, fusion: str, reason: str) -> dict[str, object]:
    """The bindings of the rule that refuses `fusion` for `reason` (empty for a base reason)."""
    names = BLOCKING.get(reason)
    if names is None:
        return {}
    explainer.prover.begin()
    proof = explainer.prover.prove("refused", (fusion, reason))
    bindings = dict(getattr(proof, "bindings", ()))
    found = {n: bindings[n] for n in names if n in bindings}
    if reason == "too_narrow":  # the block itself: the first narrow one the model holds
        block = next((t for t in sorted(explainer.prover.model.tuples("block"))
                      if t[0] == found.get("O") and t[2] == found.get("B")), None)
        if block is not None:
            found["block"] = block[1]
    return found


def _said(reason: str, found: dict[str, object]) -> str:
    if reason == "shared_partial" and found:
        return f"shared_partial: {found['M']}'s partial {found['T']} is also read by {found['X']}"
    if reason == "too_narrow" and found:
        return f"too_narrow: block {found.get('block', '?')} is {found['B']} wide, under min_collective_block {found['L']}"
    return reason


def answer(session):
    ws = session.workspace
    facts, model, shim = ws.program.facts, ws.model, ws.shim
    declared = [p for s, p in facts.ordered("collective_kernel") if s == shim]
    minimum = next((n for s, k, n in facts.tuples("limit") if s == shim and k == "min_collective_block"), None)
    kinds = dict(facts.tuples("collective"))
    kernels = {f: p for f, p in model.tuples("kernel")}
    members: dict[str, set[str]] = {}
    for f, o in facts.tuples("member"):
        members.setdefault(f, set()).add(o)
    refused: dict[str, list[str]] = {}
    for f, r in model.tuples("refused"):
        refused.setdefault(f, []).append(r)
    rows = []
    for fold, collective in facts.ordered("fold"):
        kind = kinds.get(collective, "all_reduce")
        pattern = PATTERN_OF[kind]
        row = {"fold": fold, "collective": collective, "kind": kind, "pattern": pattern,
               "declared": pattern in declared, "kernels": []}
        for f in sorted(f for f, p in kernels.items() if p == pattern and fold in members.get(f, ())):
            reasons = sorted(refused.get(f, []))
            row["kernels"].append({"fusion": f, "legal": not reasons, "reasons": reasons,
                                   "blocking": {r: _blocking(session.explainer, f, r) for r in reasons
                                                if r in BLOCKING}})
        rows.append(row)
    if session.format == "json":
        return json.dumps({"shim": shim, "declares": declared, "min_collective_block": minimum, "collectives": rows},
                          default=str)
    return _text(shim, declared, minimum, rows)


def _text(shim: str, declared: list[str], minimum, rows: list[dict]):
    from .answers import _table

    what = f"declares {', '.join(declared)}" if declared else "declares no collective kernel"
    if minimum is not None:
        what += f"; min_collective_block {minimum}"
    head = Text(f"collective kernels under shim {shim} ({what})")
    if not rows:
        return Group(head, Text("the program has no collective"))
    table = _table("fold", "collective", "pattern", "answer")
    for row in rows:
        shown = f"{row['kind'].replace('_', '-')} {row['collective']}"
        if not row["declared"]:
            answers = [f"no: the shim does not declare {row['pattern']}"]
        elif not row["kernels"]:
            answers = [f"no: no candidate is exactly {row['pattern']}"]
        else:
            answers = [f"{k['fusion']}: legal" if k["legal"] else
                       f"{k['fusion']}: refused " + "; ".join(_said(r, k["blocking"].get(r, {})) for r in k["reasons"])
                       for k in row["kernels"]]
        table.add_row(row["fold"], shown, row["pattern"], "\n".join(answers))
    return Group(head, table)
