"""Rule edits the golden snapshots must catch, and `tprules diff` must report exactly.

For every reason of SPEC §3, a copy of rules/ loses the one rule that derives that refusal
(`refused(F, "reason")` in tp.dl or `base_refused(F, "reason")` in base.dl; its lines are
blanked so every other rule keeps its line). Then:

- `tprules golden --rules COPY` fails, and its report names that reason (and no other) as
  the one whose refusals changed;
- `tprules diff --old rules --new COPY` reports exactly the fusions whose verdicts differ
  between `tprules check --format json` under the two rule sets (an independent
  computation), each removed refusal explained by the deleted rule's file:line on the old side.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import FACTS, RULES
from test_reasons import SPEC_REASONS

from tprules.datalog.lang import ast
from tprules.datalog.lang.parser import parse_file
from tprules.golden.corpus import example_programs, meant_for

PROGRAMS = example_programs(FACTS)
REFUSING = ("refused", "base_refused")


def refusal_rule(rules_dir, reason):
    """The one rule whose head refuses with `reason`."""
    found = [r for path in sorted(rules_dir.glob("*.dl")) for r in parse_file(path).rules
             if r.head.rel in REFUSING and ast.Str(reason) in r.head.args]
    assert len(found) == 1, f"{reason}: expected one refusal rule, found {len(found)}"
    return found[0]


def delete_rule(rules_dir, reason) -> str:
    """Blank the lines of the rule that refuses with `reason`; returns its `file:line` as the
    explainer names it."""
    rule = refusal_rule(rules_dir, reason)
    path = rules_dir / rule.pos.file.rsplit("/", 1)[-1]
    lines = path.read_text().split("\n")
    i = rule.pos.line - 1
    while True:  # a rule ends at the first line whose text (comments aside) ends with "."
        done = lines[i].split("//")[0].rstrip().endswith(".")
        lines[i] = ""
        if done:
            break
        i += 1
    path.write_text("\n".join(lines))
    with pytest.raises(AssertionError):
        refusal_rule(rules_dir, reason)
    return f"rules/{path.name}:{rule.pos.line}"


def check_json(cli, rules, program, shim):
    status, out, err = cli("check", program, "--rules", rules, "--shim", shim, "--format", "json")
    assert (status, err) == (0, "")
    return {f["fusion"]: (f["legal"], tuple(f["reasons"])) for f in json.loads(out)["fusions"]}


def all_verdicts(cli, rules):
    return {(p.name, shim, f): v for p in PROGRAMS for shim in meant_for(p)
            for f, v in check_json(cli, rules, p, shim).items()}


@pytest.fixture(scope="module")
def before():
    """Every verdict with the project's rules, from `tprules check --format json`."""
    import contextlib
    import io

    from tprules.cli import main

    out = {}
    for p in PROGRAMS:
        for shim in meant_for(p):
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                assert main(["check", str(p), "--shim", shim, "--format", "json"]) == 0
            for f in json.loads(buffer.getvalue())["fusions"]:
                out[(p.name, shim, f["fusion"])] = (f["legal"], tuple(f["reasons"]))
    return out


@pytest.mark.parametrize("reason", SPEC_REASONS)
def test_deleting_a_refusal_rule_fails_golden_naming_the_reason(reason, cli, rules_copy):
    delete_rule(rules_copy, reason)
    status, out, err = cli("golden", "--rules", rules_copy)
    assert (status, err) == (1, "")
    changed = re.findall(r"^  refusals changed: (.*)$", out, re.M)
    assert changed, out
    assert {part.split()[0] for line in changed for part in line.split(", ")} == {reason}
    assert all(re.fullmatch(rf"{reason} -\d+", line) for line in changed), changed
    assert f"tprules golden --update --rules {rules_copy}" in out


