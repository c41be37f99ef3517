"""Soufflé's file IO for `tprules eval`: `.input` relations read and `.output` relations
written as Soufflé 2.5 does, with the directives' parameters.

Parameters understood: `IO` (`file`, the default, or `stdout` for an output), `filename`
(relative to -F / -D), `delimiter` (default a TAB) and `headers=true` (a first line of
column names). A line is read as Soufflé reads it: columns split on the delimiter, extra
columns ignored, a number column read whole in decimal, an unsigned also in 0x/0b, a float
as C's strtod; a zero-arity relation holds `()` when its file has a line. Values are
written as Soufflé writes them: floats with 17 significant digits, `()` for a true
zero-arity relation.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ...errors import FactError, UsageError
from ...paths import display_path
from ...pos import Pos
from ..lang import ast
from ..lang.values import render

_KNOWN = {"IO", "filename", "delimiter", "headers", "attributeNames", "name"}
_NUMBER = re.compile(r"\s*[+-]?[0-9]+")
_UNSIGNED = re.compile(r"\s*\+?(0x[0-9a-fA-F]+|0b[01]+|[0-9]+)")
_FLOAT = re.compile(r"\s*[+-]?(inf(inity)?|nan(\([0-9A-Za-z_]*\))?|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)", re.IGNORECASE)


@dataclass(frozen=True)
class Channel:
    """Where one relation is read from or written to."""

    rel: str
    kind: str  # "input", "output" or "printsize"
    io: str  # "file" or "stdout"
    filename: str
    delimiter: str
    headers: bool
    pos: Pos


def channels(checked) -> list[Channel]:
    """Every .input, .output and .printsize of a checked program, with its parameters."""
    found = []
    for directive in checked.program.directives:
        params = dict(directive.params)
        io = params.get("IO", "file")
        if io not in ("file", "stdout") or directive.kind == "input" and io != "file":
            raise UsageError(f".{directive.kind} IO={io} is not supported by tprules eval (IO=file"
                             f"{', IO=stdout' if directive.kind == 'output' else ''})", directive.pos)
        for key in params:
            if key not in _KNOWN:
                raise UsageError(f".{directive.kind} parameter {key} is not supported by tprules eval "
                                 f"(it knows {', '.join(sorted(_KNOWN))})", directive.pos)
        for rel in directive.names:
            default = f"{rel}.facts" if directive.kind == "input" else f"{rel}.csv"
            found.append(Channel(rel, directive.kind, io, params.get("filename", default),
                                 params.get("delimiter", "\t"), params.get("headers") == "true", directive.pos))
    return found


# ---- reading --------------------------------------------------------------------------


def read_input(channel: Channel, types: tuple[str, ...], facts_dir: Path) -> list[tuple]:
    """The tuples of one .input relation's file, in file order (missing: none, as tprules' SPEC says)."""
    path = Path(channel.filename)
    path = path if path.is_absolute() else facts_dir / path
    display = display_path(path)
    if not path.exists():
        return []
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise FactError(f"cannot read fact file: {err}", Pos(display, 0)) from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    start = 1 if channel.headers and lines else 0
    tuples = []
    for number, line in enumerate(lines[start:], start + 1):
        if line.endswith("\r"):
            line = line[:-1]
        tuples.append(_row(line, types, channel.delimiter, channel.rel, Pos(display, number)))
    return tuples


def _row(line: str, types: tuple[str, ...], delimiter: str, rel: str, pos: Pos) -> tuple:
    if not types:
        return ()
    fields = line.split(delimiter)
    if len(fields) < len(types):
        raise FactError(f"{rel} has {len(types)} column{'s' if len(types) != 1 else ''} but this line has "
                        f"{len(fields)} (separated by {delimiter!r})", pos)
    return tuple(_value(field, kind, i, rel, pos) for i, (field, kind) in enumerate(zip(fields, types)))


def _value(field: str, kind: str, column: int, rel: str, pos: Pos):
    if kind == "symbol":
        return field
    pattern = {"number": _NUMBER, "unsigned": _UNSIGNED, "float": _FLOAT}[kind]
    found = pattern.fullmatch(field)
    try:
        if found is None:
            raise ValueError
        if kind == "float":
            return float(found.group(0).split("(")[0])
        text = found.group(0).strip().lstrip("+")
        value = int(text[2:], 16) if text.startswith("0x") else int(text[2:], 2) if text.startswith("0b") \
            else int(text)
        low, high = (0, (1 << 64) - 1) if kind == "unsigned" else (-(1 << 63), (1 << 63) - 1)
        if not low <= value <= high:
            raise ValueError
        return value
    except ValueError:
        raise FactError(f"column {column + 1} of {rel} must be a{'n' if kind[0] in 'au' else ''} {kind}, "
                        f"got {field!r}", pos) from None


def records_read(checked, rel: str, rows: list[tuple]) -> list[tuple]:
    """Rows with each record or ADT column (`[1, a]`, `$Mon`, as Soufflé writes them) in
    the form the engines hold (datalog/lang/record_values.py)."""
    types = {t.name: t for t in checked.program.types}

    def is_shape(name: str) -> bool:
        seen = set()
        while name in types and name not in seen:
            seen.add(name)
            if types[name].kind in ("record", "adt"):
                return True
            if len(types[name].bases) != 1:
                return False
            name = types[name].bases[0]
        return False

    columns = [i for i, a in enumerate(checked.decls[rel].attrs) if is_shape(a.type)]
    if not columns or not rows:
        return rows
    from ..lang.record_values import from_printed

    return [tuple(from_printed(v) if i in columns else v for i, v in enumerate(row)) for row in rows]


# ---- writing --------------------------------------------------------------------------


def _sort_key(types: tuple[str, ...]):
    def key(row):
        return tuple((math.isnan(v), v) if k == "float" else v for v, k in zip(row, types))

    return key


def lines_of(tuples, types: tuple[str, ...], delimiter: str = "\t") -> list[str]:
    """A relation's rows as Soufflé writes them, sorted by value."""
    if not types:
        return ["()"] if tuples else []
    rows = sorted(tuples, key=_sort_key(types))
    return [delimiter.join(render(v, k) for v, k in zip(row, types)) for row in rows]


