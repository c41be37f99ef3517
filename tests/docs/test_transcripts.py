"""Every transcript of README.md and docs/ prints, run now, what the page says (sybil)."""

from __future__ import annotations

import pytest
from transcripts import ROOT, documents, examples, stray_prompts

EXAMPLES = examples(documents())


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: f"{Path_rel(e.path)}:{e.line}")
def test_transcript(example):
    example.evaluate()


def Path_rel(path: str) -> str:
    from pathlib import Path
    return str(Path(path).relative_to(ROOT))
