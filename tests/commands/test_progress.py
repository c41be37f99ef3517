"""Progress bars: drawn on stderr when it is a terminal, nothing when it is piped."""

from __future__ import annotations

import io

from tprules.progress import Progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_progress_bar_draws_on_a_terminal_and_nothing_when_piped():
    shown, piped = Terminal(), io.StringIO()
    for stream in (shown, piped):
        p = Progress(stream=stream)
        p.phase("stamp layers", 4)
        p.advance(4)
        p.close()
    assert "stamp layers" in shown.getvalue() and piped.getvalue() == ""


def test_plan_counts_its_merges_on_a_terminal():
    from tprules.planner import plan
    from tprules.workspace import Workspace

    shown, piped = Terminal(), io.StringIO()
    plans = [plan(Workspace("facts/llama-layer-tp4"), progress=Progress(stream=s)) for s in (shown, piped)]
    assert plans[0] == plans[1]  # the bar changes nothing
    assert "plan: merges" in shown.getvalue() and piped.getvalue() == ""


def test_piped_plan_prints_nothing_on_stderr(cli):
    status, _, err = cli("plan", "facts/llama-layer-tp4")
    assert status == 0 and err == ""
