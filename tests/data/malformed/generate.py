"""Rewrite the malformed-input cases: `python tests/data/malformed/generate.py`.

Each case is the small valid TP program BASE (case `valid`) with one violation of SPEC §2.
The folders are the test data; this script only documents how they were made. Each
case's expected.txt is the message reviewed by hand (not written by this script).
"""
import copy
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent
BASE = {
    "chips": [("2",)],
    "tensor": [(t, "f32") for t in ("x", "w0", "w1", "h0", "h1", "y", "z")],
    "placed": [("w0", "0"), ("h0", "0"), ("w1", "1"), ("h1", "1")],
    "spine": [("x",), ("y",), ("z",)],
    "op": [("mm0", "matmul"), ("mm1", "matmul"), ("ar", "sum"), ("act", "relu")],
    "reads": [("mm0", "0", "x"), ("mm0", "1", "w0"), ("mm1", "0", "x"), ("mm1", "1", "w1"),
              ("ar", "0", "h0"), ("ar", "1", "h1"), ("act", "0", "y")],
    "writes": [("mm0", "h0"), ("mm1", "h1"), ("ar", "y"), ("act", "z")],
    "fold": [("ar", "mlp_out")],
    "member": [("f", "mm0"), ("f", "mm1")],
}
# BASE's fold as a reduce-scatter (SPEC §1): its sum y is read only by one slice per chip,
# chip k's taking block k of axis 0 into z<k>. The `scatter_` cases are this with one violation.
SCATTER = {**BASE,
           "tensor": [(t, "f32") for t in ("x", "w0", "w1", "h0", "h1", "y", "z0", "z1")],
           "placed": [("w0", "0"), ("h0", "0"), ("w1", "1"), ("h1", "1"), ("z0", "0"), ("z1", "1")],
           "spine": [("x",), ("y",)],
           "shape": [("y", "0", "4"), ("y", "1", "8")],
           "op": [("mm0", "matmul"), ("mm1", "matmul"), ("ar", "sum"), ("s0", "slice"), ("s1", "slice")],
           "reads": [("mm0", "0", "x"), ("mm0", "1", "w0"), ("mm1", "0", "x"), ("mm1", "1", "w1"),
                     ("ar", "0", "h0"), ("ar", "1", "h1"), ("s0", "0", "y"), ("s1", "0", "y")],
           "writes": [("mm0", "h0"), ("mm1", "h1"), ("ar", "y"), ("s0", "z0"), ("s1", "z1")],
           "attr": [("ar", "axis", "0"), ("s0", "axis", "0"), ("s0", "start", "0"), ("s0", "end", "2"),
                    ("s1", "axis", "0"), ("s1", "start", "2"), ("s1", "end", "4")],
           "collective": [("mlp_out", "reduce_scatter")]}
CLASSES = [line.split("\t")[0] for line in (ROOT.parents[2] / "facts/shims/registry.facts").read_text().splitlines() if line]


def replace(rel, old, new):
    def f(p):
        p[rel] = [new if t == old else t for t in p[rel]]
    return f


def add(rel, *tuples):
    def f(p):
        p.setdefault(rel, []).extend(tuples)
    return f


def drop(rel, tup):
    def f(p):
        p[rel].remove(tup)
    return f


def both(*fs):
    def f(p):
        for g in fs:
            g(p)
    return f


def own_shim(levels):
    answers = [("mychip", c, levels.get(c, "fused")) for c in CLASSES if levels.get(c) != "-"]
    return both(add("shim", ("mychip",)), add("supports", *answers))


