"""Random TP programs cut into random groups run like the reference.

Any cut of the program order into consecutive groups can run (a consecutive stretch of a
topological order has no path that leaves and re-enters it), whatever chips the members
belong to: the executor moves what a group's chip lacks. Only a fold must stay alone,
which is what the collective_fold rule is for (tests/runtime/test_run.py shows why).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plans import fused_plan
from strategies import tp_programs

from tprules.runtime import Program, execute
from tprules.workspace import Workspace


@st.composite
def cut_programs(draw):
    b = draw(tp_programs(candidates=False))
    folds = {o for o, _ in b.facts["fold"]}
    groups: list[list[str]] = []
    for o in b.statements:
        if o in folds:
            groups.append([o])
            groups.append([])
        elif not groups or draw(st.booleans()):
            groups.append([o])
        else:
            groups[-1].append(o)
    return b, [g for g in groups if len(g) > 1]


def check(b, groups, device: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(b.write(Path(tmp) / "p"))
        prog = Program.from_workspace(ws)
        plan = fused_plan(prog, groups)
        report = execute(ws, plan, device=device, prog=prog)
        assert report.kernels == len(plan.groups)
        assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs if not o.ok]


SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@settings(max_examples=40, **SETTINGS)
@given(cut_programs())
def test_random_cuts_run_on_the_simulator(case):
    check(*case, "sim")


@settings(max_examples=12, **SETTINGS)
@given(cut_programs())
def test_random_cuts_run_on_cpu(case):
    check(*case, "cpu")
