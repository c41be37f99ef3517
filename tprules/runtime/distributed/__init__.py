"""Beyond one process: one MPI rank per group of chips (`tprules run DIR --ranks N`, or
`mpiexec -n N tprules run DIR --mpi`).

1. job.py        the program checked and planned once (as one process plans it), before any
                 rank starts; status records;
2. launch.py     `--ranks N`: start the ranks with the MPI's own mpiexec, watch, name a failed rank;
3. world.py      the one object owning the communicator and which chips a rank holds
                 (the only importer of mpi4py; collectives polled against a timeout);
4. rank.py       one rank, start to end: it prepares and runs as one process does
                 (`runtime.Prepared` and runtime/execution/executor.py), with its `RankWorld`;
5. reference.py  the numpy reference, each rank for its own chips and the spine;
6. collect.py    rank 0 gathers outputs and figures; report.py renders them.

Kernels, the planner and the executor never see MPI. See docs/distributed.md.
"""
