"""Collective kernels at run time (SPEC §3): a planned group of place `collective` that holds
more than its fold runs as one collective, with the unfused program's outputs.

Its parts are the fold alone (the collective: an all-gather, reduce-scatter or all-reduce,
as runtime/execution/executor.py runs a fold alone) and each other member alone, where it runs (the matmul
of chip k on chip k; the residual add and the RMSNorm on the spine). Each part is lowered
and compiled as any group is (so the kernel compiles for every device, cuda included).

- In one process (`--device cpu|sim|cuda`), the parts run in order on the chips' queues:
  every value is the unfused program's, bit for bit.
- As MPI ranks (`--ranks N`, `--mpi`) the kernel runs on the host of each rank as the
  backends overlap it (runtime/execution/overlap.py): the all-gather as a ring of nonblocking sends and
  receives, each rank multiplying the block it has while the next is in flight; the
  reduce-scatter one destination block at a time, each sent while the next is computed; the
  all-reduce in row chunks, the norm applied to each chunk as it arrives.

>>> from tprules.planner.plan import Group
>>> from tprules.workspace import Workspace
>>> prog = Program.from_workspace(Workspace("facts/async-tp-mlp-tp2"))
>>> k = collective_kernel(Group("g0", ("allgather", "mm1_0", "mm1_1"), "collective"), prog)
>>> k.pattern, [p.place for p in k.parts]
('all_gather_matmul', ['collective', 'chip:0', 'chip:1'])
"""

from __future__ import annotations

from dataclasses import dataclass

from ...planner.kernels import pattern_of
from ...planner.plan import Group
from ...program.model import Program


@dataclass(frozen=True)
class CollectiveKernel:
    """A collective kernel of the plan: its group, pattern, fold and parts (in program order)."""

    group: str
    pattern: str
    fold: str
    members: tuple[str, ...]
    parts: tuple[Group, ...]  # the fold alone, each other member alone, named as the group


def collective_kernel(group: Group, prog: Program) -> CollectiveKernel | None:
    """The collective kernel a planned group is, or None (a fold alone, or any other group)."""
    if group.place != "collective":
        return None
    pattern = pattern_of(prog, group.members)
    if pattern is None:
        return None
    fold = next(o for o in group.members if prog.statement(o).fold)
    parts = tuple(Group(group.group, (o,), "collective" if o == fold else prog.places.get(o, "spine"))
                  for o in group.members)
    return CollectiveKernel(group.group, pattern, fold, group.members, parts)


def expand(groups: list[Group], prog: Program) -> tuple[list[Group], dict[int, CollectiveKernel]]:
    """The groups to lower, each collective kernel as its parts; and where each kernel's
    parts begin in that list (its parts follow each other)."""
    out: list[Group] = []
    spans: dict[int, CollectiveKernel] = {}
    for g in groups:
        kernel = collective_kernel(g, prog)
        if kernel is None:
            out.append(g)
            continue
        spans[len(out)] = kernel
        out.extend(kernel.parts)
    return out, spans
