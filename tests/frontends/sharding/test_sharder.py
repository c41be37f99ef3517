"""The Sharder on small graphs built by hand: the slices, shares and whole twins it adds at
a style's boundary, and the graph it is given left as it was."""

from __future__ import annotations

import numpy as np

from tprules.frontends.graph import OUTPUT, Graph, Statement, Tensor
from tprules.frontends.sharding.placement import REPLICATE, Shard, plain
from tprules.frontends.sharding.sharder import Sharder
from tprules.frontends.sharding.styles import style

S = Shard


def test_a_replicated_operand_as_wide_as_a_split_one_is_sliced_per_chip():
    # x @ w.T split on its columns (colwise), plus a replicated bias [1, 8] as wide as the
    # split axis: each chip adds its own block of the bias (a slice, no communication);
    # the module's colwise_gather_output gathers the sum at the boundary.
    g = Graph()
    g.add_value(Tensor("x", (2, 4), "f32", role="input"))
    g.add_value(Tensor("w", (8, 4), "f32", role="weight", module="lin"))
    g.add_value(Tensor("b", (1, 8), "f32", role="weight", module="other"))
    g.add_value(Tensor("m", (2, 8), "f32", role="activation", module="lin"))
    g.add_value(Tensor(OUTPUT, (2, 8), "f32", role="activation", module="lin"))
    g.stmts += [Statement("m", "matmul", ("x", "w"), "m", (("transpose_b", "1"),), module="lin", aten="aten.mm.default"),
                Statement("add", "add", ("m", "b"), OUTPUT, (), module="lin", aten="aten.add.Tensor")]
    tpp = Sharder(g, 2, "Tiny", lambda path: style("colwise_gather_output") if path == "lin" else None).run(
        {"w": S((plain(0, 2, 8),))})
    facts = tpp.builder.facts
    slices = {o: dict((k, v) for s, k, v in facts["attr"] if s == o) for o, c in facts["op"] if o.startswith("block_")}
    assert {o: (a["axis"], a["start"], a["end"]) for o, a in slices.items()} == \
        {"block_b_0@0": ("1", "0", "4"), "block_b_0@1": ("1", "4", "8")}
    assert ("add@1", 1, "b_block_1x2@1") in facts["reads"]
    assert [c for _, c in facts["collective"]] == ["all_gather"]


def test_a_value_a_split_input_module_shares_with_a_sibling_is_whole_outside_it(tmp_path):
    # Qwen4-Exp: the flattened hidden state r is one statement (the lowering shares the same
    # view) for the rowwise_split_input linear `a` and its unplanned sibling `b`. Inside `a`
    # each chip reads its slice of r; `b` reads r whole, the view computed again on the spine.
    from tprules.runtime import Program
    from tprules.runtime.values.inputs import program_inputs
    from tprules.runtime.values.reference import reference
    from tprules.workspace import Workspace

    g = Graph()
    g.add_value(Tensor("x", (1, 2, 8), "f32", role="input"))
    g.add_value(Tensor("wa", (3, 8), "f32", role="weight", module="a"))
    g.add_value(Tensor("wb", (3, 8), "f32", role="weight", module="b"))
    for name, shape, module in (("r", (2, 8), "a"), ("ya", (2, 3), "a"), ("yb", (2, 3), "b"), (OUTPUT, (2, 3), "")):
        g.add_value(Tensor(name, shape, "f32", role="activation", module=module))
    mm = (("transpose_b", "1"),)
    g.stmts += [Statement("r", "reshape", ("x",), "r", (), module="a", aten="aten.view.default"),
                Statement("ma", "matmul", ("r", "wa"), "ya", mm, module="a", aten="aten.mm.default"),
                Statement("mb", "matmul", ("r", "wb"), "yb", mm, module="b", aten="aten.mm.default"),
                Statement("add", "add", ("ya", "yb"), OUTPUT, (), module="", aten="aten.add.Tensor")]
    tpp = Sharder(g, 2, "Tiny", lambda path: style("rowwise_split_input") if path == "a" else None).run(
        {"wa": S((plain(1, 2, 8),))})
    b = tpp.builder
    assert ("mb", 0, "r_whole") in b.facts["reads"] and ("r_whole", 0, "x") in b.facts["reads"]
    assert "r_whole" in {t for (t,) in b.facts["spine"]} and ("ma@1", 0, "r@1") in b.facts["reads"]
    rng = np.random.default_rng(0)
    x, wa, wb = (rng.standard_normal(s).astype(np.float32) for s in ((1, 2, 8), (3, 8), (3, 8)))
    b.data.update({"x": x, "wa@0": wa[:, :4], "wa@1": wa[:, 4:], "wb": wb})
    prog = Program.from_workspace(Workspace(b.write(tmp_path / "p")))
    got = reference(prog, program_inputs(prog)).get(OUTPUT)
    np.testing.assert_allclose(got, x.reshape(2, 8) @ (wa + wb).T, rtol=1e-5)


