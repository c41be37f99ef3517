"""`tprules lsp`: the language server for rule files, over stdin and stdout (docs/editor.md)."""

from __future__ import annotations


def add_parser(sub):
    p = sub.add_parser("lsp", help="serve the Language Server Protocol for rule files over stdio (docs/editor.md)")
    p.add_argument("--stdio", action="store_true", help="speak over stdin and stdout (the default and only transport)")
    p.add_argument("--log", metavar="FILE", help="write the server's log to FILE")
    p.add_argument("--rules", metavar="RULES_DIR",
                   help="also check this rule folder as soon as the editor connects, and publish the diagnostics "
                        "of every file in it, open or not (other folders are checked when a file of theirs opens)")
    return p


def run(args) -> int:
    import gc
    import logging

    gc.enable()  # the command line turns it off for one-shot commands; a server runs for hours

    if args.log:
        logging.basicConfig(filename=args.log, level=logging.INFO)
    from pathlib import Path

    from ..lsp.server import serve

    serve(Path(args.rules) if args.rules else None)
    return 0
