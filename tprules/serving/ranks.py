"""`tprules generate ... --ranks N`: the prefill program and the decode steps on N MPI ranks,
as `tprules run --ranks N` runs one program (runtime/distributed/):

1. the launcher (this process) plans both programs once (`plan_job`: bad input stops here,
   before any rank starts) and writes them, the prompt and the count of tokens to a job folder;
2. it starts N ranks, `tprules generate ... --mpi --job FOLDER`, with the MPI's own mpiexec,
   and watches them (launch.start_ranks: a rank that fails or dies is named in one line);
3. each rank prepares both programs for its chips (rank r holds the chips k with k mod N == r)
   and runs the prefill and every decode step (generate.greedy): the caches each step writes
   stay on the rank that holds their chip and are fed back there as the next step's inputs;
   only the greedy tokens travel, from the rank holding the logits to the others;
4. rank 0 leaves the tokens in the job folder, which the launcher compares with transformers.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np

from .generate import RanksFailed, greedy

STEPS = ("prefill", "decode")


def on_ranks(ranks: int, command: list[str], timeout: float = 600.0):
    """generate's runner on `ranks` ranks; `command`: the generate command's own arguments,
    which each rank is started with (it reads its job from the folder)."""
    from ..errors import UsageError

    if ranks < 1:
        raise UsageError(f"--ranks takes a count of at least 1; got {ranks}")

    def runner(work: Path, prompt: np.ndarray, tokens: int, device: str, seconds: dict) -> np.ndarray:
        return _on_ranks(work, prompt, tokens, device, ranks, command, seconds, timeout)

    return runner


def _on_ranks(work: Path, prompt: np.ndarray, tokens: int, device: str, ranks: int, command: list[str],
              seconds: dict, timeout: float) -> np.ndarray:
    """The greedy tokens [B, tokens] of the programs in `work` (prefill/, decode/) on `ranks` ranks."""
    from ..errors import UsageError
    from ..runtime.distributed.job import plan_job, write_job
    from ..runtime.distributed.launch import find_mpiexec, start_ranks

    mpiexec = find_mpiexec()  # no MPI: one line, before anything is planned
    started = time.perf_counter()
    jobs = {name: plan_job(work / name, device=device) for name in STEPS if (work / name).is_dir()}
    chips = jobs["prefill"].prog.chips
    if ranks > chips:
        raise UsageError(f"refused: {ranks} ranks for the {chips} chip{'' if chips == 1 else 's'} of "
                         f"{jobs['prefill'].prog.display}; at most one rank per chip")
    seconds["plan"] = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="tprules-generate-ranks-") as name:
        folder = Path(name)
        for step, job in jobs.items():
            (folder / step).mkdir()
            write_job(folder / step, job)
        np.save(folder / "prompt.npy", prompt)
        (folder / "generate.json").write_text(json.dumps({"tokens": tokens, "device": device, "chips": chips}))
        code = start_ranks(["generate", *command, "--mpi", "--job", str(folder), "--timeout", f"{timeout:g}"], ranks,
                           folder, timeout, mpiexec=mpiexec)
        if code != 0 or not (folder / "tokens.npy").is_file():
            raise RanksFailed(code or 3)
        seconds.update(json.loads((folder / "seconds.json").read_text()))
        return np.load(folder / "tokens.npy")


def run_rank(folder: Path, timeout: float = 600.0, traceback: bool = False) -> int:
    """This process as one rank of `generate --ranks` (started by `on_ranks`)."""
    from ..runtime import Prepared
    from ..runtime.distributed.job import read_job
    from ..runtime.distributed.rank import run_as_rank

    spec = json.loads((folder / "generate.json").read_text())
    prompt = np.load(folder / "prompt.npy")
    jobs = {step: read_job(folder / step) for step in STEPS if (folder / step).is_dir()}

    def body(world) -> int:
        started = time.perf_counter()
        # as `run --ranks` prepares (runtime/distributed/rank.py): this rank's chips, a spine kernel on each
        ready = {step: Prepared(job.prog, job.plan, spec["device"], share=False, world=world, jobs=1)
                 for step, job in jobs.items()}
        compiled = time.perf_counter()
        got = greedy(ready["prefill"], ready.get("decode"), prompt, spec["tokens"], world)
        ran = time.perf_counter()
        slowest = world.gather((compiled - started, ran - compiled), "the timings at rank 0")
        if world.rank == 0:
            np.save(folder / "tokens.npy", got)
            (folder / "seconds.json").write_text(json.dumps({"compile": max(s[0] for s in slowest),
                                                             "run": max(s[1] for s in slowest)}))
        return 0

    return run_as_rank(folder, int(spec["chips"]), body, timeout, traceback)