def test_a_write_of_a_replicated_key_beside_split_heads_reads_each_chip_s_block():
    # MLA's key (deepseek_v2): the heads' own keys, split by head, and the one rotary key
    # expanded over every head (replicated), written side by side (a cat on the last axis):
    # each chip writes its heads' block of the rotary key (a slice, no communication).
    g = Graph()
    g.add_value(Tensor("x", (4, 8), "f32", role="input"))
    g.add_value(Tensor("w", (16, 8), "f32", role="weight", module="attn.kv_b_proj"))
    g.add_value(Tensor("rot", (1, 4, 4, 2), "f32", role="weight", module="attn"))
    for name, shape in (("kv", (4, 16)), ("k", (1, 4, 4, 4)), ("h", (1, 4, 4, 6))):
        g.add_value(Tensor(name, shape, "f32", role="activation", module="attn"))
    g.add_value(Tensor(OUTPUT, (1, 4, 4, 6), "f32", role="activation", module="attn"))
    g.stmts += [Statement("kv", "matmul", ("x", "w"), "kv", (("transpose_b", "1"),), module="attn.kv_b_proj",
                          aten="aten.mm.default"),
                Statement("k", "reshape", ("kv",), "k", (), module="attn", aten="aten.view.default"),
                Statement("h", "cat", ("k", "rot"), "h", (("axis", "3"),), module="attn", aten="aten.slice_scatter.default"),
                Statement("out", "scale", ("h",), OUTPUT, (("factor", "2.0"),), module="attn", aten="aten.mul.Tensor")]
    styles = {"attn.kv_b_proj": "colwise", "attn": "colwise_gather_output"}
    tpp = Sharder(g, 2, "Tiny", lambda path: style(styles[path]) if path in styles else None).run(
        {"w": S((plain(0, 2, 16),))})
    facts = tpp.builder.facts
    assert str(tpp.placement["h"]) == "Shard(axis 2 in 2)"  # [batch, sequence, heads, key]
    slices = {o: dict((k, v) for s, k, v in facts["attr"] if s == o) for o, c in facts["op"] if o.startswith("block_")}
    assert {o: (a["axis"], a["start"], a["end"]) for o, a in slices.items()} == \
        {"block_rot_0@0": ("2", "0", "2"), "block_rot_0@1": ("2", "2", "4")}
    assert ("h@1", 1, "rot_block_2x2@1") in facts["reads"]


def test_a_view_shared_with_a_split_input_module_is_whole_again_outside_it():
    # qwen4_exp's hyper-connection: one view of the normed input feeds both a rowwise_split_input
    # projection (so the view is each chip's slice) and a sibling projection outside that
    # module, which needs the whole view: it is computed again on the spine from the input.
    g = Graph()
    g.add_value(Tensor("x", (1, 4, 8), "f32", role="input"))
    g.add_value(Tensor("wd", (6, 8), "f32", role="weight", module="hc.down"))
    g.add_value(Tensor("wi", (2, 8), "f32", role="weight", module="hc.inject"))
    for name, shape, module in (("h", (1, 4, 8), "hc"), ("v", (4, 8), "hc.down"), ("d", (4, 6), "hc.down"),
                                ("i", (4, 2), "hc.inject")):
        g.add_value(Tensor(name, shape, "f32", role="activation", module=module))
    g.add_value(Tensor(OUTPUT, (4, 6), "f32", role="activation", module="hc"))
    g.stmts += [Statement("h", "tanh", ("x",), "h", (), module="hc", aten="aten.tanh.default"),
                Statement("v", "reshape", ("h",), "v", (), module="hc.down", aten="aten.view.default"),
                Statement("d", "matmul", ("v", "wd"), "d", (("transpose_b", "1"),), module="hc.down", aten="aten.mm.default"),
                Statement("i", "matmul", ("v", "wi"), "i", (("transpose_b", "1"),), module="hc.inject", aten="aten.mm.default"),
                Statement("out", "add", ("d", "i"), OUTPUT, (), module="hc", aten="aten.add.Tensor")]
    styles = {"hc.down": "rowwise_split_input"}
    tpp = Sharder(g, 2, "Tiny", lambda path: style(styles[path]) if path in styles else None).run(
        {"wd": S((plain(1, 2, 8),))})
    facts = tpp.builder.facts
    assert ("v_whole", "reshape") in facts["op"] and str(tpp.placement["v_whole"]) == "Replicate"
    assert ("v_whole", 0, "h") in facts["reads"] and ("i", 0, "v_whole") in facts["reads"]
    assert ("v@0", 0, "h_split@0") in facts["reads"]  # the split module reads its slice


