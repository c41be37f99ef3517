"""The kernels run on one device queue per chip, in one process or as one MPI rank:

buffers.py       a kernel's buffers on one chip, by parameter role
launch_order.py  the order a run launches its kernels in, on chips that share the CPU's cores
world.py         which chips this process holds, and how it reaches the others
overlap.py       collective kernels as MPI ranks run them, the transfer overlapping the compute
executor.py      the run: kernels where their group's place says, partials moved and all-reduced
"""
