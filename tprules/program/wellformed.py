"""The well-formedness rules of SPEC §2, each one a small checker naming file and line.

`check_wellformed` runs them in order and raises the first problem (exit status 2).
"""

from __future__ import annotations

from collections import defaultdict
from typing import NoReturn

from ..datalog.facts.base import FactBase
from ..datalog.facts.columns import Columns
from ..errors import BadInput, IllFormed, raise_all
from ..ops import Ops
from ..pos import Pos
from . import guards
from .schema import COLLECTIVES, DTYPES, LEVELS, LIMIT_KEYS, PATTERNS, SPEC
from .shimsource import DESCRIBING


def _problem(facts: FactBase, rel: str, tup: tuple, message: str) -> IllFormed:
    pos = facts.where(rel, tup)
    if pos is None:
        files = facts.files.get(rel)
        pos = Pos(files[0], 1) if files else None
    return IllFormed(message, pos)


def _fail(facts: FactBase, rel: str, tup: tuple, message: str) -> NoReturn:
    raise _problem(facts, rel, tup, message)


def _line_of(pos: Pos | None) -> int:
    return pos.line if pos is not None else 0  # a tuple added without a file: first


def check_statements(facts: FactBase) -> None:
    ops: dict[str, str] = {}
    for tup in facts.ordered("op"):
        o, cls = tup
        if o in ops:
            _fail(facts, "op", tup, f"statement {o} has two classes ({ops[o]} and {cls})")
        ops[o] = cls
    registry = {c: n for c, _, n in facts.tuples("registry")}
    for tup in facts.ordered("op"):
        if registry and tup[1] not in registry:
            _fail(facts, "op", tup, f"statement {tup[0]} has class {tup[1]}, which the class registry does not know")
    for rel in ("reads", "writes", "attr", "fold"):
        for tup in facts.ordered(rel):
            if tup[0] not in ops:
                _fail(facts, rel, tup, f"statement {tup[0]} is not declared in op.facts")
    for tup in facts.ordered("member"):
        if tup[1] not in ops:
            _fail(facts, "member", tup, f"candidate fusion {tup[0]} names statement {tup[1]}, "
                                        "which op.facts does not declare")
    for tup in facts.ordered("section"):
        if tup[1] not in ops:
            _fail(facts, "section", tup, f"statement {tup[1]} is not declared in op.facts")
    written: dict[str, list[tuple]] = defaultdict(list)
    writer: dict[str, tuple] = {}
    for tup in facts.ordered("writes"):
        o, t = tup
        written[o].append(tup)
        if t in writer:
            _fail(facts, "writes", tup, f"tensor {t} is written by {writer[t][0]} and by {o} (one writer per tensor)")
        writer[t] = tup
    for tup in facts.ordered("op"):
        outs = written.get(tup[0], [])
        if len(outs) != 1:
            what = "no tensor" if not outs else f"{len(outs)} tensors ({', '.join(t for _, t in outs)})"
            _fail(facts, "op", tup, f"statement {tup[0]} writes {what}; every statement writes exactly one")
    operands: dict[str, dict[int, str]] = defaultdict(dict)
    for tup in facts.ordered("reads"):
        o, i, t = tup
        if i in operands[o]:
            _fail(facts, "reads", tup, f"operand {i} of {o} is given twice ({operands[o][i]} and {t})")
        operands[o][i] = t
    for tup in facts.ordered("op"):
        o, cls = tup
        indexes = sorted(operands.get(o, {}))
        if indexes != list(range(len(indexes))):
            _fail(facts, "op", tup, f"operands of {o} are numbered {', '.join(map(str, indexes))}; "
                                    f"expected 0..{len(indexes) - 1} without gaps")
        want = registry.get(cls)
        if want and len(indexes) != want:
            _fail(facts, "op", tup, f"statement {o} ({cls}) has {len(indexes)} operand(s); "
                                    f"the class registry says {cls} takes {want}")
        if want == 0 and not indexes:
            _fail(facts, "op", tup, f"{o} is a {cls} with no operands")