@pytest.mark.parametrize("reason", SPEC_REASONS)
def test_diff_finds_exactly_the_changed_fusions(reason, cli, rules_copy, before):
    deleted_at = delete_rule(rules_copy, reason)
    status, out, err = cli("diff", "--old", RULES, "--new", rules_copy, *PROGRAMS, "--format", "json")
    assert (status, err) == (1, "")
    report = json.loads(out)
    after = all_verdicts(cli, rules_copy)
    assert after.keys() == before.keys()
    expected = {key for key in before if before[key] != after[key]}
    found = {(c["program"].rsplit("/", 1)[-1], c["shim"], c["fusion"]) for c in report["changes"]}
    assert found == expected and found
    assert report["reasons"] == {reason: {"gone": sum(reason in before[k][1] for k in found), "new": 0}}
    for change in report["changes"]:
        key = (change["program"].rsplit("/", 1)[-1], change["shim"], change["fusion"])
        assert (change["old"]["legal"], tuple(change["old"]["reasons"])) == before[key]
        assert (change["new"]["legal"], tuple(change["new"]["reasons"])) == after[key]
        (gone,) = [t for t in change["tuples"] if t["relation"] == "refused"]
        assert gone["values"] == [change["fusion"], reason] and gone["change"] == "removed"
        assert gone["old"]["holds"] and not gone["new"]["holds"]
        assert gone["old"]["rules"][0] == deleted_at, "the old side names the deleted rule"


def test_diff_of_identical_rule_sets_is_empty(cli, rules_copy):
    status, out, err = cli("diff", "--old", RULES, "--new", rules_copy, *PROGRAMS)
    assert (status, err) == (0, "")
    assert "no verdict differs" in out
    status, out, _ = cli("diff", "--old", RULES, "--new", rules_copy, FACTS, "--format", "json")  # a folder of programs
    report = json.loads(out)
    assert status == 0 and report["changes"] == []
    assert [(j["program"].rsplit("/", 1)[-1], j["shim"]) for j in report["judged"]] == \
        [(p.name, shim) for p in PROGRAMS for shim in meant_for(p)]


def test_diff_explains_both_sides_in_text(cli, rules_copy):
    deleted_at = delete_rule(rules_copy, "spans_chips")
    status, out, _ = cli("diff", "--old", RULES, "--new", rules_copy, FACTS / "megatron-mlp-tp2",
                         "--shim", "cuda-lane:h100:Bf16")
    assert status == 1
    block = out[out.index("  gelu_0_1:"):]
    assert block.startswith("  gelu_0_1: refused spans_chips → legal; members gelu_0 (chip:0), gelu_1 (chip:1)\n")
    assert f"        old: holds: {deleted_at} with A = gelu_0 (chip:0), B = gelu_1 (chip:1)" in block
    assert "    + legal(\"gelu_0_1\")\n        old: does not hold: blocked by refused spans_chips" in block


@pytest.mark.parametrize("side", ["--old", "--new"])
def test_diff_names_a_broken_rule_file_on_either_side(side, cli, rules_copy):
    with (rules_copy / "tp.dl").open("a") as f:
        f.write("\nrefused(F, \"oops\") :- member(F, O)\n")  # no final period
    other = "--new" if side == "--old" else "--old"
    status, out, err = cli("diff", side, rules_copy, other, RULES, PROGRAMS[0])
    assert (status, out) == (2, "")
    assert re.match(rf"{re.escape(str(rules_copy))}/tp\.dl:\d+(:\d+)?: syntax error", err), err


@pytest.mark.parametrize("args", [
    ["--old", "rules", "facts/megatron-mlp-tp2"],  # no --new
    ["--old", "rules", "--new", "rules"],  # no DIR
])
def test_diff_usage_errors_exit_2(args):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "tprules", "diff", *args], cwd=FACTS.parent,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("tprules diff: usage: the following arguments are required")


@pytest.mark.parametrize("args", [
    ["--old", "rules", "--new", "no-such-rules", "facts/megatron-mlp-tp2"],
    ["--old", "rules", "--new", "rules", "no-such-program"],
    ["--old", "rules", "--new", "rules", "facts/megatron-mlp-tp2", "--shim", "no-such-shim"],
])
def test_diff_bad_input_exits_2(args, cli, monkeypatch):
    monkeypatch.chdir(FACTS.parent)
    status, out, err = cli("diff", *args)
    assert (status, out) == (2, "") and err
