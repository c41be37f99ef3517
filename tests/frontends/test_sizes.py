"""frontends/ stays readable as issue 46 left it: no module over 450 lines and no function
over 80 (the importer had grown a 306-line closure and a 230-line one)."""

from __future__ import annotations

import ast
from pathlib import Path

import tprules.frontends

ROOT = Path(tprules.frontends.__file__).resolve().parent


def _too_long() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(ROOT)
        if text.count("\n") > 450:
            found.append(f"{where}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None \
                    and node.end_lineno - node.lineno + 1 > 80:
                found.append(f"{where}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines")
    return found


def test_no_module_over_450_lines_and_no_function_over_80():
    assert _too_long() == []
