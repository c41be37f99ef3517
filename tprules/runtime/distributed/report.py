"""The report of a run on ranks: the usual report (`runtime.report`), a table per rank, and
`"ranks"` in JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..report import chip_table, make_console, print_outputs, print_plan, seconds, size, table, verdict
from ..run import RunReport


@dataclass
class RankStats:
    rank: int
    pid: int
    host: str
    chips: list[int]
    kernels: int
    kernel_s: float  # the rank's chips' busy time added up
    allreduces: int
    allreduce_bytes: int  # the rank's payload over all its all-reduces
    allreduce_s: float  # waiting for slower ranks included
    messages: int  # point-to-point, sent and received
    message_bytes: int
    compile_s: float
    run_s: float
    wall_s: float  # from the rank's start to its report
    allgathers: int = 0
    allgather_bytes: int = 0  # the rank's payload (its chips' slices) over all its all-gathers
    reducescatters: int = 0
    reducescatter_bytes: int = 0  # what the rank received (its chips' blocks of the sums) over its reduce-scatters


@dataclass
class DistributedReport(RunReport):
    ranks: list[RankStats] = field(default_factory=list)
    mpi: str = ""  # the MPI library, e.g. MPICH 5.0.2
    collectives: str = "host"  # where the all-reduce's buffers live (docs/distributed.md)
    allreduces: int = 0  # per rank
    wall_s: float = 0.0  # the launcher's start (or the first rank's) to the report

    def to_json(self) -> dict:
        out = super().to_json()
        out.update({"mpi": self.mpi, "collectives": self.collectives, "allreduces": self.allreduces,
                    "wall_s": self.wall_s, "ranks": [_rank_json(r) for r in self.ranks]})
        return out


def _rank_json(r: RankStats) -> dict:
    """A rank's figures; the all-gather's and the reduce-scatter's only where the program has one."""
    out = asdict(r)
    if not r.allgathers:
        del out["allgathers"], out["allgather_bytes"]
    if not r.reducescatters:
        del out["reducescatters"], out["reducescatter_bytes"]
    return out


def render_text(report: DistributedReport, width: int = 130, color: bool = False) -> str:
    console, buf = make_console(width, color)
    ranks = f"{len(report.ranks)} rank{'' if len(report.ranks) == 1 else 's'}"
    print_plan(console, report, f"run {report.program} on {report.device}, {ranks} ({report.mpi})"
                                f"   shim {report.shim} ({report.shim_source})")
    console.print()
    console.print(chip_table(report))
    console.print()
    console.print(rank_table(report))
    console.print()
    print_outputs(console, report)
    n = report.allreduces
    each = report.ranks[0].allreduce_bytes // n if n else 0
    share = sum(r.allreduce_s for r in report.ranks) / max(1e-12, sum(r.run_s for r in report.ranks))
    others = (_collective(report, "allgather", "all-gather", "a rank")
              + _collective(report, "reducescatter", "reduce-scatter", "into a rank"))
    console.print(f"compile {seconds(report.compile_s)}, run {seconds(report.run_s)} ({n} all-reduce"
                  f"{'' if n == 1 else 's'} of {size(each)} a rank{others}, {share:.0%} of the run), wall "
                  f"{seconds(report.wall_s)}; {verdict(report)}", soft_wrap=True)
    return buf.getvalue()


def _collective(report: DistributedReport, kind: str, noun: str, per: str) -> str:
    """`; N <noun>s of B <per>`: a rank's count of one collective (`kind`: the rank
    field's stem) and its mean payload, or nothing when there was none."""
    n = getattr(report.ranks[0], kind + "s") if report.ranks else 0
    if not n:
        return ""
    mine = sum(getattr(r, kind + "_bytes") for r in report.ranks) // len(report.ranks) // n
    return f"; {n} {noun}{'' if n == 1 else 's'} of {size(mine)} {per}"


def rank_table(report: DistributedReport):
    ranks = table("rank", "pid", "host", "chips", "kernels", "kernel time", "all-reduces", "bytes", "all-reduce time",
                  "messages", "wall", right=("pid", "kernels", "kernel time", "all-reduces", "bytes", "all-reduce time",
                                             "messages", "wall"))
    for r in report.ranks:
        ranks.add_row(str(r.rank), str(r.pid), r.host, ",".join(map(str, r.chips)), str(r.kernels), seconds(r.kernel_s),
                      str(r.allreduces), size(r.allreduce_bytes), seconds(r.allreduce_s),
                      f"{r.messages} ({size(r.message_bytes)})" if r.messages else "0", seconds(r.wall_s))
    return ranks
