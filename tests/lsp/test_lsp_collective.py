"""`tprules lsp` on rules/collective.dl (collective kernels, SPEC §3), with
facts/async-tp-mlp-tp2 under the shim that declares them as the program beside the rules:
the file opens clean, its lenses count what each guard refuses and what each pattern rule
derives, and a reason goes to its rule. Expected counts come from `tprules check`."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsp_helpers import CONFIG, FACTS, ROOT, RULES, check_fusions, doc, line_of, open_file, position_of, start
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")
COLLECTIVE = RULES / "collective.dl"
PROGRAM, SHIM = FACTS / "async-tp-mlp-tp2", "cuda-lane:h200:Bf16SymmMem"


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: LanguageClient):
    await start(lsp_client, ROOT, {"program": str(PROGRAM), "shim": SHIM})
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def verdicts():
    return check_fusions(str(PROGRAM), "--shim", SHIM)


async def test_the_rule_file_opens_without_diagnostics(client: LanguageClient):
    assert await open_file(client, COLLECTIVE) == []


async def test_lenses_count_each_guard_and_pattern(client: LanguageClient, verdicts):
    found = await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(COLLECTIVE)))
    by_line = {lens.range.start.line: lens.command.title for lens in found}
    for reason in ("shared_partial", "too_narrow"):
        count = sum(1 for v in verdicts if reason in v["reasons"])
        assert count == 1
        title = by_line[line_of(COLLECTIVE, f'refused(F, "{reason}")')]
        assert title == "refuses 1 candidate of facts/async-tp-mlp-tp2", title
    # each pattern rule derives one kernel tuple per candidate that is exactly it
    gather = {"ag_mm1", "ag_cols_down"}
    assert {v["fusion"] for v in verdicts if v["fusion"] in gather and "collective_fold" not in v["reasons"]} == gather
    assert by_line[line_of(COLLECTIVE, 'kernel(F, "all_gather_matmul") :-')] == "derives 2 tuples"
    assert by_line[line_of(COLLECTIVE, 'kernel(F, "matmul_reduce_scatter") :-')] == "derives 2 tuples"


async def test_a_guard_reason_goes_to_its_rule(client: LanguageClient):
    found = await client.text_document_definition_async(types.DefinitionParams(
        text_document=doc(COLLECTIVE), position=position_of(COLLECTIVE, '"too_narrow")', 4)))
    assert [(f.uri, f.range.start.line) for f in found] == \
        [(COLLECTIVE.as_uri(), line_of(COLLECTIVE, 'refused(F, "too_narrow")'))]
