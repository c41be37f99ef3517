"""Bad input never breaks the language server's features: every prefix of every rule file
(a rule being typed, character by character) and a few garbled texts, through each feature
in-process, at positions all over the text. The stdio tests (test_lsp_*.py) cover the
protocol; these cover the analysis on text no test would think to write."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from lsp_helpers import RULES
from lsprotocol import types

from tprules.lsp import completion, diagnostics, hover, navigation
from tprules.lsp.ruleset import RuleSet

GARBLED = ['refused(F, "unterminated', ".decl (x: symbol)", "// only a comment", ")))(((", 'x(F) :- y("', "\x00\x01",
           ".decl a(x: nosuchtype)\na(1).", "a(X) :- !a(X).\n.decl a(x: number)"]


def _texts(name: str):
    text = (RULES / name).read_text()
    for end in range(0, len(text), 89):
        yield text[:end]
    for bad in GARBLED:
        yield text + "\n" + bad


@pytest.mark.parametrize("name", sorted(p.name for p in RULES.glob("*.dl")))
def test_every_prefix_gets_diagnostics_and_answers(name, tmp_path):
    folder = tmp_path / "rules"
    folder.mkdir()
    for p in RULES.glob("*.dl"):
        (folder / p.name).write_text(p.read_text())
    path = (folder / name).resolve()
    rng = random.Random(name)
    previous = RuleSet.load(folder)
    for text in _texts(name):
        rs = RuleSet.load(folder, {path: text}, previous)
        found = diagnostics.by_file(rs)
        assert set(found) == set(rs.files)
        if rs.problems:
            assert any(found.values()), "a problem that no diagnostic shows"
        lines = text.split("\n")
        for _ in range(3):
            line = rng.randrange(len(lines))
            at = types.Position(line, rng.randrange(len(lines[line]) + 1))
            navigation.definition(rs, path, at)
            navigation.references(rs, path, at, True)
            hover.hover(rs, path, at, None)
            completion.complete(rs, path, at, None)
        navigation.symbols(rs, path)
        previous = rs


def test_a_file_that_never_parsed_and_a_missing_folder(tmp_path):
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "a.dl").write_text("this is not datalog")
    rs = RuleSet.load(folder)
    assert rs.checked is None and [p.code for p in rs.problems] == ["syntax"]
    empty = RuleSet.load(tmp_path / "nothing")
    assert [p.message for p in empty.problems][0].startswith("no .dl rule files")
    assert diagnostics.by_file(empty) == {}
    assert navigation.symbols(rs, Path(folder / "a.dl")) == []