CASES = {
    "undeclared_tensor": replace("reads", ("act", "0", "y"), ("act", "0", "q")),
    "tensor_placed_and_spine": add("spine", ("h0",)),
    "tensor_placed_twice": add("placed", ("h0", "1")),
    "tensor_neither_placed_nor_spine": drop("spine", ("z",)),
    "tensor_bad_dtype": replace("tensor", ("z", "f32"), ("z", "f64")),
    "statement_writes_nothing": drop("writes", ("act", "z")),
    "statement_writes_two_tensors": both(add("tensor", ("z2", "f32")), add("spine", ("z2",)), add("writes", ("act", "z2"))),
    "tensor_two_writers": replace("writes", ("act", "z"), ("act", "y")),
    "statement_class_unknown": replace("op", ("act", "relu"), ("act", "gelu_fast")),
    "statement_operand_count": add("reads", ("act", "1", "x")),
    "chip_out_of_range_placed": replace("placed", ("w1", "1"), ("w1", "2")),
    "chip_out_of_range_relocated": both(add("section", ("tail", "act")), add("relocated", ("tail", "2"))),
    "no_chips_fact": lambda p: p.pop("chips"),
    "non_fold_binds_two_chips": replace("reads", ("mm0", "1", "w0"), ("mm0", "1", "w1")),
    "fold_reads_spine_tensor": add("reads", ("ar", "2", "x")),
    "fold_reads_two_operands_of_one_chip": both(add("tensor", ("h0b", "f32")), add("placed", ("h0b", "0")),
                                                 replace("reads", ("ar", "1", "h1"), ("ar", "1", "h0b")),
                                                 add("reads", ("ar", "2", "h1"))),
    "fold_misses_a_chip": drop("reads", ("ar", "1", "h1")),
    "fold_writes_chip_tensor": both(drop("spine", ("y",)), add("placed", ("y", "0"))),
    "fold_not_a_sum": replace("op", ("ar", "sum"), ("ar", "add")),
    # An all-gather (SPEC §1): its fold is a cat whose operand i is chip i's; one known kind.
    "gather_fold_not_a_cat": add("collective", ("mlp_out", "all_gather")),
    "gather_operands_out_of_chip_order": both(replace("op", ("ar", "sum"), ("ar", "cat")), add("attr", ("ar", "axis", "1")),
                                              add("collective", ("mlp_out", "all_gather")),
                                              replace("reads", ("ar", "0", "h0"), ("ar", "0", "h1")),
                                              replace("reads", ("ar", "1", "h1"), ("ar", "1", "h0"))),
    "collective_unknown_kind": add("collective", ("mlp_out", "all_to_all")),
    "collective_given_twice": add("collective", ("mlp_out", "all_reduce"), ("mlp_out", "all_gather")),
    "valid_reduce_scatter": lambda p: None,
    "scatter_slice_of_wrong_block": both(replace("attr", ("s1", "start", "2"), ("s1", "start", "0")),
                                         replace("attr", ("s1", "end", "4"), ("s1", "end", "2"))),
    "scatter_read_by_a_non_slice": both(add("op", ("act", "relu")), add("reads", ("act", "0", "y")),
                                        add("writes", ("act", "z")), add("tensor", ("z", "f32")), add("spine", ("z",))),
    "scatter_second_slice_of_a_chip": both(add("op", ("s2", "slice")), add("reads", ("s2", "0", "y")),
                                           add("writes", ("s2", "z2")), add("tensor", ("z2", "f32")),
                                           add("placed", ("z2", "0")),
                                           add("attr", ("s2", "axis", "0"), ("s2", "start", "0"), ("s2", "end", "2"))),
    "scatter_axis_not_divided": replace("shape", ("y", "0", "4"), ("y", "0", "5")),
    "scatter_fold_has_no_axis": drop("attr", ("ar", "axis", "0")),
    "scatter_slice_writes_spine_tensor": both(drop("placed", ("z1", "1")), add("spine", ("z1",))),
    "scatter_slices_on_swapped_chips": both(replace("writes", ("s0", "z0"), ("s0", "z1")),
                                            replace("writes", ("s1", "z1"), ("s1", "z0"))),
    "shim_misses_a_class": own_shim({"transpose": "-"}),
    # The program's own description of a library shim (which shadows the library's whole)
    # answers matmul twice.
    "shim_answers_a_class_twice": add("supports", *[("cuda-lane:h100:Bf16", c, "fused") for c in CLASSES],
                                      ("cuda-lane:h100:Bf16", "matmul", "alone")),
    "shim_bad_level": own_shim({"softmax": "sometimes"}),
    "shim_unknown_limit_key": add("limit", ("cuda-lane:h100:Bf16", "max_matmul", "1")),
    "shim_undeclared_in_supports": add("supports", ("cuda-lane:b200:Fp8", "matmul", "fused")),
    "shim_answers_unknown_class": add("supports", ("cuda-lane:h100:Bf16", "conv2d", "fused")),
    "shim_views_unknown_class": add("views", ("cuda-lane:h100:Bf16", "conv2d")),
    "shim_undeclared_in_views": add("views", ("cuda-lane:b200:Fp8", "reshape")),
    # Collective kernels (SPEC §2 collective_kernel, limit min_collective_block).
    "collective_kernel_unknown_pattern": add("collective_kernel", ("cuda-lane:h100:Bf16", "all_gather_mm")),
    "collective_kernel_undeclared_shim": add("collective_kernel", ("cuda-lane:b200:Fp8", "all_gather_matmul")),
    "shim_min_collective_block_zero": add("limit", ("cuda-lane:h100:Bf16", "min_collective_block", "0")),
    "shim_min_collective_block_negative": add("limit", ("cuda-lane:h100:Bf16", "min_collective_block", "-1024")),
    "shim_min_collective_block_not_a_number": add("limit", ("cuda-lane:h100:Bf16", "min_collective_block", "1k")),
    "statement_two_classes": add("op", ("act", "gelu")),
    "statement_operands_misnumbered": replace("reads", ("mm1", "1", "w1"), ("mm1", "2", "w1")),
    "chips_given_twice": add("chips", ("4",)),
    "section_relocated_twice": both(add("section", ("tail", "act")), add("relocated", ("tail", "0"), ("tail", "1"))),
    "statement_in_two_relocated_sections": both(add("section", ("s1", "act"), ("s2", "act")),
                                                add("relocated", ("s1", "0"), ("s2", "1"))),
    "candidate_with_one_member": drop("member", ("f", "mm1")),
    "candidate_names_undeclared_statement": replace("member", ("f", "mm1"), ("f", "mm9")),
    "wrong_column_count": replace("writes", ("act", "z"), ("act", "z", "extra")),
    "non_number": replace("placed", ("w1", "1"), ("w1", "one")),
    "data_flow_cycle": both(replace("op", ("act", "relu"), ("act", "add")), add("reads", ("act", "1", "q")),
                            add("op", ("back", "neg")), add("reads", ("back", "0", "z")), add("writes", ("back", "q")),
                            add("tensor", ("q", "f32")), add("spine", ("q",))),
    "number_too_large": replace("placed", ("w1", "1"), ("w1", "18446744073709551616")),
    "number_in_hexadecimal": replace("placed", ("w1", "1"), ("w1", "0x1")),  # pyarrow alone would read 1
    "blank_lines_then_error": replace("placed", ("w1", "1"), ("w1", "one")),
    "crlf_then_error": replace("placed", ("w1", "1"), ("w1", "one")),
    "unknown_shim": lambda p: None,
    "valid": lambda p: None,
}
ARGS = {"unknown_shim": "--shim cuda-lane:h200:Fp8\n"}
# Cases whose fact files are written differently: blank lines count in line numbers, and a
# CRLF file is read line by line (both name the same line as in the file).
TEXT = {"blank_lines_then_error": lambda rel, lines: ("\n\n" if rel == "placed" else "\n").join(lines) + "\n",
        "crlf_then_error": lambda rel, lines: "".join(line + "\r\n" for line in lines)}

for name, change in CASES.items():
    p = copy.deepcopy(SCATTER if name == "valid_reduce_scatter" or name.startswith("scatter_") else BASE)
    change(p)
    case = ROOT / name
    if (case / "program").exists():
        shutil.rmtree(case / "program")
    (case / "program").mkdir(parents=True)
    for rel, tuples in p.items():
        lines = ["\t".join(t) for t in tuples]
        text = TEXT[name](rel, lines) if name in TEXT else "".join(line + "\n" for line in lines)
        (case / "program" / f"{rel}.facts").write_bytes(text.encode())
    if name in ARGS:
        (case / "args.txt").write_text(ARGS[name])
print(len(CASES), "cases")
