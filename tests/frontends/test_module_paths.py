"""Reports name the model's modules: each member's `attr module` beside it in check, why,
plan and the REPL (and in their JSON), and `--module PREFIX` / `:module PREFIX` keep only
what has a member under that module."""

from __future__ import annotations

import json
from pathlib import Path

MLP = "model.layers.1.mlp"


def test_check_shows_each_members_module_and_filters_by_prefix(cli, imported):
    folder = imported("llama", 2)
    status, every, _ = cli("check", folder)
    status, out, err = cli("check", folder, "--module", MLP)
    assert status == 0 and err == ""
    rows = out.splitlines()[3:-2]
    assert rows and len(rows) < len(every.splitlines()) - 5
    assert all(f" {MLP}" in row for row in rows)  # every candidate kept has a member under it
    assert any("mm_" in row and f"(chip:0) {MLP}.down_proj" in row for row in rows)
    status, out, _ = cli("check", folder, "--module", MLP, "--format", "json")
    fusions = json.loads(out)["fusions"]
    assert len(fusions) == len(rows)
    for f in fusions:
        assert len(f["modules"]) == len(f["members"]) and any(m.startswith(MLP) for m in f["modules"])


def test_a_module_that_holds_no_statement_is_a_usage_error(cli, imported):
    status, out, err = cli("check", imported("llama", 2), "--module", "model.layers.9")
    assert (status, out) == (2, "")
    assert err.strip() == "usage: --module model.layers.9: no statement lies under it"


def test_plan_keeps_the_groups_under_a_module_with_their_paths(cli, imported):
    status, out, _ = cli("plan", imported("llama", 2), "--module", MLP, "--format", "json")
    groups = json.loads(out)["groups"]
    assert status == 0 and groups
    for g in groups:
        assert len(g["modules"]) == len(g["members"]) and any(m.startswith(MLP) for m in g["modules"])


def test_why_shows_the_module_beside_each_member(cli, imported):
    folder = imported("llama", 2)
    _, out, _ = cli("check", folder, "--module", f"{MLP}.down_proj", "--format", "json")
    fusion = json.loads(out)["fusions"][0]["fusion"]
    status, out, _ = cli("why", folder, f'legal("{fusion}")')
    assert status == 0 and f"{MLP}.down_proj" in out.splitlines()[1]


def test_the_repl_filters_answers_and_the_plan_by_module(cli, imported, monkeypatch):
    import io

    folder = imported("llama", 2)
    script = f":module {MLP}.down_proj\n?- member(F, O).\n:plan\n:module nowhere\n:module\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(script))
    status, out, _ = cli("repl", folder)
    assert status == 0
    assert f"module {MLP}.down_proj" in out and "module: every statement" in out
    assert "error: usage: :module nowhere: no statement lies under it" in out
    answers = out.split("?- member(F, O).")[1].split("tprules>")[0]
    assert "mm_" in answers and "embedding" not in answers


def test_run_shows_each_kernels_members_with_their_modules(cli, imported, tmp_path):
    """`run --show kernels` follows each run of members with their module path; `--trace`
    carries each member's path beside it, as check's and plan's JSON do."""
    folder = imported("llama", 2)
    trace = tmp_path / "trace.json"
    status, out, err = cli("run", folder, "--show", "kernels", "--trace", trace, "--format", "json")
    assert status == 0 and json.loads(out)["ok"]
    headers = [line for line in err.splitlines() if line.startswith("# --- group ")]
    assert len(headers) == json.loads(out)["kernels"]
    assert any(f"@0 ({MLP}.down_proj)" in h and h.endswith(" on chip:0") for h in headers)
    assert any("(model.embed_tokens)" in h for h in headers)
    slices = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") in ("kernel", "collective")]
    assert slices and all(len(e["args"]["modules"]) == len(e["args"]["members"]) for e in slices)
    assert any(m.startswith(f"{MLP}.") for e in slices for m in e["args"]["modules"])


def test_a_ranks_kernels_and_collectives_name_their_modules(imported, tmp_path):
    """On `--ranks 2` rank 0 has the paths from the launcher's job for `--show kernels` (its own chip 0's
    kernels), and the MPI collectives' trace slices carry them."""
    import shutil
    import subprocess
    import sys

    import pytest

    if shutil.which("mpiexec") is None and not (Path(sys.executable).parent / "mpiexec").exists():
        pytest.skip("needs MPI: pip install -e '.[mpi]'")
    trace = tmp_path / "trace.json"
    done = subprocess.run([sys.executable, "-m", "tprules", "run", str(imported("llama", 2)), "--ranks", "2",
                           "--show", "kernels", "--trace", str(trace)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert any(f"@0 ({MLP}.down_proj)" in line for line in done.stderr.splitlines() if line.startswith("# --- group"))
    collectives = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "collective"]
    assert collectives and all(e["args"]["modules"][0].startswith(("model.", "lm_head")) for e in collectives)
    assert any(e["name"].startswith("all_gather") and e["args"]["modules"][0] == "lm_head" for e in collectives)


def test_members_under_one_module_name_it_once():
    from tprules.commands.common import with_modules

    modules = {"a": "m.x", "b": "m.x", "c": "m.y"}
    assert with_modules(["a", "b", "c", "d"], modules) == "a, b (m.x), c (m.y), d"
    assert with_modules(["d"], modules) == "d"


def test_a_kernel_does_not_depend_on_where_its_statements_came_from(imported):
    """The cost model leaves `module` and `aten` out of what it caches kernels by
    (program/view.py PROVENANCE): no kernel's estimate changes without them."""
    from dataclasses import replace

    from tprules.codegen import lower
    from tprules.codegen.cost import CPU, GPU, estimate
    from tprules.planner import plan
    from tprules.program.model import Program
    from tprules.program.view import PROVENANCE
    from tprules.workspace import Workspace

    ws = Workspace(imported("qwen2_moe", 2))
    prog = Program.from_workspace(ws)

    class Bare:  # the program with its statements' provenance left out
        def __getattr__(self, name):
            return getattr(prog, name)

        def statement(self, name):
            s = prog.statement(name)
            return replace(s, attrs=tuple(a for a in s.attrs if a[0] not in PROVENANCE))

        @property
        def statements(self):
            return tuple(self.statement(s.name) for s in prog.statements)

    bare = Bare()
    assert sum(len(s.attrs) for s in bare.statements) < sum(len(s.attrs) for s in prog.statements)
    groups = [g for g in plan(ws, machine=None).groups]
    groups += [replace(groups[0], members=(s.name,)) for s in prog.statements]
    for g in groups:
        for machine in (CPU, GPU):
            assert estimate(lower(g, prog), machine) == estimate(lower(g, bare), machine), g.members
