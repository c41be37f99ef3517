"""A torch tensor as numpy: the one converter of the importer (data/, expected/, the check's
values). Floats become float32 (the program's floats); integers stay as they are; a boolean
stays numpy's bool where it is written to a file (the runtime reads it as the program stores
it, runtime/values/inputs.py's as_stored) and is an i8 0 or 1 where tprules' reference computes with it
(`stored=True`: the program's own storage)."""

from __future__ import annotations

import numpy as np


def as_numpy(t, stored: bool = False) -> np.ndarray:
    """`t` (a torch tensor, on any device but meta) as numpy; `stored`: a boolean as an i8."""
    import torch

    a = t.detach().cpu()
    if stored and a.dtype == torch.bool:
        return a.to(torch.int8).numpy()
    if a.is_floating_point():
        a = a.float()
    return a.numpy()


__all__ = ["as_numpy"]