def test_an_identity_expert_reads_its_share_and_the_fold_sums_it_back(tmp_path):
    # moe_identity_expert (LongCat-Flash's zero-computation experts): the expert passes its
    # replicated input through; each chip takes 1 / N of it (a partial), so that the fold
    # that sums the experts' partial outputs counts the identity expert once, not N times.
    from tprules.runtime import Program
    from tprules.runtime.values.inputs import program_inputs
    from tprules.runtime.values.reference import reference
    from tprules.workspace import Workspace

    g = Graph()
    g.add_value(Tensor("x", (2, 4), "f32", role="input"))
    g.add_value(Tensor("y", (2, 4), "f32", role="activation", module="moe.identity"))
    g.add_value(Tensor(OUTPUT, (2, 4), "f32", role="activation", module=""))
    g.stmts += [Statement("pass", "scale", ("x",), "y", (("factor", "1.0"),), module="moe.identity", aten="aten.mul.Tensor"),
                Statement("out", "add", ("y", "x"), OUTPUT, (), module="", aten="aten.add.Tensor")]
    tpp = Sharder(g, 2, "Tiny", lambda path: style("moe_identity_expert") if path == "moe.identity" else None).run({})
    b = tpp.builder
    assert {("share_x@0", "scale"), ("share_x@1", "scale")} <= set(b.facts["op"])
    assert len(b.facts["fold"]) == 1  # the partial is summed back once, leaving the module
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    b.data.update({"x": x})
    prog = Program.from_workspace(Workspace(b.write(tmp_path / "p")))
    np.testing.assert_allclose(reference(prog, program_inputs(prog)).get(OUTPUT), 2 * x, rtol=1e-6)


def _split_input_graph() -> Graph:
    g = Graph()
    g.add_value(Tensor("x", (2, 8), "f32", role="input"))
    g.add_value(Tensor("w", (3, 8), "f32", role="weight", module="a"))
    g.add_value(Tensor(OUTPUT, (2, 3), "f32", role="activation", module="a"))
    g.stmts += [Statement("m", "matmul", ("x", "w"), OUTPUT, (("transpose_b", "1"),), module="a", aten="aten.mm.default")]
    return g


def test_the_sharder_leaves_the_graph_it_is_given_as_it_was():
    # rowwise_split_input adds x's slices (x_split) and the fold: values of the TP program,
    # not of the graph, which a second sharding (decode's) reads again as it was
    g = _split_input_graph()
    values, stmts = dict(g.values), list(g.stmts)
    tpp = Sharder(g, 2, "Tiny", lambda path: style("rowwise_split_input") if path == "a" else None).run(
        {"w": S((plain(1, 2, 8),))})
    assert g.values == values and g.stmts == stmts
    assert "x_split" in tpp.values and "x_split" not in g.values


def test_two_shardings_of_one_graph_write_the_same_facts():
    styles = lambda path: style("rowwise_split_input") if path == "a" else None  # noqa: E731
    g = _split_input_graph()
    first = Sharder(g, 2, "Tiny", styles).run({"w": S((plain(1, 2, 8),))})
    second = Sharder(g, 2, "Tiny", styles).run({"w": S((plain(1, 2, 8),))})
    rows = lambda tpp: {rel: tpp.builder.facts[rel] for rel in tpp.builder.facts}  # noqa: E731
    assert rows(first)["op"] and rows(first) == rows(second)


