"""`tprules lsp` over stdio on the project's rules/, with facts/llama-layer-tp4 as the
program beside them (an initialization option): every feature, through pytest-lsp's real
JSON-RPC client and a server subprocess. Expected answers come from the rule files' text
and from `tprules check`, never written in by hand."""

from __future__ import annotations

import re

import pytest
import pytest_lsp
from lsp_helpers import CONFIG, LLAMA, ROOT, RULES, check_fusions, doc, line_of, open_file, position_of, start
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")
TP, PLACE, SCHEMA, BASE, COLLECTIVE = (RULES / f"{n}.dl" for n in ("tp", "place", "schema", "base", "collective"))


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: LanguageClient):
    await start(lsp_client, ROOT, {"program": str(LLAMA)})
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def verdicts():
    """`tprules check facts/llama-layer-tp4 --format json`, in this process."""
    return check_fusions(str(LLAMA))


async def test_every_rule_file_opens_without_diagnostics(client: LanguageClient):
    for path in (TP, PLACE, SCHEMA, BASE):
        assert await open_file(client, path) == [], path


async def test_definition_of_a_relation_is_its_decl(client: LanguageClient):
    found = await client.text_document_definition_async(types.DefinitionParams(
        text_document=doc(TP), position=position_of(TP, "on_chip(A, CA)", 3)))
    assert len(found) == 1
    assert found[0].uri == PLACE.as_uri()
    assert found[0].range.start == position_of(PLACE, ".decl on_chip", len(".decl "))
    assert found[0].range.end.character - found[0].range.start.character == len("on_chip")


async def test_definition_of_a_reason_lists_the_rules_deriving_it(client: LanguageClient):
    found = await client.text_document_definition_async(types.DefinitionParams(
        text_document=doc(TP), position=position_of(TP, '"chip_and_spine")', 4)))  # inside the string of the head
    assert [(f.uri, f.range.start.line) for f in found] == [(TP.as_uri(), line_of(TP, 'refused(F, "chip_and_spine")'))]
    found = await client.text_document_definition_async(types.DefinitionParams(
        text_document=doc(BASE), position=position_of(BASE, '"cycle"', 2)))
    assert {f.range.start.line for f in found} == {line_of(BASE, 'base_refused(F, "cycle")')}


async def test_references_list_every_rule_using_the_relation_across_the_folder(client: LanguageClient):
    found = await client.text_document_references_async(types.ReferenceParams(
        text_document=doc(TP), position=position_of(TP, "member(F, O)"),
        context=types.ReferenceContext(include_declaration=False)))
    files = {f.uri for f in found}
    using = {p.as_uri(): p for p in (TP, BASE, COLLECTIVE)}
    assert files == set(using)  # member is used by tp.dl's, base.dl's and collective.dl's rules
    for f in found:  # each reference is the relation's name, written there
        text = using[f.uri].read_text().split("\n")[f.range.start.line]
        assert text[f.range.start.character:f.range.end.character] == "member"
    expected = sum(len(re.findall(r"(?<![\w.])member\(", row.split("//")[0]))
                   for p in (TP, BASE, COLLECTIVE) for row in p.read_text().split("\n") if not row.lstrip().startswith("."))
    assert len(found) == expected
    with_decl = await client.text_document_references_async(types.ReferenceParams(
        text_document=doc(TP), position=position_of(TP, "member(F, O)"),
        context=types.ReferenceContext(include_declaration=True)))
    assert len(with_decl) == expected + 1 and SCHEMA.as_uri() in {f.uri for f in with_decl}


async def test_document_symbols_list_relations_and_rules(client: LanguageClient):
    found = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=doc(TP)))
    names = [(s.name, s.kind) for s in found]
    assert ("refused", types.SymbolKind.Struct) in names and ("legal", types.SymbolKind.Struct) in names
    rules = [s for s in found if s.kind == types.SymbolKind.Function]
    assert [s.name for s in rules].count('refused(F, "spans_chips")') == 1
    assert len(rules) == sum(1 for row in TP.read_text().split("\n") if ":-" in row)
    spans = next(s for s in rules if s.name == 'refused(F, "spans_chips")')
    assert spans.range.end.line == spans.range.start.line + 1  # the rule's two lines


