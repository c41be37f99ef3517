"""Where a shim's description comes from: the program's own folder or the shim library.

A program folder is self-contained (SPEC §2): a shim that the program's own
`supports.facts`, `limit.facts`, `quantized.facts`, `views.facts` or `collective_kernel.facts`
names is described by the program, and that description shadows the library's shim of the same
name as a whole. Nothing is merged line by line: the library's `supports`, `limit`, `quantized`,
`views` and `collective_kernel` lines for such a
shim are dropped before the two fact bases meet, so the totality rule (every registry
class answered exactly once) and the limits apply to the program's description on its
own. `shim.facts` only names shims: a library shim that the program's `shim.facts` names
is chosen, not described, and stays the library's.

>>> from tprules.datalog.facts.base import FactBase
>>> own, lib = FactBase(), FactBase()
>>> own.add("shim", ("gpu",)); own.add("shim", ("cpu",))
>>> own.add("limit", ("gpu", "max_members", 4))
>>> lib.add("shim", ("gpu",)); lib.add("shim", ("cpu",))
>>> lib.add("limit", ("gpu", "max_members", 16))
>>> sources, shadowed = shadow(own, lib)
>>> sources, shadowed
({'gpu': 'program', 'cpu': 'library'}, frozenset({'gpu'}))
>>> sorted(lib.tuples("limit")), sorted(lib.tuples("shim"))
([], [('cpu',), ('gpu',)])
"""

from __future__ import annotations

from ..datalog.facts.base import FactBase

# The relations that make up a shim, keyed by the shim in their first column; all but
# `shim` (which only names it) describe it.
SHIM_RELATIONS = ("shim", "supports", "limit", "quantized", "views", "collective_kernel")
DESCRIBING = SHIM_RELATIONS[1:]

PROGRAM = "program"  # the shim is described by the program's own facts
LIBRARY = "library"  # the shim comes from the shim library (facts/shims/)
GRAPH = "graph"  # the shim's facts were handed over through the Shim API


def described(facts: FactBase) -> list[str]:
    """The shims these facts describe, in shim.facts order, then in the order first named."""
    names = {tup[0] for rel in DESCRIBING for tup in facts.tuples(rel)}
    order = [s for (s,) in facts.ordered("shim")] + [t[0] for rel in DESCRIBING for t in facts.ordered(rel)]
    return [s for s in dict.fromkeys(order) if s in names]


def shadow(own: FactBase, library: FactBase) -> tuple[dict[str, str], frozenset[str]]:
    """Drop from `library` every description line of a shim that `own` describes.

    Returns each shim's source (the program's shims first, then the library's) and the
    shims whose library description was shadowed."""
    mine = described(own)
    drop = set(mine)
    shadowed = frozenset(drop & set(described(library)))
    for rel in DESCRIBING:
        if any(t[0] in drop for t in library.tuples(rel)):
            library.keep(rel, lambda t: t[0] not in drop)
    sources = dict.fromkeys(mine, PROGRAM)
    for rel in SHIM_RELATIONS:
        for tup in library.ordered(rel):
            sources.setdefault(tup[0], LIBRARY)
    return sources, shadowed
