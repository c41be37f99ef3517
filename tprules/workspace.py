"""One rule set, one program and one shim: what every command works on.

>>> ws = Workspace("facts/megatron-mlp-tp2")                     # doctest: +SKIP
>>> [v.fusion for v in ws.verdicts() if v.legal]                  # doctest: +SKIP
['bias_residual', 'gelu_mm2_1', 'mm1_gelu_0']
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path

import numpy as np

from .datalog.analysis.checked import CheckedRules, load_rules
from .datalog.engine.options import ENGINE_TABLE
from .datalog.facts.columns import isin
from .errors import RuleError
from .program.load import LoadedProgram, check_rule_schema, load_program
from .program.model import Program
from .rulefolder import rules_folder
from .verdicts import Verdict, VerdictTable, judge, places

ENGINES = tuple(ENGINE_TABLE)
VERDICT_RELATIONS = ("legal", "refused")


def make_engine(name: str, checked: CheckedRules, program: LoadedProgram | None = None):
    """The engine that evaluates a checked program: `fast` (numpy columns), `compiled`
    (generated Python joins, tuple at a time) or `pydatalog` (the reference). The fast
    engine shares a loaded program's symbol table, so its encoded facts are reused."""
    if name not in ENGINE_TABLE:
        raise ValueError(f"unknown engine {name}")
    return ENGINE_TABLE[name].make(checked, program)


def load_checked_rules(rules_dir: Path | str | None, include_dirs=()) -> CheckedRules:
    """The rules of a folder (default: the setting's, config.py), checked against SPEC §2's schema;
    `#include` searches `include_dirs` (the command's `-I` folders) after the including file's."""
    checked = load_rules(rules_folder(rules_dir), include_dirs=include_dirs)
    check_rule_schema(checked)
    return checked


