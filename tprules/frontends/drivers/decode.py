"""The driver of `tprules import hf SOURCE --tp N --decode [--past P] [--cache-len L]`: one
decode step (source/decode_step.py) through the passes of `import hf` (frontends/__init__.py).

- the step is traced with torch.export, its token, position and caches program inputs;
- each layer's cache is placed as its key/value projection's output is (split by key/value
  heads, on axis 1 of [batch, kv heads, L, head]), so each chip holds its own heads' cache;
  the write at the position is a `put_along` on the chip, and the updated caches are
  program outputs `model.layers.I.key_cache_new` and `..value_cache_new`, each chip's its own;
- each layer kind is traced once and every layer stamped where `import hf` stamps
  (layers/stamp.py);
- data/ holds the caches as torch's prefill of P seeded prompt tokens left them and the new
  token; expected/ torch's logits and updated caches of the step (a split cache's expected
  value one file per chip, as its tensors are), expected/prompt_ids.npy the prompt;
- the program checks itself on a second prompt before the folder is written (verify.check).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from ..errors import ImportFailed
from ..graph import INPUT, OUTPUT
from ..layers.per_layer import per_layer_positions
from ..layers.stamp import CannotStamp
from ..sharding.placement import REPLICATE, Placement, Shard
from ..source import decode_step as ds
from .built import Built, Checked, built_whole, program_data, stamp_built, written
from .hf import plan_report, pretrained_info
from .job import ImportJob, ImportReport, prepare, pretrained
from .ties import refuse_ties


@dataclass(frozen=True)
class _Cache:
    """The step's place in its static cache: `past` tokens before it, `length` in all."""

    past: int
    length: int

    @property
    def fresh(self) -> bool:
        """A prefill into the cache: its recurrent states read as a new cache's (decode_step.stepping)."""
        return self.past == 0


def import_decode(source, tp: int, out, past: int = 8, cache_len: int | None = None, batch: int = 1,
                  layers: int | None = None, plan=None, seed: int = 0, no_data: bool = False, progress=None,
                  verify: bool = True, every_layer: bool = False, step: int = 1) -> ImportReport:
    """Write the program folder `out`: one decode step of the model at `source` on `tp` chips,
    after a prompt of `past` tokens, with a static cache of `cache_len` (default past + step).
    `step` tokens a step (a prefill into the cache: `past` 0, `step` the prompt's length)."""
    from ..layers.kinds import layer_kinds

    cache = _Cache(past, past + step if cache_len is None else cache_len)
    with prepare(out, tp, batch, step, seed, no_data, verify, progress) as job:
        pretrained(job, source, layers, plan, check=lambda src: ds.check_lengths(src, past, cache.length, batch, step))
        job.kinds = None if every_layer else layer_kinds(job.model)
        built = _build(job, cache)
        refuse_ties(job, built)
        per_layer_positions(built, {ds.POSITION, *built.folded})
        within_layers(built)
        placement = full_placement(built)
        data, expected = {}, {}
        if not no_data:
            data, expected = _data(job, cache, built, placement)
        job.clock.tick("data")
        checked = Checked(partial(_second, job, cache, built, placement, data) if job.verify else None)
        options = {"decode": True, "past": past, "cache_len": cache.length, "batch": batch, "step": step}
        return written(job, built, pretrained_info(job, source, options, built), data, expected, checked,
                       **plan_report(job))


def _build(job: ImportJob, cache: _Cache) -> Built:
    """The traced, lowered and sharded step: each layer kind traced once and every layer
    stamped (layers/stamp.py) where import hf would stamp the prefill, else every layer traced."""
    if job.stamps:
        try:
            return _stamped(job, cache)
        except (CannotStamp, ImportFailed):
            pass  # traced whole: a model that fails is reported as the full trace names it
    return _whole(job, cache)


def _lowered(job: ImportJob, cache: _Cache, tag=None):
    """The step traced (torch.export) and lowered to a Graph."""
    from ..lowering.walk import Lowerer
    from ..source.constants import Constants
    from ..source.trace import export

    src, model = job.src, job.model
    static = ds.static_cache(src, model, job.tokens[0], cache.length, traced=True)
    kinds, path = ds.state_kinds(static), ds.layers_path(model)
    with ds.stepping(model, static, cache.fresh) as step:
        program = export(step, ds.example(job.tokens, static), {}, src.architecture)
    job.clock.tick("trace")
    constants = Constants(program, model)
    names = dict(zip(constants.user_inputs, ds.input_names(path, kinds)))
    lowerer = Lowerer(program, constants, src.architecture, inputs=names, more=ds.output_names(path, kinds),
                      positions=cache.length)
    if tag is not None:
        tag(lowerer, program)
    graph = lowerer.run()
    job.clock.tick("lower")
    return constants, lowerer, graph


