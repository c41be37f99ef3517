"""The Shim API: the chip interface a compiler's fusion optimizer asks, backed by the rules.

- `protocol`: `Shim` (name, supports, fits, activation), `Support`, `QuantFormat`, `Fit`.
- `graph`: `TensorGraph` (networkx), `Op`, `FusedOp`.
- `manifest`: `Manifest` (placements, spine, folds, sections, relocations).
- `base`: `FactShim`, a base chip from shim facts, answered by `rules/base.dl`.
- `tp`: `TensorParallelShim(base, manifest)`, answered by `rules/tp.dl`; base may be any
  Python shim, whose answers become facts the rules read.
- `session`: the rule evaluation behind them, once per graph.
"""

from .base import FactShim
from .graph import FusedOp, Op, Tensor, TensorGraph
from .manifest import Manifest
from .protocol import Fit, QuantFormat, Refusal, Shim, Support, fits_all
from .tp import TensorParallelShim

__all__ = ["FactShim", "Fit", "FusedOp", "Manifest", "Op", "QuantFormat", "Refusal", "Shim", "Support",
           "Tensor", "TensorGraph", "TensorParallelShim", "fits_all"]
