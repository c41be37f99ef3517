"""One module per command; each defines `add_parser(subparsers)` and `run(args) -> int`."""

COMMANDS = ("check", "plan", "run", "compile", "cache", "lint", "export", "why", "repl", "golden", "diff", "eval",
            "importer", "generate", "shim", "rules", "lsp")
