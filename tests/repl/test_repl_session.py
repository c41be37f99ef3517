"""The REPL session beyond scripted transcripts: :reload with edits, :plan, completion, the terminal loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FACTS
from rich.text import Text

from tprules.explain.render import to_text
from tprules.repl.complete import ReplCompleter, candidates
from tprules.repl.session import COMMANDS, QUIT, Session


def say(session: Session, line: str) -> str:
    answer = session.handle(line)
    if answer is None or answer is QUIT:
        return ""
    return answer if isinstance(answer, str) else to_text(answer, width=1000)  # as when piped


@pytest.fixture
def session(rules_copy, program_copy):
    return Session(program_copy("megatron-mlp-tp2"), rules_copy)


def test_reload_takes_a_good_edit(session, rules_copy):
    assert "mm2_bias" not in say(session, "?- legal(F).")
    with open(rules_copy / "tp.dl", "a") as f:
        f.write('\n.decl waived(f: symbol)\nwaived("mm2_bias").\nlegal(F) :- waived(F).\n')
    assert say(session, ":reload").startswith("reloaded ")
    assert '"mm2_bias"' in say(session, "?- legal(F).")
    proof = say(session, 'why legal("mm2_bias")')
    assert "legal(F) :- waived(F)." in proof and "fact in rules" in proof


@pytest.mark.parametrize("edit, message", [
    ("legal(F) :- candidate(F), F = .", "syntax error"),
    ("legal(F) :- candidate(F), !nosuch(F).", "relation nosuch is used but not declared"),
    ("legal(F) :- candidate(G).", "unsafe variable F"),
    ("legal(F) :- candidate(F), !legal(F).", "not stratifiable"),
])
def test_reload_keeps_the_previous_rules_after_a_broken_edit(session, rules_copy, edit, message):
    before = say(session, "?- legal(F).")
    tp = rules_copy / "tp.dl"
    tp.write_text(tp.read_text() + "\n" + edit + "\n")
    answer = say(session, ":reload")
    assert answer.startswith("reload failed; the previous rules and facts stay in use: ")
    assert message in answer and "tp.dl:" in answer
    assert answer.count("\n") == 1  # one problem, one line
    assert say(session, "?- legal(F).") == before
    assert "legal(F) :- candidate(F), !refused(F, _)." in say(session, 'why legal("mm1_gelu_0")')


def test_reload_rereads_facts_and_reports_a_broken_fact_file(session):
    member = session.program_dir / "member.facts"
    member.write_text(member.read_text() + "late\tbias\nlate\tresidual\n")
    assert "10 candidates" in say(session, ":reload")
    assert say(session, '?- legal("late").') == "true.\n"
    member.write_text(member.read_text() + "broken line without tab\n")
    answer = say(session, ":reload")
    assert "reload failed" in answer and "member.facts:" in answer
    assert say(session, '?- legal("late").') == "true.\n"


def test_reload_reports_every_problem_of_a_broken_edit_one_per_line(session, rules_copy):
    tp = rules_copy / "tp.dl"
    tp.write_text(tp.read_text() + "\nlegal(F) :- candidate(G).\nlegal(F) :- member(F, _), !nosuch(F).\n")
    lines = say(session, ":reload").splitlines()
    assert lines[0] == "reload failed; the previous rules and facts stay in use:"
    assert len(lines) == 3 and all("rules/tp.dl:" in line for line in lines[1:])


def test_reload_forgets_elided_ids(session):
    say(session, ":depth 1")
    assert "subproof 1" in say(session, 'why legal("mm1_gelu_0")')
    say(session, ":reload")
    assert say(session, "subproof 1") == "error: no subtree #1 was elided in this session\n"


def test_reload_error_in_json(session, rules_copy):
    (rules_copy / "tp.dl").write_text("legal(F) :- .\n")
    say(session, ":format json")
    answer = json.loads(say(session, ":reload"))
    assert answer["kind"] == "reload failed" and "syntax error" in answer["error"]


def test_plan_puts_every_statement_in_one_group(session):
    say(session, ":format json")
    plan = json.loads(say(session, ":plan"))
    members = [o for group in plan["groups"] for o in group["members"]]
    assert sorted(members) == sorted(session.workspace.program.order)
    assert plan["shim"] == session.workspace.shim
    assert {g["place"] for g in plan["groups"]} <= {"chip:0", "chip:1", "spine", "collective"}


def test_plan_as_text_names_the_shim_and_every_statement(session):
    text = say(session, ":plan")
    assert text.startswith(f"plan for shim {session.workspace.shim}:")
    for statement in session.workspace.program.order:
        assert statement in text


def test_an_internal_error_is_one_line_and_the_session_goes_on(session, monkeypatch):
    def broken(*args):
        raise KeyError("boom")

    monkeypatch.setattr(session, "rules", broken)
    assert say(session, ":rules legal") == "error: internal error: KeyError: 'boom'\n"
    assert say(session, '?- legal("mm1_gelu_0").') == "true.\n"


def test_format_json_answers_say_what_the_text_says(session):
    assert json.loads(say(session, ":format json")) == {"format": "json"}

    def ask(line: str):
        return json.loads(say(session, line))

    legal = ask("?- legal(F).")
    assert legal["variables"] == ["F"] and legal["count"] == len(legal["rows"]) == 3 and not legal["stopped"]
    assert sorted(r[0] for r in legal["rows"]) == ["bias_residual", "gelu_mm2_1", "mm1_gelu_0"]
    assert ask('?- legal("x").') == {"holds": False}
    why = ask('why legal("mm1_gelu_0")')
    assert why["holds"] and why["why_not"] is None
    assert why["fusions"][0]["members"] == [{"statement": "mm1_0", "place": "chip:0"},
                                            {"statement": "gelu_0", "place": "chip:0"}]
    proof = why["proofs"][0]
    assert proof["tuple"] == 'legal("mm1_gelu_0")' and proof["rule"]["file"].endswith("/tp.dl")
    assert proof["rule"]["text"] == "legal(F) :- candidate(F), !refused(F, _)."
    whynot = ask('whynot legal("mm2_bias")')
    assert not whynot["holds"] and whynot["proofs"] == []
    assert whynot["fusions"][0]["reasons"] == ["chip_and_spine", "cycle"]
    blocking = whynot["why_not"]["rules"][0]["blocking"]
    assert [b["tuple"] for b in blocking] == ['refused("mm2_bias", "chip_and_spine")', 'refused("mm2_bias", "cycle")']
    rules = ask(":rules refused")
    assert rules["relation"] == "refused" and all(r["text"].startswith("refused(") for r in rules["rules"])
    assert ("tp.dl", 12, 'refused(F, "collective_fold") :- member(F, O), is_fold(O), !kernel(F, _).') \
        in [(Path(r["file"]).name, r["line"], r["text"]) for r in rules["rules"]]
    member = ask(":facts member")
    assert member["columns"] == ["f", "o"] and member["count"] == len(member["tuples"]) == 20
    assert {"values": ["mm2_bias", "bias"], "at": f"{session.workspace.program.display}/member.facts:14"} \
        in member["tuples"]
    relations = {r["relation"]: r for r in ask(":relations")["relations"]}
    assert relations["refused"]["kind"] == "derived" and relations["member"]["kind"] == "input"
    assert relations["member"]["tuples"] == 20
    plan = ask(":plan")
    assert plan["shim"] == session.workspace.shim
    assert [(g["members"], g["place"]) for g in plan["groups"]] == [
        (["mm1_0", "gelu_0", "mm2_0"], "chip:0"), (["mm1_1", "gelu_1", "mm2_1"], "chip:1"),
        (["allreduce"], "collective"), (["bias", "residual"], "spine")]
    assert ask("?- nosuch(X).") == {"error": "unknown relation nosuch", "kind": "query error", "column": 4}
    assert ask("bogus") == {"error": "unknown command 'bogus'; :help lists the commands", "kind": "error",
                            "column": None}


# ---- completion ---------------------------------------------------------------------

RELATIONS = ["legal", "member", "on_chip", "on_spine", "refused"]
SYMBOLS = ["bias", "gelu_0", "mm2_0", "mm2_bias"]
NAMES = [c.name for c in COMMANDS]


@pytest.mark.parametrize("before, want", [
    ("", [(n, 0) for n in NAMES]),
    ("wh", [("why", 2), ("whynot", 2)]),
    (":r", [(":rules", 2), (":relations", 2), (":reload", 2)]),
    ("why on_", [("on_chip", 3), ("on_spine", 3)]),
    ('why refused("mm2', [('mm2_0"', 3), ('mm2_bias"', 3)]),
    ('?- member(F, "b', [('bias"', 1)]),
    ("?- member(F, O), on_s", [("on_spine", 4)]),
    (":rules ", [(r, 0) for r in RELATIONS]),
    (":format j", [("json", 1)]),
    ('why legal("x") ', []),
])
def test_completion_candidates(before, want):
    assert sorted(candidates(before, NAMES, RELATIONS, SYMBOLS)) == sorted(want)


def test_completer_offers_the_model_symbols(session):
    from prompt_toolkit.document import Document

    completer = ReplCompleter(session, NAMES)
    found = [c.text for c in completer.get_completions(Document('why legal("mm1_g'), None)]
    assert found == ['mm1_gelu_0"']


FUSIONS = ["allreduce_bias", "bias_residual", "everything", "gelu_0_1", "gelu_mm2_1", "mm1_gelu_0",
           "mm1_mm2_0", "mm2_allreduce", "mm2_bias"]
STATEMENTS = ["allreduce", "bias", "gelu_0", "gelu_1", "mm1_0", "mm1_1", "mm2_0", "mm2_1", "residual"]


def completions(completer, text: str) -> list[str]:
    from prompt_toolkit.document import Document

    return [c.text.rstrip('"') for c in completer.get_completions(Document(text), None)]


@pytest.mark.parametrize("text, want", [
    ('why legal("', FUSIONS),  # every fusion id (refused ones too: a why-not needs them), no statements
    ('?- legal("m', [f for f in FUSIONS if f.startswith("m")]),
    ('why on_chip("', STATEMENTS),  # statement ids, no fusion ids or tensors
    ('?- op("g', ["gelu_0", "gelu_1"]),
    ('?- member("mm2_b', ["mm2_bias"]),
    ('?- member(F, "mm2', ["mm2_0", "mm2_1"]),
    ('?- refused(F, "c', ["chip_and_spine", "collective_fold", "cycle"]),
    ('?- tensor("a_', ["a_0", "a_1"]),
])
def test_completion_follows_the_column(session, text, want):
    assert completions(ReplCompleter(session, NAMES), text) == want


@pytest.mark.parametrize("engine", ["fast", "compiled"])
def test_both_model_readers_give_a_columns_symbols(engine):
    from tprules.explain.access import reader
    from tprules.workspace import Workspace

    read = reader(Workspace(FACTS / "megatron-mlp-tp2", engine=engine).model)
    assert read.column_symbols("member", 0) == set(FUSIONS)
    assert read.column_symbols("legal", 0) == {"bias_residual", "gelu_mm2_1", "mm1_gelu_0"}
    assert read.column_symbols("on_chip", 1) == set()  # a number column
    assert read.column_symbols("no_such_relation", 0) == set()


def test_completion_of_an_empty_domain_offers_nothing(session):
    completer = ReplCompleter(session, NAMES)
    assert completions(completer, '?- relocated("') == []  # no sections in this program
    assert completions(completer, '?- limit(S, "max_') == ["max_inputs", "max_matmuls", "max_members"]


def test_completion_follows_the_rules_after_reload(session, rules_copy):
    with open(rules_copy / "tp.dl", "a") as f:
        f.write('\n.decl waived(f: symbol)\nwaived(F) :- member(F, "bias").\n')
    completer = ReplCompleter(session, NAMES)
    before = completions(completer, '?- waived("')  # not a relation yet: every symbol of the model
    assert set(FUSIONS) | set(STATEMENTS) | {"a_0", "f32"} <= set(before)
    assert say(session, ":reload").startswith("reloaded ")
    assert completions(completer, '?- waived("') == FUSIONS


# ---- the terminal loop --------------------------------------------------------------


def test_terminal_loop_answers_and_stops_at_quit(session, capsys, tmp_path, monkeypatch):
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from tprules.repl.terminal import run_terminal

    monkeypatch.setenv("TPRULES_CACHE_DIR", str(tmp_path))
    with create_pipe_input() as pipe:
        pipe.send_text('?- legal("mm1_gelu_0").\r:format json\r?- nosuch(X).\r:quit\r')
        with create_app_session(input=pipe, output=DummyOutput()):
            run_terminal(session, width=100)
    out = capsys.readouterr().out
    assert "true." in out
    assert '"kind": "query error"' in out
    assert (tmp_path / "repl_history").read_text().count("\n+") == 4


def test_error_answers_are_text_without_markup(session):
    answer = session.handle("?- legal([1, 2])")  # a record in a column of symbols
    assert isinstance(answer, Text)
    assert answer.plain == "query error at column 10: legal.f is a symbol but is given a record"
