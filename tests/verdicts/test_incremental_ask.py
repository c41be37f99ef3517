"""The planner's questions (Workspace.ask: only the member-dependent strata, evaluated over
the proposals' member facts against the base model) get the verdicts of a full
re-evaluation: the program written again with those proposals as its candidates, judged
by `check` from scratch."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tprules.planner import plan
from tprules.workspace import Workspace, load_checked_rules

PROGRAM = Path("facts/llama-layer-tp4")
CHECKED = load_checked_rules(None)
WS = Workspace(PROGRAM, checked=CHECKED)
STATEMENTS = list(WS.program.order)


def full_reevaluation(proposals: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "p"
        shutil.copytree(PROGRAM, copy)
        (copy / "member.facts").write_text("".join(f"{f}\t{o}\n" for f, ms in proposals.items() for o in ms))
        return {v.fusion: v.reasons for v in Workspace(copy, checked=CHECKED).verdicts()}


groups = st.lists(st.sampled_from(STATEMENTS), min_size=2, max_size=6, unique=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(groups, min_size=1, max_size=12))
def test_random_proposals_get_the_full_reevaluations_verdicts(members):
    proposals = {f"p{i}": tuple(ms) for i, ms in enumerate(members)}
    assert WS.ask(proposals) == full_reevaluation(proposals)


def test_the_planners_groups_get_the_full_reevaluations_verdicts():
    made = [g for g in plan(WS).groups if len(g.members) > 1]
    proposals = {g.group: g.members for g in made}
    answers = WS.ask(proposals)
    assert answers == full_reevaluation(proposals)
    assert all(reasons == () for reasons in answers.values())  # the planner made only legal fusions


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(groups, min_size=1, max_size=12))
def test_encoded_questions_get_the_full_reevaluations_verdicts(members):
    """What the planner asks on encoded member facts (Workspace.refused_rows)."""
    import numpy as np

    proposals = {f"q{i}": tuple(ms) for i, ms in enumerate(members)}
    symbols = WS.program.facts.symbols
    fusions = symbols.intern(list(proposals), distinct=True)
    rows = np.array([(symbols.ids[f], symbols.ids[o]) for f, ms in proposals.items() for o in ms], dtype=np.int64)
    refused = WS.refused_rows(fusions, rows)
    assert refused is not None
    assert dict(zip(proposals, refused.tolist())) == {f: bool(r) for f, r in full_reevaluation(proposals).items()}
