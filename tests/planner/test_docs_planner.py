"""The planner's and the Shim API's documentation runs: docstring examples, and the
compiler-side snippet of docs/shim-api.md prints what the page says it prints."""

from __future__ import annotations

import contextlib
import doctest
import importlib
import io
import re

import pytest
from conftest import ROOT

MODULES = ["tprules.shim.protocol", "tprules.shim.graph", "tprules.shim.manifest", "tprules.shim.base",
           "tprules.shim.tp", "tprules.planner", "tprules.planner.groups",
           "tprules.planner.index", "tprules.planner.shapes", "tprules.program.view", "tprules.program.model",
           "tprules.program.records", "tprules", "tprules.program.shimsource",
           "tprules.datalog.analysis.domains", "tprules.repl.complete", "tprules.ops", "tprules.ops.layout",
           "tprules.program.axes"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # examples name facts/... folders
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def snippets(page: str) -> list[tuple[str, str]]:
    """Each ```python block of a page followed by a ```text block: (code, printed output)."""
    text = (ROOT / "docs" / page).read_text()
    return re.findall(r"```python\n(.*?)```\n+(?:[^`]*?\n)?```text\n(.*?)```", text, re.S)


@pytest.mark.parametrize("page", ["shim-api.md", "planner.md"])
def test_doc_snippets_print_what_the_page_says(page, monkeypatch):
    monkeypatch.chdir(ROOT)
    found = snippets(page)
    assert found
    for code, expected in found:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"docs/{page}", "exec"), {"__name__": "snippet"})  # noqa: S102 - our own docs
        assert out.getvalue() == expected
