"""Time `tprules lsp` as an editor sees it: diagnostics and code lenses after each edit.

    python benchmarks/bench_lsp.py [--rules rules] [--program facts/llama-layer-tp4] [--edits 10]
                                   [--limit-diag-ms 100] [--limit-lens-ms 1000]

Starts the server as an editor does (a subprocess over stdio, pygls's client), opens every
rule file of the folder with the program configured, then makes `--edits` edits to tp.dl,
alternately deleting the chip_and_spine rule and putting it back (each edit changes what
the rules derive, so the lenses must be recomputed). For each edit it times, from sending
`didChange`: the diagnostics published for the file, and the answer to `codeLens` (the
server recomputes the program's model before it answers). Prints the median and worst of
each; exits 1 when a worst time exceeds its limit. Figures on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere


async def bench(rules: Path, program: Path, edits: int) -> tuple[list[float], list[float], float]:
    client = LanguageClient("bench-lsp", "1")
    published: dict[str, asyncio.Event] = {}

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def _published(params: types.PublishDiagnosticsParams):
        published.setdefault(params.uri, asyncio.Event()).set()

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def _refresh(params):
        return None

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    await client.start_io(sys.executable, "-m", "tprules", "lsp", env=env)
    started = time.perf_counter()
    await client.initialize_async(types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=ROOT.as_uri(),
        initialization_options={"program": str(program)}))
    client.initialized(types.InitializedParams())
    tp = (rules / "tp.dl").resolve()
    uri = tp.as_uri()
    for path in sorted(rules.glob("*.dl")):
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=path.resolve().as_uri(), language_id="datalog", version=1, text=path.read_text())))
    await client.text_document_code_lens_async(types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    opened = time.perf_counter() - started
    text = tp.read_text()
    cut = text[text.index('refused(F, "chip_and_spine")'):text.index("\n.decl legal")]
    diag_s, lens_s = [], []
    for n in range(edits):
        new = text.replace(cut, "") if n % 2 == 0 else text
        published[uri] = asyncio.Event()
        t0 = time.perf_counter()
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(version=n + 2, uri=uri),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=new)]))
        await published[uri].wait()
        diag_s.append(time.perf_counter() - t0)
        lenses = await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        lens_s.append(time.perf_counter() - t0)
        assert lenses, "no code lenses: is the program folder right?"
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return diag_s, lens_s, opened


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rules", type=Path, default=ROOT / "rules")
    ap.add_argument("--program", type=Path, default=ROOT / "facts" / "llama-layer-tp4")
    ap.add_argument("--edits", type=int, default=10)
    ap.add_argument("--limit-diag-ms", type=float, default=100.0)
    ap.add_argument("--limit-lens-ms", type=float, default=1000.0)
    args = ap.parse_args()
    diag_s, lens_s, opened = asyncio.run(bench(args.rules, args.program.resolve(), args.edits))
    from tprules.paths import display_path

    print(f"rules {display_path(args.rules)}, program {display_path(args.program)}: {args.edits} edits of tp.dl "
          f"(server started, files opened, first lenses: {opened * 1e3:.0f} ms)")
    for what, times, limit in (("diagnostics", diag_s, args.limit_diag_ms), ("code lenses", lens_s, args.limit_lens_ms)):
        print(f"{what:12} median {statistics.median(times) * 1e3:6.1f} ms   worst {max(times) * 1e3:6.1f} ms   "
              f"(goal {limit:.0f} ms)")
    late = max(diag_s) * 1e3 > args.limit_diag_ms or max(lens_s) * 1e3 > args.limit_lens_ms
    return 1 if late else 0


if __name__ == "__main__":
    sys.exit(main())
