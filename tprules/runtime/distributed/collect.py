"""What each rank sends rank 0 at the end (`rank_share`), and the report rank 0 builds from
them (`collect`): outputs compared with the reference (and with DIR/expected/ when there),
the fastest run's figures, a row per rank."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import numpy as np

from ..execution.executor import kernel_timing
from ..run import ChipStats, matmul_core
from ..values.compare import compare
from ..values.reference import Values
from .report import DistributedReport, RankStats


@dataclass
class RankShare:
    stats: RankStats  # figures of the rank's fastest run are filled in by collect
    runs: list  # an executor.Execution per run (outputs kept for the last run only, no device buffers)
    reference: dict[str, np.ndarray]  # the reference's program outputs this rank computed
    sources: set[str]  # digests of the kernel sources the rank compiled


def rank_share(world, prepared, runs, wall_s: float) -> RankShare:
    """What this rank sends rank 0 of its runs of `prepared` (a runtime.Prepared)."""
    for done in runs:
        done.held = {}  # device buffers: neither sent nor kept
    for done in runs[:-1]:
        done.outputs = {}
    stats = RankStats(world.rank, world.pid, world.host, list(world.chips), 0, 0.0, 0, 0, 0.0, 0, 0,
                      prepared.compile_s, 0.0, wall_s)
    reference = prepared.expected
    outputs = {t: reference[t] for t in prepared.prog.outputs if t in reference}
    digests = {hashlib.sha256(c.source.encode()).hexdigest() for c in prepared.compiled if c is not None}
    return RankShare(stats, runs, outputs, digests)


def collect(job, prepared, world, shares: list[RankShare]) -> DistributedReport:
    """Rank 0's report of every rank's `shares`, as one process's (`Prepared.report`) with a row per rank."""
    prog, plan, kernels, device = job.prog, job.plan, prepared.kernels, prepared.device
    # the fastest run is the one whose slowest rank was fastest
    n = len(shares[0].runs)
    best = min(range(n), key=lambda i: max(s.runs[i].seconds for s in shares))
    last = [s.runs[-1] for s in shares]
    chips, ranks = [], []
    for share in shares:
        run = share.runs[best]
        stats = share.stats
        stats.kernels = sum(run.kernels.values())
        stats.kernel_s = sum(run.busy.values())
        t = run.traffic
        stats.allreduces, stats.allreduce_bytes, stats.allreduce_s = t.allreduces, t.allreduce_bytes, t.allreduce_s
        stats.messages, stats.message_bytes, stats.run_s = t.messages, t.message_bytes, run.seconds
        stats.allgathers, stats.allgather_bytes = t.allgathers, t.allgather_bytes
        stats.reducescatters, stats.reducescatter_bytes = t.reducescatters, t.reducescatter_bytes
        ranks.append(stats)
        threads = getattr(run, "threads", None) or {}
        chips += [ChipStats(c, run.kernels[c], run.launches[c], run.busy[c], threads.get(c)) for c in run.kernels]
    outputs: dict[str, dict[int, np.ndarray]] = {t: {} for t in prog.outputs}
    for done in last:
        for t, per_chip in done.outputs.items():
            outputs[t].update(per_chip)
    ref = Values(chips=[{} for _ in range(prog.chips)])
    for share in reversed(shares):
        for t, value in share.reference.items():
            ref.put(t, prog.tensors[t].home, value)
    values = {}
    for t, per_chip in outputs.items():
        home = prog.tensors[t].home
        values[t] = per_chip[home if home in per_chip else min(per_chip)]
    running = [k for k in kernels if k.place != "collective"]
    kinds: dict[str, int] = {}
    for k in running:
        kinds[k.kind] = kinds.get(k.kind, 0) + 1
    moved = sum(s.runs[best].moved_bytes for s in shares) + sum(r.message_bytes for r in ranks) // 2
    transfers = sum(s.runs[best].transfers for s in shares) + sum(r.messages for r in ranks) // 2
    wall = time.time() - job.launched if job.launched else max(r.wall_s for r in ranks)
    timing = kernel_timing(t for s in shares for t in s.runs[best].kernel_seconds)
    sources = len(set().union(*(s.sources for s in shares)))
    return DistributedReport(
        prog.display, device.describe(), prog.shim, len(plan.groups), len(running), sources, kinds,
        sorted(chips, key=lambda c: c.chip), compare(prog, outputs, ref), max(r.compile_s for r in ranks),
        max(r.run_s for r in ranks), transfers, moved, values, matmul_core(device), prog.shim_source, timing,
        ranks=ranks, mpi=world.library, collectives="host", allreduces=ranks[0].allreduces, wall_s=wall)
