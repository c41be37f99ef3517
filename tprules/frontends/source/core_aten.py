"""torch.export of a module to core ATen, in one trace.

torch's public way is two traces: `torch.export.export` gives the training IR, and
`run_decompositions` traces that graph again with the decompositions. Here the module is
traced once with the same decompositions applied as it goes: the overrides of the
CompositeImplicitAutograd ops and the Python decomposition table that `run_decompositions`
hands its own trace (`torch.export._trace._export` with the ATen dispatch of torch's
export before the training IR). The graph is the same node for node (names, targets,
arguments, values, module stacks; tests/frontends/source/test_startup.py) less the training
IR's `_assert_tensor_metadata` checks, which the op table skips anyway: 0.3 s of the 8B
import's 3.5. Two cases take the two public traces: a model that shares a parameter
between modules (tied embeddings: the second trace reads it by the other module's name),
and a torch that lacks one of these functions; and a model the one trace cannot trace is
traced again the public way, whose error (trace.py reads it) is the one reported.

Either way, torch lists the dispatcher's CompositeImplicitAutograd ops once for each
namespace of torch.ops, twice over (some fifty times the same list, 0.2 s); no op is
registered meanwhile, so the first listing stands for the rest.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager


def export(model, args: tuple, kwargs: dict):
    """The ExportedProgram of `model(*args, **kwargs)` in core ATen (addmm as mm + add)."""
    with _one_listing_of_cia_ops():
        parts = _one_trace_parts()
        if parts is not None and not _shares_parameters(model):
            try:
                return _one_trace(model, args, kwargs, *parts)
            except Exception:  # noqa: BLE001 - refused as torch.export refuses it (trace.py reads that error)
                pass
        return two_traces(model, args, kwargs)


def two_traces(model, args: tuple, kwargs: dict):
    import torch

    exported = torch.export.export(model, args, kwargs=kwargs, strict=False)
    return exported.run_decompositions(decompositions())


def decompositions():
    """Core ATen, and addmm as mm + add (a bias is added after a rowwise layer's fold)."""
    import torch
    from torch._decomp import get_decompositions

    table = torch.export.default_decompositions()
    table.update(get_decompositions([torch.ops.aten.addmm]))
    return table


def _shares_parameters(model) -> bool:
    return len(list(model.parameters())) != len(list(model.named_parameters(remove_duplicate=False)))


def _one_trace_parts():
    try:
        from torch.export import _trace
        from torch.export.exported_program import (
            _override_composite_implicit_decomp,
            _split_decomp_table_to_cia_and_python_decomp,
        )
    except ImportError:
        return None
    if not (hasattr(_trace, "_export") and hasattr(_trace, "_export_to_aten_ir")):
        return None
    return _trace, _split_decomp_table_to_cia_and_python_decomp, _override_composite_implicit_decomp


def _one_trace(model, args, kwargs, _trace, split, override):
    # what run_decompositions does with the table before its trace
    cia_ops, python_table = split(dict(decompositions()))
    to_aten = _trace._export_to_aten_ir
    _trace._export_to_aten_ir = functools.partial(to_aten, decomp_table=python_table)
    try:
        with override(cia_ops):
            return _trace._export(model, args, kwargs, strict=False, pre_dispatch=False)
    finally:
        _trace._export_to_aten_ir = to_aten


@contextmanager
def _one_listing_of_cia_ops():
    from torch._export import utils

    listing = getattr(utils, "_materialize_cpp_cia_ops", None)
    if listing is None:
        yield
        return
    done: list[bool] = []

    def once():
        if not done:
            listing()
            done.append(True)

    utils._materialize_cpp_cia_ops = once
    try:
        yield
    finally:
        utils._materialize_cpp_cia_ops = listing
