"""Running a planned program: the steps of `tprules run`, in order.

1. plan/          the plan as the runtime takes it:
   groups.py        checked against the program, its groups ordered (producers first);
   collective.py    a collective kernel expanded into its parts (SPEC §3);
   reduce_scatter.py  a sum fold read only by one slice per chip, run as a reduce-scatter;
2. codegen        each group lowered to one kernel and compiled for the device (devices/; the
                  distinct sources in worker processes, devices/pool.py; warm.py: `compile
                  --device cpu`, every kernel into the cache ahead of a run);
3. values/        what the outputs should be:
   inputs.py        program inputs, from DIR/data/*.npy or a fixed seed;
   semantics.py     the class registry's meaning in numpy (SPEC §4, the living definition);
   reference.py     the unfused reference, statement by statement;
4. execution/     the kernels run on one device queue per chip, partials all-reduced:
   buffers.py       a kernel's buffers on one chip, by parameter role;
   launch_order.py  the order a run launches its kernels in, on chips sharing the CPU's cores;
   world.py         which chips this process holds (one process, or one MPI rank: distributed/);
   overlap.py       collective kernels on ranks, the transfer overlapping the compute;
   executor.py      the run itself;
5. values/compare.py  every program output compared with the reference;
6. report.py      the text report; trace.py a run's timeline (`--trace`).

run.py ties the steps together (`Prepared`, `execute`); devices/ holds one module per
device, distributed/ the MPI ranks (`--ranks N`).
"""

from ..program.model import Program
from .plan.groups import BadPlan, unfused
from .run import ChipStats, Prepared, RunReport, execute, run_plan

__all__ = ["BadPlan", "ChipStats", "Prepared", "RunReport", "Program", "execute", "run_plan", "unfused"]
