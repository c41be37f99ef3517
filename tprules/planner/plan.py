"""A fusion plan: every statement in exactly one group, each group with its place."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    """One fused op (or a statement alone). `place` is `chip:K`, `spine` or `collective`."""

    group: str
    members: tuple[str, ...]  # in program order
    place: str

    def to_json(self) -> dict:
        return {"group": self.group, "members": list(self.members), "place": self.place}


@dataclass(frozen=True)
class Plan:
    shim: str
    groups: tuple[Group, ...]  # in program order of their first member

    def to_json(self) -> dict:
        return {"shim": self.shim, "groups": [g.to_json() for g in self.groups]}

    def group_of(self) -> dict[str, Group]:
        return {o: g for g in self.groups for o in g.members}
