"""The driver of `tprules import hf`: the passes of frontends/__init__.py, in order.

>>> report = import_hf("/tmp/tiny-llama", tp=2, out="/tmp/llama-tp2")   # doctest: +SKIP
>>> report.statements, report.candidates                                 # doctest: +SKIP
(316, 548)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import UsageError
from .errors import ImportFailed, require_extra
from .graph import INPUT, OUTPUT
from .placement import Shard


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

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())


def import_hf(source, tp: int, out, seq: int = 8, batch: int = 1, layers: int | None = None, plan=None,
              seed: int = 0, no_data: bool = False) -> ImportReport:
    """Write the program folder `out` for the Hugging Face model folder `source` on `tp` chips."""
    require_extra()
    for flag, value in (("--tp", tp), ("--seq", seq), ("--batch", batch)):
        if value < 1:
            raise UsageError(f"{flag} takes a count of at least 1; got {value}")
    from .constants import Constants
    from .hf import build_model, check_plan_paths, head_counts, read_source
    from .lower import Lowerer
    from .tp import Heads, check_experts, check_heads, shard
    from .trace import trace
    from .write import add_candidates, check_out, write_folder

    check_out(Path(out))
    clock = _Clock()
    src = read_source(source, layers, plan)
    heads = Heads(*head_counts(src.config))
    check_heads(src, heads, tp)
    check_experts(src)
    _quiet_transformers()
    model = build_model(src, seed, no_data)
    check_plan_paths(src, model)
    clock.tick("model")
    program = trace(model, batch, seq, src.architecture)
    clock.tick("trace")
    constants = Constants(program, model)
    graph = Lowerer(program, constants, src.architecture).run()
    clock.tick("lower")
    tpp = shard(graph, tp, src.architecture, src.plan, getattr(model, "base_model_prefix", "model"), heads)
    for name, node in graph.folded.items():
        split = [w for w in constants.leaves(node) if isinstance(tpp.placement.get(w), Shard)]
        if split:
            raise ImportFailed(f"{src.architecture}: the constant subgraph at {name} reads {split[0]}, which the plan "
                               "splits; tprules folds only replicated constants", src.where())
    candidates = add_candidates(tpp.builder)
    clock.tick("shard")
    data, expected = {}, {}
    if not no_data:
        data, expected = _data(src, model, graph, constants, tpp, tp, batch, seq, seed)
    clock.tick("data")
    b = tpp.builder
    info = {"source": str(Path(source)), "architecture": src.architecture, "model_type": src.config.model_type,
            "tp": tp, "seq": seq, "batch": batch, "layers": getattr(src.config, "num_hidden_layers", None),
            "seed": seed, "no_data": no_data, "plan": src.plan, **_versions(),
            "statements": len(b.statements), "candidates": candidates,
            "folded": sorted(graph.folded)}
    write_folder(Path(out), b, data, expected, info, validate=_wellformed)
    clock.tick("write")
    return ImportReport(Path(out), src.architecture, tp, len(b.statements), candidates, len(b.shapes),
                        len(b.facts["fold"]), sorted(graph.folded), clock.seconds)


def _data(src, model, graph, constants, tpp, tp, batch, seq, seed):
    """Every input's values (a split weight one file per chip), and torch's own logits."""
    import torch

    vocab = int(src.config.vocab_size)
    ids = np.random.default_rng(seed).integers(0, vocab, size=(batch, seq)).astype(np.int64)
    data = {}
    for v in graph.inputs:
        if v.role == "input":
            whole = ids
        elif v.role == "weight":
            whole = _numpy(constants.weight(v.name))
        else:
            whole = _numpy(constants.value(graph.folded[v.name]))
        placement = tpp.placement[v.name]
        for name, chip in tpp.local_names(v.name, tp):
            part = whole if chip is None else placement.slice_of(whole, chip, tp)
            data[name] = np.array(part, order="C")  # (ascontiguousarray makes a scalar 1-D)
    with torch.no_grad():
        logits = model(input_ids=torch.from_numpy(ids), use_cache=False).logits
    return data, {OUTPUT: _numpy(logits)}


def _numpy(t) -> np.ndarray:
    a = t.detach().cpu()
    if a.is_floating_point():
        a = a.float()
    return a.numpy()


def _wellformed(folder: Path) -> None:
    """The folder must pass tprules' own checks before it replaces DIR."""
    from ..program.load import load_program
    from ..workspace import load_checked_rules

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


__all__ = ["INPUT", "OUTPUT", "ImportReport", "import_hf"]
