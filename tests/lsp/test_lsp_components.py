"""`tprules lsp` on tests/data/family_rules (issue 27): a component per shim family, an
`#include` of the shared declarations, records and a subsumptive clause. Go to definition,
references, hover and lenses know instance-qualified names (`cuda.refused`), a name
written inside a `.comp` (one relation per instance), both heads of a subsumptive clause,
component names, and the included file, each at its original file:line:col. Expected
answers come from the rule files' text and from the REPL, never written in by hand."""

from __future__ import annotations

import json
import re

import pytest
import pytest_lsp
from lsp_helpers import CONFIG, FACTS, ROOT, doc, line_of, open_file, position_of, start
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")
FAMILY = ROOT / "tests" / "data" / "family_rules"
BASE, ROUTES, DECLS, TP = (FAMILY / n for n in ("base.dl", "routes.dl", "decls.dlh", "tp.dl"))
IN_A_COMPONENT = ROOT / "tests" / "data" / "eval" / "subsumption_in_a_component" / "program.dl"
PROGRAM = FACTS / "int8-mlp-tp2"


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: LanguageClient):
    await start(lsp_client, ROOT, {"program": str(PROGRAM)})
    for path in (BASE, ROUTES, TP):
        assert await open_file(lsp_client, path) == [], path
    yield
    await lsp_client.shutdown_session()


def block(path, opening: str) -> range:
    """The 0-based lines of the `.comp` block that starts with `opening`."""
    rows = path.read_text().split("\n")
    first = line_of(path, opening)
    return range(first, next(i for i in range(first, len(rows)) if rows[i].strip() == "}") + 1)


def refused_lines(*blocks: range) -> set[int]:
    """The lines of those blocks that write a rule for `refused` (directly or by the macro)."""
    rows = BASE.read_text().split("\n")
    return {i for b in blocks for i in b if re.search(r"(?<![\w.])refused\(|FUSION_LIMIT\(", rows[i])
            and not rows[i].lstrip().startswith((".", "#"))}


def text_at(path, rng: types.Range) -> str:
    return path.read_text().split("\n")[rng.start.line][rng.start.character:rng.end.character]


async def definition(client, path, position) -> list[types.Location]:
    return await client.text_document_definition_async(types.DefinitionParams(text_document=doc(path),
                                                                               position=position))


async def references(client, path, position, with_decl=False) -> list[types.Location]:
    return await client.text_document_references_async(types.ReferenceParams(
        text_document=doc(path), position=position, context=types.ReferenceContext(include_declaration=with_decl)))


async def hover(client, path, position) -> str:
    found = await client.text_document_hover_async(types.HoverParams(text_document=doc(path), position=position))
    return found.contents.value


async def test_an_instance_relation_goes_to_the_decl_in_its_component(client: LanguageClient):
    decl = position_of(BASE, ".decl refused", len(".decl "))  # inside .comp Backend
    for offset in (1, len("cuda.") + 2):  # on the instance's name and on the relation's
        (found,) = await definition(client, BASE, position_of(BASE, "cuda.refused(F, R)", offset))
        assert found.uri == BASE.as_uri() and found.range.start == decl
        assert text_at(BASE, found.range) == "refused"


async def test_references_of_an_instance_relation_are_its_components_rules_and_uses(client: LanguageClient):
    backend, quantizing = block(BASE, ".comp Backend"), block(BASE, ".comp QuantizingBackend")
    rows = BASE.read_text().split("\n")
    for instance, blocks in (("cuda", (backend, quantizing)), ("cpu", (backend,))):
        found = await references(client, BASE, position_of(BASE, f"{instance}.refused(F, R)", len(instance) + 3))
        assert {f.uri for f in found} == {BASE.as_uri()}  # never tp.dl's own `refused`
        uses = {i for i, row in enumerate(rows) if f"{instance}.refused(" in row}
        assert sorted(f.range.start.line for f in found) == sorted(refused_lines(*blocks) | uses), instance
        for f in found:  # each is the name as written there, or a macro's line
            assert text_at(BASE, f.range) in ("refused", f"{instance}.refused") or "FUSION_LIMIT" in text_at(BASE, f.range)
        with_decl = await references(client, BASE, position_of(BASE, f"{instance}.refused(F, R)"), True)
        assert len(with_decl) == len(found) + 1


async def test_a_name_inside_a_component_is_each_instances_relation(client: LanguageClient):
    inside = position_of(BASE, 'refused(F, "cycle")', 2)
    (found,) = await definition(client, BASE, inside)
    assert found.range.start == position_of(BASE, ".decl refused", len(".decl "))
    text = await hover(client, BASE, inside)
    assert ".decl refused(f: symbol, reason: symbol)" in text
    assert "one relation for each instance" in text and "`cuda.refused`" in text and "`cpu.refused`" in text
    found = await references(client, BASE, inside)
    rows = BASE.read_text().split("\n")
    both = {i for i, row in enumerate(rows) if re.search(r"\b(cuda|cpu)\.refused\(", row)}
    assert {f.range.start.line for f in found} == refused_lines(block(BASE, ".comp Backend"),
                                                                block(BASE, ".comp QuantizingBackend")) | both


