"""One rank of a run (`tprules run DIR --mpi`, under `mpiexec -n N`, or started by `--ranks N`).

1. connect: MPI up, this rank's place in the world (world.py);
2. the job: read from the launcher's folder, or planned by rank 0 and broadcast, so that bad
   input stops every rank together with one message (from rank 0);
3. prepare, as one process does (`runtime.Prepared` with this rank's world): lower every
   group (all ranks walk the whole plan), compile the kernels of this rank's chips, read
   only the inputs its chips bind and the spine's, the reference for its chips (reference.py);
4. the runs (runtime/execution/executor.py, with this rank's world);
5. rank 0 gathers outputs and figures, compares, and reports (`emit`); every rank exits with
   rank 0's status.

A rank that fails prints one line naming itself and its chips and aborts the whole run
(MPI_Abort), so no other rank waits for it; a collective that waits longer than the
timeout fails the same way.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...errors import BadInput, UsageError
from .job import Job, plan_job, read_job, write_status
from .world import RankTimeout, RankWorld, describe_rank


@dataclass
class RankOptions:
    program_dir: str
    device: str = "cpu"
    repeat: int = 1
    timeout: float = 600.0
    job: Path | None = None  # the launcher's folder (--ranks), else rank 0 plans
    rules: str | None = None
    shim: str | None = None
    engine: str = "fast"
    unfused: bool = False
    # module paths -> the printer of (kernel, source), on rank 0 (--show kernels)
    show_kernels: Callable[[dict, frozenset[str]], Callable] | None = None
    traceback: bool = False  # --show traceback: a failing rank prints its traceback before its line
    trace: str | None = None  # --trace OUT.json: every rank's trace, merged by rank 0 into one file
    matmul: str = "auto"  # the device's matmul core (--matmul)
    include_dirs: tuple = ()  # -I: the rules' include folders


def run_rank(options: RankOptions, emit) -> int:
    """Run this process's rank; rank 0 hands the report to `emit(report) -> exit status`."""
    started = time.time()
    world = RankWorld.connect(options.timeout)
    _share_cores(world)
    status = _Status(world, options.job)
    try:
        job, code = _job(world, options)
    except BadInput:
        raise  # rank 0's, after every rank heard of it
    except BaseException as err:  # noqa: BLE001 - a rank never leaves the others waiting
        _fail(world, status, err, options.traceback)
    if job is None:
        return code  # rank 0 reported why
    if world.size > job.prog.chips:
        if world.rank == 0:
            raise UsageError(f"refused: {world.size} ranks for the {job.prog.chips} chip"
                             f"{'' if job.prog.chips == 1 else 's'} of {job.prog.display}; at most one rank per chip")
        return 2
    world.assign(job.prog.chips)
    status("started")
    try:
        code = run_job(world, job, options, emit, started, status)
    except BaseException as err:  # noqa: BLE001 - a rank never leaves the others waiting
        _fail(world, status, err, options.traceback)
    status("done", code=code)
    return code


def run_as_rank(folder: Path, chips: int, body: Callable[[RankWorld], int], timeout: float = 600.0,
                traceback: bool = False) -> int:
    """This process as one rank of a job that a launcher wrote to `folder` for a program on
    `chips` chips (launch.start_ranks; `tprules generate --ranks`): `body(world)` runs with
    this rank's world, its status records kept as `run`'s ranks keep theirs, and a failure
    ends every rank with one line naming this one."""
    world = RankWorld.connect(timeout)
    _share_cores(world)
    status = _Status(world, folder)
    world.assign(chips)
    status("started")
    try:
        code = body(world)
    except BaseException as err:  # noqa: BLE001 - a rank never leaves the others waiting
        _fail(world, status, err, traceback)
    status("done", code=code)
    return code


def _job(world: RankWorld, options: RankOptions) -> tuple[Job | None, int]:
    """The job, or (None, exit status) when rank 0 could not make it; rank 0 then raises."""
    if options.job is not None:
        return read_job(options.job), 0
    payload: Job | BaseException | None = None
    code = 0
    if world.rank == 0:
        try:
            payload = plan_job(options.program_dir, rules=options.rules, shim=options.shim, engine=options.engine,
                               unfused=options.unfused, device=options.device, matmul=options.matmul,
                               modules=options.show_kernels is not None, include_dirs=options.include_dirs)
        except BadInput as err:
            payload, code = err, 2
        except Exception as err:  # noqa: BLE001 - raised below, once every rank knows
            payload, code = err, 3
    shared = world.bcast(code or payload, "the plan from rank 0")
    if code:
        assert isinstance(payload, BaseException)
        raise payload  # rank 0 prints it
    return (None, shared) if isinstance(shared, int) else (shared, 0)


