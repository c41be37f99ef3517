"""`tprules import torch` refuses what it cannot import faithfully: one line naming the module
path, the style and what is missing (or the recipe's file and line), exit 2, no traceback,
no DIR."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from ..torch_recipe import TITAN, write_recipe  # noqa: E402

MLP = '{"w1": ColwiseParallel(), "w2": RowwiseParallel()}'

# name → (model, plan, extra arguments, what the line ends with; an optional recipe prefix)
BAD = {
    "path_matches_no_module": ("mlp", '{"w9": ColwiseParallel(), "w2": RowwiseParallel()}', [],
                               "recipe.py: import: recipe: plan key 'w9' (ColwiseParallel) matches no module of MLP"),
    "custom_style": ("mlp", '{"w1": Mine(), "w2": RowwiseParallel()}', [],
                     "recipe.py: import: recipe: w1: Mine: a ParallelStyle tprules does not import (it reads "
                     "ColwiseParallel, RowwiseParallel, SequenceParallel, PrepareModuleInput, PrepareModuleOutput "
                     "and PrepareModuleInputOutput)", "class Mine(ColwiseParallel):\n    pass\n"),
    "partial_layout": ("mlp", '{"w1": ColwiseParallel(), "w2": RowwiseParallel(output_layouts=Partial())}', [],
                       "recipe.py: import: recipe: w2: RowwiseParallel: output_layouts Partial() is a layout tprules "
                       "does not import (Shard(d) and Replicate() are)"),
    "shard_on_a_missing_axis": ("lm", TITAN.replace('"norm": SequenceParallel()',
                                                    '"norm": SequenceParallel(sequence_dim=3)'), [],
                                "recipe.py: import: recipe: SequenceParallel at norm: Shard(3) of its input 0 add_9, "
                                "which has 3 axes [2, 8, 16]"),
    "shard_not_divisible": ("lm", TITAN, ["--seq", "6", "--tp", "4"],
                            "recipe.py: import: recipe: RowwiseParallel at tok_embeddings: Shard(1) of its output "
                            "embedding: axis 1 has 6, which --tp 4 does not divide"),
    # 4 heads of 4 features over 8 chips: each chip's colwise block is half a head, which the
    # forward's view(b, s, -1, head_dim) cannot hold; named at the style that split it
    "head_cut_in_two": ("lm", TITAN, ["--tp", "8"],
                        "recipe.py: import: recipe: ColwiseParallel at layers.0.attention.wq: its output's 16 features "
                        "are 4 groups of 4 (a view at layers.0.attention), which do not split over --tp 8 chips"),
    "colwise_not_linear": ("normed", '{"norm": ColwiseParallel()}', [],
                           "recipe.py: import: recipe: norm: ColwiseParallel: it shards nn.Linear and nn.Embedding; "
                           "this module is a RMSNorm"),
    "plain_replicated_taken_as_shard": (
        "mlp", '{"w2": RowwiseParallel()}', [],
        "recipe.py: import: recipe: RowwiseParallel at w2: torch takes its input 0 relu, a plain tensor, to be Shard(-1) "
        "on 2 chips, but it is replicated (Replicate()) here; torch would run a program other than the model's "
        "(a layout the importer cannot import faithfully)"),
    # the same plan with use_local_output=False imports (test_import_torch's mlp_gathered_dtensor_sliced)
    "plain_gathered_taken_as_shard": (
        "mlp", '{"w1": ColwiseParallel(output_layouts=Replicate()), "w2": RowwiseParallel()}', [],
        "recipe.py: import: recipe: RowwiseParallel at w2: torch takes its input 0 relu, a plain tensor, to be Shard(-1) "
        "on 2 chips, but it is replicated (Replicate()) here; torch would run a program other than the model's "
        "(a layout the importer cannot import faithfully)"),
    "sequence_parallel_on_a_whole_input": (
        "normed", '{"norm": SequenceParallel()}', [],
        "recipe.py: import: recipe: SequenceParallel at norm: torch takes its input 0 view_1, a plain tensor, to be "
        "Shard(1) on 2 chips, but it is replicated (Replicate()) here; torch would run a program other than the "
        "model's (a layout the importer cannot import faithfully)"),
    "kwarg_layouts": ("mlp", '{"w1": PrepareModuleInput(input_kwarg_layouts={"input": Shard(1)}, '
                             'desired_input_kwarg_layouts={"input": Replicate()})}', [],
                      "recipe.py: import: recipe: w1: PrepareModuleInput: input_kwarg_layouts {'input': Shard(dim=1)}: "
                      "layouts of keyword inputs are not imported (give the inputs positionally)"),
    "all_to_all": ("mlp", '{"w1": ColwiseParallel(output_layouts=Shard(1)), "w2": RowwiseParallel()}', [],
                   "recipe.py: import: recipe: ColwiseParallel at w1: its output view_1 is split (Shard(axis 2 in 2)); "
                   "Shard(1) needs an all-to-all, which tprules does not import"),
    "inputs_of_one_shape": ("gated", '{"gate": PrepareModuleInput(input_layouts=(Replicate(), Replicate()), '
                                     'desired_input_layouts=(Replicate(), Shard(1)))}', [],
                            "recipe.py: import: recipe: PrepareModuleInput at gate: its inputs 0 and 1 both have shape "
                            "[2, 8, 16]; which one x is cannot be told from the trace"),
    "two_styles_for_one_module": ("mlp", '{"w1": ColwiseParallel(), "w*": RowwiseParallel()}', [],
                                  "recipe.py: import: recipe: w1: plan keys 'w1' and 'w*' both give it a style "
                                  "(ColwiseParallel, RowwiseParallel); tprules imports one style per module"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_plan_tprules_cannot_import_faithfully_is_one_line(cli, tmp_path, case):
    kind, plan, extra, line, *prefix = BAD[case]
    path = write_recipe(tmp_path, kind, plan, extra=prefix[0] if prefix else "")
    args = ["--tp", "2", *extra] if "--tp" not in extra else extra
    status, out, err = cli("import", "torch", path, "--out", tmp_path / "p", *args)
    assert (status, out) == (2, "")
    assert err == f"{tmp_path}/{line}\n"
    assert not (tmp_path / "p").exists()


def _recipe(tmp_path, text: str):
    path = tmp_path / "recipe.py"
    path.write_text(text)
    return path


GOOD = "import torch\nfrom torch.distributed.tensor.parallel import ColwiseParallel\n"
# name → (the recipe's text, what its line says after "PATH:")
RECIPES = {
    "fails_to_import": ("import torch\n\nx = 1 / 0\n", "3: import: the recipe fails to import: ZeroDivisionError: "
                                                      "division by zero"),
    "syntax_error": ("def model(:\n", "1: import: the recipe fails to import: SyntaxError: invalid syntax"),
    "no_plan": (GOOD + "def model():\n    return torch.nn.Linear(4, 4)\n\ndef inputs():\n    return (torch.ones(4),)\n",
                " import: recipe: the recipe defines no PLAN (it defines model(), inputs() and PLAN)"),
    "no_model_no_inputs": (GOOD + "PLAN = {}\n", " import: recipe: the recipe defines no model, inputs (it defines "
                                                 "model(), inputs() and PLAN)"),
    "model_not_a_module": (GOOD + "def model():\n    return 3\n\ndef inputs():\n    return (torch.ones(4),)\n\nPLAN = {}\n",
                           " import: recipe: model() returned a int; it returns the nn.Module"),
    "model_raises": (GOOD + "def model():\n    raise ValueError('no weights')\n\ndef inputs():\n    return ()\n\nPLAN = {}\n",
                     "4: import: model() fails: ValueError: no weights"),
    "seq_not_taken": (GOOD + "def model():\n    return torch.nn.Linear(4, 4)\n\ndef inputs():\n    return (torch.ones(4),)"
                             "\n\nPLAN = {'': ColwiseParallel()}\n", " import: recipe: --seq given, but inputs() takes no seq"),
    "root_style": (GOOD + "def model():\n    return torch.nn.Linear(4, 4)\n\ndef inputs():\n    return (torch.ones(4),)"
                          "\n\nPLAN = {'': ColwiseParallel()}\n",
                   " import: recipe: plan key '': a plan names submodules by path (the root's own style is not imported)"),
}


@pytest.mark.parametrize("case", sorted(RECIPES))
def test_a_broken_recipe_is_one_line_at_its_file(cli, tmp_path, case):
    text, line = RECIPES[case]
    path = _recipe(tmp_path, text)
    extra = ["--seq", "4"] if case == "seq_not_taken" else []
    status, out, err = cli("import", "torch", path, "--tp", "2", "--out", tmp_path / "p", *extra)
    assert (status, out) == (2, "")
    assert err == f"{path}:{line}\n"
    assert not (tmp_path / "p").exists()


def test_a_recipe_may_define_a_dataclass(cli, tmp_path):
    """torchtitan's ModelArgs is a dataclass: the recipe is loaded as an imported module is
    (dataclasses resolves string annotations through sys.modules), and its field sizes the
    module: the program is the Linear of Args().dim inputs, its output the module's own."""
    import numpy as np

    from ..tiny import facts

    path = _recipe(tmp_path, "from __future__ import annotations\n" + GOOD +
                   "from dataclasses import dataclass\n\n@dataclass\nclass Args:\n    dim: int = 6\n\n"
                             "def model():\n    return torch.nn.Linear(Args().dim, 4)\n\n"
                             "def inputs():\n    return (torch.ones(2, 6),)\n\nPLAN = {}\n")
    status, out, err = cli("import", "torch", path, "--tp", "2", "--out", tmp_path / "p")
    assert status == 0, err
    program = tmp_path / "p"
    source = json.loads((program / "source.json").read_text())
    assert (source["recipe"], source["model"], source["inputs"]) == ("recipe", "Linear", {"input": [2, 6]})
    assert facts(program, "op") == [["mm", "matmul"], ["add", "add"]]
    shapes = {}
    for tensor, _, size in facts(program, "shape"):
        shapes.setdefault(tensor, []).append(int(size))
    assert shapes == {"input": [2, 6], "weight": [4, 6], "bias": [4], "mm": [2, 4], "output": [2, 4]}
    data = {name: np.load(program / "data" / f"{name}.npy") for name in ("input", "weight", "bias")}
    want = data["input"] @ data["weight"].T + data["bias"]
    assert np.allclose(np.load(program / "expected" / "output.npy"), want, atol=1e-6)