def check_tensors(facts: FactBase, program: str | None = None) -> dict[str, int | None]:
    """Every bound tensor is declared, placed once or spine, never both. Returns each tensor's chip."""
    declared: dict[str, str] = {}
    for tup in facts.ordered("tensor"):
        t, dtype = tup
        if t in declared:
            _fail(facts, "tensor", tup, f"tensor {t} is declared twice")
        if dtype not in DTYPES:
            _fail(facts, "tensor", tup, f"tensor {t} has dtype {dtype}; expected one of {', '.join(DTYPES)}")
        declared[t] = dtype
    chips = facts.ordered("chips")
    if len(chips) != 1:
        if not chips:
            raise IllFormed("the program has no chips fact (chips.facts: one line, the number of chips)",
                            Pos(f"{program}/chips.facts", 0) if program else None)
        _fail(facts, "chips", chips[1], f"chips is given {len(chips)} times "
                                        f"({', '.join(str(c[0]) for c in chips)}); expected one line, the number of chips")
    n = chips[0][0]
    if n < 1:
        _fail(facts, "chips", chips[0], f"the program runs on {n} chips; expected at least 1")
    home: dict[str, int | None] = {}
    for tup in facts.ordered("placed"):
        t, chip = tup
        if t in home:
            _fail(facts, "placed", tup, f"tensor {t} is placed twice (on chips {home[t]} and {chip})")
        if not 0 <= chip < n:
            _fail(facts, "placed", tup, f"tensor {t} is placed on chip {chip}; chips are 0..{n - 1}")
        home[t] = chip
    for tup in facts.ordered("spine"):
        if tup[0] in home:
            _fail(facts, "spine", tup, f"tensor {tup[0]} is both on the spine and placed on chip {home[tup[0]]}")
        home[tup[0]] = None
    for rel, col in (("reads", 2), ("writes", 1)):
        for tup in facts.ordered(rel):
            t = tup[col]
            if t not in declared:
                _fail(facts, rel, tup, f"tensor {t} of {tup[0]} is not declared in tensor.facts")
            if t not in home:
                _fail(facts, rel, tup, f"tensor {t} of {tup[0]} is neither placed on a chip nor on the spine")
    for tup in facts.ordered("relocated"):
        if not 0 <= tup[1] < n:
            _fail(facts, "relocated", tup, f"section {tup[0]} is relocated to chip {tup[1]}; chips are 0..{n - 1}")
    return home


def check_places(facts: FactBase, home: dict[str, int | None], only_folds: bool = False) -> None:
    """A statement that is not a fold binds one chip's tensors at most; folds are all-reduces."""
    folds = {o for o, _ in facts.tuples("fold")}
    n = next(iter(facts.tuples("chips")))[0]
    seen: dict[str, tuple[int, str]] = {}
    for rel, col in () if only_folds else (("writes", 1), ("reads", 2)):
        for tup in facts.ordered(rel):
            o, t = tup[0], tup[col]
            chip = home[t]
            if o in folds or chip is None:
                continue
            if o in seen and seen[o][0] != chip:
                _fail(facts, rel, tup, f"statement {o} binds {seen[o][1]} (chip {seen[o][0]}) and {t} (chip {chip}); "
                                       "only a fold may bind tensors of two chips")
            seen.setdefault(o, (chip, t))
    ops = dict(facts.tuples("op"))
    by_fold: dict[str, list[tuple]] = defaultdict(list)
    for tup in facts.tuples("reads"):
        if tup[0] in folds:
            by_fold[tup[0]].append(tup)
    for tuples in by_fold.values():  # file order, for the first offending line
        tuples.sort(key=lambda r: _line_of(facts.where("reads", r)))
    output = dict(facts.tuples("writes"))
    kinds = dict(facts.tuples("collective"))
    for tup in facts.ordered("fold"):
        o, kind = tup[0], kinds.get(tup[1], "all_reduce")
        if ops.get(o) != COLLECTIVES[kind]:
            what = "a fold is a sum" if kind == "all_reduce" and tup[1] not in kinds else \
                f"the fold of an {kind} is a {COLLECTIVES[kind]}"
            _fail(facts, "fold", tup, f"fold {o} is of class {ops.get(o)}; {what}")
        chips_read: dict[int, str] = {}
        for r in by_fold[o]:
            chip = home[r[2]]
            if chip is None:
                _fail(facts, "reads", r, f"fold {o} reads spine tensor {r[2]}; a fold reads only chip tensors")
            if chip in chips_read:
                _fail(facts, "reads", r, f"fold {o} reads two operands of chip {chip} ({chips_read[chip]} and {r[2]}); "
                                         "a fold reads one operand per chip")
            if kind == "all_gather" and chip != r[1]:
                _fail(facts, "reads", r, f"all-gather fold {o} reads {r[2]} (chip {chip}) as operand {r[1]}; "
                                         "operand i of an all-gather's fold is chip i's")
            chips_read[chip] = r[2]
        missing = [str(c) for c in range(n) if c not in chips_read]
        if missing:
            _fail(facts, "fold", tup, f"fold {o} reads no operand of chip {', '.join(missing)}; "
                                      f"a fold reads one operand from each chip 0..{n - 1}")
        out = output[o]
        if home[out] is not None:
            _fail(facts, "fold", tup, f"fold {o} writes {out}, a chip tensor; a fold writes a spine tensor")


