"""Each package folder's `__init__.py` is its table of contents (STYLE.md, tinygrad's
`codegen/__init__.py`): it names every module and sub-folder of the folder, and nothing
that is not there (a stale `program.py` in runtime/'s, seven modules missing from codegen/'s)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import tprules

ROOT = Path(tprules.__file__).resolve().parent
# the packages laid out by stage; their contents are checked here
STAGED = ["codegen", "runtime", "datalog/engine", "frontends", "serving"]


def packages() -> list[Path]:
    return sorted(p.parent for top in STAGED for p in (ROOT / top).rglob("__init__.py"))


def contents(package: Path) -> set[str]:
    """The modules (`name.py`) and sub-folders (`name/`) of a package."""
    return {p.name if p.is_file() else p.name + "/" for p in package.iterdir()
            if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()}


def named(package: Path) -> set[str]:
    """What the table of contents names: `name.py` and `name/` words of its docstring, read
    as entries of this folder when they carry no folder of their own."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    return set(re.findall(r"(?<![\w/.])([a-z_]+\.py|[a-z_]+/)(?![\w/])", doc))


@pytest.mark.parametrize("package", packages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_table_of_contents_names_every_module(package):
    missing = contents(package) - named(package)
    assert not missing, f"{package.relative_to(ROOT)}/__init__.py does not name: {', '.join(sorted(missing))}"


@pytest.mark.parametrize("package", packages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_table_of_contents_names_nothing_that_is_gone(package):
    # an entry of a sub-folder's may be listed under it (codegen/'s names lowering/'s modules),
    # and a package of tprules' own named as a reference (frontends/'s "nothing in runtime/")
    stale = {n for n in named(package) - contents(package)
             if not any(package.rglob(n.rstrip("/"))) and not (ROOT / n.rstrip("/")).exists()}
    assert not stale, f"{package.relative_to(ROOT)}/__init__.py names what is not there: {', '.join(sorted(stale))}"


def test_a_missing_entry_is_found(tmp_path):
    (tmp_path / "__init__.py").write_text('"""a.py  the first pass"""\n')
    (tmp_path / "a.py").write_text("")
    (tmp_path / "b.py").write_text("")
    assert contents(tmp_path) - named(tmp_path) == {"b.py"}


def test_a_stale_entry_is_found(tmp_path):
    (tmp_path / "__init__.py").write_text('"""program.py  the program as the runtime sees it\nsub/  a stage"""\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("")
    assert named(tmp_path) - contents(tmp_path) == {"program.py"}
