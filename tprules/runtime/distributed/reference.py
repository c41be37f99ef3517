"""The unfused reference across ranks: each rank computes, with the numpy semantics of
SPEC §4 (`semantics.apply`), only what its own chips and the spine hold, so no rank ever
holds another chip's weights.

A statement placed on chip k is computed by the rank holding k; a spine statement by
every rank; a fold by every rank, after each partial is sent to it, summed left to right
as in the one-process reference. Any operand a rank lacks comes point-to-point from the
lowest rank that has it. This path shares nothing with the run's all-reduce, so it checks it.
"""

from __future__ import annotations

import numpy as np

from ...program.model import Program
from ..execution.world import World
from ..values.reference import statement_value


def ranks_computing(prog: Program, statement, world: World) -> set[int]:
    place = prog.places.get(statement.name, "spine")
    if place.startswith("chip:") and not statement.fold:
        return {world.owner(int(place.split(":")[1]))}
    return set(range(world.size))


def rank_reference(prog: Program, inputs: dict[str, np.ndarray], world: World) -> dict[str, np.ndarray]:
    """Reference values of every tensor this rank computes or receives, by name."""
    values = dict(inputs)
    have: dict[str, set[int]] = {}
    for name in prog.inputs:
        home = prog.tensors[name].home
        have[name] = {world.owner(home)} if home is not None else set(range(world.size))
    for s in prog.statements:
        runs = ranks_computing(prog, s, world)
        for t in dict.fromkeys(s.reads):
            src = min(have[t])
            for r in sorted(runs - have[t]):
                info = prog.tensors[t]
                what = f"the reference's {t} for rank {r}"
                if world.rank == src:
                    world.send(np.ascontiguousarray(values[t], info.storage).reshape(info.buffer_shape), r, what)
                elif world.rank == r:
                    values[t] = world.recv(info.buffer_shape, info.storage, src, what).reshape(info.shape)
            have[t] |= runs
        if world.rank in runs:
            out = prog.tensors[s.writes]
            result = statement_value(prog, s, [values[t] for t in s.reads])
            values[s.writes] = result.reshape(out.shape).copy()
        have[s.writes] = runs
    return values
