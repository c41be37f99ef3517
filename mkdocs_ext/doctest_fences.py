"""A griffe extension for the API pages: a docstring's doctest becomes a fenced `pycon` block.

tprules' docstrings hold runnable examples (`>>>` lines and their output, run by
tests/planner/test_docs_planner.py) outside any "Examples:" section, where Markdown would read `>>>`
as nested block quotes and `[...][:2]` as a link. mkdocs.yml loads this file by its path.
"""

from __future__ import annotations

import griffe


def fence(text: str) -> str:
    r"""Each run of lines that opens with `>>>` and ends at a blank line, as a pycon block.

    >>> fence("Text.\n>>> 1 + 1\n2\n\nMore.").splitlines()
    ['Text.', '```pycon', '>>> 1 + 1', '2', '```', '', 'More.']
    """
    out: list[str] = []
    in_fence = in_example = False
    for line in text.split("\n"):
        if in_example and not line.strip():
            out.append("```")
            in_example = False
        elif not in_example and not in_fence and line.startswith(">>>"):
            out.append("```pycon")
            in_example = True
        elif not in_example and line.startswith("```"):
            in_fence = not in_fence
        out.append(line)
    if in_example:
        out.append("```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence(obj.docstring.value)
