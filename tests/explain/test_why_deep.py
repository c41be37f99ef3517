"""A proof deeper than Python's stack: a clean error that says how to get it in parts."""

from __future__ import annotations

import pytest

from tprules.program.builder import ProgramBuilder
from tprules.repl.session import Session


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """600 unary statements in a row on chip 0; fusing the first and the last makes a cycle
    whose escape path is 598 statements long (598 rounds of the recursive `escapes`)."""
    b = ProgramBuilder(chips=1)
    prev = b.tensor("x", [2, 2], chip=0)
    for i in range(600):
        prev = b.stmt(f"s{i}", "relu", [prev], b.tensor(f"t{i}", [2, 2], chip=0))
    b.candidate("ends", ["s0", "s599"])
    return b.write(tmp_path_factory.mktemp("chain") / "p")


def test_cli_says_to_use_depth(cli, chain):
    status, out, err = cli("why", chain, 'refused("ends", "cycle")', "--depth", "0")
    assert status == 2 and out == ""
    assert err == "usage: this proof is too deep to build whole; give --depth N and expand with --subproof\n"


def test_cli_with_a_depth_answers(cli, chain):
    status, out, err = cli("why", chain, 'refused("ends", "cycle")', "--depth", "5")
    assert status == 0 and err == ""
    assert 'escapes("ends", "s598")' in out and "--subproof 1" in out


def test_repl_says_so_and_goes_on(chain):
    session = Session(chain, depth=None)
    assert session.handle('why refused("ends", "cycle")').plain == \
        "error: the explanation is too deep (try a smaller :depth)"
    assert session.handle('?- legal("ends").').plain == "false."