def header(decl: ast.Decl, delimiter: str) -> str:
    return delimiter.join(a.name for a in decl.attrs)


def stdout_block(rel: str, lines: list[str], head: str | None = None) -> str:
    """A relation as Soufflé prints it with IO=stdout or -D -."""
    top = f"---------------\n{rel}\n" + (f"{head}\n" if head is not None else "") + "===============\n"
    return top + "".join(line + "\n" for line in lines) + "===============\n"


def write_outputs(model, checked, chans: list[Channel], out_dir: str) -> None:
    """Write every .output relation (to files under out_dir, or to stdout for '-'), then the
    .printsize lines; files are written only once everything was computed."""
    decls = checked.decls
    files: list[tuple[Path, str]] = []
    printed: list[str] = []
    for chan in chans:
        decl = decls[chan.rel]
        if chan.kind == "printsize":
            printed.append(f"{chan.rel}\t{len(model.tuples(chan.rel))}\n")
            continue
        if chan.kind != "output":
            continue
        delimiter = chan.delimiter
        lines = lines_of(model.tuples(chan.rel), decl.types, delimiter)
        # -D - prints the column names as Soufflé does; a file or IO=stdout only with headers=true
        head = header(decl, delimiter) if chan.headers or out_dir == "-" else None
        if out_dir == "-" or chan.io == "stdout":
            printed.append(stdout_block(chan.rel, lines, head))
            continue
        path = Path(chan.filename)
        path = path if path.is_absolute() else Path(out_dir) / path
        text = ("" if head is None else head + "\n") + "".join(line + "\n" for line in lines)
        files.append((path, text))
    for path, text in files:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError as err:
            raise UsageError(f"cannot write {display_path(path)}: {err.strerror or err}") from None
    sys.stdout.write("".join(printed))


def symbols_in_order(checked, facts: dict[str, list[tuple]]) -> list[str]:
    """The program's symbol constants in the order written, then the facts' symbols in the
    order read: roughly the order Soufflé's symbol table numbers them (what ord() shows)."""
    found: dict[str, None] = {}

    def walk(node) -> None:
        if isinstance(node, ast.Str):
            found.setdefault(node.value, None)
        elif isinstance(node, tuple):
            for part in node:
                walk(part)
        elif hasattr(node, "__dataclass_fields__") and not isinstance(node, Pos):
            for name in node.__dataclass_fields__:
                walk(getattr(node, name))

    walk(checked.program.rules)
    for rel, rows in facts.items():
        kinds = checked.decls[rel].types
        for row in rows:
            for value, kind in zip(row, kinds):
                if kind == "symbol":
                    found.setdefault(value, None)
    return list(found)