def test_a_transformers_hook_and_torch_s_port_of_one_layout_write_one_program():
    # rowwise_split_input is transformers' RowwiseParallel(input_layouts=Replicate()): its
    # input port, a hook, slices the replicated x as torch's port does
    from tprules.frontends.sharding.styles import REPLICATED, Layout, Port, Style

    g = _split_input_graph()
    hook = Sharder(g, 2, "Tiny", lambda path: style("rowwise_split_input") if path == "a" else None)
    torch_style = Style("RowwiseParallel", "rowwise", inputs=(Port(REPLICATED, Layout(-1), local=False),),
                        outputs=(Port(None, REPLICATED),))
    port = Sharder(g, 2, "Tiny", lambda path: torch_style if path == "a" else None, args={"a": [[(2, 8)]]})
    op = port.run({"w": S((plain(1, 2, 8),))}).builder.facts["op"]
    assert any(row[0] == "split_x@0" for row in op)
    assert op == hook.run({"w": S((plain(1, 2, 8),))}).builder.facts["op"]


def _partial_input_graph() -> Graph:
    """A Megatron pair (c colwise, p rowwise: h a partial) read by module "a" (rowwise_split_input)."""
    g = Graph()
    g.add_value(Tensor("x", (2, 8), "f32", role="input"))
    g.add_value(Tensor("wc", (8, 8), "f32", role="weight", module="c"))
    g.add_value(Tensor("hc", (2, 8), "f32", role="activation", module="c"))
    g.add_value(Tensor("w0", (8, 8), "f32", role="weight", module="p"))
    g.add_value(Tensor("h", (2, 8), "f32", role="activation", module="p"))
    g.add_value(Tensor("w", (3, 8), "f32", role="weight", module="a"))
    g.add_value(Tensor(OUTPUT, (2, 3), "f32", role="activation", module="a"))
    g.stmts += [Statement("hc", "matmul", ("x", "wc"), "hc", (("transpose_b", "1"),), module="c", aten="aten.mm.default"),
                Statement("h", "matmul", ("hc", "w0"), "h", (("transpose_b", "1"),), module="p", aten="aten.mm.default"),
                Statement("m", "matmul", ("h", "w"), OUTPUT, (("transpose_b", "1"),), module="a", aten="aten.mm.default")]
    return g


def test_a_hook_folds_a_partial_it_is_given_whole_where_torch_s_port_refuses_it():
    # transformers' rowwise hook is written for a replicated input: a partial entering is
    # summed first (tprules folds where a value is read); torch would take the plain partial
    # as replicated, a program other than the model's: refused
    import pytest

    from tprules.frontends.errors import ImportFailed
    from tprules.frontends.sharding.styles import REPLICATED, Layout, Port, Style

    weights = {"wc": S((plain(0, 2, 8),)), "w0": S((plain(1, 2, 8),)), "w": S((plain(1, 2, 8),))}
    g = _partial_input_graph()
    styles = {"c": style("colwise"), "p": style("rowwise"), "a": style("rowwise_split_input")}
    op = Sharder(g, 2, "Tiny", styles.get).run(dict(weights)).builder.facts["op"]
    names = [row[0] for row in op]
    assert names.index("allreduce_h") < names.index("split_h@0")
    torch_style = Style("RowwiseParallel", "rowwise", inputs=(Port(REPLICATED, Layout(-1), local=False),),
                        outputs=(Port(None, REPLICATED),))
    torch_styles = {"c": style("colwise"), "p": style("rowwise"), "a": torch_style}
    with pytest.raises(ImportFailed, match=r"torch takes its input 0 h, a plain tensor, to be Replicate\(\)"):
        Sharder(g, 2, "Tiny", torch_styles.get, args={"a": [[(2, 8)]]}).run(dict(weights))