def _rank_trace(world: RankWorld, device, started: float):
    """This rank's trace: process `rank`, named by its rank, pid, host and chips."""
    from ..trace import Trace

    chips = ",".join(map(str, world.chips))
    trace = Trace(pid=world.rank, name=f"rank {world.rank} (pid {world.pid} on {world.host}; chips {chips})",
                  clock="cuda events" if device.name == "cuda" else "host")
    trace.meta("process_sort_index", 0, sort_index=world.rank)
    trace.meta("process_labels", 0, labels=f"started {started:.6f}")
    return trace


def _write_trace(world: RankWorld, trace, path: str, started: float, wall: float) -> None:
    """Every rank's events to rank 0, which writes them as one file: the ranks' slices share the
    host wall clock as their time base (ranks on several machines: as well as their clocks agree)."""
    from ..trace import write

    trace.wall(started, wall, rank=world.rank, wall_s=wall)
    events = world.gather(trace.events, "the trace at rank 0")
    if world.rank == 0:
        write(path, [e for rank in events for e in rank], {"clock": trace.clock, "ranks": world.size})


def _share_cores(world: RankWorld) -> None:
    """The ranks of a node share its cores: Numba's thread pool gets cores / ranks here."""
    if "numba" not in sys.modules:
        os.environ.setdefault("NUMBA_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // world.local_size)))


class _Status:
    def __init__(self, world: RankWorld, folder):
        self.world = world
        self.folder = folder

    def __call__(self, state: str, **fields) -> None:
        w = self.world
        write_status(self.folder, w.rank, state, pid=w.pid, host=w.host, chips=list(w.chips), **fields)


def _fail(world: RankWorld, status: _Status, err: BaseException, traceback: bool = False):
    if traceback and not isinstance(err, (BadInput, KeyboardInterrupt)):
        import traceback as tb

        tb.print_exception(err, file=sys.stderr)
    if isinstance(err, BadInput):
        code, what = 2, f"failed: {err}"
    elif isinstance(err, KeyboardInterrupt):
        code, what = 130, "was interrupted"
    elif isinstance(err, RankTimeout):
        code, what = 3, f"failed: {err}"
    else:
        code, what = 3, f"failed: {type(err).__name__}: {' '.join(str(err).split())}"
    line = f"{describe_rank(world.rank, world.chips)} {what}"
    status("failed", code=code, message=line)
    print(line, file=sys.stderr)
    world.abort(code)


def run_job(world: RankWorld, job: Job, options: RankOptions, emit, started: float, status=None) -> int:
    """Steps 3-5 on this rank, given its world and the job; rank 0 calls `emit(report)`.
    `status(state)` (optional) hears when the run proper begins."""
    from ..devices import get_device
    from ..run import Prepared
    from .collect import collect, rank_share

    device = get_device(options.device, options.matmul)
    trace = _rank_trace(world, device, started) if options.trace else None
    show = (options.show_kernels(job.modules, frozenset(job.prog.inputs)) if options.show_kernels and world.rank == 0
            else None)
    # as one process prepares (runtime/run.py), for this rank's chips; a spine kernel
    # runs on each of them, as in real tensor parallelism (docs/distributed.md)
    prepared = Prepared(job.prog, job.plan, device, show_kernels=show, trace=trace, share=False, world=world,
                        jobs=1)  # the ranks are processes compiling side by side already
    if status is not None:
        status("running")
    runs = [prepared.run() for _ in range(max(1, options.repeat))]
    wall = time.time() - started
    share = rank_share(world, prepared, runs, wall)
    if trace is not None and options.trace is not None:
        _write_trace(world, trace, options.trace, started, wall)
    shares = world.gather(share, "the outputs at rank 0")
    code = 0
    if world.rank == 0:
        code = emit(collect(job, prepared, world, shares))
    return world.bcast(code, "the exit status from rank 0")
