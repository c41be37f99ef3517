"""Every transcript of README.md and docs/ prints, run now, what the page says (sybil)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sybil.example import SybilFailure
from transcripts import ROOT, SYBIL, NotATranscript, documents, examples, stray_prompts

EXAMPLES = examples(documents())


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: f"{Path(e.path).relative_to(ROOT)}:{e.line}")
def test_transcript(example):
    example.evaluate()


def test_the_walk_through_and_the_pages_are_found():
    """The parser still finds the README's check, bad input, why and plan, and the pages' transcripts."""
    readme = [e for e in EXAMPLES if Path(e.path).name == "README.md"]
    assert [e.parsed[0].args[0] for e in readme] == ["check", "check", "why", "plan"]
    assert len(EXAMPLES) - len(readme) >= 13


def test_no_tprules_prompt_outside_a_transcript():
    """A `$ tprules` line inside another block would be read by nobody: the block must open with it."""
    assert [where for path in documents() for where in stray_prompts(path)] == []


PAGE = """A page of a test.

```console
$ tprules check facts/megatron-mlp-tp2
{first}
...
```
"""


def _page(tmp_path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text)
    return page


def _evaluate(page: Path) -> None:
    (example,) = SYBIL.parse(page)
    example.evaluate()


def test_a_changed_transcript_fails(tmp_path):
    """The runner can fail: the real first line passes the parse, a changed one fails with a diff."""
    page = _page(tmp_path, PAGE.format(first="check facts/megatron-mlp-tp2   shim cuda-lane:h100:Bf16 (library)   rules rules"))
    with pytest.raises(SybilFailure) as failed:  # the page abridges the table with "...": the rest differs
        _evaluate(page)
    assert "+fusion          verdict" in str(failed.value) and "-..." in str(failed.value)
    whole = (ROOT / "README.md").read_text()
    start = whole.index("$ tprules check facts/megatron-mlp-tp2\n")
    block = whole[start:whole.index("```", start)]
    assert not _failure(tmp_path, block)
    assert "-10 candidates" in _failure(tmp_path, block.replace("9 candidates", "10 candidates"))


def test_a_wrong_exit_status_fails(tmp_path):
    line = "$ tprules check tests/data/malformed/chip_out_of_range_placed/program"
    printed = "tests/data/malformed/chip_out_of_range_placed/program/placed.facts:3: ill-formed: " \
              "tensor w1 is placed on chip 2; chips are 0..1\n"
    assert not _failure(tmp_path, f"{line}   # exit 2\n{printed}")
    assert "exit status 2 (the page says 0)" in _failure(tmp_path, f"{line}\n{printed}")


def test_shell_in_a_transcript_is_an_error_naming_the_page(tmp_path):
    page = _page(tmp_path, "```\n$ tprules check facts/megatron-mlp-tp2 | tail -1\n9 candidates\n```\n")
    with pytest.raises(NotATranscript, match=r"page.md:1: .*`\|` is shell"):
        SYBIL.parse(page)


def _failure(tmp_path, block: str) -> str:
    """What sybil reports for a one-block page holding `block`; '' when it passes."""
    page = _page(tmp_path, f"```console\n{block}```\n")
    try:
        _evaluate(page)
    except SybilFailure as failure:
        return str(failure)
    return ""
