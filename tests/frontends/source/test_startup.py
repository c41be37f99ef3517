"""What an import's process loads and does (frontends/source/startup.py, core_aten.py, cli.py):
transformers lists its model folders once, scipy stays out, torch lists the
CompositeImplicitAutograd ops once, the model is traced once to core ATen, and the process
ends without tearing torch down; with the same transformers, the same graph and the same
output as without."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tprules.frontends.source import startup

from ..tiny import make_model

LOAD = """
import json, sys
from tprules.frontends.source.startup import load_extra
load_extra()
from transformers.utils import import_utils
import transformers.models
info = import_utils.create_import_structure_from_path.cache_info()
report = {"scipy": "scipy" in sys.modules, "modeling_utils": "transformers.modeling_utils" in sys.modules,
          "told_no_scipy": sorted(name for name, m in sys.modules.items() if name.startswith("transformers.")
                                  and getattr(vars(m).get("is_scipy_available"), "__module__", "").startswith("tprules")),
          "scipy_available": import_utils.is_scipy_available(),
          "maxsize": info.maxsize, "hits": info.hits,
          "finders_left": [type(f).__name__ for f in sys.meta_path if type(f).__module__.startswith("tprules")]}
import scipy.optimize  # hidden only while transformers loads
print(json.dumps(report))
"""

LAZY = """
import json, sys
if sys.argv[1] == "startup":
    from tprules.frontends.source.startup import load_extra
    load_extra()
else:
    import transformers.modeling_utils
import transformers, transformers.models
def canon(v):
    if isinstance(v, dict):
        return sorted([canon(k), canon(x)] for k, x in v.items())
    if isinstance(v, (set, frozenset, list, tuple)):
        return sorted(canon(x) for x in v)
    return str(v)
def table(m):  # the lazy module's maps of names to modules, backends and objects
    return canon({k: v for k, v in vars(m).items() if k.startswith("_") and isinstance(v, dict)
                  and all(isinstance(x, str) for x in v)})
