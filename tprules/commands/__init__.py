"""One module per command; each defines `add_parser(subparsers)` and `run(args) -> int`."""

COMMANDS = ("check", "lint", "export", "run")
