"""Lower a small torch module through the op table and evaluate the statements with the
class table's references: what each ATen lowering means, checked against torch itself.

The module's forward takes one float tensor `x` (read by the first statement as the input)
and returns one tensor; its parameters are weights, what depends on nothing else is folded.
"""

from __future__ import annotations

import numpy as np


def lower_module(module, x):
    """(graph, constants, torch's output) for `module(x)`: the op table's statements for its
    forward, and the constants they read (the module's weights, what the lowering folded)."""
    import torch

    from tprules.frontends.lowering.walk import Lowerer
    from tprules.frontends.source.constants import Constants
    from tprules.frontends.source.core_aten import decompositions

    module = module.eval()
    with torch.no_grad():
        program = torch.export.export(module, (x,), strict=False).run_decompositions(decompositions())
        expected = module(x)
    constants = Constants(program, module)
    return Lowerer(program, constants, "test").run(), constants, expected


def evaluate(graph, consts, x) -> np.ndarray:
    """The graph's output, each statement by its class's reference (as runtime/reference.py runs them)."""
    from tprules import ops

    env = {}
    for v in graph.values.values():
        if v.role == "input":
            env[v.name] = x.detach().numpy().astype(np.float32)
        elif v.role == "weight":
            env[v.name] = consts.weight(v.name).numpy().astype(np.float32)
        elif v.role == "folded":
            env[v.name] = np.asarray(consts.value(graph.folded[v.name]).detach().numpy(), dtype=np.float32)
    for s in graph.stmts:
        entry = ops.CLASSES[s.cls]
        attrs = dict(s.attrs)
        args = [env[r] for r in s.reads]
        shape = graph.values[s.writes].shape
        out = entry.reference(attrs, shape, *args) if entry.shaped else entry.reference(attrs, *args)
        env[s.writes] = np.asarray(out, dtype=np.float32).reshape(shape)
    return env["logits"]