def _whole(job: ImportJob, cache: _Cache) -> Built:
    from ..sharding.sharder import Sharder
    from ..sharding.weights import plan_placements

    src = job.src
    job.progress.phase("trace the decode step", 1)
    constants, lowerer, graph = _lowered(job, cache)
    style_of, weights, kinds = plan_placements(graph, job.tp, src.architecture, src.plan, src.base_prefix, job.heads,
                                               src.buffers)
    caches = written_caches(graph) if job.tp > 1 else frozenset()
    tpp = Sharder(graph, job.tp, src.architecture, style_of).run(weights, kinds, caches)
    if not settled(graph, tpp, weights):
        tpp = Sharder(graph, job.tp, src.architecture, style_of).run(weights, kinds, caches)
    built = built_whole(job, graph, constants, lowerer, tpp)
    built.placement = tpp.placement
    return built


def _stamped(job: ImportJob, cache: _Cache) -> Built:
    """Each layer kind's first and second layers traced; each cache input and output tagged
    with the layer that writes it; every layer stamped (built.stamp_built)."""
    from ...ops import Ops
    from ..layers.kinds import reduced
    from ..layers.stamp import Segments, tag_lowerer

    kinds = job.kinds
    assert kinds is not None
    job.progress.phase(f"trace {len(kinds.order)} of {kinds.count} layers of the decode step", 1)
    tagged: dict = {}

    def tag(lowerer, program):
        tagged["s"] = Segments(program, kinds)
        tag_lowerer(lowerer, tagged["s"])

    with reduced(job.model, kinds, renumber=True):
        constants, lowerer, graph = _lowered(job, cache, tag)
    constants.forget_weights()
    job.progress.advance()
    segments = tagged["s"]
    outputs = set(lowerer.more.values())
    states = set(lowerer.input_names.values()) - {ds.POSITION, INPUT} if lowerer.input_names else set()
    for s in graph.stmts:
        if s.cls == Ops.PUT_ALONG and graph.values[s.reads[0]].role == "input":
            graph.segment[s.reads[0]] = segments.of[s.name]
        elif s.name in outputs:
            segments.of[s.name] = graph.segment[s.name] = graph.segment[s.reads[0]]
    for s in graph.stmts:  # a state no put_along writes (a recurrent one): the layer of its first reader
        for r in s.reads:
            if r in states and r not in graph.segment and s.name in segments.of:
                graph.segment[r] = segments.of[s.name]

    caches = written_caches(graph) if job.tp > 1 else frozenset()
    built = stamp_built(job, graph, constants, lowerer, caches, settled)
    _check_names(built.facts)
    return built


def _check_names(facts) -> None:
    """CannotStamp where two stamped statements or tensors share a name (fx numbers a step's
    nodes with gaps that layers/stamp.py cannot follow in some models: the step is traced whole)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for rel, cols in (("op", (0,)), ("writes", (0,)), ("writes", (1,)), ("reads", (0, 1)), ("tensor", (0,))):
        if not facts.count(rel):
            continue
        keys = [pc.cast(facts.column(rel, c), pa.string()) for c in cols]
        joined = keys[0] if len(keys) == 1 else pc.binary_join_element_wise(*keys, "\t")
        if len(pc.unique(joined)) != facts.count(rel):
            raise CannotStamp(f"two stamped rows of {rel}.facts share a name")


def settled(graph, tpp, weights) -> bool:
    """Whether each recurrent state (no put_along writes it) is placed as its update is: a
    state is replicated in a first sharding, and where its update comes out split (of its
    shape), that placement goes into `weights` for a second (False). The plans of today's
    hybrid models replicate or gather their recurrent mixers, so the first sharding stands."""
    found = state_placements(graph, tpp, recurrent_states(graph, written_caches(graph)))
    moved = {name: p for name, p in found.items() if p != tpp.placement[name]}
    weights.update(moved)
    return not moved


def within_layers(built) -> None:
    """Drop the sibling candidates whose two statements lie in different decoder layers (a
    producer and its consumer in the next layer stay: the residual and the next norm). A
    step computes its causal mask and rotary rows from the position once and every layer's
    attention on every chip reads them: their readers would pair across layers (the 405B at
    TP 16: 2.6 million candidates), each pair refused as a `cycle` (a path runs from the
    earlier layer to the later through the layers between) at a cost that grows with both."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ...program.facts import interned

    facts = built.facts
    column = facts.column
    if len(column("member", 0)) == 0:
        return
    modules = pc.equal(column("attr", 1), "module")
    named, paths = pc.filter(column("attr", 0), modules), pc.filter(column("attr", 2), modules)
    members, writers, readers = column("member", 1), column("writes", 0), column("reads", 0)
    code, _ = interned(pa.chunked_array([named, members, writers, readers], pa.string()))
    n = int(code.max()) + 1
    at = np.cumsum([0, len(named), len(members), len(writers), len(readers)])
    c_named, c_members, c_writers, c_readers = (code[at[i]:at[i + 1]] for i in range(4))
    found = pc.struct_field(pc.extract_regex(paths, r"(?:^|\.)layers\.(?P<n>\d+)(?:\.|$)"), [0])
    has = pc.is_valid(found).to_numpy(zero_copy_only=False)
    layer = np.full(n, -1, dtype=np.int64)
    layer[c_named[has]] = pc.cast(pc.filter(found, pc.is_valid(found)), pa.int64()).to_numpy()
    t_code, _ = interned(pa.chunked_array([column("writes", 1), column("reads", 2)], pa.string()))
    writer = np.full(int(t_code.max()) + 1, -1, dtype=np.int64)
    writer[t_code[:len(writers)]] = c_writers
    fed_by = writer[t_code[len(writers):]]
    fed = np.unique(fed_by[fed_by >= 0] * n + c_readers[fed_by >= 0])
    a, c = c_members[0::2], c_members[1::2]  # a candidate is a pair: its two member rows in turn
    across = (layer[a] >= 0) & (layer[c] >= 0) & (layer[a] != layer[c])
    drop = across & ~np.isin(a * n + c, fed) & ~np.isin(c * n + a, fed)
    if not drop.any():
        return
    keep = pa.array(np.repeat(~drop, 2))
    facts.set("member", [pc.filter(column("member", 0), keep), pc.filter(members, keep)])
    built.candidates -= int(drop.sum())