def check_collectives(facts: FactBase) -> None:
    """A collective has at most one `collective` fact, of a known kind."""
    kinds: dict[str, str] = {}
    for tup in facts.ordered("collective"):
        c, kind = tup
        if kind not in COLLECTIVES:
            _fail(facts, "collective", tup, f"collective {c} is of kind {kind}; the kinds are "
                                            f"{', '.join(COLLECTIVES)}")
        if c in kinds:
            _fail(facts, "collective", tup, f"collective {c} has two collective facts ({kinds[c]} and {kind}); "
                                            "at most one")
        kinds[c] = kind


def check_reduce_scatters(facts: FactBase, home: dict[str, int | None]) -> None:
    """A reduce-scatter's fold output is read by exactly one `slice` per chip, chip k's
    taking block k along the fold's `axis` (whose size N divides) into a chip-k tensor (SPEC §2)."""
    scatters = {c for c, kind in facts.tuples("collective") if kind == "reduce_scatter"}
    if not scatters:
        return
    n = next(iter(facts.tuples("chips")))[0]
    ops = dict(facts.tuples("op"))
    output = dict(facts.tuples("writes"))
    attrs: dict[str, dict[str, tuple]] = defaultdict(dict)
    for tup in facts.tuples("attr"):
        attrs[tup[0]][tup[1]] = tup
    readers: dict[str, list[tuple]] = defaultdict(list)
    for tup in facts.ordered("reads"):
        readers[tup[2]].append(tup)
    shapes = {(tup[0], tup[1]): tup for tup in facts.tuples("shape")}
    rank: dict[str, int] = defaultdict(int)
    for t, a, _ in facts.tuples("shape"):
        rank[t] = max(rank[t], a + 1)
    for tup in facts.ordered("fold"):
        o, c = tup
        if c not in scatters:
            continue
        out = output[o]
        if "axis" not in attrs[o]:
            _fail(facts, "fold", tup, f"fold {o} of reduce-scatter {c} has no attr axis; a reduce-scatter's fold "
                                      "names the axis its sum is scattered along")
        axis_tup = attrs[o]["axis"]
        axis = _int_attr(facts, axis_tup)
        block = None  # a program without shapes (judged, never run) has its blocks unchecked
        if rank[out]:
            axis = axis % rank[out] if -rank[out] <= axis < rank[out] else axis
            if (out, axis) not in shapes:
                _fail(facts, "attr", axis_tup, f"fold {o} of reduce-scatter {c} scatters along axis {axis}, "
                                               f"which {out} does not have")
            size = shapes[(out, axis)][2]
            if size % n:
                _fail(facts, "attr", axis_tup, f"fold {o} of reduce-scatter {c} scatters axis {axis} of {out} "
                                               f"(size {size}) over {n} chips; {n} does not divide {size}")
            block = size // n
        taken: dict[int, str] = {}
        for r in readers[out]:
            s = r[0]
            if ops.get(s) != Ops.SLICE:
                _fail(facts, "reads", r, f"{out}, the sum of reduce-scatter {c}, is read by {s} (a {ops.get(s)}); "
                                         "it is read only by one slice per chip")
            chip = home[output[s]]
            if chip is None:
                _fail(facts, "writes", (s, output[s]), f"slice {s} of reduce-scatter {c} writes {output[s]}, a spine "
                                                       "tensor; each chip's slice writes a tensor of that chip")
            if chip in taken:
                _fail(facts, "reads", r, f"{out}, the sum of reduce-scatter {c}, is read by a second slice of chip "
                                         f"{chip} ({s}, after {taken[chip]}); it is read by one slice per chip")
            a = attrs[s]
            got = tuple(_int_attr(facts, a[k]) if k in a else None for k in ("axis", "start", "end", "step"))
            slice_axis = got[0] % rank[out] if got[0] is not None and rank[out] else got[0]
            want = (chip * block, (chip + 1) * block) if block is not None else got[1:3]
            if slice_axis != axis or got[1:3] != want or got[3] not in (None, 1):
                where = a.get("start") or a.get("axis") or r
                rel = "reads" if where is r else "attr"
                _fail(facts, rel, where, f"slice {s} takes {got[1]}:{got[2]} of axis {slice_axis} of {out} into "
                                         f"{output[s]} (chip {chip}); chip {chip}'s slice of reduce-scatter {c} takes "
                                         f"block {chip} of {n}, {want[0]}:{want[1]} of axis {axis}")
            taken[chip] = s
        missing = [str(k) for k in range(n) if k not in taken]
        if missing:
            _fail(facts, "fold", tup, f"{out}, the sum of reduce-scatter {c}, is read by no slice of chip "
                                      f"{', '.join(missing)}; it is read by one slice per chip 0..{n - 1}")


