"""The tail every driver shares: a traced and lowered graph made a program, sharded whole
(`built_whole`: every layer traced) or stamped for every layer from the traced ones
(`stamp_built`, layers/stamp.py), the folded constants checked, the candidates added; each
program input's values (`program_data`, a split one as one file per chip); then the folder
written once `Checked` passes, and the report (`written`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ImportFailed
from ..source.arrays import as_numpy
from .job import ImportJob, ImportReport

if TYPE_CHECKING:
    from ...program.facts import Facts
    from ..graph import Graph
    from ..source.constants import Constants


@dataclass
class Built:
    """The program's facts and what `program_data` needs to write its inputs."""

    facts: Facts
    statements: int
    candidates: int
    tensors: int
    folds: int
    folded: list[str]
    inputs: list  # (full name, reduced Tensor, placement, weight renamer)
    constants: Constants
    graph: Graph
    kinds: int | None = None
    traced: int | None = None
    names: dict = field(default_factory=dict)  # fx node → the graph value holding it (the lowerer's)
    output: object = None  # the fx node of the logits
    reduce: Any = None  # the context the graph was traced in (the reduced model), if any
    placement: dict = field(default_factory=dict)  # a stamped graph's value → its placement
    instances: Any = None  # a stamped graph's value → (full name, template, layer) of each copy (layers/stamp.py)


def check_folded(src, graph, constants, placement) -> None:
    """A folded constant subgraph reads only replicated weights (tprules folds no split one)."""
    from ..sharding.placement import Shard

    for name, node in graph.folded.items():
        split = [w for w in constants.leaves(node) if isinstance(placement.get(w), Shard)]
        if split:
            raise ImportFailed(f"{src.architecture}: the constant subgraph at {name} reads {split[0]}, which the plan "
                               "splits; tprules folds only replicated constants", src.where())


def built_whole(job: ImportJob, graph, constants, lowerer, tpp) -> Built:
    """A program traced whole (every layer) and sharded: its folded constants checked, its
    candidates added, and what `program_data` needs."""
    from ...program.candidates import candidates as add_candidates

    check_folded(job.src, graph, constants, tpp.placement)
    facts = tpp.builder.facts
    candidates = add_candidates(facts)
    job.clock.tick("shard")
    job.progress.advance()
    inputs = [(v.name, v, tpp.placement[v.name], None) for v in graph.inputs]
    return Built(facts, facts.count("op"), candidates, facts.count("tensor"), facts.count("fold"),
                 sorted(graph.folded), inputs, constants, graph, names=lowerer.names, output=lowerer.output)


def stamp_built(job: ImportJob, graph, constants, lowerer, caches: frozenset[str] = frozenset(),
                settled=None) -> Built:
    """A reduced trace's graph (its values tagged with their segments, layers/stamp.py) sharded and
    stamped for every layer of `job.kinds`; `caches` placed at their writes (Sharder.run's).
    `settled(graph, tpp, weights)` is False where the sharding placed an input otherwise than
    its values need (it adds their placements to `weights`): the graph is sharded again."""
    from ...program.candidates import candidates as add_candidates
    from ..layers.kinds import reduced
    from ..layers.stamp import Stamper, TaggingSharder
    from ..sharding.weights import plan_placements

    src, kinds = job.src, job.kinds
    assert kinds is not None
    style_of, weights, kinds_of = plan_placements(graph, job.tp, src.architecture, src.plan, src.base_prefix,
                                                  job.heads, src.buffers)
    sharder = TaggingSharder(graph, job.tp, src.architecture, style_of)
    tpp = sharder.run(weights, kinds_of, caches)
    if settled is not None and not settled(graph, tpp, weights):
        sharder = TaggingSharder(graph, job.tp, src.architecture, style_of)
        tpp = sharder.run(weights, kinds_of, caches)
    check_folded(src, graph, constants, tpp.placement)
    job.clock.tick("shard")
    stamper = Stamper(graph, sharder, kinds)
    facts = stamper.facts(job.progress)
    inputs = []
    for v in graph.inputs:
        for name, t, i in stamper.instances(v.name):
            inputs.append((name, v, tpp.placement[v.name], (lambda fqn, t=t, i=i: stamper.whole(fqn, t, i))))
    folded = sorted(name for f in graph.folded for name, _, _ in stamper.instances(f))
    candidates = add_candidates(facts)
    job.clock.tick("stamp")
    model = job.model
    built = Built(facts, facts.count("op"), candidates, facts.count("tensor"), facts.count("fold"), folded, inputs,
                  constants, graph, kinds.kinds, len(kinds.order), lowerer.names, lowerer.output,
                  lambda: reduced(model, kinds))
    built.placement, built.instances = tpp.placement, stamper.instances
    return built


def program_data(built: Built, tp: int, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every program input's values: `inputs` (program input → its whole value), the weights
    and the folded constants, a split one as one file per chip."""
    from ..sharding.placement import Replicate

    data = {}
    memos: dict = {}
    c = built.constants
    for name, v, placement, rename in built.inputs:
        if v.role == "input":
            whole = inputs[name]
        elif v.role == "weight":
            whole = as_numpy(c.weight(name))
        elif rename is None:
            whole = as_numpy(c.value(built.graph.folded[v.name]))
        else:
            whole = as_numpy(c.value_as(built.graph.folded[v.name], rename, memos.setdefault(rename, {})))
        chips = [(name, None)] if isinstance(placement, Replicate) else [(f"{name}@{k}", k) for k in range(tp)]
        for local, chip in chips:
            part = whole if chip is None else placement.slice_of(whole, chip, tp)
            data[local] = np.array(part, order="C")  # (ascontiguousarray makes a scalar 1-D)
    return data


class Checked:
    """write_folder's check of the written folder: well-formed (tprules' own checks), then
    `second(folder)`, the program against torch on a second input (verify.py), where one is
    given; its seconds kept for the timing line."""

    def __init__(self, second: Callable[[Path], None] | None = None):
        self.second = second
        self.seconds = 0.0

    def __call__(self, folder: Path) -> None:
        from ...program.load import load_program
        from ...workspace import load_checked_rules

        load_program(folder, load_checked_rules(None))  # the folder must pass before it replaces DIR
        if self.second is None:
            return
        started = time.perf_counter()
        try:
            self.second(folder)
        finally:
            self.seconds = time.perf_counter() - started


def written(job: ImportJob, built: Built, info: dict, data: dict, expected: dict, checked: Checked,
            **report) -> ImportReport:
    """A driver's last step: the folder written (source.json `info`) once `checked` passes,
    the check's seconds counted as `verify`, and the report (`report`: a driver's own fields)."""
    from .write import write_folder

    write_folder(job.out, built.facts, data, expected, info, validate=checked, progress=job.progress)
    job.clock.tick("write")
    job.clock.move("write", "verify", checked.seconds)
    return ImportReport(job.out, job.src.architecture, job.tp, built.statements, built.candidates, built.tensors,
                        built.folds, built.folded, job.clock.seconds, built.kinds, built.traced, **report)


__all__ = ["Built", "Checked", "built_whole", "check_folded", "program_data", "stamp_built", "written"]
