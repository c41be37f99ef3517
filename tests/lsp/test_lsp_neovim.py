"""A real editor: headless Neovim (its built-in LSP client, Debian's `neovim`) opens a rule
file of a broken copy of rules/, waits for the diagnostics, jumps to a definition with
`vim.lsp.buf.definition()`, and reports where it landed (tests/lsp/nvim/drive.lua)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from lsp_helpers import ROOT, RULES

NVIM = shutil.which("nvim")
pytestmark = pytest.mark.skipif(NVIM is None, reason="Neovim (nvim) is not installed: apt-get install -y neovim")


def test_neovim_shows_the_diagnostics_and_jumps_to_the_decl(tmp_path):
    shutil.copytree(RULES, tmp_path / "rules")
    tp = tmp_path / "rules" / "tp.dl"
    tp.write_text(tp.read_text().replace("on_chip(A, CA)", "on_chipp(A, CA)"))
    out = tmp_path / "seen.json"
    env = {**os.environ, "TPRULES_PYTHON": sys.executable, "TPRULES_ROOT": str(ROOT), "TPRULES_WORKSPACE": str(tmp_path),
           "TPRULES_FILE": str(tp), "TPRULES_JUMP": "is_fold(O)", "TPRULES_OUT": str(out)}
    subprocess.run([NVIM, "--headless", "--clean", "-c", f"luafile {ROOT / 'tests/lsp/nvim/drive.lua'}"],
                   env=env, cwd=tmp_path, timeout=120, check=True, stdin=subprocess.DEVNULL, capture_output=True)
    seen = json.loads(out.read_text())
    assert seen["attached"], seen
    (diag,) = seen["diagnostics"]
    row = next(i for i, line in enumerate(tp.read_text().split("\n")) if "on_chipp(A, CA)" in line)
    assert (diag["lnum"], diag["col"]) == (row, tp.read_text().split("\n")[row].index("on_chipp"))
    assert diag["end_col"] - diag["col"] == len("on_chipp") and "on_chipp is used but not declared" in diag["message"]
    assert seen["jumped"], seen
    place = tmp_path / "rules" / "place.dl"
    decl = next(i for i, line in enumerate(place.read_text().split("\n")) if line.startswith(".decl is_fold"))
    assert seen["landed"]["file"] == str(place)
    assert (seen["landed"]["row"], seen["landed"]["col"]) == (decl + 1, len(".decl "))  # on the name in its .decl
