"""The tree renderer on hand-built explanations: every node kind, colour off, a fixed width."""

from __future__ import annotations

import io

from rich.console import Console

from tprules.explain.proof import (
    AggregateValue,
    Attempt,
    Checked,
    Computed,
    Derived,
    Elided,
    Explanation,
    Fact,
    Fusion,
    Shown,
    Unproven,
    WhyNot,
)
from tprules.explain.render import Renderer, to_text
from tprules.pos import Pos

FACT = Fact('member("f1", "mm_0")', "member", ("f1", "mm_0"), Pos("p/member.facts", 3))
RULE_FACT = Fact('flag("x")', "flag", ("x",), Pos("rules/extra.dl", 7, 1), in_rules=True)
PROOF = Derived(
    'refused("f1", "too_many_members")', "refused", ("f1", "too_many_members"), Pos("rules/base.dl", 16, 1),
    'refused(F, "too_many_members") :- member(F, O), target(S), !is_fold(O), N = count : { member(F, _) }, N > 1.',
    (("F", "f1"), ("O", "mm_0"), ("S", "shim"), ("N", 3)),
    (FACT, Computed('target("shim")', "target", ("shim",), "the shim asked"),
     Checked("negation", '!is_fold("mm_0")', "no such tuple"),
     AggregateValue('count : { member("f1", _) }', 3, (FACT, RULE_FACT), more=1),
     Checked("comparison", "3 > 1", "true"),
     Elided(4, 'on_chip("mm_0", 0)', "proof"),
     Shown('candidate("f1")', Pos("rules/base.dl", 5, 1)),
     Unproven('odd("f1")', "no rule instance derives it")))

WIDE = """\
refused("f1", "too_many_members")  rules/base.dl:16
refused(F, "too_many_members") :- member(F, O), target(S), !is_fold(O), N = count : { member(F, _) }, N > 1.
with F = "f1", O = "mm_0", S = "shim", N = 3
├── member("f1", "mm_0")  fact p/member.facts:3
├── target("shim")  computed by tprules: the shim asked
├── !is_fold("mm_0")  no such tuple
├── count : { member("f1", _) } = 3
│   ├── member("f1", "mm_0")  fact p/member.facts:3
│   ├── flag("x")  fact in rules rules/extra.dl:7
│   └── ... and 1 more
├── 3 > 1  true
├── on_chip("mm_0", 0)  [proof #4 elided: subproof 4]
├── candidate("f1")  rules/base.dl:5  (proved above)
└── odd("f1")  no rule instance derives it
"""

NARROW_ASCII = """\
refused("f1", "too_many_members")  rules/base.dl:16
refused(F, "too_many_members") :- member(F, O), target(S),
!is_fold(O), N = count : { member(F, _) }, N > 1.
with F = "f1", O = "mm_0", S = "shim", N = 3
+-- member("f1", "mm_0")  fact p/member.facts:3
+-- target("shim")  computed by tprules: the shim asked
+-- !is_fold("mm_0")  no such tuple
+-- count : { member("f1", _) } = 3
|   +-- member("f1", "mm_0")  fact p/member.facts:3
|   +-- flag("x")  fact in rules rules/extra.dl:7
|   `-- ... and 1 more
+-- 3 > 1  true
+-- on_chip("mm_0", 0)  [proof #4 elided: --subproof 4]
+-- candidate("f1")  rules/base.dl:5  (proved above)
`-- odd("f1")  no rule instance derives it
"""

WHY_NOT = WhyNot('legal("f1")', "legal", "1 rule could derive it; none holds", (
    Attempt(Pos("rules/tp.dl", 24, 1), "legal(F) :- candidate(F), !refused(F, _).", (("F", "f1"),),
            '!refused("f1", _)', "blocked by 9 tuples", (Elided(1, 'refused("f1", "cycle")', "proof"),), 8),
    Attempt(Pos("rules/tp.dl", 30, 1), "legal(F) :- waived(F).", (("F", "f1"),), 'waived("f1")', "no tuple matches",
            nested=WhyNot('waived("f1")', "waived", "waived is an input relation: no line of p/waived.facts matches")),
))

WHY_NOT_TEXT = """\
fusion f1: mm_0 (chip:0), add_0 (spine); refused: chip_and_spine, cycle
legal("f1") does not hold: 1 rule could derive it; none holds
├── rules/tp.dl:24  legal(F) :- candidate(F), !refused(F, _).
│   with F = "f1"
│   fails at !refused("f1", _): blocked by 9 tuples
│   ├── refused("f1", "cycle")  [proof #1 elided: subproof 1]
│   └── ... and 8 more
└── rules/tp.dl:30  legal(F) :- waived(F).
    with F = "f1"
    fails at waived("f1"): no tuple matches
    └── waived("f1") does not hold: waived is an input relation: no line of p/waived.facts matches
"""


def test_every_proof_node_kind_at_a_wide_width():
    assert to_text(Renderer().proof(PROOF), width=200) == WIDE


def test_narrow_width_wraps_and_ascii_guides():
    assert to_text(Renderer("--subproof {id}").proof(PROOF), width=60, ascii=True) == NARROW_ASCII


def test_why_not_with_blocking_tuples_and_a_nested_why_not():
    answer = Explanation('legal("f1")', False, why_not=WHY_NOT,
                         fusions=(Fusion("f1", (("mm_0", "chip:0"), ("add_0", "spine")), ("chip_and_spine", "cycle")),))
    assert to_text(Renderer().explanation(answer), width=200) == WHY_NOT_TEXT


def test_many_matches_say_how_many_are_shown():
    one = Explanation('member("f1", O)', True, (FACT,), more=4)
    assert to_text(Renderer().explanation(one), width=100).splitlines()[0] == \
        '5 tuples match member("f1", O); the first is shown'
    two = Explanation('member("f1", O)', True, (FACT, FACT), more=1)
    assert to_text(Renderer().explanation(two), width=100).splitlines()[0] == \
        '3 tuples match member("f1", O); the first 2 are shown'
    alone = Explanation('member("f1", O)', True, (FACT,))
    assert to_text(Renderer().explanation(alone), width=100).splitlines()[0] == FACT.text + "  fact p/member.facts:3"


def test_colour_only_on_a_terminal():
    coloured, plain = io.StringIO(), io.StringIO()
    Console(file=coloured, force_terminal=True, color_system="standard", width=200).print(Renderer().proof(PROOF))
    Console(file=plain, width=200).print(Renderer().proof(PROOF))
    assert "\x1b[" in coloured.getvalue()
    assert "\x1b[" not in plain.getvalue()
