"""Load one program for judging: its facts, the shim library, the chosen shim, the computed inputs."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from ..config import DEFAULT_SHIM, shim_library_dir
from ..datalog.analysis.checked import CheckedRules
from ..datalog.facts.base import FactBase, load_fact_dir
from ..datalog.facts.columns import Columns, Symbols
from ..errors import FactError, RuleError, UsageError
from ..paths import display_path
from ..pos import Pos
from .order import topological_ids
from .schema import COMPUTED, PROGRAM, SHIM, SPEC
from .shimsource import LIBRARY, shadow
from .wellformed import check_wellformed


@dataclass
class LoadedProgram:
    """A program's facts merged with the shim library, checked, with `target` and `topo` added."""

    directory: Path
    display: str
    facts: FactBase
    shim: str
    order_ids: np.ndarray  # statements in topological order, program order first, as the facts' symbol ids
    columns: Columns | None = None  # the SPEC relations encoded, shared with the fast engine
    shim_sources: dict[str, str] | None = None  # shim → "program" | "library" | "graph" (shimsource.py)

    @cached_property
    def order(self) -> list[str]:
        """The statements in topological order, by name."""
        names = self.facts.symbols.names
        return [names[i] for i in self.order_ids.tolist()]

    @property
    def shim_source(self) -> str:
        """Where the chosen shim is described: `program` (its own folder), `library` or `graph`."""
        return (self.shim_sources or {}).get(self.shim, LIBRARY)

    @property
    def shim_label(self) -> str:
        """The chosen shim and where it comes from, as headers show it: `cuda-lane:h100:Bf16 (program)`."""
        return f"{self.shim} ({self.shim_source})"

    @cached_property
    def position(self) -> dict[str, int]:
        return {o: i for i, o in enumerate(self.order)}


def check_rule_schema(checked: CheckedRules) -> None:
    """A rule file's declaration of a SPEC §2 relation must match SPEC §2."""
    problems = []
    for name, decl in checked.decls.items():
        spec = SPEC.get(name)
        if spec is not None and decl.types != spec.types:
            want = ", ".join(f"{c}: {t}" for c, t in spec.columns)
            have = ", ".join(f"{a.name}: {a.type}" for a in decl.attrs)
            problems.append(RuleError(f"{name} is a SPEC §2 relation: expected .decl {name}({want}), "
                                      f"found .decl {name}({have})", decl.pos, "schema"))
    for name in checked.inputs:
        if name not in SPEC and name not in checked.decls:
            problems.append(RuleError(f".input of undeclared relation {name}"))
    from ..datalog.analysis.checked import derived_inputs

    problems.extend(derived_inputs(checked))
    from ..errors import raise_all

    raise_all(problems)


def fact_schema(checked: CheckedRules) -> dict[str, tuple[str, ...]]:
    """Types of every relation a program folder may hold."""
    schema = {name: rel.types for name, rel in {**PROGRAM, **SHIM}.items()}
    for name in checked.inputs:
        if name not in SPEC:
            schema[name] = checked.decls[name].types
    return schema


def choose_shim(facts: FactBase, own_shims: set[tuple], requested: str | None) -> str:
    """--shim if given; else the program's own shim when it declares exactly one; else the default."""
    known = [s for (s,) in facts.ordered("shim")]
    if requested is not None:
        if requested not in known:
            raise UsageError(f"--shim {requested}: no such shim in shim.facts (the shim library's or the "
                             f"program's); known shims: {', '.join(known)}")
        return requested
    if len(own_shims) == 1:
        return next(iter(own_shims))[0]
    if DEFAULT_SHIM not in known:
        raise UsageError(f"no --shim given and the default shim {DEFAULT_SHIM} is not in the shim library")
    return DEFAULT_SHIM


def load_program(directory: Path, checked: CheckedRules, shim: str | None = None,
                 library: Path | None = None) -> LoadedProgram:
    directory = Path(directory)
    display = display_path(directory)
    for name in COMPUTED:
        if (directory / f"{name}.facts").exists():
            raise FactError(f"{name} is computed by tprules; remove this file (it is written by `tprules export`)",
                            Pos(f"{display}/{name}.facts", 1))
    schema = fact_schema(checked)
    library = Path(library) if library is not None else shim_library_dir(checked.source)
    symbols = Symbols()
    lib = load_fact_dir(library, schema, strict=False, symbols=symbols) if library.is_dir() else FactBase(symbols=symbols)
    own = load_fact_dir(directory, schema, display_root=display, symbols=symbols)
    own_shims = set(own.tuples("shim"))
    sources, shadowed = shadow(own, lib)  # the program's description of a shim shadows the library's
    return prepare_program(own.absorb(lib), own_shims, shim, directory, display, shim_sources=sources,
                           shadowed=shadowed)


def prepare_program(facts: FactBase, own_shims: set[tuple], shim: str | None, directory: Path, display: str,
                    computed: dict[str, set[tuple]] | None = None,
                    shim_sources: dict[str, str] | None = None,
                    shadowed: frozenset[str] = frozenset()) -> LoadedProgram:
    """Check merged facts and add the computed inputs (`target`, `topo`, and any `computed`
    relations, e.g. a Python base shim's answers). `own_shims` are the shims the program
    itself declares, which choose the shim when `shim` is None; `shim_sources` says where
    each shim is described and `shadowed` which library shims the program's own replace
    (program/shimsource.py). Used by `load_program` and by tprules.shim."""
    columns = Columns(facts, {rel: r.types for rel, r in SPEC.items()})
    check_wellformed(facts, program=display, columns=columns, shadowed=shadowed)
    chosen = choose_shim(facts, own_shims, shim)
    ids = topological_ids(facts, columns)
    facts.extend("target", [(chosen,)], types=COMPUTED["target"].types)
    topo = np.stack([ids, np.arange(len(ids), dtype=ids.dtype)], axis=1)
    facts.append("topo", topo.astype(np.int32) if len(facts.symbols.names) <= np.iinfo(np.int32).max else topo,
                  types=COMPUTED["topo"].types)  # int32 as the facts read (datalog/facts/scan.py)
    for rel, tuples in (computed or {}).items():
        facts.extend(rel, tuples, types=COMPUTED[rel].types if rel in COMPUTED else None)
    return LoadedProgram(directory, display, facts, chosen, ids, columns, shim_sources)