def _int_attr(facts: FactBase, tup: tuple) -> int:
    try:
        return int(tup[2])
    except ValueError:
        _fail(facts, "attr", tup, f"attr {tup[1]} of {tup[0]} is {tup[2]}; expected an integer")


def check_sections(facts: FactBase) -> None:
    relocated: dict[str, int] = {}
    for tup in facts.ordered("relocated"):
        if tup[0] in relocated:
            _fail(facts, "relocated", tup, f"section {tup[0]} is relocated twice (to chips {relocated[tup[0]]} "
                                           f"and {tup[1]})")
        relocated[tup[0]] = tup[1]
    where: dict[str, str] = {}
    for tup in facts.ordered("section"):
        s, o = tup
        if s in relocated:
            if o in where and where[o] != s:
                _fail(facts, "section", tup, f"statement {o} is in two relocated sections ({where[o]} and {s})")
            where[o] = s


def check_candidates(facts: FactBase) -> None:
    members: dict[str, list[tuple]] = defaultdict(list)
    for tup in facts.ordered("member"):
        members[tup[0]].append(tup)
    for f, tuples in members.items():
        if len(tuples) < 2:
            _fail(facts, "member", tuples[0], f"candidate fusion {f} has one member; a fusion needs at least two")


def check_shims(facts: FactBase, shadowed: frozenset[str] = frozenset()) -> None:
    """Every shim answers `supports` for every registry class exactly once; every line of a
    shim's description names a declared shim, a known class, level and limit key.

    `shadowed` are the shims whose library description the program's own replaces
    (program/shimsource.py): a gap in one is named at the program's description."""
    shims = [s for (s,) in facts.ordered("shim")]
    classes = [c for c, _, _ in facts.ordered("registry")]
    answers: dict[tuple[str, str], tuple] = {}
    for tup in facts.ordered("supports"):
        s, cls, level = tup
        if s not in shims:
            _fail(facts, "supports", tup, f"supports names shim {s}, which shim.facts does not declare")
        if cls not in classes:
            _fail(facts, "supports", tup, f"shim {s} answers class {cls}, which the class registry does not know")
        if level not in LEVELS:
            _fail(facts, "supports", tup, f"shim {s} answers class {cls} with level {level}; "
                                          f"expected {', '.join(LEVELS[:-1])} or {LEVELS[-1]}")
        if (s, cls) in answers:  # named at the first line: a program's own facts come before the library's
            again = facts.where("supports", tup)
            _fail(facts, "supports", answers[(s, cls)], f"shim {s} answers class {cls} twice (again at {again}); "
                                                        "a shim answers each class exactly once")
        answers[(s, cls)] = tup
    for tup in facts.ordered("limit"):
        if tup[0] not in shims:
            _fail(facts, "limit", tup, f"limit names shim {tup[0]}, which shim.facts does not declare")
        if tup[1] not in LIMIT_KEYS:
            _fail(facts, "limit", tup, f"shim {tup[0]} has a limit {tup[1]}, which is not a limit key; "
                                       f"expected {', '.join(LIMIT_KEYS[:-1])} or {LIMIT_KEYS[-1]}")
        if tup[1] == "min_collective_block" and tup[2] < 1:
            _fail(facts, "limit", tup, f"shim {tup[0]} has min_collective_block {tup[2]}; expected a positive "
                                       "number (the narrowest block, in elements, a collective kernel takes)")
    for tup in facts.ordered("collective_kernel"):
        if tup[0] not in shims:
            _fail(facts, "collective_kernel", tup, f"collective_kernel names shim {tup[0]}, which shim.facts "
                                                   "does not declare")
        if tup[1] not in PATTERNS:
            _fail(facts, "collective_kernel", tup, f"shim {tup[0]} declares collective kernel {tup[1]}, which is "
                                                   f"not a pattern; expected {', '.join(list(PATTERNS)[:-1])} "
                                                   f"or {list(PATTERNS)[-1]}")
    for tup in facts.ordered("quantized"):
        if tup[0] not in shims:
            _fail(facts, "quantized", tup, f"quantized names shim {tup[0]}, which shim.facts does not declare")
    for tup in facts.ordered("views"):
        if tup[0] not in shims:
            _fail(facts, "views", tup, f"views names shim {tup[0]}, which shim.facts does not declare")
        if tup[1] not in classes:
            _fail(facts, "views", tup, f"shim {tup[0]} lowers class {tup[1]} as a view, which the class registry "
                                       "does not know")
    check_shims_total(facts, shims, classes, answers, shadowed)


