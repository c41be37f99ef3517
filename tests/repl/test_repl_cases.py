"""`tprules repl` sessions piped from a file, compared with their expected transcript.

Each folder under tests/data/repl/ is one case (see tests/explain_cases.py)."""

from __future__ import annotations

import pytest
from explain_cases import expected, repl_cases, run_case


@pytest.mark.parametrize("case", repl_cases(), ids=lambda p: p.name)
def test_repl_case(case):
    assert run_case(case) == expected(case)