lazy = sorted(name for name, m in sys.modules.items() if type(m).__name__ == "_LazyModule")
print(json.dumps([lazy, [table(sys.modules[name]) for name in lazy], sorted(dir(transformers.models))]))
"""


def _run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_transformers_lists_its_model_folders_once_and_scipy_stays_out():
    import transformers

    folders = [p for p in (Path(transformers.__file__).parent / "models").iterdir() if p.is_dir()
               and p.name != "__pycache__"]
    report = json.loads(_run(LOAD))
    assert report["modeling_utils"] and not report["scipy"] and report["told_no_scipy"] == []
    assert report["scipy_available"]
    assert report["maxsize"] is None and report["hits"] >= len(folders)  # the second listing read none again
    assert report["finders_left"] == []


def test_transformers_lazy_modules_are_the_ones_it_builds_itself():
    assert json.loads(_run(LAZY, "startup")) == json.loads(_run(LAZY, "plain"))


def test_a_loaded_transformers_is_left_as_it_is():
    import transformers.modeling_utils  # noqa: F401 - loaded, as in this test process

    finders, scipy = list(sys.meta_path), sys.modules.get("scipy")
    startup.load_extra()
    assert sys.meta_path == finders and sys.modules.get("scipy") is scipy


def test_run_decompositions_lists_the_cia_ops_once_and_decomposes_the_same(monkeypatch):
    import torch
    from torch._export import utils

    from tprules.frontends.source import core_aten

    calls = []
    listing = utils._materialize_cpp_cia_ops

    def counted():
        calls.append(1)
        listing()

    monkeypatch.setattr(utils, "_materialize_cpp_cia_ops", counted)
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.SiLU(), torch.nn.Linear(8, 4)).eval()
    with torch.no_grad():
        exported = torch.export.export(model, (torch.zeros(2, 4, device="meta"),), strict=False)
        calls.clear()
        with core_aten._one_listing_of_cia_ops():
            once = exported.run_decompositions(core_aten.decompositions())
        assert len(calls) == 1 and utils._materialize_cpp_cia_ops is counted
        calls.clear()
        every = exported.run_decompositions(core_aten.decompositions())
    assert len(calls) > 1  # without it, torch lists them once per namespace
    assert once.graph_module.code == every.graph_module.code


def _nodes(program) -> list[tuple]:
    """What the lowering reads of each node (the checks it skips left out)."""
    rows = []
    for n in program.graph.nodes:
        if n.target is not torch_assert():
            val = n.meta.get("val")
            rows.append((n.name, n.op, str(n.target), str(n.args), str(n.kwargs), str(n.meta.get("nn_module_stack")),
                         str(getattr(val, "shape", val)), str(getattr(val, "dtype", None))))
    return rows


def torch_assert():
    import torch

    return torch.ops.aten._assert_tensor_metadata.default


@pytest.mark.parametrize("model_type", ["llama", "qwen3_moe", "mixtral", "gpt_neox", "gemma"])
def test_one_trace_is_the_two_traces_node_for_node(model_type, tmp_path, monkeypatch):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from tprules.frontends.source import core_aten

    config = AutoConfig.from_pretrained(make_model(tmp_path / "m", model_type, weights=False))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32,
                                                 experts_implementation="batched_mm").eval()
    args, kwargs = (torch.zeros((1, 6), dtype=torch.int64, device="meta"),), {"use_cache": False}
    traces = []
    monkeypatch.setattr(core_aten, "_one_trace", lambda *a, one=core_aten._one_trace: traces.append(1) or one(*a))
    with torch.no_grad():
        one = core_aten.export(model, args, kwargs)
        two = core_aten.two_traces(model, args, kwargs)
    assert traces == ([] if model_type == "gemma" else [1])  # gemma ties its embedding to lm_head: two traces
    assert _nodes(one) == _nodes(two)
    assert one.graph_signature == two.graph_signature
    assert sorted(one.state_dict) == sorted(two.state_dict) and sorted(one.constants) == sorted(two.constants)


def test_without_torch_private_export_the_two_traces_are_used(monkeypatch):
    from tprules.frontends.source import core_aten

    monkeypatch.setattr(core_aten, "_one_trace_parts", lambda: None)
    used = []
    monkeypatch.setattr(core_aten, "two_traces", lambda *a: used.append(a) or "two")
    assert core_aten.export("model", ("ids",), {}) == "two" and used == [("model", ("ids",), {})]


def test_a_model_the_one_trace_refuses_is_traced_the_public_way(monkeypatch):
    import torch

    from tprules.frontends.source import core_aten

    def refuse(*args):
        raise RuntimeError("not in one trace")

    monkeypatch.setattr(core_aten, "_one_trace", refuse)
    model = torch.nn.Linear(4, 4).eval()
    with torch.no_grad():
        program = core_aten.export(model, (torch.zeros(2, 4),), {})
    assert "aten.mm.default" in {str(n.target) for n in program.graph.nodes}


ROOT = Path(__file__).resolve().parents[3]
END = """
import atexit, sys
atexit.register(lambda: print("torn down", file=sys.stderr))
sys.argv = ["tprules", *sys.argv[1:]]
from tprules.cli import entry
entry()
"""


def test_an_import_ends_its_process_at_once_with_its_output_written(tmp_path):
    source = make_model(tmp_path / "model", "llama", weights=False, num_hidden_layers=3)
    done = subprocess.run([sys.executable, "-c", END, "import", "hf", str(source), "--tp", "2", "--no-data",
                           "--out", str(tmp_path / "p"), "--format", "json"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "torn down" not in done.stderr
    assert json.loads(done.stdout)["statements"] == json.loads((tmp_path / "p" / "source.json").read_text())[
        "statements"]
    bad = subprocess.run([sys.executable, "-c", END, "import", "hf", str(tmp_path / "none"), "--tp", "2",
                          "--out", str(tmp_path / "q")], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.splitlines() == [f"import: {tmp_path / 'none'}: no such folder (SOURCE is a save_pretrained "
                                       "folder)"]
    other = subprocess.run([sys.executable, "-c", END, "check", str(ROOT / "facts" / "llama-layer-tp4")],
                           capture_output=True, text=True, timeout=300)
    assert other.returncode == 0 and "torn down" in other.stderr  # every other command exits as Python does


def test_a_profiled_import_still_writes_its_profile(tmp_path):
    source = make_model(tmp_path / "model", "llama", weights=False, num_hidden_layers=3)
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(tmp_path / "i.prof"), "-m", "tprules",
                           "import", "hf", str(source), "--tp", "2", "--no-data", "--out", str(tmp_path / "p")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "i.prof").stat().st_size > 0
