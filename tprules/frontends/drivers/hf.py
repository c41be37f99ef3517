"""The driver of `tprules import hf`: the passes of frontends/__init__.py, in order.

>>> report = import_hf("/tmp/tiny-llama", tp=2, out="/tmp/llama-tp2")   # doctest: +SKIP
>>> report.statements, report.candidates                                 # doctest: +SKIP
(316, 548)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import UsageError
from ..errors import ImportFailed
from ..graph import INPUT, OUTPUT

if TYPE_CHECKING:
    from ...program.facts import Facts
    from ..graph import Graph
    from ..source.constants import Constants


@dataclass
class ImportReport:
    out: Path
    architecture: str
    tp: int
    statements: int
    candidates: int
    tensors: int
    folds: int
    folded: list[str]  # constant subgraphs folded into input tensors
    seconds: dict[str, float] = field(default_factory=dict)
    kinds: int | None = None  # layer kinds traced once each (None: every layer traced)
    traced: int | None = None  # decoder layers traced
    collectives: dict[str, int] | None = None  # import torch: how many folds of each collective kind
    inputs: dict[str, list[int]] | None = None  # import torch: each program input's shape
    drawn: bool = False  # import torch: the check's second input drawn by tprules (inputs() takes no seed)
    ep: bool = False  # import hf --ep: the expert-parallel plan

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())


def import_hf(source, tp: int, out, seq: int = 8, batch: int = 1, layers: int | None = None, plan=None,
              seed: int = 0, no_data: bool = False, every_layer: bool = False, progress=None,
              verify: bool = True, ep: bool = False, experts: str | None = None) -> ImportReport:
    """Write the program folder `out` for the Hugging Face model folder `source` on `tp` chips
    (`ep`: under the config's expert-parallel plan in place of its tensor-parallel one;
    `experts`: transformers' experts form traced, `grouped_mm` (the default, under `ep` too:
    each chip sorts its own routing slots, dispatch.py) or `batched_mm`).

    Each kind of decoder layer is traced once and stamped for every layer of that kind
    (stamp.py); `every_layer` traces every layer instead (the same facts, slower). With
    data, `verify` first checks the program against torch on a second input (verify.py).
    `experts`: the form of a mixture of experts, transformers' `grouped_mm` or `batched_mm`
    (hf.EXPERTS)."""
    from ..source.startup import load_extra

    clock = _Clock()
    load_extra()
    for flag, value in (("--tp", tp), ("--seq", seq), ("--batch", batch)):
        if value < 1:
            raise UsageError(f"{flag} takes a count of at least 1; got {value}")
    from ...progress import Progress
    from ..layers.kinds import layer_kinds
    from ..sharding.weights import Heads, check_experts, check_heads
    from ..source.pretrained import apply_plan, build_model, head_counts, read_source
    from .write import check_out

    experts = experts or "grouped_mm"  # hf.EXPERTS' first
    check_out(Path(out))
    progress = progress or Progress(False)
    try:
        clock.tick("load")  # torch and transformers (startup.py)
        src = read_source(source, layers, plan, ep)
        heads = Heads(*head_counts(src.config))
        if not ep:  # the EP plan splits no attention heads
            check_heads(src, heads, tp)
        check_experts(src, tp if ep else None)
        _quiet_transformers()
        model = build_model(src, seed, no_data, experts)
        apply_plan(src, model)
        clock.tick("model")
        kinds = None if every_layer else layer_kinds(model)
        built = None
        if kinds is not None and len(kinds.order) < kinds.count:
            from ..layers.stamp import CannotStamp

            try:
                built = _stamped(src, model, kinds, tp, batch, seq, heads, clock, progress)
            except (CannotStamp, ImportFailed):
                built = None  # traced whole: a model that fails is reported as the full trace names it
        if built is None:
            built = _traced(src, model, tp, batch, seq, heads, clock, progress)
        data, expected = {}, {}
        if not no_data:
            data, expected = _data(src, model, built, tp, batch, seq, seed)
        clock.tick("data")
        checked = _Checked(src, model, built, seed, batch, seq, verify and not no_data, data)
        options = {"ep": ep, "seq": seq, "batch": batch}
        return written(out, source, src, built, tp, options, seed, no_data, data, expected, checked, clock, progress)
    finally:
        progress.close()


def written(out, source, src, built: _Built, tp: int, options: dict, seed: int, no_data: bool,
            data: dict, expected: dict, checked: _Checked, clock: _Clock, progress) -> ImportReport:
    """An import's last step (import hf's and its decode step's): source.json (`options` the
    import's own keys after `tp`), the folder written once `checked` passes, the check's
    seconds counted as `verify`, and the report."""
    from .write import write_folder

    info = {"source": str(Path(source)), "architecture": src.architecture, "model_type": src.config.model_type,
            "tp": tp, **options, "layers": getattr(src.config, "num_hidden_layers", None), "seed": seed,
            "no_data": no_data, "plan": src.plan, **_versions(), "statements": built.statements,
            "candidates": built.candidates, "folded": built.folded, "layer_kinds": built.kinds,
            "traced_layers": built.traced}
    write_folder(Path(out), built.facts, data, expected, info, validate=checked, progress=progress)
    clock.tick("write")
    clock.move("write", "verify", checked.seconds)
    return ImportReport(Path(out), src.architecture, tp, built.statements, built.candidates, built.tensors,
                        built.folds, built.folded, clock.seconds, built.kinds, built.traced, ep=bool(options.get("ep")))


@dataclass
class _Built:
    """The program's facts and what `_data` needs to write its inputs."""

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
    reduce: object = None  # the context the graph was traced in (the reduced model), if any
    placement: dict = field(default_factory=dict)  # a stamped graph's value → its placement
    instances: Any = None  # a stamped graph's value → (full name, template, layer) of each copy (stamp.py)


