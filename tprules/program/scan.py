"""The columnar fact reader: a fact file's bytes split, its numbers parsed and its symbols
interned with numpy, without a Python object per line or per field.

- **split** (`split`): one pass finds the TABs and newlines; a field is the span between
  two of them, and the fields of the non-empty lines are the rows. A file this reader
  cannot read exactly as the line reader does is declined (None), and the line reader
  then reads it or names its first bad line: a line with the wrong number of columns, a CR,
  a byte-order mark, bytes that are not UTF-8, a number other than `-?[0-9]{1,18}`
  (`+5`, ` 4`, `1_000`, 19 digits: Python's `int` reads those, or finds fault).
- **numbers**: parsed digit position by digit position over a whole column.
- **symbols** (`Interning`): each field's bytes are read as little-endian 64-bit words
  (a view of the buffer with a stride of one byte), hashed, and grouped by sorting the
  hashes; every field is then compared word for word with the first field of its hash
  (this file's or an earlier one's), so a collision is found, never trusted (`Collision`:
  the files are then read by lines). The new symbols of each column are decoded in one
  go, and all of them interned into the symbol table at once, in order of first
  occurrence (file, column, line): the ids a line-by-line reading would give.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .columns import I64, Symbols

_TAB, _NEWLINE, _MINUS, _ZERO = 9, 10, 45, 48
_DIGITS = 18  # 10**18 < 2**63: a number of at most 18 digits cannot overflow
_U64 = np.uint64
_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=_U64)  # the first k bytes of a word
_MIX = (_U64(0x9E3779B97F4A7C15), _U64(0xBF58476D1CE4E5B9))


class Collision(Exception):
    """Two different symbols hashed alike (read the files by lines instead)."""


def join(contents: list[bytes]) -> tuple[np.ndarray, list[int]]:
    """The bytes of all the files read together, each ending in a newline, then zeros (for
    reading a word at any field), and where each file begins."""
    parts, begins, at = [], [], 0
    for data in contents:
        begins.append(at)
        parts.append(data if not data or data.endswith(b"\n") else data + b"\n")
        at += len(parts[-1])
    parts.append(bytes(8))
    return np.frombuffer(b"".join(parts), dtype=np.uint8), begins


@dataclass
class Split:
    """A file's fields: each one's start (in the joined bytes) and length as (rows, arity)
    arrays, the parsed number columns, and the line of each row (None when row k is line
    k + 1)."""

    starts: np.ndarray
    lengths: np.ndarray
    numbers: dict[int, np.ndarray]
    lines: np.ndarray | None


def split(buffer: np.ndarray, begin: int, data: bytes, types: tuple[str, ...]) -> Split | None:
    """The file `data`, at `begin` in the joined bytes, as field spans, or None when the
    line reader must read it."""
    arity = len(types)
    if not arity or b"\r" in data or data.startswith(b"\xef\xbb\xbf"):
        return None
    text = buffer[begin:begin + len(data) + (bool(data) and not data.endswith(b"\n"))]
    if not _utf8(data, text):
        return None
    ends = np.flatnonzero((text == _TAB) | (text == _NEWLINE))
    starts = np.empty_like(ends)
    starts[:1] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts
    newline = text[ends] == _NEWLINE
    after_newline = np.empty_like(newline)
    after_newline[:1] = True
    after_newline[1:] = newline[:-1]
    blank = newline & after_newline & (lengths == 0)  # a line with nothing on it
    lines = None
    if blank.any():
        kept = ~blank
        line_of = np.cumsum(newline) - newline + 1  # the line each field is on
        starts, lengths, newline, line_of = starts[kept], lengths[kept], newline[kept], line_of[kept]
        lines = line_of[::arity].astype(I64)
        if np.array_equal(lines, np.arange(1, len(lines) + 1)):  # blank lines after the last row only
            lines = None
    count = len(starts)
    if count % arity or not np.array_equal(np.flatnonzero(newline), np.arange(arity - 1, count, arity)):
        return None  # some line has another number of columns
    starts, lengths = (starts + begin).reshape(-1, arity), lengths.reshape(-1, arity)
    numbers = {}
    for i, kind in enumerate(types):
        if kind == "number":
            column = _numbers(buffer, starts[:, i], lengths[:, i])
            if column is None:
                return None
            numbers[i] = column
    return Split(starts, lengths, numbers, lines)


def _utf8(data: bytes, text: np.ndarray) -> bool:
    if not len(text) or int(text.max()) < 0x80:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _numbers(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """A column of decimal integers (`-?[0-9]{1,18}`), or None if some field is not one."""
    if not len(starts):
        return np.zeros(0, dtype=I64)
    negative = buffer[starts] == _MINUS  # an empty field's first byte is its separator
    first, digits = starts + negative, lengths - negative
    shortest, longest = int(digits.min()), int(digits.max())
    if shortest < 1 or longest > _DIGITS:
        return None
    value = np.zeros(len(starts), dtype=I64)
    for j in range(longest):
        digit = buffer[first + np.minimum(j, digits - 1)] - np.uint8(_ZERO)  # wraps below '0'
        if int(digit.max()) > 9:
            return None
        if j < shortest:
            value = value * 10 + digit
        else:
            value = np.where(j < digits, value * 10 + digit, value)
    return np.where(negative, -value, value)


class _Words:
    """The fields' bytes as little-endian 64-bit words (a view of the joined bytes with a
    stride of one byte): word m of the fields longer than 8m, zero past each one's end."""

    def __init__(self, buffer: np.ndarray):
        self.view = np.ndarray((len(buffer) - 7,), dtype="<u8", buffer=buffer, strides=(1,))

    def __call__(self, starts: np.ndarray, lengths: np.ndarray, m: int) -> np.ndarray:
        return self.view[starts + 8 * m] & _MASKS[np.minimum(lengths - 8 * m, 8)]


