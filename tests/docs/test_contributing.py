"""The diffs of docs/contributing.md still apply, and each does what the page says.

Each diff is applied with `git apply` to a scratch copy of the parts of the repository it
touches (the package, the rules, the examples and the shim library, the generated class
table), and then checked there in a subprocess, so the tree under test is never edited.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from transcripts import ROOT, environment

PAGE = ROOT / "docs" / "contributing.md"
COPIED = ("tprules", "rules", "facts", "docs/classes.md")


def diffs(text: str) -> dict[str, str]:
    """Each ```diff block of the page, by the first file it changes."""
    found = {}
    for block in re.findall(r"^```diff\n(.*?)^```$", text, re.S | re.M):
        first = re.search(r"^\+\+\+ b/(\S+)", block, re.M).group(1)
        found[first] = block
    return found


DIFFS = diffs(PAGE.read_text())
CLASS, ATEN, RULE = DIFFS["docs/classes.md"], DIFFS["tprules/frontends/lowering/arithmetic.py"], DIFFS["rules/tp.dl"]


@pytest.fixture
def scratch(tmp_path):
    for name in COPIED:
        source, target = ROOT / name, tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, target)
    return tmp_path


def apply(root: Path, diff: str) -> None:
    done = subprocess.run(["git", "apply", "-"], cwd=root, input=diff, capture_output=True, text=True)
    assert done.returncode == 0, f"the diff of docs/contributing.md no longer applies:\n{done.stderr}"


def python(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = environment()
    env["PYTHONPATH"] = str(root)
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_the_page_has_three_diffs():
    assert len(DIFFS) == 3


def test_adding_a_class(scratch):
    before = python(scratch, "-c", "from tprules.ops import Ops; print('sign' in set(Ops))")
    assert before.stdout == "False\n"
    apply(scratch, CLASS)
    assert python(scratch, "-m", "tprules.ops.registry_files", "--check").returncode == 0
    check = python(scratch, "-m", "tprules", "check", "facts/megatron-mlp-tp2")
    assert (check.returncode, check.stderr) == (0, "")
    reference = python(scratch, "-c", "import numpy as np; from tprules.ops import Ops, CLASSES; "
                                      "print(CLASSES[Ops.SIGN].reference({}, np.array([-2.0, 0.0, 3.0], np.float32)))")
    assert reference.stdout == "[-1.  0.  1.]\n", reference.stderr


def test_a_class_no_shim_answers_is_refused_at_load(scratch):
    apply(scratch, CLASS)
    supports = scratch / "facts/shims/supports.facts"
    supports.write_text("".join(line for line in supports.read_text().splitlines(True) if "\tsign\t" not in line))
    check = python(scratch, "-m", "tprules", "check", "facts/megatron-mlp-tp2")
    assert check.returncode == 2
    assert "does not answer class sign of the class registry" in check.stderr


def test_adding_an_aten_lowering(scratch):
    pytest.importorskip("torch")
    apply(scratch, CLASS)
    apply(scratch, ATEN)
    probe = """
import torch
from tprules.frontends.lowering import aten
class Ctx:
    def emit(self, node, cls, operands, **attrs):
        print(cls, operands, attrs)
class Node:
    target = torch.ops.aten.sign.default
    args = ("x",)
    kwargs = {}
aten.build_table().ops[torch.ops.aten.sign.default](Ctx(), Node())
"""
    done = python(scratch, "-c", probe)
    assert done.stdout == "sign ['x'] {}\n", done.stderr


def test_adding_a_rule(scratch):
    line = re.compile(r"^gelu1_probs +refused +(\S.*?)  ", re.M)
    check = ("-m", "tprules", "check", "facts/relocated-head-tp2")
    assert line.search(python(scratch, *check).stdout).group(1) == "cycle, spans_chips"
    apply(scratch, RULE)
    assert line.search(python(scratch, *check).stdout).group(1) == "crosses_sections, cycle, spans_chips"
