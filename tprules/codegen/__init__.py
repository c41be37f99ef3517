"""Code generation: each planned group becomes one kernel.

The passes, in order:
1. schedule.py  split the group's members into stages (tiled matmul, row, pointwise) and
                decide which values go through memory;
2. lower.py     build the kernel IR (ir.py): parameters, and per stage the expressions it
                stores, with quantized reads as an absmax pass and a quantized load;
                attention.py folds attention's chain (a bmm, the work on its result, the
                bmm that reads it) into one stage;
3. cpu.py       render it as one Numba CPU function (cpu_gemm.py: a matmul stage as BLAS
                calls on tiles, blas.py, with the prologue before and the epilogue on
                each tile; batched.py: a bmm stage as BLAS calls per batch index;
                views.py: layout chains over a buffer read by BLAS as they lie;
                attention_cpu.py: attention's stage per head and tile of rows), or
   cuda.py      as one Numba-CUDA kernel (real GPUs and the simulator), prepared first
                (`cuda.prepare`: its matmul stages split around a library's gemm where the
                device has one, extern.py; attention stages of other forms than the online
                softmax of attention_cuda.py unfolded);
                both render through emit.py (formulas from the class table, tprules/ops),
                batched.py (bmm) and tiles.py (the GPU's shared-memory tiles);
4. cache.py     write the source under the cache folder and import it (Numba caches the
                machine code beside it).

Beside them, cost.py estimates what a kernel costs on a kind of machine (the planner's
cost model asks it; a layout that is a view costs nothing, views.py).
"""

from .ir import Kernel
from .lower import lower

__all__ = ["Kernel", "lower"]
