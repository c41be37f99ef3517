"""The pygls server: one handler per LSP feature, each calling ruleset.py's index and the
feature's module. Nothing a user types can end the session: a handler that fails logs
the error and answers nothing, and bad input becomes a diagnostic or a message."""

from __future__ import annotations

import logging
import traceback
from functools import wraps
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from ..errors import BadInput
from ..version import __version__
from . import completion, diagnostics, hover, lenses, navigation
from .folder_model import FolderModel
from .ruleset import RuleSet
from .settings import Settings, from_options, from_toml

log = logging.getLogger(__name__)


class RuleServer(LanguageServer):
    """The rule folders the editor has open (each checked as one program), the program
    folder beside them, and the last good model of each folder's rules over it."""

    def __init__(self):
        super().__init__("tprules", __version__)
        self.root: Path | None = None
        self.rules: Path | None = None  # `--rules`: checked as soon as the client connects
        self.settings = Settings()
        self.rulesets: dict[Path, RuleSet] = {}
        self.programs: dict[Path, FolderModel] = {}  # by rule folder: the last one its good rules built
        self.told: set[str] = set()  # messages already shown (a broken program is said once)
        self._init_options: object = None  # the client's initializationOptions

    # -- state --------------------------------------------------------------------------

    def buffers(self, folder: Path) -> dict[Path, str]:
        found = {}
        for uri, doc in self.workspace.text_documents.items():
            path = _path(uri)
            if path is not None and path.parent == folder:
                found[path] = doc.source
        return found

    def ruleset(self, path: Path) -> RuleSet:
        folder = path.parent
        if folder not in self.rulesets:
            self.refresh(folder, publish=False)
        return self.rulesets[folder]

    def refresh(self, folder: Path, publish: bool = True) -> None:
        """Check the folder again with the open buffers; publish every file's diagnostics;
        evaluate the program under the rules when they check (else keep the last model)."""
        rs = RuleSet.load(folder, self.buffers(folder), self.rulesets.get(folder))
        self.rulesets[folder] = rs
        if publish:
            for name, found in diagnostics.by_file(rs).items():
                self.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(uri=rs.files[name].path.as_uri(), diagnostics=found))
        if rs.checked is not None and self.settings.program is not None:
            self.evaluate(folder, rs)

    def evaluate(self, folder: Path, rs: RuleSet) -> None:
        assert rs.checked is not None and self.settings.program is not None  # refresh asks only then
        previous = self.programs.get(folder)
        if previous is not None and previous.checked is rs.checked:
            return
        try:
            self.programs[folder] = FolderModel.build(self.settings.program, rs.checked, self.settings.shim, previous)
        except BadInput as err:
            self.programs.pop(folder, None)
            self.say(f"program {self.settings.program} (from {self.settings.origin}): {err}", types.MessageType.Warning)
            return
        if _client_refreshes_lenses(self):
            self.workspace_code_lens_refresh(None)

    def program(self, path: Path) -> FolderModel | None:
        self.ruleset(path)
        return self.programs.get(path.parent)

    def configure(self, settings: Settings | None) -> None:
        try:
            self.settings = settings if settings is not None else from_toml(self.root)
        except BadInput as err:
            self.settings = Settings()
            self.say(str(err), types.MessageType.Warning)
        self.programs.clear()
        self.told.clear()
        for folder in list(self.rulesets):
            self.refresh(folder)

    def say(self, message: str, kind=types.MessageType.Info) -> None:
        log.info(message)
        if message not in self.told:
            self.told.add(message)
            self.window_show_message(types.ShowMessageParams(type=kind, message=message))


server = RuleServer()


def _path(uri: str) -> Path | None:
    path = to_fs_path(uri)
    return Path(path).resolve() if path and path.endswith(".dl") else None


def _client_refreshes_lenses(ls: RuleServer) -> bool:
    caps = ls.client_capabilities.workspace
    return bool(caps and caps.code_lens and caps.code_lens.refresh_support)


