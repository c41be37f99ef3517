"""The columnar fact reader: a fact file's bytes split, its numbers parsed and its symbols
interned with numpy, without a Python object per line or per field.

- **split** (`split`): one pass finds the TABs and newlines; a field is the span between
  two of them, and the fields of the non-empty lines are the rows. A file this reader
  cannot read exactly as the line reader does is declined (None), and the line reader
  then reads it or names its first bad line: a line with the wrong number of columns, a CR,
  a byte-order mark, bytes that are not UTF-8, a number other than `-?[0-9]{1,18}`
  (`+5`, ` 4`, `1_000`, 19 digits: Python's `int` reads those, or finds fault).
- **numbers**: parsed digit position by digit position over a whole column.
- **symbols** (`Interner`): a file's symbol fields are read as little-endian 64-bit
  words (a view of the joined bytes with a stride of one byte), hashed, and grouped by
  one sort of the hashes; every field is compared word for word with the first field of
  its hash, and every hash with the first field of the same hash in the files before, so
  a collision is found, never trusted (`Collision`: the files are then read by lines).
  The symbols no file before held are decoded a window of the buffer at a time and
  interned into the symbol table at once, in order of first occurrence (file, column, line): the ids a
  line-by-line reading would give.

The per-field work goes a file, and within it a chunk of fields, at a time, and positions
are int32 where the joined bytes allow: the reader's temporaries stay a fraction of the
facts it reads.
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
_I32 = np.iinfo(np.int32)


class Collision(Exception):
    """Two different symbols hashed alike (read the files by lines instead)."""


class Joined:
    """The bytes of all the files read together in one buffer, each file ending in a
    newline, then zeros (for reading a word at any field); each file's place in it.

    Files are read straight into the buffer, sized beforehand from their sizes on disk
    (`capacity`): no copy of a file's bytes is made, and the buffer does not move as it fills.
    """

    def __init__(self, capacity: int = 0):
        self._bytes = np.zeros(capacity + 16, dtype=np.uint8)  # calloc: pages no file fills stay untouched
        self._end = 0
        self.places: list[tuple[int, int]] = []  # (begin, size) of each file's own bytes

    def add(self, data: bytes) -> None:
        self._reserve(len(data))
        self._bytes[self._end:self._end + len(data)] = np.frombuffer(data, dtype=np.uint8)
        self._added(len(data))

    def add_file(self, path, size: int) -> None:
        """The file's bytes (`size` as found on disk; a file that changed since is read whole)."""
        self._reserve(size)
        with open(path, "rb") as f:
            got = f.readinto(self._bytes.data[self._end:self._end + size])
            rest = f.read()
        if rest:
            self._reserve(got + len(rest))
            self._bytes[self._end + got:self._end + got + len(rest)] = np.frombuffer(rest, dtype=np.uint8)
        self._added(got + len(rest))

    def _reserve(self, size: int) -> None:
        need = self._end + size + 1 + 8  # the file, a newline, a word of zeros
        if need > len(self._bytes):
            grown = np.zeros(max(need, 2 * len(self._bytes)), dtype=np.uint8)
            grown[:self._end] = self._bytes[:self._end]
            self._bytes = grown

    def _added(self, size: int) -> None:
        begin = self._end
        self.places.append((begin, size))
        self._end += size
        if size and self._bytes[self._end - 1] != _NEWLINE:
            self._bytes[self._end] = _NEWLINE
            self._end += 1

    def close(self) -> np.ndarray:
        return self._bytes[:self._end + 8]

    def data(self, k: int) -> bytes:
        """File k's bytes, as read."""
        begin, size = self.places[k]
        return self._bytes[begin:begin + size].tobytes()


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