def test_a_hook_leaves_a_layout_it_was_not_written_for():
    # colwise_gather_output's hook gathers a chip's block; a value leaving replicated (the
    # norm of a replicated input, computed inside the module) crosses as it is
    g = Graph()
    g.add_value(Tensor("x", (2, 8), "f32", role="input"))
    g.add_value(Tensor("y", (2, 8), "f32", role="activation", module="lin"))
    g.add_value(Tensor(OUTPUT, (2, 8), "f32", role="activation"))
    g.stmts += [Statement("y", "neg", ("x",), "y", (), module="lin", aten="aten.neg.default"),
                Statement("o", "neg", ("y",), OUTPUT, (), module="", aten="aten.neg.default")]
    tpp = Sharder(g, 2, "Tiny", lambda path: style("colwise_gather_output") if path == "lin" else None).run({})
    assert not tpp.builder.facts["collective"] and [row[0] for row in tpp.builder.facts["op"]] == ["y", "o"]


def test_a_share_hook_gives_each_chip_1_over_n_of_its_input():
    g = Graph()
    g.add_value(Tensor("x", (2, 8), "f32", role="input"))
    g.add_value(Tensor(OUTPUT, (2, 8), "f32", role="activation", module="e"))
    g.stmts += [Statement("o", "neg", ("x",), OUTPUT, (), module="e", aten="aten.neg.default")]
    tpp = Sharder(g, 2, "Tiny", lambda path: style("moe_identity_expert") if path == "e" else None).run({})
    shares = [row for row in tpp.builder.facts["attr"] if row[0].startswith("share_x@") and row[1] == "factor"]
    assert sorted(shares) == [("share_x@0", "factor", "0.5"), ("share_x@1", "factor", "0.5")]
    assert ("allreduce_x_share", "sum") in tpp.builder.facts["op"]  # neg needs the whole: the shares summed back


def _cache_graph() -> Graph:
    """A decode step's key cache: k = x @ wk.T (colwise: split on its features) written into
    the cache at the step's position (put_along along the positions), the new cache its output."""
    g = Graph()
    g.add_value(Tensor("x", (1, 4), "f32", role="input"))
    g.add_value(Tensor("cache", (3, 8), "f32", role="input"))
    g.add_value(Tensor("ids", (1, 8), "i64", role="input"))
    g.add_value(Tensor("wk", (8, 4), "f32", role="weight", module="attn.k_proj"))
    g.add_value(Tensor("k", (1, 8), "f32", role="activation", module="attn.k_proj"))
    g.add_value(Tensor(OUTPUT, (3, 8), "f32", role="activation", module="attn"))
    g.stmts += [Statement("k", "matmul", ("x", "wk"), "k", (("transpose_b", "1"),), module="attn.k_proj",
                          aten="aten.mm.default"),
                Statement("put", "put_along", ("cache", "ids", "k"), OUTPUT, (("axis", "0"),), module="attn",
                          aten="aten.index_put.default")]
    return g


def test_a_cache_is_placed_at_its_put_along_in_the_one_sharding():
    # decode shards once: the cache takes the placement of the keys written into it (split on
    # their features, as k_proj's colwise weight splits them), and the program is the one a
    # sharding given that placement up front writes, row for row
    styles = {"attn.k_proj": style("colwise"), "attn": style("colwise_gather_output")}
    weights = {"wk": S((plain(0, 2, 8),))}
    g = _cache_graph()
    once = Sharder(g, 2, "Tiny", styles.get).run(dict(weights), caches=frozenset({"cache"}))
    assert once.placement["cache"] == S((plain(1, 2, 8),))
    given = Sharder(g, 2, "Tiny", styles.get).run({**weights, "cache": S((plain(1, 2, 8),))})
    rows = lambda tpp: {rel: list(tpp.builder.facts[rel]) for rel in tpp.builder.facts}  # noqa: E731
    assert rows(once) == rows(given)
    assert [r[0] for r in rows(once)["tensor"][:4]] == ["x", "cache@0", "cache@1", "ids"]  # the inputs first


def test_a_cache_no_put_along_writes_first_is_replicated():
    styles = {"attn.k_proj": style("colwise"), "attn": style("colwise_gather_output")}
    g = _cache_graph()
    g.add_value(Tensor("peek", (3, 8), "f32", role="activation", module="attn"))
    g.stmts.insert(0, Statement("peek", "neg", ("cache",), "peek", (), module="attn", aten="aten.neg.default"))
    tpp = Sharder(g, 2, "Tiny", styles.get).run({"wk": S((plain(0, 2, 8),))}, caches=frozenset({"cache"}))
    assert tpp.placement["cache"] == REPLICATE