def check_shims_total(facts: FactBase, shims: list[str], classes: list[str], answers: dict,
                      shadowed: frozenset[str]) -> None:
    """Every declared shim answers every registry class (SPEC §2's totality rule): every
    class a shim misses is named in the one run, a line each."""
    problems: list[BadInput] = []
    for s in shims:
        missing = [c for c in classes if (s, c) not in answers]
        if not missing:
            continue
        if s in shadowed:  # the program's description stands alone: name its first line
            rel, tup = next((rel, t) for rel in DESCRIBING for t in facts.ordered(rel)
                            if t[0] == s)
            problems += [_problem(facts, rel, tup, f"shim {s} does not answer class {c} of the class registry: add a "
                                  f"line {_line(s, c)} to this folder's supports.facts (its description of the shim "
                                  "shadows the library's as a whole)") for c in missing]
        elif len(missing) == len(classes):
            problems.append(_problem(facts, "shim", (s,), f"shim {s} is described nowhere: neither this folder's "
                                     "supports.facts nor the shim library's answers a class for it"))
        else:
            problems += [_problem(facts, "shim", (s,), f"shim {s} does not answer class {c} of the class registry: "
                                  f"add a line {_line(s, c)} to supports.facts") for c in missing]
    raise_all(problems, in_order=True)  # shim by shim, in registry order


def _line(shim: str, cls: str) -> str:
    return f"'{shim}<TAB>{cls}<TAB>fused|alone|none'"


def missing_answers(facts: FactBase) -> dict[str, list[str]]:
    """Each declared shim's registry classes that no supports line answers, in registry order."""
    classes = [c for c, _, _ in facts.ordered("registry")]
    answered = {(s, c) for s, c, _ in facts.ordered("supports")}
    return {s: [c for c in classes if (s, c) not in answered] for (s,) in facts.ordered("shim")}


def check_wellformed(facts: FactBase, shims_only: bool = False, program: str | None = None,
                     columns: Columns | None = None, shadowed: frozenset[str] = frozenset()) -> None:
    """Raise `IllFormed` for the first violation of SPEC §2, naming its file and line.
    `program` is the program folder as shown, for facts missing altogether. `columns`
    are the facts encoded (made here when not given): the common case is settled on them
    (guards.py) and only a program that fails a guard is walked line by line."""
    check_shims(facts, shadowed)
    if shims_only:
        return
    if columns is None:
        columns = Columns(facts, {rel: r.types for rel, r in SPEC.items()})
    if not guards.statements_look_fine(columns):
        check_statements(facts)
    if not guards.tensors_look_fine(columns):
        check_tensors(facts, program)
    check_collectives(facts)
    one_chip = guards.non_folds_bind_one_chip(columns)
    if not (one_chip and guards.folds_look_fine(columns)):
        home: dict[str, int | None] = dict(facts.tuples("placed"))
        home.update(dict.fromkeys(t for (t,) in facts.tuples("spine")))
        check_places(facts, home, only_folds=one_chip)
    if any(kind == "reduce_scatter" for _, kind in facts.tuples("collective")):
        home = dict(facts.tuples("placed"))
        home.update(dict.fromkeys(t for (t,) in facts.tuples("spine")))
        check_reduce_scatters(facts, home)
    check_sections(facts)
    if not guards.candidates_look_fine(columns):
        check_candidates(facts)