class Workspace:
    def __init__(self, program_dir: Path | str, rules_dir: Path | str | None = None, shim: str | None = None,
                 engine: str = "fast", checked: CheckedRules | None = None, one_pass: bool = False,
                 include_dirs=()):
        """`one_pass`: the workspace evaluates once (`check`), and its engine may drop
        what only a later evaluation would reuse. `include_dirs`: the `-I` folders the
        rules' `#include` searches."""
        self.checked = checked if checked is not None else load_checked_rules(rules_dir, include_dirs)
        self.program: LoadedProgram = load_program(Path(program_dir), self.checked, shim)
        self.engine_name = engine
        self.engine = make_engine(engine, self.checked, self.program)
        if one_pass and hasattr(self.engine, "one_pass"):
            self.engine.one_pass = True

    @classmethod
    def from_program(cls, program: LoadedProgram, checked: CheckedRules, engine: str = "fast") -> "Workspace":
        """A workspace over an already loaded program (e.g. one tprules.shim built from a graph)."""
        ws = cls.__new__(cls)
        ws.checked, ws.program, ws.engine_name = checked, program, engine
        ws.engine = make_engine(engine, checked, program)
        return ws

    @property
    def shim(self) -> str:
        return self.program.shim

    @property
    def shim_source(self) -> str:
        """Where the shim is described: `program` (the program's own folder) or `library`."""
        return self.program.shim_source

    def header(self, command: str) -> str:
        """The first line of a command's text output: program, shim (and its source), rules."""
        return f"{command} {self.program.display}   shim {self.program.shim_label}   rules {self.checked.source}"

    @cached_property
    def model(self):
        """Every relation of the rule program, evaluated over this program's facts."""
        return self._evaluate(self.program.facts.relations)

    @cached_property
    def verdict_model(self):
        """Only what `legal` and `refused` need (the fast path for `check`)."""
        if "model" in self.__dict__:
            return self.model
        return self._evaluate(self.program.facts.relations, targets=VERDICT_RELATIONS)

    def _evaluate(self, facts, **options):
        return self.engine.evaluate(facts, **options)

    def verdicts(self) -> list[Verdict]:
        return list(self.verdict_table())

    def verdict_table(self) -> VerdictTable:
        """Every candidate's verdict as columns (what `check` prints from)."""
        return judge(self.verdict_model, self.program.facts)

    def places(self) -> dict[str, str]:
        return places(self.places_model)

    @cached_property
    def tensor_program(self) -> Program:
        """The program as the planner, the cost model, codegen and the runtime read it: one
        view of the loaded columns, built once (`Program.from_workspace` checks its shapes)."""
        return Program(self.program, self.places)

    @property
    def places_model(self):
        """A model that holds the places (`on_chip`, `on_spine`, `is_fold`). Places do not
        depend on candidates, so the model without them answers as well."""
        return self.model if "model" in self.__dict__ else self._base_model

    # -- asking about fusions that member.facts does not hold (the planner's questions) --

    @cached_property
    def _base_model(self):
        """Every relation evaluated with no candidates: what proposed fusions are judged on top of."""
        from .verdicts import PLACE_RELATIONS

        facts = self.program.facts.relations.replacing(member=set())
        return self._evaluate(facts, targets=VERDICT_RELATIONS + PLACE_RELATIONS)

    def _dependent(self, seeds: frozenset[str]) -> frozenset[str]:
        from .datalog.analysis.locality import dependent_relations

        cache = self.__dict__.setdefault("_dependent_cache", {})
        if seeds not in cache:
            cache[seeds] = frozenset().union(*(dependent_relations(self.checked.strata, s) for s in seeds))
        return cache[seeds]

    def _local(self, seeds: frozenset[str]) -> bool:
        from .datalog.analysis.locality import is_candidate_local

        if seeds == {"member"}:
            return self.checked.candidate_local
        return all(is_candidate_local(self.checked.strata, self.checked.decls, s) for s in seeds)

    def refused_rows(self, fusions: np.ndarray, members: np.ndarray) -> np.ndarray | None:
        """`ask` on encoded facts: `fusions` are the proposals' symbol ids and `members` their
        (fusion, statement) rows, in the program's symbol table; whether each is refused.
        None when this engine or these rules cannot answer so (ask with `ask` then): it
        needs the fast engine over the program's symbols and candidate-local rules, so that
        all proposals share one evaluation of the strata that depend on `member`."""
        seeds = frozenset({"member"})
        if not (self.engine.capabilities.incremental and getattr(self.engine, "symbols", None) is self.program.facts.symbols
                and self._local(seeds)):
            return None
        given = _Encoded(self.program.facts.symbols, {"member": members})
        model = self.engine.evaluate(given, targets=("refused", "legal"), base=self._base_model,
                                     only=self._dependent(seeds))
        refused = isin(fusions, model.arrays["refused"][:, 0])
        wrong = np.flatnonzero(refused == isin(fusions, model.arrays["legal"][:, 0]))
        if len(wrong):
            k = int(wrong[0])
            raise RuleError(_both_or_neither(self.program.facts.symbols.names[int(fusions[k])], bool(refused[k])))
        return refused

    def ask(self, proposals: dict[str, tuple[str, ...]], facts: dict[str, set[tuple]] | None = None,
            relation: str = "refused") -> dict[str, tuple[str, ...]]:
        """Judge proposed fusions (id → members): the reasons each is refused, () when legal.

        Each proposal gets the verdict `check` would give it alone. Only the strata that
        depend on `member` are evaluated again, over the proposals' member facts; when the
        rules are candidate-local (see datalog/analysis/locality.py) all proposals share one
        evaluation, else each gets its own.

        `facts` are further inputs keyed by the proposal in their first column (a Python
        base shim's `base_refusal` answers); they replace the program's. `relation` is the
        verdict relation read: `refused` (checked against `legal`, SPEC §3) or another
        relation of the same shape, such as `base_refused`.
        """
        if not proposals:
            return {}
        facts = facts or {}
        seeds = frozenset({"member", *facts})
        if self._local(seeds):
            batches = [proposals]
        else:
            batches = [{f: ms} for f, ms in proposals.items()]
        targets = (relation, "legal") if relation == "refused" else (relation,)
        answers: dict[str, tuple[str, ...]] = {}
        for batch in batches:
            given = {"member": {(f, o) for f, ms in batch.items() for o in ms}}
            for rel, tuples in facts.items():
                given[rel] = set(tuples) if len(batches) == 1 else {t for t in tuples if t[0] in batch}
            if self.engine.capabilities.incremental:
                model = self.engine.evaluate(given, targets=targets, base=self._base_model,
                                             only=self._dependent(seeds))
            else:
                everything = dict(self.program.facts.relations)
                everything.update(given)
                model = self.engine.evaluate(everything, targets=targets)
            reasons: dict[str, list[str]] = {}
            for f, reason in model.tuples(relation):
                reasons.setdefault(f, []).append(reason)
            legal = {f for (f,) in model.tuples("legal")}
            for f in batch:
                found = tuple(sorted(reasons.get(f, ())))
                if relation == "refused" and (f in legal) == bool(found):
                    raise RuleError(_both_or_neither(f, bool(found)))
                answers[f] = found
        return answers


def _both_or_neither(fusion: str, refused: bool) -> str:
    return (f"the rules derive {'both' if refused else 'neither'} legal and refused for proposed fusion {fusion}; "
            "exactly one must hold (SPEC §3)")


class _Encoded(Mapping):
    """Relations given as rows in a symbol table (what the fast engine takes as they are)."""

    def __init__(self, symbols, arrays: dict[str, np.ndarray]):
        self.symbols, self.arrays = symbols, arrays

    def rows(self, rel: str) -> np.ndarray:
        return self.arrays[rel]

    def __getitem__(self, rel: str):
        raise KeyError(rel)  # never decoded: the engine reads `rows`

    def __iter__(self):
        return iter(self.arrays)

    def __len__(self) -> int:
        return len(self.arrays)
