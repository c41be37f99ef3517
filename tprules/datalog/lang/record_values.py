"""Records and ADT values as interned symbols, so that joins stay columnar.

A record `[1, "a"]`, `nil`, or an ADT value `$Int(1)` is held as one canonical string
that begins with RECORD (a control character no symbol read from a fact file holds), its
symbols quoted: equal values are equal strings, so every engine interns, compares and
joins them as it does symbols. `tag`, `field` and `printed` read them back.

>>> text = make_record(("number", "symbol"), (1, "a"))
>>> tag(text), field(text, 1, "symbol"), printed(text)
('[2', 'a', '[1, a]')
>>> printed(make_branch("Int", ("number",), (7,))), printed(NIL)
('$Int(7)', 'nil')
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

RECORD = "\x1e"
NIL = RECORD + "nil"
_DECODER = json.JSONDecoder()
_NAME = re.compile(r"[A-Za-z?_][A-Za-z0-9_?]*")
_NUMBER = re.compile(r"-?(?:inf|nan|[0-9][0-9a-fA-Fx.eE+\-]*)")


def is_record(value) -> bool:
    return isinstance(value, str) and value.startswith(RECORD)


def _canon(value, kind: str) -> str:
    if kind == "symbol":
        return value[1:] if is_record(value) else json.dumps(value, ensure_ascii=False)
    if kind == "float":
        return repr(float(value))
    return str(int(value))


def make_record(kinds: tuple[str, ...], values: tuple) -> str:
    return f"{RECORD}[{','.join(_canon(v, k) for v, k in zip(values, kinds))}]"


def make_branch(name: str, kinds: tuple[str, ...], values: tuple) -> str:
    inside = ",".join(_canon(v, k) for v, k in zip(values, kinds))
    return f"{RECORD}${name}({inside})" if values else f"{RECORD}${name}"


def _value(text: str, i: int):
    """(the value starting at text[i], the index after it)."""
    ch = text[i]
    if ch == '"':
        value, end = _DECODER.raw_decode(text, i)
        return value, end
    if ch == "[" or ch == "$" or text.startswith("nil", i):
        end = _skip(text, i)
        return RECORD + text[i:end], end
    found = _match(_NUMBER, text, i)
    word = found.group(0)
    if any(c in word for c in ".en") and not word.startswith(("0x", "-0x")):
        return float(word), found.end()
    return int(word, 0), found.end()


def _match(pattern: re.Pattern[str], text: str, i: int) -> re.Match[str]:
    """A match that is there: a canonical value is well formed, and a name follows `$`."""
    found = pattern.match(text, i)
    assert found is not None, text
    return found


def _skip(text: str, i: int) -> int:
    """The index after the nested value starting at text[i]."""
    if text.startswith("nil", i):
        return i + 3
    if text[i] == "$":
        end = _match(_NAME, text, i + 1).end()
        if end < len(text) and text[end] == "(":
            return _fields(text, end + 1, ")")[1]
        return end
    return _fields(text, i + 1, "]")[1]


def _fields(text: str, i: int, close: str) -> tuple[list, int]:
    out: list = []
    if text[i] == close:
        return out, i + 1
    while True:
        value, i = _value(text, i)
        out.append(value)
        if text[i] == close:
            return out, i + 1
        i += 1  # the ','


@lru_cache(maxsize=1 << 16)
def parse(value: str) -> tuple[str, tuple]:
    """(tag, fields) of a canonical value: `[n` for a record of n fields, `nil`, `$Name`."""
    if not is_record(value):
        return "", ()
    text = value[1:]
    if text == "nil":
        return "nil", ()
    if text.startswith("$"):
        end = _match(_NAME, text, 1).end()
        fields = _fields(text, end + 1, ")")[0] if end < len(text) else []
        return text[:end], tuple(fields)
    fields = _fields(text, 1, "]")[0]
    return f"[{len(fields)}", tuple(fields)


def tag(value) -> str:
    return parse(value)[0] if is_record(value) else ""


_DEFAULT = {"symbol": "", "float": 0.0}


def field(value, i: int, kind: str):
    """Field i of a record or ADT value (a harmless default where it has none: the tag
    test beside every use filters such rows out)."""
    fields = parse(value)[1] if is_record(value) else ()
    if i < len(fields):
        found = fields[i]
        if kind == "float":
            return float(found) if not isinstance(found, str) else 0.0
        if kind in ("number", "unsigned"):
            return int(found) if not isinstance(found, str) else 0
        return found
    return _DEFAULT.get(kind, 0)


def printed(value) -> str:
    """Soufflé's printed form: `[1, a]`, `nil`, `$Int(1)`, `$Mon` (symbols as they are)."""
    if not is_record(value):
        return value if isinstance(value, str) else _number(value)
    name, fields = parse(value)
    inner = ", ".join(printed(f) for f in fields)
    if name.startswith("["):
        return f"[{inner}]"
    if name == "nil":
        return "nil"
    return f"{name}({inner})" if fields else name