def written_caches(graph) -> frozenset[str]:
    """The cache inputs a put_along writes (its operand 0: the key and value caches)."""
    from ...ops import Ops

    return frozenset(s.reads[0] for s in graph.stmts if s.cls == Ops.PUT_ALONG and len(s.reads) == 3
                     and graph.values[s.reads[0]].role == "input")


def recurrent_states(graph, caches: frozenset[str]) -> list[str]:
    """The step's states no put_along writes, updated as an output `NAME_new` (a recurrent one)."""
    news = {s.writes for s in graph.stmts if s.aten == "(output)"}
    return [v.name for v in graph.inputs if v.role == "input" and v.name not in caches and f"{v.name}_new" in news]


def state_placements(graph, tpp, states: list[str]) -> dict[str, Placement]:
    """Each recurrent state placed as its update is, where that is split and of its shape."""
    found: dict[str, Placement] = {}
    for name in states:
        p = tpp.placement.get(f"{name}_new")
        found[name] = p if isinstance(p, Shard) and graph.values[f"{name}_new"].shape == graph.values[name].shape \
            else REPLICATE
    return found


def full_placement(built) -> dict[str, Placement]:
    """The program's inputs' and outputs' placements by their names in the full program."""
    if built.instances is None:
        return built.placement
    graph = built.graph
    ends = [v.name for v in graph.inputs if v.role == "input"] + [graph.output] + \
        [s.writes for s in graph.stmts if s.aten == "(output)"]
    return {full: built.placement[name] for name in ends for full, _, _ in built.instances(name)}


def _split(values: dict[str, np.ndarray], placement: dict[str, Placement], tp: int) -> dict[str, np.ndarray]:
    """Whole values by program name → each as its tensors hold it (a split one per chip)."""
    out = {}
    for name, whole in values.items():
        p = placement.get(name, REPLICATE)
        if isinstance(p, Shard):
            for k in range(tp):
                out[f"{name}@{k}"] = np.array(p.slice_of(whole, k, tp), order="C")
        else:
            out[name] = whole
    return out


def prompt(seed, vocab: int, tokens: tuple[int, int], past: int, stream: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The seeded prompt [B, P] and the step's tokens [B, S] (stream 1: the check's second input)."""
    rng = np.random.default_rng([seed, 2, stream])
    ids = rng.integers(0, vocab, size=(tokens[0], past + tokens[1])).astype(np.int64)
    return ids[:, :past], ids[:, past:]


def _data(job: ImportJob, cache: _Cache, built: Built, placement):
    vocab = int(job.src.config.get_text_config().vocab_size)
    ids, token = prompt(job.seed, vocab, job.tokens, cache.past)
    inputs, outputs = ds.after_prompt(job.src, job.model, ids, token, cache.length)
    data = program_data(built, job.tp, inputs)
    expected = _split(outputs, placement, job.tp)
    expected["prompt_ids"] = ids
    return data, expected


def _second(job: ImportJob, cache: _Cache, built: Built, placement, data: dict, folder: Path) -> None:
    """The reference after a second prompt against torch's step (verify.check, on the logits)."""
    from .verify import check

    src = job.src
    vocab = int(src.config.get_text_config().vocab_size)
    ids, token = prompt(job.seed, vocab, job.tokens, cache.past, stream=1)
    inputs, outputs = ds.after_prompt(src, job.model, ids, token, cache.length)
    given = {**inputs, **_split(inputs, placement, job.tp)}
    check(folder, job.model, built, [("a second input", given, outputs[OUTPUT])], src.architecture, src.where(),
          data=data)


__all__ = ["INPUT", "import_decode"]