def _longer(fields: np.ndarray, lengths: np.ndarray, m: int) -> np.ndarray:
    """Those of `fields` (positions, shortest first dropped as m grows) longer than 8m bytes."""
    return fields[lengths[fields] > 8 * m]


def _hash(words: _Words, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A hash of each field's words and length (of its own words only, so that a symbol
    hashes alike in every column)."""
    h = lengths.astype(_U64) * _MIX[0]
    fields = np.arange(len(starts))
    for m in range((int(lengths.max()) + 7) // 8):
        if m or not lengths.all():  # (no field is empty: the first word of every field)
            fields = _longer(fields, lengths, m)
            mixed = (h[fields] ^ words(starts[fields], lengths[fields], m)) * _MIX[1]
            h[fields] = mixed ^ (mixed >> _U64(31))
        else:
            h = (h ^ words(starts, lengths, 0)) * _MIX[1]
            h ^= h >> _U64(31)
    return h


def intern(buffer: np.ndarray, splits: list[tuple[Split, tuple[str, ...]]], symbols: Symbols) -> list[np.ndarray]:
    """The rows of each split file in `symbols`' ids: every symbol field of every file
    hashed, grouped, compared with the first field of its group (raises `Collision`), and
    the distinct symbols decoded and interned in order of first occurrence."""
    spans = [(split.starts[:, i], split.lengths[:, i]) for split, types in splits
             for i, kind in enumerate(types) if kind == "symbol"]
    field_ids = np.zeros(0, dtype=I64)
    if spans and sum(len(s) for s, _ in spans):
        starts = np.concatenate([s for s, _ in spans])
        lengths = np.concatenate([n for _, n in spans])
        field_ids = _symbol_ids(buffer, starts, lengths, symbols)
    out, at = [], 0
    for split, types in splits:
        rows = np.empty(split.starts.shape, dtype=I64)
        for i, kind in enumerate(types):
            if kind == "symbol":
                rows[:, i] = field_ids[at:at + len(rows)]
                at += len(rows)
            else:
                rows[:, i] = split.numbers[i]
        out.append(rows)
    return out


def _symbol_ids(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray, symbols: Symbols) -> np.ndarray:
    words = _Words(buffer)
    hashed = _hash(words, starts, lengths)
    order = np.argsort(hashed)  # numpy's quicksort (vectorised): several times its stable sort
    ordered = hashed[order]
    head = np.empty(len(ordered), dtype=bool)
    head[0] = True
    head[1:] = ordered[1:] != ordered[:-1]
    first = np.minimum.reduceat(order, np.flatnonzero(head))  # the first field of each hash
    group = np.empty(len(order), dtype=I64)
    group[order] = np.cumsum(head) - 1
    del hashed, order, ordered, head
    _compare(words, starts, lengths, first, group)
    by_occurrence = np.argsort(first)
    rank = np.empty(len(first), dtype=I64)
    rank[by_occurrence] = np.arange(len(first))
    first = first[by_occurrence]
    ids = symbols.intern(_decode(buffer, starts[first], lengths[first]), distinct=True)
    return ids[rank[group]]


def _compare(words: _Words, starts: np.ndarray, lengths: np.ndarray, first: np.ndarray, group: np.ndarray) -> None:
    """Every field equal to the first field of its hash, byte for byte (or `Collision`)."""
    repeat = np.ones(len(group), dtype=bool)
    repeat[first] = False
    repeat = np.flatnonzero(repeat)
    same = np.empty(len(group), dtype=I64)
    same[repeat] = first[group[repeat]]  # the first field of a repeat's hash
    if not np.array_equal(lengths[same[repeat]], lengths[repeat]):
        raise Collision
    for m in range((int(lengths[repeat].max()) + 7) // 8 if len(repeat) else 0):
        repeat = _longer(repeat, lengths, m)
        if not np.array_equal(words(starts[same[repeat]], lengths[repeat], m), words(starts[repeat], lengths[repeat], m)):
            raise Collision


def _decode(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> list[str]:
    """The fields' text, decoded in one go."""
    spans = lengths + 1  # each field and the separator after it
    offsets = np.cumsum(spans) - spans
    gathered = buffer[np.repeat(starts - offsets, spans) + np.arange(int(spans.sum()))]
    gathered[offsets + lengths] = _NEWLINE
    return gathered.tobytes().decode("utf-8").split("\n")[:-1]
