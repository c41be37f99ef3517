"""The columnar fact reader: a fact file's bytes split, its numbers parsed and its symbols
interned with numpy, without a Python object per line or per field.

- **split** (`split`): one pass finds the TABs and newlines; a field is the span between
  two of them, and the fields of the non-empty lines are the rows. A file this reader
  cannot read exactly as the line reader does is declined (None), and the line reader
  then reads it or names its first bad line: a line with the wrong number of columns, a CR,
  a byte-order mark, bytes that are not UTF-8, a number other than `-?[0-9]{1,18}`
  (`+5`, ` 4`, `1_000`, 19 digits: Python's `int` reads those, or finds fault).
- **numbers**: parsed digit position by digit position over a whole column.
- **symbols** (`intern`): the symbol fields of all the files read together are read as
  little-endian 64-bit words (a view of the joined bytes with a stride of one byte),
  hashed, and grouped by one sort of the hashes; every field is then compared word for
  word with the first field of its hash, so a collision is found, never trusted
  (`Collision`: the files are then read by lines). The distinct symbols are decoded
  65,536 at a time and interned into the symbol table at once, in order of first
  occurrence (file, column, line): the ids a line-by-line reading would give.

The per-field work goes a chunk of fields at a time, and positions are int32 where the
joined bytes allow: the reader's temporaries stay a fraction of the facts it reads.
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


class Joined:
    """The bytes of all the files read together in one buffer, each file ending in a
    newline, then zeros (for reading a word at any field); each file's place in it."""

    def __init__(self):
        self._bytes = bytearray()
        self.places: list[tuple[int, int]] = []  # (begin, size) of each file's own bytes

    def add(self, data: bytes) -> None:
        self.places.append((len(self._bytes), len(data)))
        self._bytes += data
        if data and not data.endswith(b"\n"):
            self._bytes += b"\n"

    def close(self) -> np.ndarray:
        self._bytes += bytes(8)
        return np.frombuffer(self._bytes, dtype=np.uint8)

    def data(self, k: int) -> bytes:
        """File k's bytes, as read."""
        begin, size = self.places[k]
        return bytes(self._bytes[begin:begin + size])


@dataclass
class Split:
    """A file's rows: the start (in the joined bytes) and length of each field of its
    symbol columns, its parsed number columns, and the line of each row (None when row k
    is line k + 1)."""

    rows: int
    spans: dict[int, tuple[np.ndarray, np.ndarray]]
    numbers: dict[int, np.ndarray]
    lines: np.ndarray | None