def guarded(default=None):
    """A handler that logs what it raised and answers `default`: the session goes on."""
    def wrap(fn):
        @wraps(fn)
        def handler(ls, params):
            try:
                return fn(ls, params)
            except Exception as err:  # noqa: BLE001 - one request failing must not end the server
                log.error("%s failed: %s\n%s", fn.__name__, err, traceback.format_exc())
                ls.say(f"tprules lsp: {fn.__name__} failed: {type(err).__name__}: {err}", types.MessageType.Error)
                return default
        return handler
    return wrap


# -- lifecycle and documents -------------------------------------------------------------

@server.feature(types.INITIALIZED)
@guarded()
def initialized(ls: RuleServer, params: types.InitializedParams):
    root = ls.workspace.root_path
    ls.root = Path(root).resolve() if root else None
    options = getattr(ls, "_init_options", None)
    ls.configure(from_options(options, ls.root))
    if ls.rules is not None:
        ls.refresh(ls.rules)
        if not ls.rulesets[ls.rules].files:  # nothing to publish a diagnostic on
            ls.say(f"--rules {ls.rules}: {ls.rulesets[ls.rules].problems[0].message}", types.MessageType.Warning)


@server.feature(types.INITIALIZE)
def initialize(ls: RuleServer, params: types.InitializeParams):
    ls._init_options = params.initialization_options


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
@guarded()
def did_change_configuration(ls: RuleServer, params: types.DidChangeConfigurationParams):
    settings = from_options(params.settings, ls.root)
    if settings is not None or ls.settings.origin == "the client's settings":
        ls.configure(settings)


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
@guarded()
def did_open(ls: RuleServer, params: types.DidOpenTextDocumentParams):
    _changed(ls, params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
@guarded()
def did_change(ls: RuleServer, params: types.DidChangeTextDocumentParams):
    _changed(ls, params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
@guarded()
def did_save(ls: RuleServer, params: types.DidSaveTextDocumentParams):
    _changed(ls, params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
@guarded()
def did_close(ls: RuleServer, params: types.DidCloseTextDocumentParams):
    _changed(ls, params.text_document.uri)  # the file on disk again


def _changed(ls: RuleServer, uri: str) -> None:
    path = _path(uri)
    if path is not None:
        ls.refresh(path.parent)


# -- features ----------------------------------------------------------------------------

@server.feature(types.TEXT_DOCUMENT_DEFINITION)
@guarded([])
def definition(ls: RuleServer, params: types.DefinitionParams):
    path = _path(params.text_document.uri)
    return navigation.definition(ls.ruleset(path), path, params.position) if path else []


@server.feature(types.TEXT_DOCUMENT_REFERENCES)
@guarded([])
def references(ls: RuleServer, params: types.ReferenceParams):
    path = _path(params.text_document.uri)
    if path is None:
        return []
    return navigation.references(ls.ruleset(path), path, params.position, params.context.include_declaration)


@server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
@guarded([])
def document_symbol(ls: RuleServer, params: types.DocumentSymbolParams):
    path = _path(params.text_document.uri)
    return navigation.symbols(ls.ruleset(path), path) if path else []


@server.feature(types.TEXT_DOCUMENT_HOVER)
@guarded()
def on_hover(ls: RuleServer, params: types.HoverParams):
    path = _path(params.text_document.uri)
    return hover.hover(ls.ruleset(path), path, params.position, ls.program(path)) if path else None


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=['"']))
@guarded()
def on_completion(ls: RuleServer, params: types.CompletionParams):
    path = _path(params.text_document.uri)
    return completion.complete(ls.ruleset(path), path, params.position, ls.program(path)) if path else None


@server.feature(types.TEXT_DOCUMENT_CODE_LENS)
@guarded([])
def code_lens(ls: RuleServer, params: types.CodeLensParams):
    path = _path(params.text_document.uri)
    if path is None:
        return []
    program = ls.program(path)
    return lenses.lenses(ls.ruleset(path), path, program) if program is not None else []


def serve(rules: Path | None = None) -> None:
    """Serve over stdin and stdout until the client says exit; `rules`: a folder to check
    (and publish every file's diagnostics of) as soon as the client connects."""
    server.rules = rules.resolve() if rules is not None else None
    server.start_io()