async def test_hover_shows_the_declaration_columns_comment_and_tuple_count(client: LanguageClient, verdicts):
    found = await client.text_document_hover_async(types.HoverParams(
        text_document=doc(TP), position=position_of(TP, "legal(F) :-", 1)))
    text = found.contents.value
    assert ".decl legal(f: symbol)" in text and "`f` symbol" in text
    legal = sum(1 for v in verdicts if v["legal"])
    assert f"{legal} tuples in " in text and "llama-layer-tp4" in text
    found = await client.text_document_hover_async(types.HoverParams(
        text_document=doc(TP), position=position_of(TP, "member(F, O)")))
    assert "candidate fusion f holds statement o" in found.contents.value  # the comment beside its .decl
    found = await client.text_document_hover_async(types.HoverParams(
        text_document=doc(PLACE), position=position_of(PLACE, ".decl on_chip", 7)))
    assert "The place chip:C." in found.contents.value  # the comment line above its .decl


async def test_completion_offers_relations_with_their_arity(client: LanguageClient):
    text = TP.read_text() + "\nrefused(F, \"x\") :- mem"
    await _edit(client, TP, text, 2)
    end = position_of(TP, "mem", text.rindex("mem") - text.index("mem") + 3, text=text)
    found = await client.text_document_completion_async(types.CompletionParams(text_document=doc(TP), position=end))
    items = {i.label: i.detail for i in found.items}
    assert items["member"].startswith("member/2")
    assert items["on_chip"].startswith("on_chip/2")
    await _restore(client, TP)


async def test_completion_inside_a_string_offers_the_columns_constants(client: LanguageClient, verdicts):
    text = TP.read_text() + '\nq(F) :- legal("'
    await _edit(client, TP, text)
    found = await client.text_document_completion_async(types.CompletionParams(text_document=doc(TP), position=_end(text)))
    labels = {i.label for i in found.items}
    assert {v["fusion"] for v in verdicts} <= labels  # legal's column holds fusion ids
    assert not any(label.startswith("mm") and "_" not in label for label in labels)
    text = TP.read_text() + '\nq(F) :- refused(F, "'
    await _edit(client, TP, text, 4)
    found = await client.text_document_completion_async(types.CompletionParams(text_document=doc(TP), position=_end(text)))
    reasons = {i.label for i in found.items if i.kind == types.CompletionItemKind.EnumMember}
    assert {"spans_chips", "chip_and_spine", "collective_fold", "cycle", "too_many_inputs"} <= reasons
    await _restore(client, TP)


async def test_code_lenses_count_what_each_rule_refuses_or_derives(client: LanguageClient, verdicts):
    found = await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(TP)))
    by_line = {lens.range.start.line: lens.command.title for lens in found}
    for reason in ("spans_chips", "chip_and_spine", "collective_fold"):
        count = sum(1 for v in verdicts if reason in v["reasons"])
        title = by_line[line_of(TP, f'refused(F, "{reason}")')]
        assert title.startswith(f"refuses {count} candidate") and title.endswith("llama-layer-tp4"), title
    legal = sum(1 for v in verdicts if v["legal"])
    assert by_line[line_of(TP, "legal(F) :-")] == f"derives {legal} tuples"


async def test_an_edit_recomputes_the_lenses_and_a_broken_edit_keeps_them(client: LanguageClient, verdicts):
    # Deleting the chip_and_spine rule: every candidate it alone refused becomes legal.
    text = TP.read_text()
    start, end = text.index('refused(F, "chip_and_spine")'), text.index("\n.decl legal")
    edited = text[:start] + text[end:]
    assert await _edit(client, TP, edited, 10) == []
    found = await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(TP)))
    only_that = sum(1 for v in verdicts if v["reasons"] == ["chip_and_spine"])
    legal = sum(1 for v in verdicts if v["legal"]) + only_that
    assert f"derives {legal} tuples" in {lens.command.title for lens in found}
    broken = edited.replace("legal(F) :- candidate(F), !refused(F, _).", "legal(F) :- candidate(F), !refused(F, _)")
    problems = await _edit(client, TP, broken, 11)
    assert [p.code for p in problems] == ["syntax"]
    kept = await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(TP)))
    assert [lens.command.title for lens in kept] == [lens.command.title for lens in found]
    await _restore(client, TP)
    again = await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(TP)))
    assert f"derives {legal - only_that} tuples" in {lens.command.title for lens in again}


async def _edit(client: LanguageClient, path, text: str, version: int = 3):
    from lsp_helpers import change

    return await change(client, path, text, version)


async def _restore(client: LanguageClient, path) -> None:
    assert await _edit(client, path, path.read_text(), 100) == []


def _end(text: str) -> types.Position:
    lines = text.split("\n")
    return types.Position(len(lines) - 1, len(lines[-1]))
