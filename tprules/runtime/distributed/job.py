"""What the launcher hands its ranks, and what the ranks leave for it.

`tprules run DIR --ranks N` checks and plans the program once, before any rank starts, and
writes the job (the program as the runtime sees it, and its plan) to a folder that every
rank reads. Each rank then leaves a status record there, `rank-R.json`, rewritten as it
goes (`started`, `running`, `done` or `failed`): how the launcher names a rank that
failed or was killed, and how a test finds a rank mid-run.
"""

from __future__ import annotations

import json
import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...planner.plan import Plan
    from ...program.model import Program


@dataclass
class Job:
    prog: Program
    plan: Plan
    launched: float | None = None  # time.time() when the launcher started, for the wall time
    modules: dict[str, str] = field(default_factory=dict)  # statement → module path (--show kernels)


def write_job(folder: Path, job: Job) -> None:
    (folder / "job.pickle").write_bytes(pickle.dumps(job))


def read_job(folder: Path) -> Job:
    return pickle.loads((Path(folder) / "job.pickle").read_bytes())


def write_status(folder: Path | None, rank: int, state: str, **fields) -> None:
    """Rank `rank`'s record: its state and what the launcher needs to name it."""
    if folder is None:
        return
    record = {"rank": rank, "state": state, "time": time.time(), **fields}
    path = Path(folder) / f"rank-{rank}.json"
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)  # atomic: the launcher never reads half a record


def read_statuses(folder: Path) -> dict[int, dict]:
    records = {}
    for path in Path(folder).glob("rank-*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        records[record["rank"]] = record
    return records


def plan_job(program_dir, *, rules=None, shim=None, engine="fast", unfused=False, device="cpu", matmul="auto",
             modules=False, launched=None, include_dirs=()) -> Job:
    """Load, check and plan the program once, as one process plans it for `device` with its
    `matmul` core (`runtime.execute`): every bad input is found here, before any rank
    computes (the launcher calls this before it starts the ranks). `modules`: keep the
    statements' module paths (for --show kernels)."""
    from ...program.model import Program
    from ...verdicts import module_paths
    from ...workspace import Workspace
    from ..devices import get_device
    from ..plan.groups import ordered_groups
    from ..run import run_plan
    from ..values.inputs import check_input_files

    ws = Workspace(program_dir, rules, shim, engine=engine, include_dirs=include_dirs)
    prog = Program.from_workspace(ws)
    plan = run_plan(ws, prog, get_device(device, matmul), baseline=unfused)  # (a device the ranks lack: here)
    ordered_groups(plan, prog)  # a plan that cannot run is bad input here, not in a rank
    check_input_files(prog)
    return Job(prog, plan, launched, module_paths(ws.program.facts) if modules else {})
