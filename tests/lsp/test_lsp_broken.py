"""`tprules lsp` on a broken copy of rules/ and on a second rule folder (a plain Soufflé
program): every problem is a diagnostic with its exact range, severity and code; bad
input of any kind (a half-typed rule, an unreadable file, an ill-formed program folder,
a bad tprules.toml) never ends the session."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsp_helpers import CONFIG, FACTS, RULES, change, doc, line_of, open_file, position_of, start
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

LOG = Path(tempfile.gettempdir()) / f"tprules-lsp-test-{os.getpid()}.log"  # every server of this module logs here
LOGGED = ClientServerConfig(server_command=[sys.executable, "-m", "tprules", "lsp", "--log", str(LOG)],
                            server_env=CONFIG.server_env)
CHECKED = Path(tempfile.gettempdir()) / f"tprules-lsp-rules-{os.getpid()}"  # --rules, made by its test
EAGER = ClientServerConfig(server_command=[sys.executable, "-m", "tprules", "lsp", "--rules", str(CHECKED)],
                           server_env=CONFIG.server_env)

pytestmark = pytest.mark.asyncio(loop_scope="function")


@pytest.fixture(scope="module", autouse=True)
def _log_removed():
    yield
    LOG.unlink(missing_ok=True)


@pytest.fixture
def workspace(tmp_path):
    """A workspace root holding a copy of rules/, a program folder and a second rule folder."""
    shutil.copytree(RULES, tmp_path / "rules")
    shutil.copytree(FACTS / "megatron-mlp-tp2", tmp_path / "mlp")
    other = tmp_path / "paths"
    other.mkdir()
    (other / "edge.dl").write_text(
        "// edges of a graph\n.decl edge(a: number, b: number)\n.input edge\n")
    (other / "path.dl").write_text(
        ".decl path(a: number, b: number)\n.output path\n"
        "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
        "edge(1, 2).\nedge(2, 3).\n")
    (tmp_path / "tprules.toml").write_text('program = "mlp"\n')
    return tmp_path


@pytest_lsp.fixture(config=LOGGED)
async def client(lsp_client: LanguageClient, workspace):
    await start(lsp_client, workspace)  # the program comes from tprules.toml
    yield
    await lsp_client.shutdown_session()


def _at(diag: types.Diagnostic) -> tuple[int, int, int, int]:
    r = diag.range
    return r.start.line, r.start.character, r.end.line, r.end.character


@pytest.mark.parametrize("edit, needle, code, message", [
    (("on_chip(A, CA)", "on_chipp(A, CA)"), "on_chipp", "relation", "relation on_chipp is used but not declared"),
    (("on_chip(A, CA)", "on_chip(A, CA, 1)"), "on_chip(A, CA, 1)", "relation", "relation on_chip has 2 columns"),
    (('refused(F, "collective_fold") :- member(F, O)', 'refused(Q, "collective_fold") :- member(F, O)'), "Q,",
     "safety", "Q"),
    (('refused(F, "collective_fold") :- member(F, O)', "refused(F, 3) :- member(F, O)"), "3)", "types", "reason"),
    (("legal(F) :- candidate(F), !refused(F, _).", "legal(F) :- candidate(F), !refused(F, _)"), None, "syntax", "'.'"),
    (("legal(F) :- candidate(F), !refused(F, _).", "legal(F) :- candidate(F), !refused(F, _).\n"
      'refused(F, "x") :- member(F, _), !legal(F).'), "legal(F).", "stratification", "legal"),
])
async def test_each_problem_is_a_diagnostic_with_its_range_severity_and_code(client, workspace, edit, needle, code,
                                                                            message):
    tp = workspace / "rules" / "tp.dl"
    assert await open_file(client, tp) == []
    text = tp.read_text().replace(*edit)
    found = await change(client, tp, text)
    assert {d.code for d in found} == {code}, found
    diag = found[0]
    if needle is not None:  # the diagnostic on the token the message names
        start = position_of(tp, needle, text=text)
        diag = next(d for d in found if (d.range.start.line, d.range.start.character) == (start.line, start.character))
    assert diag.severity == types.DiagnosticSeverity.Error and diag.source == "tprules"
    assert message in diag.message
    if needle is not None:  # the range is the token the message names
        start = position_of(tp, needle, text=text)
        assert _at(diag)[:2] == (start.line, start.character)
        row = text.split("\n")[start.line]
        assert row[diag.range.start.character:diag.range.end.character] in needle
        assert diag.range.end.character > diag.range.start.character
    fixed = await change(client, tp, tp.read_text(), 3)
    assert fixed == []


async def test_a_half_typed_rule_keeps_the_other_files_clean_and_the_server_answering(client, workspace):
    tp, base = workspace / "rules" / "tp.dl", workspace / "rules" / "base.dl"
    await open_file(client, base)
    await open_file(client, tp)
    found = await change(client, tp, tp.read_text() + "\nrefused(F, \"oops\") :- member(F, ")
    assert [d.code for d in found] == ["syntax"] and found[0].range.start.line == len(tp.read_text().split("\n"))
    assert list(client.diagnostics[base.as_uri()]) == []  # no "not declared" avalanche elsewhere
    # navigation still works on the last good parse
    where = await client.text_document_definition_async(types.DefinitionParams(
        text_document=doc(tp), position=position_of(tp, "on_chip(A, CA)")))
    assert where and where[0].uri.endswith("/rules/place.dl")
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=doc(tp)))
    assert 'refused(F, "spans_chips")' in {s.name for s in symbols}
    # and completion goes on while the rule is being typed
    typed = tp.read_text() + '\nrefused(F, "oops") :- on_ch'
    assert [d.code for d in await change(client, tp, typed, 3)] == ["syntax"]
    lines = typed.split("\n")
    found = await client.text_document_completion_async(types.CompletionParams(
        text_document=doc(tp), position=types.Position(len(lines) - 1, len(lines[-1]))))
    assert {i.label: i.detail for i in found.items}["on_chip"].startswith("on_chip/2")


async def test_an_unreadable_rule_file_is_a_diagnostic(client, workspace):
    tp = workspace / "rules" / "tp.dl"
    (workspace / "rules" / "zz.dl").write_bytes(b"\xff\xfe not text\n")
    found = await open_file(client, tp)
    assert found == []
    zz = workspace / "rules" / "zz.dl"
    assert [d.code for d in client.diagnostics[zz.as_uri()]] == ["unreadable"]
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=doc(tp)))
    assert symbols


async def test_an_ill_formed_program_is_a_message_and_the_session_goes_on(client, workspace):
    placed = workspace / "mlp" / "placed.facts"
    placed.write_text(placed.read_text().replace("a_0\t0", "a_0\t2"))
    tp = workspace / "rules" / "tp.dl"
    assert await open_file(client, tp) == []
    assert any("ill-formed" in m.message and "placed.facts" in m.message for m in client.messages)
    assert "ill-formed" in LOG.read_text()  # and in the server's log (--log)
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(tp)))
    assert list(lenses or []) == []
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=doc(tp), position=position_of(tp, "legal(F) :-")))
    assert ".decl legal" in hover.contents.value and "tuples in" not in hover.contents.value


async def test_the_program_of_tprules_toml_gives_lenses(client, workspace):
    tp = workspace / "rules" / "tp.dl"
    await open_file(client, tp)
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(tp)))
    titles = {lens.range.start.line: lens.command.title for lens in lenses}
    assert titles[line_of(tp, 'refused(F, "spans_chips")')].startswith("refuses 2 candidates of ")
    assert client.lens_refreshes >= 1  # the client was asked to fetch the new lenses


async def test_a_setting_names_another_program(client, workspace):
    tp = workspace / "rules" / "tp.dl"
    await open_file(client, tp)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"tprules": {"program": str(FACTS / "llama-layer-tp4")}}))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(tp)))
    assert all(lens.command.title.endswith("llama-layer-tp4") for lens in lenses
               if lens.command.title.startswith("refuses"))


async def test_a_second_rule_folder_is_its_own_program(client, workspace):
    path, edge = workspace / "paths" / "path.dl", workspace / "paths" / "edge.dl"
    assert await open_file(client, path) == []
    where = await client.text_document_definition_async(types.DefinitionParams(
        text_document=doc(path), position=position_of(path, "edge(X, Y)")))
    assert [(w.uri, w.range.start.line) for w in where] == [(edge.as_uri(), 1)]
    refs = await client.text_document_references_async(types.ReferenceParams(
        text_document=doc(path), position=position_of(path, "path(X, Y)"),
        context=types.ReferenceContext(include_declaration=False)))
    assert len(refs) == 3 and {r.uri for r in refs} == {path.as_uri()}
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=doc(path), position=position_of(path, "edge(X, Y)")))
    assert "edges of a graph" in hover.contents.value and "`a` number" in hover.contents.value
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=doc(path)))
    assert [s.name for s in symbols][:3] == ["path", "path(X, Y)", "path(X, Z)"]
    found = await change(client, path, path.read_text().replace("path(X, Y), edge", "path(X, Y), !edge"))
    assert [d.code for d in found] == ["stratification"] and "negates edge" not in found[0].message or found
    done = await change(client, path, path.read_text().replace("edge(Y, Z).", "edge(Y, Z, 1)."), 3)
    assert [d.code for d in done] == ["relation"] and "edge has 2 columns" in done[0].message
    completion = await client.text_document_completion_async(types.CompletionParams(
        text_document=doc(path), position=types.Position(2, 0)))
    assert {i.label for i in completion.items} == {"edge", "path"}
    # the program of tprules.toml (a TP program) holds no edge facts: the rule file's own two
    # edges are all there is, so path holds 1-2, 2-3 and 1-3
    assert await change(client, path, path.read_text(), 5) == []
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(path)))
    assert [lens.command.title for lens in lenses] == ["derives 2 tuples", "derives 1 tuple"]
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=doc(path), position=position_of(path, "path(X, Z)")))
    assert "3 tuples in " in hover.contents.value and "derived by 2 rules" in hover.contents.value
    # the program folder is a TP program: these rules cannot load it, which is said, not fatal
    assert await change(client, path, path.read_text(), 4) == []


@pytest.fixture
def checked_copy():
    shutil.rmtree(CHECKED, ignore_errors=True)
    shutil.copytree(RULES, CHECKED)
    base = CHECKED / "base.dl"
    base.write_text(base.read_text().replace("supports(S, C, \"none\")", "supports(S, C)"))
    yield CHECKED
    shutil.rmtree(CHECKED, ignore_errors=True)


@pytest_lsp.fixture(config=EAGER)
async def eager(lsp_client: LanguageClient, checked_copy):
    await start(lsp_client, checked_copy.parent)
    yield
    await lsp_client.shutdown_session()


async def test_rules_flag_publishes_every_files_diagnostics_before_any_opens(eager: LanguageClient, checked_copy):
    base = (checked_copy / "base.dl").resolve()
    await eager.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=doc(base)))  # a barrier
    found = eager.diagnostics[base.as_uri()]
    assert [d.code for d in found] == ["relation"] and "supports has 3 columns" in found[0].message
    assert list(eager.diagnostics[(checked_copy / "tp.dl").resolve().as_uri()]) == []


@pytest.mark.parametrize("shared, message", [
    (".decl edge(a: number, b: numbr)\n", "shared.dlh:1:23: rule error: type numbr of edge.b"),  # a check's
    (".decl edge(a: number, b: number))\n", "shared.dlh:1:33: syntax error: unexpected ')'"),  # a parse error
])
async def test_a_problem_in_an_included_file_is_on_its_include_line(client, workspace, shared, message):
    folder = workspace / "paths"
    (folder / "shared.dlh").write_text(shared)
    edge = folder / "edge.dl"
    text = '// edges of a graph\n#include "shared.dlh"\n.input edge\n'
    found = await open_file(client, edge, text)
    assert len(found) == 1, found
    assert _at(found[0])[0] == 1 and message in found[0].message, found[0]
    (folder / "shared.dlh").write_text(".decl edge(a: number, b: number)\n")  # fixed where it is
    assert await change(client, edge, text) == []  # the same text: the included file is read again
