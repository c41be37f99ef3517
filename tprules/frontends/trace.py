"""Trace the causal-LM forward (prefill: fixed batch and sequence, no cache) with
torch.export and lower it to core ATen.

Tracing costs seconds (minutes for a full-size model), and the graph does not depend on
the weights, so traces are kept per process by config, shape and device: importing one
model at TP 1, 2 and 4 traces it once. A process keeps the last few (`TRACES_KEPT`).
"""

from __future__ import annotations

import json
from collections import OrderedDict

from .errors import ImportFailed

TRACES_KEPT = 4  # the traces a process keeps, least recently used dropped first
_traces: OrderedDict[tuple, object] = OrderedDict()


def _key(model, batch: int, seq: int) -> tuple:
    config = model.config.to_dict()
    config.pop("_name_or_path", None)
    device = next(iter(model.parameters())).device.type
    return json.dumps(config, sort_keys=True, default=str), batch, seq, device


def _decompositions():
    """Core ATen, and addmm as mm + add (a bias is added after a rowwise layer's fold)."""
    import torch
    from torch._decomp import get_decompositions

    table = torch.export.default_decompositions()
    table.update(get_decompositions([torch.ops.aten.addmm]))
    return table


def trace(model, batch: int, seq: int, arch: str):
    """The decomposed ExportedProgram of `model(input_ids, use_cache=False)`."""
    import torch

    key = _key(model, batch, seq)
    if key in _traces:
        _traces.move_to_end(key)
        return _traces[key]
    device = next(iter(model.parameters())).device
    ids = torch.zeros((batch, seq), dtype=torch.int64, device=device)
    import logging

    quiet = logging.getLogger("torch._subclasses.fake_tensor")  # it logs a traceback before raising
    level, quiet.level = quiet.level, logging.CRITICAL
    try:
        with torch.no_grad():
            exported = torch.export.export(model, (ids,), kwargs={"use_cache": False}, strict=False)
            program = exported.run_decompositions(_decompositions())
    except Exception as err:  # noqa: BLE001 - torch.export raises many kinds
        text = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        raise ImportFailed(f"{arch}: torch.export cannot trace the forward: {text}") from None
    finally:
        quiet.setLevel(level)
    return _keep(key, program)


def _keep(key: tuple, program):
    """Keep `program` as the most recently used trace, dropping the least recently used."""
    _traces[key] = program
    _traces.move_to_end(key)
    while len(_traces) > TRACES_KEPT:
        _traces.popitem(last=False)
    return program
