"""Trace the causal-LM forward (prefill: fixed batch and sequence, no cache) with
torch.export, in core ATen (core_aten.py).

Tracing costs seconds (minutes for a full-size model), and the graph does not depend on
the weights, so traces are kept per process by config, shape and device: importing one
model at TP 1, 2 and 4 traces it once. A process keeps the last few (`TRACES_KEPT`).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from contextlib import contextmanager

from ..errors import ImportFailed
from . import core_aten

ERASED = "tprules_erased"  # the graph module's meta key of the nodes the trace erased
TRACES_KEPT = 4  # the traces a process keeps, least recently used dropped first
_traces: OrderedDict[tuple, object] = OrderedDict()
# torch's bookkeeping of its symbols in a guard's message, left out of the refusal's line
SYMBOL_NOTES = re.compile(r"\s*\((?:unhinted|Size-like symbols): (?:[^()]|\([^()]*\))*\)\.?")


def _key(model, batch: int, seq: int) -> tuple:
    config = model.config.to_dict()
    config.pop("_name_or_path", None)
    device = next(iter(model.parameters())).device.type
    experts = getattr(model.config, "_experts_implementation", None)  # not in to_dict: the experts' form
    return json.dumps(config, sort_keys=True, default=str), batch, seq, device, experts


def trace(model, batch: int, seq: int, arch: str):
    """The decomposed ExportedProgram of `model(input_ids, use_cache=False)`."""
    import torch

    key = _key(model, batch, seq)
    if key in _traces:
        _traces.move_to_end(key)
        return _traces[key]
    device = next(iter(model.parameters())).device
    ids = torch.zeros((batch, seq), dtype=torch.int64, device=device)
    program = export(model, (ids,), {"use_cache": False}, arch)
    return _keep(key, program)


def export(model, args: tuple, kwargs: dict, arch: str):
    """The decomposed ExportedProgram of `model(*args, **kwargs)` (core_aten.py), or one line
    saying why torch.export cannot trace it (a data-dependent shape names its module)."""
    import logging

    import torch

    quiet = logging.getLogger("torch._subclasses.fake_tensor")  # it logs a traceback before raising
    level, quiet.level = quiet.level, logging.CRITICAL
    try:
        with torch.no_grad(), _erased() as erased:
            program = core_aten.export(model, args, kwargs)
        program.graph_module.meta[ERASED] = erased.get(id(program.graph_module.graph), [])
        return program
    except Exception as err:  # noqa: BLE001 - torch.export raises many kinds
        text = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        where = data_dependent(err, model)
        if where is not None:
            text = SYMBOL_NOTES.sub("", text)
            raise ImportFailed(f"{arch}: torch.export cannot trace a data-dependent shape at {where}: {text}") from None
        raise ImportFailed(f"{arch}: torch.export cannot trace the forward: {text}") from None
    finally:
        quiet.setLevel(level)


class Erased:
    """A node the trace named and then erased (dead code): its name and module stack."""

    op = "call_function"

    def __init__(self, node):
        self.name = node.name
        stack = node.meta.get("nn_module_stack") or {}  # paths as the final graph has them
        self.meta = {"nn_module_stack": {k: (_rooted(v[0]), *v[1:]) for k, v in stack.items()}}


def _rooted(path: str) -> str:
    """A module path of export's wrapper (`_export_root.model.layers.1`) as the model's."""
    root = "_export_root"
    return path[len(root) + 1:] if path.startswith(root + ".") else "" if path == root else path


@contextmanager
def _erased():
    """The nodes erased from each fx graph while tracing, by the graph's id. The trace names
    a node by its op, numbered in order (`view_52`), before dead code is erased, so a layer's
    node numbers count its erased nodes too (stamp.py)."""
    import torch.fx

    erased: dict[int, list[Erased]] = {}
    erase = torch.fx.Graph.erase_node

    def recorded(graph, node):
        if node.op != "placeholder":
            erased.setdefault(id(graph), []).append(Erased(node))
        return erase(graph, node)

    torch.fx.Graph.erase_node = recorded  # type: ignore[method-assign]
    try:
        yield erased
    finally:
        torch.fx.Graph.erase_node = erase  # type: ignore[method-assign]


def erased_nodes(program) -> list[Erased]:
    """The nodes the trace of `program` erased (none known for a program traced elsewhere)."""
    return program.graph_module.meta.get(ERASED, [])


def _keep(key: tuple, program):
    """Keep `program` as the most recently used trace, dropping the least recently used."""
    _traces[key] = program
    _traces.move_to_end(key)
    while len(_traces) > TRACES_KEPT:
        _traces.popitem(last=False)
    return program


def data_dependent(err: BaseException, model) -> str | None:
    """For a trace stopped by a shape or branch that depends on the data (a guard on an
    unbacked symbol): `MODULE: OP (FILE:LINE)`, the innermost module of `model` on the way,
    the torch function that needed the value and the model's line; else None."""
    names = {id(m): name for name, m in model.named_modules()}
    if not _is_data_dependent(err):
        return None
    module, op, line, at = None, None, None, None
    tb = err.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        owner = frame.f_locals.get("self")
        if owner is not None and id(owner) in names and frame.f_code.co_name == "forward":
            module, at = names[id(owner)] or "(top)", owner
            line = f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"
        func = frame.f_locals.get("func") if frame.f_code.co_name == "__torch_function__" else None
        if func is not None and op is None and module is not None:
            op = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or str(func)
        tb = tb.tb_next
    if module is None:
        return None
    return f"{module}: {op or 'a value of a tensor'} ({line}{_no_static_experts(at)})"


def _no_static_experts(module) -> str:
    """Why the static `batched_mm` form (hf.py asks for it) did not replace a data-dependent
    experts loop: transformers gives it only to experts classes its `use_experts_implementation`
    decorates, which set `is_concatenated` on the module."""
    if not hasattr(module, "gate_up_proj") and not hasattr(module, "down_proj") or hasattr(module, "is_concatenated"):
        return ""
    return f"; {type(module).__name__} has no batched_mm form: transformers' experts_implementation does not reach it"


def _is_data_dependent(err: BaseException) -> bool:
    kinds = {type(e).__name__ for e in (err, err.__cause__, err.__context__) if e is not None}
    text = str(err)
    return bool(kinds & {"GuardOnDataDependentSymNode", "UserError", "DataDependentOutputException"}) and \
        ("data-dependent" in text or "data dependent" in text or "unbacked" in text)
