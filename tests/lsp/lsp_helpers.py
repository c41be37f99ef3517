"""Starting `tprules lsp` as a subprocess under pytest-lsp, and small LSP helpers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules"
FACTS = ROOT / "facts"
LLAMA = FACTS / "llama-layer-tp4"

CONFIG = ClientServerConfig(server_command=[sys.executable, "-m", "tprules", "lsp"],
                            server_env={**os.environ, "PYTHONPATH": str(ROOT)})


async def start(client: LanguageClient, root: Path, options=None) -> None:
    """Initialize a session as VS Code would; the client counts the server's lens refreshes."""
    client.lens_refreshes = 0

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def _refresh(params):
        client.lens_refreshes += 1

    params = types.InitializeParams(capabilities=client_capabilities("visual-studio-code"), root_uri=root.as_uri(),
                                    initialization_options=options)
    await client.initialize_session(params)


async def open_file(client: LanguageClient, path: Path, text: str | None = None) -> list[types.Diagnostic]:
    """Open a rule file (its text on disk unless given) and wait for its diagnostics."""
    text = path.read_text() if text is None else text
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=path.as_uri(), language_id="datalog", version=1, text=text)))
    return await diagnostics_of(client, path)


async def change(client: LanguageClient, path: Path, text: str, version: int = 2) -> list[types.Diagnostic]:
    """Replace an open document's text and wait for its diagnostics."""
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=path.as_uri(), version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
    return await diagnostics_of(client, path)


async def diagnostics_of(client: LanguageClient, path: Path) -> list[types.Diagnostic]:
    """The diagnostics of `path` once the server has handled every notification sent so far.

    A request is the barrier: the server handles messages in order and publishes within a
    notification's handler, so everything it sent for earlier notifications (diagnostics,
    messages) reaches the client before this request's answer."""
    await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=doc(path)))
    return list(client.diagnostics[path.as_uri()])


def position_of(path: Path, needle: str, offset: int = 0, text: str | None = None) -> types.Position:
    """The LSP position of the first `needle` in the file (plus `offset` characters)."""
    text = path.read_text() if text is None else text
    at = text.index(needle) + offset
    line = text.count("\n", 0, at)
    return types.Position(line, at - (text.rfind("\n", 0, at) + 1))


def line_of(path: Path, needle: str) -> int:
    """0-based line of the first line of the file that starts with `needle`."""
    return next(i for i, row in enumerate(path.read_text().split("\n")) if row.startswith(needle))


def doc(path: Path) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=path.as_uri())


def check_fusions(*args: str) -> list:
    """`tprules check ARGS --format json`'s fusions, run in this process (a lens's expected counts)."""
    import contextlib
    import io
    import json

    from tprules.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["check", *args, "--format", "json"]) == 0
    return json.loads(out.getvalue())["fusions"]
