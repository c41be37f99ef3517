"""The driver of `tprules import hf`: the passes of frontends/__init__.py, in order, over one
import job (job.py).

>>> report = import_hf("/tmp/tiny-llama", tp=2, out="/tmp/llama-tp2")   # doctest: +SKIP
>>> report.statements, report.candidates                                 # doctest: +SKIP
(316, 548)
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ImportFailed
from ..graph import INPUT, OUTPUT
from ..source.arrays import as_numpy
from .built import Built, Checked, built_whole, program_data, stamp_built, written
from .job import ImportJob, ImportReport, prepare, pretrained, versions
from .ties import refuse_ties


def import_hf(source, tp: int, out, seq: int = 8, batch: int = 1, layers: int | None = None, plan=None,
              seed: int = 0, no_data: bool = False, every_layer: bool = False, progress=None,
              verify: bool = True, ep: bool = False, experts: str | None = None) -> ImportReport:
    """Write the program folder `out` for the Hugging Face model folder `source` on `tp` chips
    (`ep`: under the config's expert-parallel plan in place of its tensor-parallel one;
    `experts`: transformers' experts form traced, `grouped_mm` (the default, under `ep` too:
    each chip sorts its own routing slots, sharding/dispatch.py) or `batched_mm`).

    Each kind of decoder layer is traced once and stamped for every layer of that kind
    (layers/stamp.py); `every_layer` traces every layer instead (the same facts, slower). With
    data, `verify` first checks the program against torch on a second input (verify.py)."""
    from ..layers.kinds import layer_kinds

    with prepare(out, tp, batch, seq, seed, no_data, verify, progress) as job:
        pretrained(job, source, layers, plan, ep, experts)
        job.kinds = None if every_layer else layer_kinds(job.model)
        built = None
        if job.stamps:
            from ..layers.stamp import CannotStamp

            try:
                built = _stamped(job)
            except (CannotStamp, ImportFailed):
                built = None  # traced whole: a model that fails is reported as the full trace names it
        if built is None:
            built = _traced(job)
        refuse_ties(job, built)
        data, expected = {}, {}
        if not no_data:
            data, expected = _data(job, built)
        job.clock.tick("data")
        checked = Checked(partial(_second, job, built, data) if job.verify else None)
        info = pretrained_info(job, source, {"ep": ep, "seq": seq, "batch": batch}, built)
        return written(job, built, info, data, expected, checked, ep=ep, **plan_report(job))


def plan_report(job: ImportJob) -> dict:
    """What the report says of the plan: where it came from (the installed transformers'
    release, whose plans change between releases, or --plan) and the experts it leaves whole."""
    from ..source.pretrained import plan_from

    return {"plan_from": plan_from(job.src), "replicated": job.src.replicated}


def pretrained_info(job: ImportJob, source, options: dict, built: Built) -> dict:
    """source.json of a pretrained model's import (import hf's and its decode step's):
    `options` the import's own keys after `tp`."""
    from ..source.pretrained import plan_from

    src = job.src
    return {"source": str(Path(source)), "architecture": src.architecture, "model_type": src.config.model_type,
            "tp": job.tp, **options, "layers": getattr(src.config, "num_hidden_layers", None), "seed": job.seed,
            "no_data": job.no_data, "plan": src.plan, "plan_from": plan_from(src),
            "replicated_experts": list(src.replicated), **versions(), "statements": built.statements,
            "candidates": built.candidates, "folded": built.folded, "layer_kinds": built.kinds,
            "traced_layers": built.traced}


def _lowered(job: ImportJob, tag=None):
    from ..lowering.walk import Lowerer
    from ..source.constants import Constants
    from ..source.trace import trace

    program = trace(job.model, *job.tokens, job.src.architecture)
    constants = Constants(program, job.model)
    lowerer = Lowerer(program, constants, job.src.architecture)
    if tag is not None:
        tag(lowerer, program)
    return program, constants, lowerer


def _traced(job: ImportJob) -> Built:
    """Every layer traced: the plain path (and the reference the stamped one must equal)."""
    from ..sharding.sharder import shard

    src = job.src
    job.progress.phase("trace every layer", 1)
    _, constants, lowerer = _lowered(job)
    job.clock.tick("trace")
    graph = lowerer.run()
    job.clock.tick("lower")
    tpp = shard(graph, job.tp, src.architecture, src.plan, src.base_prefix, job.heads, src.buffers)
    return built_whole(job, graph, constants, lowerer, tpp)


def _stamped(job: ImportJob) -> Built:
    """Each layer kind traced once (its first and second layers), every layer stamped."""
    from ..layers.kinds import reduced
    from ..layers.stamp import Segments, tag_lowerer

    kinds = job.kinds
    assert kinds is not None
    job.progress.phase(f"trace {len(kinds.order)} of {kinds.count} layers", 1)
    segments: dict[str, Any] = {}  # the Segments and the graph tagged with them

    def tag(lowerer, program):
        segments["s"] = Segments(program, kinds)
        segments["g"] = tag_lowerer(lowerer, segments["s"])

    with reduced(job.model, kinds):
        _, constants, lowerer = _lowered(job, tag)
    job.clock.tick("trace")
    job.progress.advance()
    graph = lowerer.run()
    job.clock.tick("lower")
    return stamp_built(job, graph, constants, lowerer)


def _data(job: ImportJob, built: Built):
    """Every input's values (a split weight one file per chip), and torch's own logits."""
    import torch

    vocab = int(job.src.config.vocab_size)
    ids = np.random.default_rng(job.seed).integers(0, vocab, size=job.tokens).astype(np.int64)
    data = program_data(built, job.tp, {INPUT: ids})
    with torch.no_grad():
        logits = job.model(input_ids=torch.from_numpy(ids), use_cache=False).logits
    return data, {OUTPUT: as_numpy(logits)}


def _second(job: ImportJob, built: Built, data: dict, folder: Path) -> None:
    """The program against torch's logits on the second input, and where it chooses by value
    on a tie-prone one (verify.py)."""
    from .verify import padded_ids, second_ids, selects, verify

    vocab = int(job.src.config.vocab_size)
    ids = second_ids(job.seed, vocab, *job.tokens)
    cases = [("a second input", ids)]
    if selects(built.graph):  # and one where ties are likely
        pad = getattr(job.src.config, "pad_token_id", None)
        cases.append(padded_ids(ids, pad if isinstance(pad, int) and 0 <= pad < vocab else None))
    names = [name for name, v, _, _ in built.inputs if v.role == "input"]
    verify(folder, job.src, job.model, built, cases, names, data)


__all__ = ["INPUT", "OUTPUT", "ImportReport", "import_hf", "pretrained_info"]
