"""The checked rules: what the engines compile. Built from rule files, cached by content."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ...config import cache_dir
from ...errors import RuleError, raise_all
from ...pos import Pos
from ...version import __version__
from ..lang import ast
from .strata import Stratum

try:  # CPython's own BLAKE2: `hashlib` loads OpenSSL's libcrypto first (3.5 MiB, 3 ms in every check)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python without the builtin module
    from hashlib import blake2b


@dataclass(frozen=True)
class CheckedRules:
    """Rules that passed every static check, with their strata in evaluation order."""

    program: ast.RuleSource
    decls: dict[str, ast.Decl] = field(hash=False)
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    strata: tuple[Stratum, ...]
    candidate_local: bool
    source: str = ""  # the rules folder (or text) it came from

    def rules_for(self, rel: str) -> list[ast.Rule]:
        return [r for r in self.program.rules if r.head.rel == rel]

    @property
    def derived(self) -> tuple[str, ...]:
        return tuple(rel for s in self.strata for rel in s.relations)


def check_rules(program: ast.RuleSource, source: str = "") -> CheckedRules:
    """Run every static check; raise all problems together, or return the checked program
    (its rules with their types written in; its strata hold the rules the engines evaluate,
    see normalise.py)."""
    from ...deep import deep

    return deep(_check_rules, program, source)


def _check_rules(program: ast.RuleSource, source: str) -> CheckedRules:
    # The checker's passes, imported here: a command whose rules come from the cache
    # (check, plan, why at model size) never loads them.
    from .checks import check_program_items
    from .components import expand_components
    from .locality import is_candidate_local
    from .magic import magic_transform
    from .normalise import evaluation_rules
    from .records import desugar_records
    from .strata import stratify, with_subsumptions
    from .subsumption import expand_subsumptions, not_of_the_stand_ins, split_subsumptions, stand_in
    from .witnesses import expand_witnesses

    program = expand_components(program)  # before every check: they see plain relations
    program = expand_subsumptions(program)  # subsumptive clauses as rules finding dominated tuples
    shape_problems: list[RuleError] = []
    program = desugar_records(program, shape_problems)  # and plain values (records are symbols)
    raise_all(shape_problems)
    program = expand_witnesses(program)  # a min's or max's witnesses, in plain Datalog
    program = magic_transform(program)  # .pragma "magic-transform": magic sets
    decls, program, problems = check_program_items(program)
    problems = not_of_the_stand_ins(problems, program)
    strata: list[Stratum] = []
    if not problems:
        deriving, deleting = split_subsumptions(evaluation_rules(program, decls))
        strata, strata_problems = stratify(deriving + tuple(map(stand_in, deleting)))
        strata = with_subsumptions(strata, deleting)
        problems.extend(strata_problems)
        if deleting:  # the checked program's rules derive; the deleting ones live in their strata
            program = ast.RuleSource(tuple(i for i in program.items if not (isinstance(i, ast.Rule)
                                                                         and i.dominating is not None)))
    raise_all(problems)
    inputs = tuple(dict.fromkeys(n for d in program.directives if d.kind == "input" for n in d.names))
    outputs = tuple(dict.fromkeys(n for d in program.directives if d.kind == "output" for n in d.names))
    return CheckedRules(
        program, decls, inputs, outputs, tuple(strata), is_candidate_local(strata, decls), source
    )


@lru_cache(maxsize=1)
def _checker_fingerprint() -> bytes:
    """The parser's and checker's own code: a cached check made by other code is not reused."""
    digest = blake2b(__version__.encode(), digest_size=32)
    package = Path(__file__).resolve().parent.parent
    for folder in ("lang", "analysis"):
        for path in sorted((package / folder).iterdir()):
            if path.suffix in (".py", ".lark"):
                digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.digest()


def _fingerprint(files: list[tuple[str, bytes]]) -> str:
    digest = blake2b(_checker_fingerprint(), digest_size=32)
    for name, content in files:
        digest.update(name.encode() + b"\0" + content + b"\0")
    return digest.hexdigest()[:24]


def load_rules(rules_dir: Path, use_cache: bool = True, include_dirs=()) -> CheckedRules:
    """Parse and check every `.dl` file of a folder; reuse the cached result when no file changed.

    When a file holds a preprocessor directive, the folder is one translation unit, its
    files in name order, as if one file included each (a macro defined in one file holds
    in the next; include guards and `#pragma once` work across them). `#include` looks in
    the including file's folder, then in `include_dirs` (a command's `-I` folders, passed down).
    """
    from ...paths import display_path
    from ..lang.preprocess import needs_preprocessor

    rules_dir = Path(rules_dir)
    if not rules_dir.is_dir():
        raise RuleError(f"no such rules folder: {rules_dir}")
    paths = sorted(rules_dir.glob("*.dl"))
    if not paths:
        raise RuleError(f"no .dl rule files in {rules_dir}")
    try:
        files = [(display_path(p), p.read_bytes()) for p in paths]
    except OSError as err:
        raise RuleError(f"cannot read it: {err.strerror}", Pos(display_path(err.filename or rules_dir), 0)) from None
    texts = []
    for name, content in files:
        try:
            texts.append((name, content.decode()))
        except UnicodeDecodeError as err:
            raise RuleError(f"rule file is not UTF-8 text: {err}", Pos(name, 1, 0)) from None
    preprocessed = any(needs_preprocessor(text) for _, text in texts)
    use_cache = use_cache and not preprocessed  # an included file is not part of the fingerprint
    cached = cache_dir() / "rules" / f"{_fingerprint([(display_path(rules_dir), b'')] + files)}.pickle"
    if use_cache and cached.exists():
        try:
            return pickle.loads(cached.read_bytes())
        except Exception:  # a stale or torn cache entry is rebuilt
            pass
    from ..lang.parser import parse_text

    items: list[ast.Item] = []
    if preprocessed:
        unit = "".join(f'#include "{p.resolve()}"\n' for p in paths)
        items.extend(parse_text(unit, str(rules_dir / "<folder>"), tuple(map(Path, include_dirs))).items)
    else:
        for name, text in texts:
            items.extend(parse_text(text, name).items)
    checked = check_rules(ast.RuleSource(tuple(items)), display_path(rules_dir))
    if use_cache:
        _store(cached, pickle.dumps(checked))
    return checked


def _store(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{id(data)}")
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError:
        pass  # caching is an optimisation only


def derived_inputs(checked: CheckedRules) -> list[RuleError]:
    """An .input relation that a rule also derives (Soufflé allows it; a TP rule folder does not)."""
    problems = []
    for rel in checked.inputs:
        rules = [r for r in checked.program.rules if r.head.rel == rel and not r.is_fact]
        if rules:
            where = next(d.pos for d in checked.program.directives if d.kind == "input" and rel in d.names)
            problems.append(RuleError(f"{rel} is an .input relation (at {where}) but this rule derives it; "
                                      "an input gets its tuples from fact files (and facts in rule files) only",
                                      rules[0].pos))
    return problems