class Interner:
    """The symbols of the files read together, interned file by file.

    Each file's symbol fields (column after column) are hashed and grouped by one sort of
    their hashes, each compared word for word with the first field of its hash in the file
    (raises `Collision`); each distinct hash is then looked up among those of the files
    before, whose first field it is compared with in turn. Only the symbols no file before
    held are decoded and interned, in order of first occurrence (column, line): file after
    file, the ids a line-by-line reading gives. What a file needs is held while it is read,
    so the reader's temporaries are those of its largest file, not of all of them.
    """

    def __init__(self, buffer: np.ndarray, symbols: Symbols):
        self.buffer, self.symbols, self.words = buffer, symbols, _Words(buffer)
        index = np.int32 if len(buffer) < 1 << 31 else np.int64
        self.hashes = np.zeros(0, dtype=_U64)  # sorted: one per symbol seen
        self.ids = np.zeros(0, dtype=I64)  # its id
        self.starts, self.lengths = np.zeros(0, dtype=index), np.zeros(0, dtype=index)  # its first field

    def rows(self, split: Split) -> np.ndarray:
        """The file's rows in the symbol table's ids (its number columns as parsed), as int32
        when every value fits (half the memory of int64; the engine's joins then bind int32
        columns too), else int64."""
        ids = None
        if split.spans and split.rows:
            starts = np.concatenate([s for s, _ in split.spans.values()])
            lengths = np.concatenate([n for _, n in split.spans.values()])
            ids = self._ids(starts, lengths).reshape(len(split.spans), split.rows)
        narrow = len(self.symbols.names) <= _I32.max and all(
            not len(c) or (_I32.min <= int(c.min()) and int(c.max()) <= _I32.max) for c in split.numbers.values())
        rows = np.empty((split.rows, len(split.spans) + len(split.numbers)), dtype=np.int32 if narrow else I64)
        if ids is not None:
            for k, i in enumerate(split.spans):
                rows[:, i] = ids[k]
        for i, column in split.numbers.items():
            rows[:, i] = column
        return rows

    def _ids(self, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        hashed = _hash(self.words, starts, lengths)
        order = np.argsort(hashed).astype(starts.dtype)  # numpy's quicksort (vectorised): several times its stable sort
        ordered = hashed[order]
        del hashed
        head = np.empty(len(ordered), dtype=bool)
        head[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=head[1:])
        distinct = ordered[head]  # sorted
        del ordered
        first = np.minimum.reduceat(order, np.flatnonzero(head))  # the first field of each hash
        group = np.empty(len(order), dtype=starts.dtype)
        group[order] = np.cumsum(head, dtype=starts.dtype) - 1
        del order, head
        _compare(self.words, starts, lengths, first, group)
        at = np.minimum(np.searchsorted(self.hashes, distinct), max(len(self.hashes) - 1, 0))
        seen = self.hashes[at] == distinct if len(self.hashes) else np.zeros(len(distinct), dtype=bool)
        old = np.flatnonzero(seen)
        if not _same(self.words, starts[first[old]], lengths[first[old]], self.starts[at[old]], self.lengths[at[old]]):
            raise Collision
        ids = np.empty(len(distinct), dtype=I64)
        ids[old] = self.ids[at[old]]
        new = np.flatnonzero(~seen)
        new = new[np.argsort(first[new])]  # in order of first occurrence
        at, size = starts[first[new]], lengths[first[new]]
        ids[new] = self.symbols.intern(_decode(self.buffer, at, size), distinct=True)
        self._remember(distinct[new], ids[new], at, size)
        return ids[group]

    def _remember(self, hashes: np.ndarray, ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> None:
        """The new symbols' hashes (none of them in the table yet) merged into the table."""
        if not len(hashes):
            return
        order = np.argsort(hashes)
        at = np.searchsorted(self.hashes, hashes[order])
        self.hashes = np.insert(self.hashes, at, hashes[order])
        self.ids = np.insert(self.ids, at, ids[order])
        self.starts = np.insert(self.starts, at, starts[order])
        self.lengths = np.insert(self.lengths, at, lengths[order])


def _compare(words: _Words, starts: np.ndarray, lengths: np.ndarray, first: np.ndarray, group: np.ndarray) -> None:
    """Every field equal to the first field of its hash, byte for byte (or `Collision`)."""
    for part in _chunks(len(group)):
        same = first[group[part]]  # the first field of each field's hash
        repeat = np.flatnonzero(same != np.arange(part.start, part.stop)) + part.start
        if not _same(words, starts[same[repeat - part.start]], lengths[same[repeat - part.start]],
                     starts[repeat], lengths[repeat]):
            raise Collision


def _same(words: _Words, starts: np.ndarray, lengths: np.ndarray, other_starts: np.ndarray,
          other_lengths: np.ndarray) -> bool:
    """Whether each field is the other field beside it, byte for byte."""
    if not np.array_equal(lengths, other_lengths):
        return False
    for m in range((int(lengths.max()) + 7) // 8 if len(lengths) else 0):
        longer = lengths > 8 * m
        starts, other_starts, lengths = starts[longer], other_starts[longer], lengths[longer]
        if not np.array_equal(words(starts, lengths, m), words(other_starts, lengths, m)):
            return False
    return True


def _decode(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> list[str]:
    """The fields' text, in the order given. Each field is followed by its separator in the
    buffer: the fields are taken in the buffer's order, a window of about a megabyte at a
    time, by a mask of their bytes and separators (one byte of temporaries per byte of
    window), and decoded and split together."""
    if not len(starts):
        return []
    order = np.argsort(starts)
    first, ends = starts[order], starts[order] + lengths[order] + 1  # each field and its separator
    decoded: list[str] = []
    at = 0
    while at < len(first):
        stop = max(int(np.searchsorted(first, int(first[at]) + _DECODED)), at + 1)
        low, high = int(first[at]), int(ends[stop - 1])
        marks = np.zeros(high - low + 1, dtype=np.int8)
        marks[first[at:stop] - low] += 1
        marks[ends[at:stop] - low] -= 1  # (a field may begin where the one before ends: two steps)
        taken = buffer[low:high][np.cumsum(marks[:-1], dtype=np.int8).view(bool)]
        del marks
        taken[taken == _TAB] = _NEWLINE
        decoded.extend(taken.tobytes().decode("utf-8").split("\n")[:-1])
        at = stop
    back = np.empty(len(order), dtype=np.int64)
    back[order] = np.arange(len(order))
    return list(map(decoded.__getitem__, back.tolist()))


_DECODED = 1 << 20  # bytes of the buffer decoded at a time
