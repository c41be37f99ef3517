"""The Shim API (tprules.shim): answers come from the rules, agree with `check`, and wrap Python shims."""

from __future__ import annotations

import json
import re

import pytest
from conftest import FACTS

from tprules.errors import BadInput, RuleError
from tprules.shim import FactShim, Fit, FusedOp, Manifest, Op, Shim, Support, TensorGraph, TensorParallelShim, fits_all

EXAMPLES = sorted(p.name for p in FACTS.iterdir() if p.is_dir() and (p / "op.facts").exists())
SHIMS = ("cuda-lane:h100:Bf16", "cuda-lane:rtx3060:TwoPassInt8", "cpu:x86:F32")


def tp_shim(example: str, base=None, **options) -> tuple[TensorParallelShim, TensorGraph]:
    folder = FACTS / example
    base = base if base is not None else FactShim.load("cuda-lane:h100:Bf16")
    return TensorParallelShim(base, Manifest.load(folder), **options), TensorGraph.load(folder)


def members_of(example: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in (FACTS / example / "member.facts").read_text().splitlines():
        if line.strip():
            f, o = line.split("\t")
            found.setdefault(f, []).append(o)
    return found


class RecordingBase:
    """A compiler's own base chip in Python: refuses fused ops with more than `widest` members
    and any fused gelu; records what it was asked."""

    def __init__(self, widest: int = 2):
        self.widest = widest
        self.asked: list[tuple[str, ...]] = []

    def name(self) -> str:
        return "my-npu:v1"

    def supports(self, cls: str) -> Support:
        return Support.ALONE if cls == "transpose" else Support.FUSED

    def fits(self, op, g) -> Fit:
        self.asked.append(op.statements)
        reasons = []
        if isinstance(op, FusedOp) and len(op.members) > self.widest:
            reasons.append("too_wide")
        if isinstance(op, FusedOp) and any(m.cls == "gelu" for m in op.members):
            reasons.append("no_gelu_epilogue")
        return Fit.refused(op.name, *reasons, source="my-npu:v1", why="my backend says so") if reasons \
            else Fit.success(op.name)

    def activation(self, consumer, operand, g):
        return None


# -- agreement with `tprules check` ----------------------------------------------------


@pytest.mark.parametrize("shim", SHIMS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_api_agrees_with_check_on_every_example(cli, example, shim):
    status, out, _ = cli("check", FACTS / example, "--shim", shim, "--format", "json")
    assert status == 0
    expected = {f["fusion"]: tuple(f["reasons"]) for f in json.loads(out)["fusions"]}
    tp, g = tp_shim(example, FactShim.load(shim))
    fused = [g.fuse(f, ms) for f, ms in members_of(example).items()]
    answers = tp.fits_all(fused, g)
    assert {f: answers[f].reasons for f in expected} == expected
    assert {f: tp.fits(op, g).reasons for f, op in zip(members_of(example), fused)} == expected


@pytest.mark.parametrize("shim", SHIMS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_base_reasons_of_the_tp_shim_are_the_base_shims_answers(example, shim):
    base = FactShim.load(shim)
    tp, g = tp_shim(example, base)
    fused = [g.fuse(f, ms) for f, ms in members_of(example).items()]
    tp_fits, base_fits = tp.fits_all(fused, g), base.fits_all(fused, g)
    for op in fused:
        owned = tuple(r.reason for r in tp_fits[op.name].refusals if r.owner == "base")
        assert owned == base_fits[op.name].reasons, op.name


# -- what the TP shim refuses itself, and what it gives to base --------------------------


def test_fused_op_with_a_fold_is_refused():
    tp, g = tp_shim("megatron-mlp-tp2")
    fit = tp.fits(g.fuse("f", ["allreduce", "bias"]), g)
    assert fit.reasons == ("collective_fold",)
    assert fit.refusals[0].owner == "tp" and re.fullmatch(r".*tp\.dl:\d+", fit.refusals[0].source)
    assert "all-reduce" in fit.explanation


def test_fused_op_over_two_chips_is_refused():
    tp, g = tp_shim("megatron-mlp-tp2")
    fit = tp.fits(g.fuse("f", ["gelu_0", "gelu_1"]), g)
    assert not fit and fit.reasons == ("spans_chips",)


def test_chip_and_spine_is_refused():
    tp, g = tp_shim("llama-layer-tp4")
    assert tp.fits(g.fuse("f", ["rms1", "q_0"]), g).reasons == ("chip_and_spine",)


def test_chip_local_fused_op_is_passed_to_base():
    base = RecordingBase(widest=2)
    tp, g = tp_shim("megatron-mlp-tp2", base)
    fit = tp.fits(g.fuse("f", ["mm1_0", "gelu_0", "mm2_0"]), g)
    assert ("mm1_0", "gelu_0", "mm2_0") in base.asked
    assert fit.reasons == ("no_gelu_epilogue", "too_wide")
    assert {r.owner for r in fit.refusals} == {"base"}
    assert tp.fits(g.fuse("f", ["bias", "residual"]), g).ok


def test_chip_local_fused_op_refused_by_base_rules():
    tp, g = tp_shim("int8-mlp-tp2", FactShim.load("cuda-lane:rtx3060:TwoPassInt8"))
    fit = tp.fits(g.fuse("f", ["square_0", "mm2_0"]), g)
    assert fit.reasons == ("quantized_inside",)
    assert fit.refusals[0].owner == "base" and "base.dl" in fit.refusals[0].source


def test_python_base_refusals_show_next_to_tp_refusals():
    tp, g = tp_shim("megatron-mlp-tp2", RecordingBase(widest=2))
    fit = tp.fits(g.fuse("f", ["gelu_1", "mm2_0", "allreduce"]), g)
    assert fit.reasons == ("collective_fold", "no_gelu_epilogue", "spans_chips", "too_wide")
    owners = {r.reason: (r.owner, r.source) for r in fit.refusals}
    assert owners["too_wide"] == ("base", "my-npu:v1")
    assert owners["spans_chips"][0] == "tp"
    assert "my backend says so" in fit.explanation


def test_python_base_answers_single_statements():
    base = RecordingBase()
    tp, g = tp_shim("megatron-mlp-tp2", base)
    assert tp.fits(g.op("gelu_0"), g).ok
    assert base.asked == [("gelu_0",)]


def test_tp_name_supports_and_activation_come_from_base():
    tp, g = tp_shim("int8-mlp-tp2", FactShim.load("cuda-lane:rtx3060:TwoPassInt8"))
    assert tp.name() == "tp2:cuda-lane:rtx3060:TwoPassInt8"
    assert tp.supports("softmax") is Support.ALONE and tp.supports("rsqrt") is Support.NONE
    assert str(tp.activation(g.op("mm2_0"), 0, g)) == "int8_two_pass"
    assert tp.activation(g.op("mm2_0"), 1, g) is None
    wrapped = TensorParallelShim(RecordingBase(), Manifest.load(FACTS / "int8-mlp-tp2"))
    assert wrapped.name() == "tp2:my-npu:v1" and wrapped.supports("transpose") is Support.ALONE


def test_every_shim_object_satisfies_the_protocol():
    tp, g = tp_shim("megatron-mlp-tp2")
    assert isinstance(tp, Shim) and isinstance(tp.base, Shim) and isinstance(RecordingBase(), Shim)
    with pytest.raises(TypeError):
        TensorParallelShim(object(), Manifest(chips=1))
    with pytest.raises(ValueError, match="distinct names"):
        tp.fits_all([g.fuse("f", ["mm1_0", "gelu_0"]), g.fuse("f", ["bias", "residual"])], g)


# -- single statements -------------------------------------------------------------------


def test_a_statement_alone_is_not_a_fusion():
    tp, g = tp_shim("int8-mlp-tp2", FactShim.load("cuda-lane:rtx3060:TwoPassInt8"))
    assert tp.fits(g.op("flip"), g).ok  # transpose runs alone on this shim: alone is fine
    assert tp.fits(g.op("allreduce"), g).ok  # a fold alone is the collective
    assert tp.fits(g.op("inv"), g).reasons == ("unsupported",)  # rsqrt is not built at all


def test_base_shim_from_facts_answers_by_the_base_rules():
    base = FactShim.load("cuda-lane:rtx3060:TwoPassInt8")
    g = TensorGraph.load(FACTS / "int8-mlp-tp2")
    assert base.fits(g.fuse("f", ["flip", "sm"]), g).reasons == ("not_fusible",)
    # one device: chips do not matter to base
    assert base.fits(g.fuse("f", ["relu_0", "relu_1"]), g).ok
    assert base.fits(g.op("flip"), g).ok


# -- the rules answer, not Python --------------------------------------------------------


def test_editing_a_rule_changes_the_answer(rules_copy):
    tp_file = rules_copy / "tp.dl"
    text = tp_file.read_text()
    rule = ('refused(F, "spans_chips") :-\n'
            '    member(F, A), member(F, B), on_chip(A, CA), on_chip(B, CB), CA != CB, !kernel(F, _).\n')
    assert rule in text
    tp_file.write_text(text.replace(rule, ""))
    edited, g = tp_shim("megatron-mlp-tp2", rules=rules_copy)
    assert edited.fits(g.fuse("f", ["gelu_0", "gelu_1"]), g).ok
    tp_file.write_text(text + '\nrefused(F, "no_gelu") :- member(F, O), op(O, "gelu").\n')
    edited, g = tp_shim("megatron-mlp-tp2", rules=rules_copy)
    fit = edited.fits(g.fuse("f", ["mm1_0", "gelu_0"]), g)
    assert fit.reasons == ("no_gelu",) and fit.refusals[0].source.endswith(f"tp.dl:{len(text.splitlines()) + 2}")


def test_rules_without_base_inputs_cannot_wrap_a_python_base(rules_copy):
    schema = rules_copy / "schema.dl"
    schema.write_text(schema.read_text().replace(".input base_refusal\n", ""))
    tp, g = tp_shim("megatron-mlp-tp2", RecordingBase(), rules=rules_copy)
    with pytest.raises(RuleError, match="base_refusal"):
        tp.fits(g.fuse("f", ["mm1_0", "gelu_0"]), g)


def test_asking_many_is_one_batch(monkeypatch):
    from tprules.workspace import Workspace

    calls = []
    original = Workspace.ask
    monkeypatch.setattr(Workspace, "ask", lambda self, *a, **k: calls.append(a[0]) or original(self, *a, **k))
    tp, g = tp_shim("llama-layer-tp4")
    ops = [g.fuse(f, ms) for f, ms in members_of("llama-layer-tp4").items()]
    answers = fits_all(tp, ops, g)
    assert len(calls) == 1 and len(calls[0]) == len(ops)
    assert answers == {op.name: tp.fits(op, g) for op in ops}


# -- graph and manifest ------------------------------------------------------------------


def test_graph_and_manifest_round_trip_the_facts():
    from tprules.datalog.facts.base import load_fact_dir
    from tprules.program.schema import PROGRAM

    facts = load_fact_dir(FACTS / "relocated-head-tp2", {n: r.types for n, r in PROGRAM.items()}, strict=False)
    g = TensorGraph.from_facts(facts)
    m = Manifest.from_facts(facts)
    for rel, tuples in {**g.to_facts(), **m.to_facts()}.items():
        assert set(tuples) == facts.tuples(rel), rel
    assert m.relocated == {"lm_head": 0} and m.sections["lm_head"] == ("head", "probs")
    assert g.order()[:3] == ["mm1_0", "gelu_0", "mm2_0"]


def test_graph_built_by_hand():
    g = TensorGraph()
    for t in ("x", "w", "h", "a"):
        g.add_tensor(t, "f32", (4, 4))
    g.add_op(Op("act", "gelu", ("h",), "a"))  # consumer first: the edge appears with its producer
    g.add_op(Op("mm", "matmul", ("x", "w"), "h"))
    assert g.order() == ["mm", "act"] and [o.name for o in g.successors("mm")] == ["act"]
    assert g.fuse("f", ["act", "mm"]).inputs == ("x", "w")
    with pytest.raises(ValueError, match="undeclared"):
        g.add_op(Op("bad", "relu", ("nope",), "a2"))
    with pytest.raises(ValueError, match="written by"):
        g.add_op(Op("again", "relu", ("x",), "a"))


def test_an_ill_formed_graph_is_a_clean_error():
    g = TensorGraph()
    for t in ("x", "y"):
        g.add_tensor(t, "f32", (2,))
    g.add_op(Op("n", "neg", ("x",), "y"))
    tp = TensorParallelShim(FactShim.load("cpu:x86:F32"), Manifest(chips=1, spine=frozenset({"x"})))
    with pytest.raises(BadInput, match="neither placed on a chip nor on the spine"):
        tp.fits(g.op("n"), g)


def test_an_edited_graph_gets_fresh_answers():
    tp, g = tp_shim("megatron-mlp-tp2")
    assert tp.fits(g.fuse("f", ["bias", "residual"]), g).ok
    g.add_tensor("z2", "f32", (8, 16))
    g.add_op(Op("late", "relu", ("z",), "z2"))
    tp.manifest = Manifest(**{**tp.manifest.__dict__, "spine": tp.manifest.spine | {"z2"}})
    assert tp.fits(g.fuse("f", ["bias", "late"]), g).ok


def test_adding_ops_in_bulk_is_all_or_nothing_and_nx_follows_the_graph():
    g = TensorGraph()
    for t in ("x", "h", "a", "b"):
        g.add_tensor(t, "f32", (2,))
    ops = [Op("mm", "relu", ("x",), "h"), Op("act", "gelu", ("h",), "a"), Op("dup", "neg", ("h",), "a")]
    with pytest.raises(ValueError, match="written by act and by dup"):
        g.add_ops(ops)
    assert len(g) == 0 and g.flows() == {}
    g.add_ops(ops[:2])
    assert list(g.nx.edges) == [("mm", "act")]
    g.add_op(Op("late", "neg", ("a",), "b"))
    assert sorted(g.nx.edges) == [("act", "late"), ("mm", "act")] and g.order() == ["mm", "act", "late"]
