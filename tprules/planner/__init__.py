"""The fusion planner: greedy vertical and horizontal fusion that asks the rules before each merge.

PLACEHOLDER until the planner lands: `plan` returns every statement alone.
"""

from __future__ import annotations

from .plan import Group, Plan


def plan(workspace) -> Plan:
    """The fusion plan of a workspace's program for its shim."""
    places = workspace.places()
    groups = tuple(Group(o, (o,), places.get(o, "spine")) for o in workspace.program.order)
    return Plan(workspace.shim, groups)


__all__ = ["Group", "Plan", "plan"]
