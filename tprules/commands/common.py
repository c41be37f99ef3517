"""Options shared by the commands, and the output helpers they use."""

from __future__ import annotations

import json
import sys


def add_rules(parser) -> None:
    parser.add_argument("--rules", metavar="RULES_DIR", help="rule folder (default: TPRULES_RULES, else [tool.tprules] "
                                                                 "rules in pyproject.toml, else the packaged rules)")
    add_include(parser)


def add_include(parser) -> None:
    parser.add_argument("-I", "--include-dir", dest="include_dirs", metavar="DIR", action="append", default=[],
                        help="a folder #include searches after the including file's own (repeatable)")


def add_shim(parser) -> None:
    parser.add_argument("--shim", metavar="NAME", help="the base chip to ask (default: DIR's only shim, "
                                                       "else cuda-lane:h100:Bf16)")


def add_format(parser, choices=("text", "json")) -> None:
    parser.add_argument("--format", choices=choices, default="text")


def add_engine(parser) -> None:
    parser.add_argument("--engine", choices=("fast", "compiled", "pydatalog"), default="fast",
                        help="fast: set-at-a-time joins over numpy columns (default); compiled: generated "
                             "Python joins, tuple at a time; pydatalog: the reference engine")


def add_show(parser) -> None:
    parser.add_argument("--show", metavar="WHAT", help="debug output: ast, strata, code, plan, cost, timing, "
                                                       "traceback, kernels")


def emit_json(data) -> None:
    """JSON with one line per element of each top-level list: readable, diffable, and fast
    to write for tens of thousands of fusions (the C encoder does each line)."""
    parts = []
    for key, value in data.items():
        if isinstance(value, list) and value:
            items = ",\n    ".join(map(_dumps, value))
            items = "    " + items
            parts.append(f"  {json.dumps(key)}: [\n{items}\n  ]")
        else:
            parts.append(f"  {json.dumps(key)}: {json.dumps(value)}")
    sys.stdout.write("{\n" + ",\n".join(parts) + "\n}\n")


def _dumps(value) -> str:
    """`json.dumps(value)`, without its per-call set-up for the dicts of strings and lists of
    strings that reports are made of (a plan's 10,000 groups); anything else goes to json."""
    quote = json.encoder.encode_basestring_ascii  # what json.dumps uses (ensure_ascii)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        parts = []
        for k, v in value.items():
            if isinstance(v, str):
                parts.append(f"{quote(k)}: {quote(v)}")
            elif isinstance(v, list | tuple) and all(isinstance(x, str) for x in v):
                parts.append(f"{quote(k)}: [{', '.join(map(quote, v))}]")
            else:
                parts.append(f"{quote(k)}: {json.dumps(v)}")
        return "{" + ", ".join(parts) + "}"
    return json.dumps(value)


def emit_json_lines(head: dict, key: str, chunks) -> None:
    """Like `emit_json(head | {key: items})` for items already written as JSON, one a line,
    and given as lists of lines (`chunks`), each written as it comes: a model-sized output
    is never held whole."""
    out = sys.stdout
    out.write("{\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items()) +
              f"  {json.dumps(key)}: [")
    first = True
    for lines in chunks:
        if lines:
            out.write(("\n    " if first else ",\n    ") + ",\n    ".join(lines))
            first = False
    out.write("]\n}\n" if first else "\n  ]\n}\n")


def add_module(parser) -> None:
    parser.add_argument("--module", metavar="PREFIX",
                        help="keep only what has a member under this module path of an imported model "
                             "(e.g. model.layers.3.mlp)")


def with_modules(members, modules: dict[str, str]) -> str:
    """Members as run shows them: each run of members under one module path, then that path
    in parentheses (`embedding (model.embed_tokens), pow_1, mean (model.norm)`); a member with
    no path as it is."""
    out, run = [], []
    for i, o in enumerate(members):
        run.append(o)
        here = modules.get(o, "")
        if i + 1 == len(members) or modules.get(members[i + 1], "") != here:
            out.append(", ".join(run) + (f" ({here})" if here else ""))
            run = []
    return ", ".join(out)