def _lowered(src, model, batch, seq, arch, tag=None):
    from ..lowering.walk import Lowerer
    from ..source.constants import Constants
    from ..source.trace import trace

    program = trace(model, batch, seq, arch)
    constants = Constants(program, model)
    lowerer = Lowerer(program, constants, arch)
    if tag is not None:
        tag(lowerer, program)
    return program, constants, lowerer


def _check_folded(src, graph, constants, placement) -> None:
    from ..sharding.placement import Shard


    for name, node in graph.folded.items():
        split = [w for w in constants.leaves(node) if isinstance(placement.get(w), Shard)]
        if split:
            raise ImportFailed(f"{src.architecture}: the constant subgraph at {name} reads {split[0]}, which the plan "
                               "splits; tprules folds only replicated constants", src.where())


def _traced(src, model, tp, batch, seq, heads, clock, progress) -> _Built:
    """Every layer traced: the plain path (and the reference the stamped one must equal)."""
    from ..sharding.sharder import shard

    progress.phase("trace every layer", 1)
    _, constants, lowerer = _lowered(src, model, batch, seq, src.architecture)
    clock.tick("trace")
    graph = lowerer.run()
    clock.tick("lower")
    tpp = shard(graph, tp, src.architecture, src.plan, src.base_prefix, heads, src.buffers)
    return built_whole(src, graph, constants, lowerer, tpp, clock, progress)


def built_whole(src, graph, constants, lowerer, tpp, clock, progress) -> _Built:
    """A program traced whole (every layer) and sharded: its folded constants checked, its
    candidates added, and what `_data` needs (import hf's and import torch's last step)."""
    from ...program.candidates import candidates as add_candidates

    _check_folded(src, graph, constants, tpp.placement)
    facts = tpp.builder.facts
    candidates = add_candidates(facts)
    clock.tick("shard")
    progress.advance()
    inputs = [(v.name, v, tpp.placement[v.name], None) for v in graph.inputs]
    return _Built(facts, facts.count("op"), candidates, facts.count("tensor"), facts.count("fold"),
                  sorted(graph.folded), inputs, constants, graph, names=lowerer.names, output=lowerer.output)


def _stamped(src, model, kinds, tp, batch, seq, heads, clock, progress) -> _Built:
    """Each layer kind traced once (its first and second layers), every layer stamped."""
    from ..layers.kinds import reduced
    from ..layers.stamp import Segments, tag_lowerer

    progress.phase(f"trace {len(kinds.order)} of {kinds.count} layers", 1)
    segments: dict[str, Any] = {}  # the Segments and the graph tagged with them

    def tag(lowerer, program):
        segments["s"] = Segments(program, kinds)
        segments["g"] = tag_lowerer(lowerer, segments["s"])

    with reduced(model, kinds):
        _, constants, lowerer = _lowered(src, model, batch, seq, src.architecture, tag)
    clock.tick("trace")
    progress.advance()
    graph = lowerer.run()
    clock.tick("lower")
    return stamp_built(src, model, graph, constants, lowerer, kinds, tp, heads, clock, progress)


