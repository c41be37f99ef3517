"""`choice-domain`: at most one tuple of a relation for each value of each key.

`.decl advisor(s: symbol, p: symbol) choice-domain s` keeps one advisor per student: a
tuple derived while another with the same key is already there is dropped, so which one
stays depends on the order of evaluation, in Soufflé as here. tprules takes each batch of
new tuples in order, symbols by their number in the symbol table (the order they were
first read, as Soufflé numbers them), so that a run is repeatable and, on Soufflé's own
tests, chooses as Soufflé does.

>>> c = Choice(("s",), ("s", "p"), [])
>>> c.admit({("ann", "bob"), ("ann", "cy"), ("dee", "cy")})
[('ann', 'bob'), ('dee', 'cy')]
"""

from __future__ import annotations

from operator import itemgetter


class Choice:
    def __init__(self, keys, columns: tuple[str, ...], tuples):
        self.keys = [itemgetter(*(columns.index(name) for name in key)) for key in keys]
        tuples = list(tuples)
        self.seen = [set(map(key, tuples)) for key in self.keys]

    def admit(self, new) -> list[tuple]:
        """The new tuples that keep every key unique, each batch in sorted order."""
        out = []
        for t in sorted(new, key=_order):
            values = [key(t) for key in self.keys]
            if any(v in seen for v, seen in zip(values, self.seen)):
                continue
            for v, seen in zip(values, self.seen):
                seen.add(v)
            out.append(t)
        return out


def _order(t: tuple) -> tuple:
    from ..lang.values import ordinal

    return tuple((ordinal(v, "symbol"), v) if isinstance(v, str) else (v, "") for v in t)  # ties: by value


def choice_of(decl, tuples) -> Choice | None:
    """The relation's choice, or None when it has no choice-domain."""
    if not decl.choice:
        return None
    return Choice(decl.choice, tuple(a.name for a in decl.attrs), tuples)
