"""Code generation: each planned group becomes one kernel. The folders are the passes, in order.

ir.py          the kernel IR every pass reads: parameters, and stages storing expressions
lowering/      a planned group to the kernel IR (`lower`)
  schedule.py    split the group's members into stages (tiled matmul, row, pointwise) and
                 decide which values go through memory
  layout.py      layout classes as index reads of their operand (nothing copied)
  window.py      window classes (conv1d) computed where read; put_along's description
  attention.py   attention's chain (a bmm, the work on its result, the bmm that reads it) as one stage
  lower.py       the IR: parameters, and per stage the expressions it stores (quantized
                 reads as an absmax pass and a quantized load)
render/        what both renderers share
  emit.py        Python lines computing an expression at an index (formulas from tprules/ops)
  views.py       layout chains over a buffer as an offset and strides (read by BLAS as they lie)
  extern.py      matmul stages split around a library's gemm (prologue, library call, epilogue)
  tiles.py       the GPU's shared-memory matmul tiles
  batched.py     a bmm stage (CPU: BLAS per batch index; GPU: tiles)
  grouped.py     a grouped matmul stage (a mixture of experts' rows per expert)
  put_along.py   a put_along's scatter stage
cpu/           render as one Numba CPU function (`function.render`)
  gemm.py        a matmul stage as BLAS calls on tiles, the prologue before, the epilogue on each tile
  attention.py   attention's stage per head and tile of rows
  function.py    the function: its stages one after another, each a loop nest over a `prange`
cuda/          render as one Numba-CUDA kernel, for real GPUs and the simulator (`kernel.render`)
  attention.py   attention's online-softmax form, a block per head and tile of rows
  sort.py        a stable sort's rank by merging in the block
  typed.py       the rendered source typed as NVVM types it, on any machine
  kernel.py      the kernel (`prepare` first: attention unfolded, matmuls split for a library)
  nvvm.py        PTX and cubins for a named GPU architecture, with no GPU (`tprules compile`)
moves.py       kernels that only move memory or add exactly, run by numpy on the CPU (no compile)
blas.py        the BLAS core generated CPU kernels import (by this name: it is in their source)
cache.py       the source written under the cache folder and imported (Numba caches the machine code);
               a corrupt entry dropped and compiled again; a worker process's compile

Beside them, cost.py estimates what a kernel costs on a kind of machine (the planner's
cost model asks it; a layout that is a view costs nothing).
"""

from .ir import Kernel
from .lowering.lower import lower

__all__ = ["Kernel", "lower"]
