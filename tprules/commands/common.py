"""Options shared by the commands, and the output helpers they use."""

from __future__ import annotations

import json
import sys


def add_rules(parser) -> None:
    parser.add_argument("--rules", metavar="RULES_DIR", help="rule folder (default: the project's rules/)")


def add_shim(parser) -> None:
    parser.add_argument("--shim", metavar="NAME", help="the base chip to ask (default: DIR's only shim, "
                                                       "else cuda-lane:h100:Bf16)")


def add_format(parser, choices=("text", "json")) -> None:
    parser.add_argument("--format", choices=choices, default="text")


def add_engine(parser) -> None:
    parser.add_argument("--engine", choices=("fast", "pydatalog"), default="fast",
                        help="fast: compiled set-at-a-time joins (default); pydatalog: the reference engine")


def add_show(parser) -> None:
    parser.add_argument("--show", metavar="WHAT", help="debug output: ast, strata, code, timing, traceback, kernels")


def emit_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")
