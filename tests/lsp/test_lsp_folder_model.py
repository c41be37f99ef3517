"""The program beside the rules: after an edit, the model evaluated on top of the previous
one (only the strata that depend on a changed relation) answers exactly as one evaluated
from scratch, for every relation and every rule's lens."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_helpers import FACTS, RULES

from tprules.lsp.folder_model import FolderModel
from tprules.lsp.ruleset import RuleSet

PROGRAM = FACTS / "llama-layer-tp4"
TP, BASE = (RULES / "tp.dl").resolve(), (RULES / "base.dl").resolve()


def _cut(text: str, start: str, end: str) -> str:
    return text[:text.index(start)] + text[text.index(end):]


EDITS = {
    "delete the chip_and_spine rule": (TP, lambda t: _cut(t, 'refused(F, "chip_and_spine")', "\n.decl legal")),
    "narrow collective_fold": (TP, lambda t: t.replace("is_fold(O), !", "is_fold(O), member(F, P), on_chip(P, _), !")),
    "a new relation and rule": (TP, lambda t: t + "\n.decl pair(f: symbol, g: symbol)\npair(F, G) :- member(F, O), "
                                                  "member(G, O), F != G.\n"),
    "a base refusal for every matmul pair": (BASE, lambda t: t + '\nbase_refused(F, "two") :- member(F, A), '
                                                                  'op(A, "matmul"), member(F, B), op(B, "matmul"), '
                                                                  "A != B.\n"),
}


def _answers(view: FolderModel, rs: RuleSet) -> tuple[dict, list]:
    counts = {rel: view.count(rel) for rel in sorted(rs.checked.decls)}
    lenses = [(r.pos.file, r.pos.line, view.derived_by(r)) for r in rs.checked.program.rules if not r.is_fact]
    return counts, lenses


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edit_re_evaluated_on_the_previous_model_answers_as_a_fresh_one(edit):
    path, change = EDITS[edit]
    before = RuleSet.load(RULES)
    first = FolderModel.build(PROGRAM, before.checked)
    after = RuleSet.load(RULES, {path: change(path.read_text())}, before)
    assert after.problems == [] and after.checked is not None
    again = FolderModel.build(PROGRAM, after.checked, previous=first)
    assert again.incremental and again.loaded is first.loaded  # the facts were read once
    fresh = FolderModel.build(PROGRAM, after.checked)
    assert _answers(again, after) == _answers(fresh, after)
    assert _answers(again, after) != _answers(first, before)  # the edit changed something


def test_another_program_is_loaded_afresh():
    rs = RuleSet.load(RULES)
    first = FolderModel.build(PROGRAM, rs.checked)
    other = FolderModel.build(Path(FACTS / "megatron-mlp-tp2"), rs.checked, previous=first)
    assert not other.incremental and other.count("legal") != first.count("legal")