def split(buffer: np.ndarray, begin: int, size: int, types: tuple[str, ...]) -> Split | None:
    """The file of `size` bytes at `begin` in the joined bytes as field spans, or None when
    the line reader must read it."""
    arity = len(types)
    text = buffer[begin:begin + size]
    if not arity or _declined(text):
        return None
    text = buffer[begin:begin + size + (size > 0 and text[-1] != _NEWLINE)]
    index = np.int32 if len(buffer) < 1 << 31 else np.int64  # positions in the joined bytes
    ends = np.flatnonzero((text == _TAB) | (text == _NEWLINE)).astype(index)
    starts = np.empty_like(ends)
    starts[:1] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts
    newline = text[ends] == _NEWLINE
    del ends
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
    starts += begin
    starts, lengths = starts.reshape(-1, arity), lengths.reshape(-1, arity)
    spans, numbers = {}, {}
    for i, kind in enumerate(types):
        if kind == "symbol":
            spans[i] = (starts[:, i].copy(), lengths[:, i].copy())
            continue
        column = _numbers(buffer, starts[:, i], lengths[:, i])
        if column is None:
            return None
        numbers[i] = column
    return Split(count // arity, spans, numbers, lines)


def _declined(text: np.ndarray) -> bool:
    """A CR, a byte-order mark, or bytes that are not UTF-8: the line reader's to read."""
    if not len(text) or int(text.max()) < 0x80:
        return bool(np.any(text == 13))
    if bytes(text[:3]) == b"\xef\xbb\xbf" or np.any(text == 13):
        return True
    try:
        text.tobytes().decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


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


_CHUNK = 1 << 16  # fields hashed and compared at a time (the temporaries stay small)


def _chunks(n: int):
    return (slice(at, min(at + _CHUNK, n)) for at in range(0, n, _CHUNK))


def _hash(words: _Words, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A hash of each field's words and length (of its own words only, so that a symbol
    hashes alike in every column)."""
    h = np.empty(len(starts), dtype=_U64)
    for part in _chunks(len(starts)):
        here, length = starts[part], lengths[part]
        mixed = length.astype(_U64) * _MIX[0]
        for m in range((int(length.max()) + 7) // 8):
            at = np.flatnonzero(length > 8 * m)
            word = (mixed[at] ^ words(here[at], length[at], m)) * _MIX[1]
            mixed[at] = word ^ (word >> _U64(31))
        h[part] = mixed
    return h


def intern(buffer: np.ndarray, splits: list[Split], symbols: Symbols) -> list[np.ndarray]:
    """The rows of each split file in `symbols`' ids: every symbol field of every file
    hashed, grouped, compared with the first field of its group (raises `Collision`), and
    the distinct symbols decoded and interned in order of first occurrence."""
    spans = [span for split in splits for span in split.spans.values()]
    field_ids = np.zeros(0, dtype=I64)
    if sum(len(s) for s, _ in spans):
        starts = np.concatenate([s for s, _ in spans])
        lengths = np.concatenate([n for _, n in spans])
        field_ids = _symbol_ids(buffer, starts, lengths, symbols)
    out, at = [], 0
    for split in splits:
        rows = np.empty((split.rows, len(split.spans) + len(split.numbers)), dtype=I64)
        for i in range(rows.shape[1]):
            if i in split.spans:
                rows[:, i] = field_ids[at:at + split.rows]
                at += split.rows
            else:
                rows[:, i] = split.numbers[i]
        out.append(rows)
    return out


def _symbol_ids(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray, symbols: Symbols) -> np.ndarray:
    words = _Words(buffer)
    hashed = _hash(words, starts, lengths)
    order = np.argsort(hashed).astype(starts.dtype)  # numpy's quicksort (vectorised): several times its stable sort
    ordered = hashed[order]
    del hashed
    head = np.empty(len(ordered), dtype=bool)
    head[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=head[1:])
    del ordered
    first = np.minimum.reduceat(order, np.flatnonzero(head))  # the first field of each hash
    group = np.empty(len(order), dtype=starts.dtype)
    group[order] = np.cumsum(head, dtype=starts.dtype) - 1
    del order, head
    _compare(words, starts, lengths, first, group)
    by_occurrence = np.argsort(first)
    rank = np.empty(len(first), dtype=starts.dtype)
    rank[by_occurrence] = np.arange(len(first), dtype=starts.dtype)
    first = first[by_occurrence]
    ids = symbols.intern(_decode(buffer, starts[first], lengths[first]), distinct=True)
    return ids[rank[group]]


def _compare(words: _Words, starts: np.ndarray, lengths: np.ndarray, first: np.ndarray, group: np.ndarray) -> None:
    """Every field equal to the first field of its hash, byte for byte (or `Collision`)."""
    for part in _chunks(len(group)):
        same = first[group[part]]  # the first field of each field's hash
        repeat = np.flatnonzero(same != np.arange(part.start, part.stop)) + part.start
        same = same[repeat - part.start]
        if not np.array_equal(lengths[same], lengths[repeat]):
            raise Collision
        for m in range((int(lengths[repeat].max()) + 7) // 8 if len(repeat) else 0):
            longer = lengths[repeat] > 8 * m
            repeat, same = repeat[longer], same[longer]
            if not np.array_equal(words(starts[same], lengths[repeat], m), words(starts[repeat], lengths[repeat], m)):
                raise Collision


def _decode(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> list[str]:
    """The fields' text, decoded a chunk of fields at a time."""
    names: list[str] = []
    for part in _chunks(len(starts)):
        spans = lengths[part] + 1  # each field and the separator after it
        offsets = np.cumsum(spans) - spans
        gathered = buffer[np.repeat(starts[part] - offsets, spans) + np.arange(int(spans.sum()))]
        gathered[offsets + lengths[part]] = _NEWLINE
        names.extend(gathered.tobytes().decode("utf-8").split("\n")[:-1])
    return names