def stamp_built(src, model, graph, constants, lowerer, kinds, tp, heads, clock, progress, place=None) -> _Built:
    """A reduced trace's graph (its values tagged with their segments, stamp.py) sharded and
    stamped for every layer (import hf's and its decode step's last step). `place(graph,
    style_of, weights, kinds)` may add placements of program inputs before the sharding."""
    from ...program.candidates import candidates as add_candidates
    from ..layers.kinds import reduced
    from ..layers.stamp import Stamper, TaggingSharder
    from ..sharding.weights import plan_placements

    style_of, weights, kinds_of = plan_placements(graph, tp, src.architecture, src.plan, src.base_prefix, heads,
                                                  src.buffers)
    if place is not None:
        place(graph, style_of, weights, kinds_of)
    sharder = TaggingSharder(graph, tp, src.architecture, style_of)
    tpp = sharder.run(weights, kinds_of)
    _check_folded(src, graph, constants, tpp.placement)
    clock.tick("shard")
    stamper = Stamper(graph, sharder, kinds)
    facts = stamper.facts(progress)
    inputs = []
    for v in graph.inputs:
        for name, t, i in stamper.instances(v.name):
            inputs.append((name, v, tpp.placement[v.name], (lambda fqn, t=t, i=i: stamper.whole(fqn, t, i))))
    folded = sorted(name for f in graph.folded for name, _, _ in stamper.instances(f))
    candidates = add_candidates(facts)
    clock.tick("stamp")
    built = _Built(facts, facts.count("op"), candidates, facts.count("tensor"), facts.count("fold"), folded, inputs,
                   constants, graph, kinds.kinds, len(kinds.order), lowerer.names, lowerer.output,
                   lambda: reduced(model, kinds))
    built.placement, built.instances = tpp.placement, stamper.instances
    return built


def _data(src, model, built: _Built, tp, batch, seq, seed):
    """Every input's values (a split weight one file per chip), and torch's own logits."""
    import torch

    vocab = int(src.config.vocab_size)
    ids = np.random.default_rng(seed).integers(0, vocab, size=(batch, seq)).astype(np.int64)
    data = program_data(built, tp, {INPUT: ids})
    with torch.no_grad():
        logits = model(input_ids=torch.from_numpy(ids), use_cache=False).logits
    return data, {OUTPUT: _numpy(logits)}


def program_data(built: _Built, tp: int, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
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
            whole = _numpy(c.weight(name))
        elif rename is None:
            whole = _numpy(c.value(built.graph.folded[v.name]))
        else:
            whole = _numpy(c.value_as(built.graph.folded[v.name], rename, memos.setdefault(rename, {})))
        chips = [(name, None)] if isinstance(placement, Replicate) else [(f"{name}@{k}", k) for k in range(tp)]
        for local, chip in chips:
            part = whole if chip is None else placement.slice_of(whole, chip, tp)
            data[local] = np.array(part, order="C")  # (ascontiguousarray makes a scalar 1-D)
    return data


def _numpy(t) -> np.ndarray:
    a = t.detach().cpu()
    if a.is_floating_point():
        a = a.float()
    return a.numpy()


class _Checked:
    """write_folder's check of the written folder: well-formed, then (`verify`) the reference
    on a second input against torch (verify.py), its seconds kept for the timing line."""

    def __init__(self, src, model, built: _Built, seed: int, batch: int, seq: int, verify: bool, data: dict):
        self.src, self.model, self.built, self.data = src, model, built, data
        self.seed, self.batch, self.seq, self.verify = seed, batch, seq, verify
        self.seconds = 0.0

    def __call__(self, folder: Path) -> None:
        _wellformed(folder)
        if not self.verify:
            return
        started = time.perf_counter()
        try:
            self.second(folder)
        finally:
            self.seconds = time.perf_counter() - started

    def second(self, folder: Path) -> None:
        """The program against torch on the second input (a decode step's: decode.py)."""
        from .verify import second_ids, verify

        ids = second_ids(self.seed, int(self.src.config.vocab_size), self.batch, self.seq)
        names = [name for name, v, _, _ in self.built.inputs if v.role == "input"]
        verify(folder, self.src, self.model, self.built, ids, names, self.data)


def _wellformed(folder: Path) -> None:
    """The folder must pass tprules' own checks before it replaces DIR."""
    from ...program.load import load_program
    from ...workspace import load_checked_rules

    load_program(folder, load_checked_rules(None))


def _versions() -> dict:
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}


def _quiet_transformers() -> None:
    import warnings

    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning, module="copyreg")


class _Clock:
    def __init__(self):
        self.last = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def tick(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self.last
        self.last = now

    def move(self, phase: str, to: str, seconds: float) -> None:
        """`seconds` of `phase` counted as `to` instead (a part timed inside another)."""
        if seconds:
            self.seconds[phase] -= seconds
            self.seconds[to] = self.seconds.get(to, 0.0) + seconds


__all__ = ["INPUT", "OUTPUT", "ImportReport", "import_hf", "program_data"]
