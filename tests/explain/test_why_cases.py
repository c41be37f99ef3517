"""`tprules why` on the example programs: proof trees, why-not trees and errors, as exact text.

Each folder under tests/data/why/ is one case (see tests/explain_cases.py)."""

from __future__ import annotations

import pytest
from explain_cases import expected, run_case, why_cases


@pytest.mark.parametrize("case", why_cases(), ids=lambda p: p.name)
def test_why_case(case):
    assert run_case(case) == expected(case)
