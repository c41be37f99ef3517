"""One rule set, one program and one shim: what every command works on.

>>> ws = Workspace("facts/megatron-mlp-tp2")                     # doctest: +SKIP
>>> [v.fusion for v in ws.verdicts() if v.legal]                  # doctest: +SKIP
['bias_residual', 'gelu_mm2_1', 'mm1_gelu_0']
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from .analysis.program import CheckedProgram, load_rules
from .config import default_rules_dir
from .program.load import LoadedProgram, check_rule_schema, load_program
from .verdicts import Verdict, judge, places

ENGINES = ("fast", "compiled", "pydatalog")
VERDICT_RELATIONS = ("legal", "refused")


def make_engine(name: str, checked: CheckedProgram):
    """The engine that evaluates a checked program: `fast` (numpy columns), `compiled`
    (generated Python joins, tuple at a time) or `pydatalog` (the reference)."""
    if name == "fast":
        from .engine.columnar import ColumnarEngine

        return ColumnarEngine(checked)
    if name == "compiled":
        from .engine.evaluate import Evaluator

        return Evaluator(checked)
    if name == "pydatalog":
        from .engine.pydatalog_backend import PyDatalogEngine

        return PyDatalogEngine(checked)
    raise ValueError(f"unknown engine {name}")


def load_checked_rules(rules_dir: Path | None) -> CheckedProgram:
    checked = load_rules(Path(rules_dir) if rules_dir is not None else default_rules_dir())
    check_rule_schema(checked)
    return checked


class Workspace:
    def __init__(self, program_dir: Path | str, rules_dir: Path | str | None = None, shim: str | None = None,
                 engine: str = "fast", checked: CheckedProgram | None = None):
        self.checked = checked if checked is not None else load_checked_rules(rules_dir)
        self.program: LoadedProgram = load_program(Path(program_dir), self.checked, shim)
        self.engine_name = engine
        self.engine = make_engine(engine, self.checked)

    @property
    def shim(self) -> str:
        return self.program.shim

    @cached_property
    def model(self):
        """Every relation of the rule program, evaluated over this program's facts."""
        return self.engine.evaluate(self.program.facts.relations)

    @cached_property
    def verdict_model(self):
        """Only what `legal` and `refused` need (the fast path for `check`)."""
        if "model" in self.__dict__:
            return self.model
        return self.engine.evaluate(self.program.facts.relations, targets=VERDICT_RELATIONS)

    def verdicts(self) -> list[Verdict]:
        return judge(self.verdict_model, self.program.facts, self.program.position)

    def places(self) -> dict[str, str]:
        return places(self.model)

    # -- asking about fusions that member.facts does not hold (the planner's questions) --

    @cached_property
    def _base_model(self):
        """Every relation evaluated with no candidates: what proposed fusions are judged on top of."""
        facts = dict(self.program.facts.relations)
        facts["member"] = set()
        return self.engine.evaluate(facts, targets=VERDICT_RELATIONS)

    @cached_property
    def _dependent(self) -> frozenset[str]:
        from .analysis.locality import dependent_relations

        return dependent_relations(self.checked.strata, "member")

    def ask(self, proposals: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        """Judge proposed fusions (id → members): the reasons each is refused, () when legal.

        Each proposal gets the verdict `check` would give it alone. Only the strata that
        depend on `member` are evaluated again, over the proposals' member facts; when the
        rules are candidate-local (see analysis/locality.py) all proposals share one
        evaluation, else each gets its own.
        """
        if not proposals:
            return {}
        batches = [proposals] if self.checked.candidate_local else [{f: ms} for f, ms in proposals.items()]
        answers: dict[str, tuple[str, ...]] = {}
        for batch in batches:
            member = {(f, o) for f, ms in batch.items() for o in ms}
            if self.engine_name in ("fast", "compiled"):
                model = self.engine.evaluate({"member": member}, targets=VERDICT_RELATIONS,
                                             base=self._base_model, only=self._dependent)
            else:
                facts = dict(self.program.facts.relations)
                facts["member"] = member
                model = self.engine.evaluate(facts, targets=VERDICT_RELATIONS)
            legal = {f for (f,) in model.tuples("legal")}
            reasons: dict[str, list[str]] = {}
            for f, reason in model.tuples("refused"):
                reasons.setdefault(f, []).append(reason)
            for f in batch:
                found = tuple(sorted(reasons.get(f, ())))
                if (f in legal) == bool(found):
                    from .errors import RuleError

                    raise RuleError(f"the rules derive {'both' if found else 'neither'} legal and refused "
                                    f"for proposed fusion {f}; exactly one must hold (SPEC §3)")
                answers[f] = found
        return answers