async def test_hover_on_an_instance_relation_names_its_init_and_counts_its_tuples(client: LanguageClient):
    from tprules.repl.session import Session

    session = Session(PROGRAM, FAMILY)
    session.handle(":format json")
    count = json.loads(session.handle("?- cuda.refused(F, R).")).get("count")
    text = await hover(client, BASE, position_of(BASE, "cuda.refused(F, R)", 6))
    assert ".decl cuda.refused(f: symbol, reason: symbol)" in text
    assert f"`.init cuda = QuantizingBackend` at tests/data/family_rules/base.dl:{line_of(BASE, '.init cuda') + 1}" \
        in text
    assert f"{count} tuple{'' if count == 1 else 's'} in " in text and count > 0


async def test_an_included_declaration_is_found_in_the_included_file(client: LanguageClient):
    at = position_of(BASE, "candidate(F) :- member(F, _)", len("candidate(F) :- "))
    (found,) = await definition(client, BASE, at)
    assert found.uri == DECLS.as_uri()
    assert found.range.start == position_of(DECLS, ".decl member", len(".decl "))
    assert text_at(DECLS, found.range) == "member"
    text = await hover(client, BASE, at)
    assert f"declared at tests/data/family_rules/decls.dlh:{line_of(DECLS, '.decl member') + 1}" in text
    assert "candidate fusion f holds statement o" in text  # the comment beside the included .decl
    with_decl = await references(client, BASE, at, True)
    assert DECLS.as_uri() in {f.uri for f in with_decl} and BASE.as_uri() in {f.uri for f in with_decl}


async def test_both_heads_of_a_subsumptive_clause_are_uses(client: LanguageClient):
    clause = next(row for row in ROUTES.read_text().split("\n") if "<=" in row and row.startswith("steps("))
    line = line_of(ROUTES, clause)
    dominating = types.Position(line, clause.index("steps", 1) + 2)
    (found,) = await definition(client, ROUTES, dominating)
    assert found.range.start == position_of(ROUTES, ".decl steps", len(".decl "))
    found = await references(client, ROUTES, dominating)
    assert {(f.range.start.line, f.range.start.character) for f in found if f.range.start.line == line} == \
        {(line, 0), (line, clause.index("steps", 1))}
    rows = [row.split("//")[0] for row in ROUTES.read_text().split("\n")]
    assert len(found) == sum(len(re.findall(r"(?<![\w.])steps\(", row)) for row in rows
                             if not row.lstrip().startswith("."))
    assert "1 subsumptive clause deletes its dominated tuples" in await hover(client, ROUTES, dominating)


async def test_a_subsumptive_clause_inside_a_component_is_each_instances(client: LanguageClient):
    await open_file(client, IN_A_COMPONENT)  # a plain Soufflé program: not a TP rule folder, still navigable
    clause = next(row for row in IN_A_COMPONENT.read_text().split("\n") if "<=" in row)
    line = line_of(IN_A_COMPONENT, clause)
    dominating = types.Position(line, clause.index("dist", clause.index("<=")) + 1)
    (found,) = await definition(client, IN_A_COMPONENT, dominating)
    assert found.range.start == position_of(IN_A_COMPONENT, ".decl dist", len(".decl "))
    text = await hover(client, IN_A_COMPONENT, dominating)
    assert "`a.dist`" in text and "`b.dist`" in text and "subsumptive clause" in text
    found = await references(client, IN_A_COMPONENT, dominating)
    assert {f.range.start.character for f in found if f.range.start.line == line} == \
        {clause.index("dist"), clause.index("dist", clause.index("<="))}


async def test_a_component_name_goes_to_its_comp_and_its_uses(client: LanguageClient):
    base_of = position_of(BASE, ".comp QuantizingBackend : Backend", len(".comp QuantizingBackend : ") + 1)
    (found,) = await definition(client, BASE, base_of)
    assert found.range.start == position_of(BASE, ".comp Backend", len(".comp "))
    found = await references(client, BASE, base_of)
    assert {(f.range.start.line, f.range.start.character) for f in found} == {
        (base_of.line, base_of.character - 1),
        (line_of(BASE, ".init cpu"), len(".init cpu = "))}
    text = await hover(client, BASE, base_of)
    assert ".comp Backend" in text and "`cpu`" in text and "`QuantizingBackend`" in text


async def test_a_lens_on_a_component_rule_names_each_instance(client: LanguageClient):
    from tprules.lsp.lenses import title
    from tprules.repl.session import Session

    session = Session(PROGRAM, FAMILY)
    session.handle(":format json")
    counts = {i: json.loads(session.handle(f'?- {i}.refused(F, "unsupported").'))["count"] for i in ("cuda", "cpu")}
    found = await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(BASE)))
    by_line = {lens.range.start.line: lens for lens in found}
    lens = by_line[line_of(BASE, '    refused(F, "unsupported")')]
    display = lens.command.title.rsplit(" of ", 1)[-1] if " of " in lens.command.title else ""
    assert lens.command.title == " · ".join(f"{i}.refused: {title('derives', n, display)}" for i, n in counts.items())
    assert text_at(BASE, lens.range) == "refused"
    lens = by_line[line_of(BASE, "base_refused(F, R) :- base_refusal")]
    assert lens.command.title.startswith(("derives ", "refuses ")) and "·" not in lens.command.title  # one relation
