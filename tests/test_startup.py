"""`check` imports only what it uses: no numba, scipy, torch, networkx, pyarrow, the
runtime, or (with its rules cached) the rule checker and OpenSSL in its process (start-up
is most of `check` on a 70b-sized program). The first run after a rule edit checks and
stratifies the rules (networkx) and caches them; the second, as in daily use, reads the
cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("numba", "llvmlite", "scipy", "torch", "transformers", "networkx", "prompt_toolkit", "pyDatalog", "pyarrow",
         "tprules.runtime", "tprules.codegen", "tprules.planner", "tprules.frontends",
         # with the rules cached: no rule checker's pass, and no OpenSSL (3.5 MiB resident) for the cache's key
         "tprules.datalog.analysis.magic", "tprules.datalog.analysis.components", "tprules.datalog.analysis.witnesses",
         "tprules.datalog.lang.parser",
         "lark", "_hashlib")

SCRIPT = """
import io, json, sys, contextlib
from tprules.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    status = main(sys.argv[2:] or ["check", sys.argv[1], "--format", "json"])
print(json.dumps({"status": status, "modules": sorted(sys.modules)}))
"""


def test_check_imports_nothing_it_does_not_use():
    subprocess.run([sys.executable, "-c", SCRIPT, "facts/llama-layer-tp4"], capture_output=True, timeout=120)
    done = subprocess.run([sys.executable, "-c", SCRIPT, "facts/llama-layer-tp4"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == 0
    loaded = [m for m in result["modules"] if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert loaded == []


@pytest.mark.parametrize("command", [["plan", "--format", "json"], ["check"], ["check", "--format", "json"]])
def test_judging_never_loads_numpy_ma(command):
    """`np.unique` imports numpy.ma on its first call (8 ms of start-up); tprules' own
    sort-based `unique` (datalog/facts/columns.py) does not."""
    program = "facts/llama-layer-tp4"
    done = subprocess.run([sys.executable, "-c", SCRIPT, program, command[0], program, *command[1:]],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "numpy.ma" not in json.loads(done.stdout)["modules"]


@pytest.mark.parametrize("command", [["plan", "--format", "json"], ["why", "legal(F)"], ["lint"]])
def test_reading_facts_does_not_import_pyarrow(command):
    """pyarrow writes an import's facts (program/facts.py); reading them is numpy's."""
    program = "facts/llama-layer-tp4"
    done = subprocess.run([sys.executable, "-c", SCRIPT, program, command[0], program, *command[1:]],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == 0
    assert [m for m in result["modules"] if m == "pyarrow" or m.startswith("pyarrow.")] == []


BLAS_SCRIPT = """
import contextlib, io, json, os, sys
from tprules.cli import entry
sys.argv = ["tprules", "check", sys.argv[1], "--format", "json"]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        entry()
    except SystemExit:
        pass
from threadpoolctl import threadpool_info
print(json.dumps([i["num_threads"] for i in threadpool_info() if i["internal_api"] == "openblas"]))
"""


@pytest.mark.parametrize("own", [None, "2"])
def test_check_starts_no_blas_thread_pool_unless_told(own):
    """`check` does no linear algebra: numpy's OpenBLAS starts one thread, or the user's number."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if own is not None:
        env["OPENBLAS_NUM_THREADS"] = own
    done = subprocess.run([sys.executable, "-c", BLAS_SCRIPT, "facts/llama-layer-tp4"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) in ([], [int(own or 1)])  # [] where numpy has no OpenBLAS


def test_a_judging_process_is_set_up_without_glibc_too(monkeypatch):
    """Where the C library is not glibc, the allocator is left as it is (no error)."""
    import ctypes

    from tprules import cli

    def no_glibc(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_glibc)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert cli._batch_process() is None
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
