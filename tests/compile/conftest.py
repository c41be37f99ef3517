"""Compiling for a GPU without one (`tprules compile`, codegen/cuda/nvvm.py). Numba's CUDA is
either the simulator or the real one in a process, and this test session runs the
simulator, so every compile runs in a process of its own, with the simulator off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
ARCHES = ("sm_90", "sm_80")  # the H100/H200 generation, and one older (A100)


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def python(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python ARGS...` at the repository's root with the simulator off."""
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=environment(), capture_output=True, text=True,
                          timeout=timeout)


def tprules(*args: str) -> subprocess.CompletedProcess:
    return python("-m", "tprules", *map(str, args))


@pytest.fixture(scope="session")
def nvvm():
    """Skips the test where NVVM cannot be loaded (the cuda-compile extra is not installed)."""
    probe = python("-c", "from tprules.codegen.cuda import nvvm; nvvm.Compiler(nvvm.parse_arch('sm_90'))")
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["?"])[-1]
        pytest.skip(f"NVVM is not installed here (pip install -e '.[cuda-compile]'): {reason}")
