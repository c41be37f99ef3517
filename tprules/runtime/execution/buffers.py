"""A kernel's buffers on one chip, by parameter role (runtime/execution/executor.py; on ranks a chip of
another rank gets placeholders)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...codegen.ir import Kernel
from ...program.records import INTEGER

REMOTE = None  # a chip of another rank holds the tensor
QUANT_SCALE = "scale"  # the role of a quantized read's scale: its max starts at zero


def storage(dtype: str) -> np.dtype:
    """How a parameter of `dtype` is kept in its buffer (as Tensor.storage)."""
    return np.dtype(INTEGER.get(dtype, np.float32))


def buffers(kernel: Kernel, chip: int, queue, on, held: dict, remote=None) -> list:
    """The buffers of `kernel`'s parameters on `chip`: inputs (and a fold's local partial)
    from `on(tensor, chip)`, outputs and scratch allocated on `queue`, an output recorded in
    `held`. A `queue` of None is another rank's chip: what it allocates is `remote` there.
    A parameter with an alias is its aliased parameter's buffer, reshaped (Param.alias)."""
    named: dict[str, Any] = {}
    for p in sorted(kernel.params, key=lambda p: p.alias is not None):  # aliases after what they name
        if p.alias is not None:
            buf = named[p.alias]
            buf = remote if buf is remote else buf.reshape(p.buffer_shape)
        elif p.role == "in":
            buf = on(p.tensor, chip)
        elif p.role == "local":
            buf = on(dict(p.local)[chip], chip)
        elif queue is None:
            buf = remote
        elif p.role in ("out", "scratch"):
            buf = queue.empty(p.buffer_shape, storage(p.dtype))
        elif p.role == QUANT_SCALE:
            buf = queue.zeros(p.buffer_shape, storage(p.dtype))
        else:
            raise AssertionError(f"kernel {kernel.group} has a parameter {p.name} of unknown role {p.role!r}")
        if p.role == "out":
            held.setdefault(p.tensor, {})[chip] = buf
        named[p.name] = buf
    return [named[p.name] for p in kernel.params]
