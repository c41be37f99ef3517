"""Hand-made plans for the runtime and codegen tests (the real planner's plans are tested through `run`)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from tprules.planner.plan import Group, Plan

FACTS = Path(__file__).resolve().parent.parent / "facts"
EXAMPLES = sorted(p.name for p in FACTS.iterdir() if (p / "op.facts").exists())
CASES = Path(__file__).resolve().parent / "data" / "runtime" / "fused"


@lru_cache(maxsize=None)
def example(name: str):
    """(Workspace, Program) of an example under facts/, loaded once per test session."""
    from tprules.runtime import Program
    from tprules.workspace import Workspace

    ws = Workspace(FACTS / name)
    return ws, Program.from_workspace(ws)


def group_place(prog, members) -> str:
    """Where a fused op runs, as the planner says it: the chip of a chip member, else the
    spine; a fold alone is the collective."""
    places = [prog.places[o] for o in members if prog.places[o] != "collective"]
    chips = sorted(p for p in places if p.startswith("chip:"))
    return chips[0] if chips else ("spine" if places else "collective")


def fused_plan(prog, groups) -> Plan:
    """The given groups (named g0, g1, ...), every other statement alone."""
    taken = {o for members in groups for o in members}
    out = [Group(f"g{i}", tuple(sorted(ms, key=prog.position.get)), group_place(prog, ms)) for i, ms in enumerate(groups)]
    out += [Group(s.name, (s.name,), prog.places[s.name]) for s in prog.statements if s.name not in taken]
    return Plan(prog.shim, tuple(out))


def cases() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(CASES.glob("*.json"))}


def spine_statement(b, name, cls, reads, shape, dtype="f32", **attrs):
    """A statement of `b` writing a new spine tensor of its own name (class test programs)."""
    return b.stmt(name, cls, reads, b.tensor(name, shape, dtype, spine=True), **attrs)


def write_programs(cases: dict, tmp_path_factory) -> dict:
    """name → the folder of each one-chip program that `cases[name](builder)` builds, with
    producer-consumer candidates."""
    from tprules.program.builder import ProgramBuilder
    from tprules.program.llama import producer_consumer_candidates

    folders = {}
    for name, build in cases.items():
        b = ProgramBuilder(chips=1)
        build(b)
        producer_consumer_candidates(b)
        folders[name] = b.write(tmp_path_factory.mktemp(name))
    return folders
