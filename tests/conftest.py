"""Shared fixtures: the project's folders, a CLI runner, and a private cache."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "rules"
FACTS = ROOT / "facts"
DATA = Path(__file__).resolve().parent / "data"


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite the golden snapshots in tests/golden/ (as `tprules golden --update`) "
                          "and print what changed; review with git diff")


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    os.environ["TPRULES_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    os.environ.pop("TPRULES_RULES", None)  # a user's own rules folder (config.py) is not the tests'
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    yield


@pytest.fixture
def cli(capsys):
    """Run `tprules ARGS...` in-process; returns (exit status, stdout, stderr)."""
    from tprules.cli import main

    def run(*args: str):
        status = main([str(a) for a in args])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return run


@pytest.fixture
def rules_copy(tmp_path):
    """A private copy of rules/ to edit."""
    target = tmp_path / "rules"
    shutil.copytree(RULES, target)
    return target


@pytest.fixture
def program_copy(tmp_path):
    """A private copy of an example program: `program_copy("megatron-mlp-tp2")`."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(FACTS / name, target)
        return target

    return copy
