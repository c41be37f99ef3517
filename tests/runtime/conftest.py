"""Runtime fixtures: loaded example programs, shared by the runtime tests of a session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tprules.runtime import RunProgram
from tprules.workspace import Workspace

FACTS = Path(__file__).resolve().parent.parent.parent / "facts"
EXAMPLES = sorted(p.name for p in FACTS.iterdir() if (p / "op.facts").exists())


@pytest.fixture(scope="session")
def example():
    """`example(name)` → (Workspace, RunProgram), loaded once per session."""
    loaded = {}

    def get(name: str):
        if name not in loaded:
            ws = Workspace(FACTS / name)
            loaded[name] = (ws, RunProgram.from_workspace(ws))
        return loaded[name]

    return get