def written(value: str) -> str:
    """A record or ADT value as rule text: `[1, "a"]`, `nil`, `$Int(1)`."""
    name, fields = parse(value)
    inner = ", ".join(written(f) if is_record(f) else json.dumps(f, ensure_ascii=False) if isinstance(f, str)
                      else _number(f) for f in fields)
    if name.startswith("["):
        return f"[{inner}]"
    if name == "nil":
        return "nil"
    return f"{name}({inner})" if fields else name


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def from_printed(text: str) -> str:
    """A record or ADT value as a fact file writes it (`[1, a]`, `$Mon`) → its canonical
    form: numbers where a field reads as one, symbols otherwise."""
    text = text.strip()
    value, _ = _read(text, 0)
    return value if is_record(value) else text


def _read(text: str, i: int):
    while i < len(text) and text[i] == " ":
        i += 1
    if text.startswith("nil", i) and not _match(_NAME, text, i).group(0)[3:]:  # nil itself, not nilly
        return NIL, i + 3
    if i < len(text) and text[i] in "[$":
        if text[i] == "[":
            fields, i = _read_fields(text, i + 1, "]")
            return RECORD + "[" + ",".join(_canon(f, _kind(f)) for f in fields) + "]", i
        end = _match(_NAME, text, i + 1).end()
        name = text[i + 1:end]
        if end < len(text) and text[end] == "(":
            fields, end = _read_fields(text, end + 1, ")")
            return make_branch(name, tuple(_kind(f) for f in fields), tuple(fields)), end
        return make_branch(name, (), ()), end
    end = i
    while end < len(text) and text[end] not in ",])":
        end += 1
    word = text[i:end].strip()
    try:
        return int(word), end
    except ValueError:
        pass
    try:
        return float(word), end
    except ValueError:
        return word, end


def _read_fields(text: str, i: int, close: str):
    out: list = []
    while i < len(text) and text[i] == " ":
        i += 1
    if i < len(text) and text[i] == close:
        return out, i + 1
    while i < len(text):
        value, i = _read(text, i)
        out.append(value)
        while i < len(text) and text[i] == " ":
            i += 1
        if i >= len(text) or text[i] == close:
            return out, i + 1
        i += 1
    return out, i


def _kind(value) -> str:
    return "symbol" if isinstance(value, str) else "float" if isinstance(value, float) else "number"


def functor(name: str, kind: str, args: tuple, arg_kinds: tuple[str, ...]):
    """The record functors the desugaring writes (datalog/analysis/records.py)."""
    if name.startswith(".rec"):
        return make_record(arg_kinds, args)
    if name.startswith(".adt:"):
        return make_branch(name.split(":")[1], arg_kinds, args)
    if name == ".tag":
        return tag(args[0])
    if name.startswith(".field:"):
        return field(args[0], int(name.split(":")[1]), kind)
    raise ValueError(name)
