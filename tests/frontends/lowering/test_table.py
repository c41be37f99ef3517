"""The op table's registry (tprules/frontends/lowering/table.py): one lowering per op, a second
one an error unless it overrides; the table's ops are the checked-in list ops.txt; every
lowering is a module-level function of a module the table of contents names."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tprules.frontends.lowering import aten
from tprules.frontends.lowering.table import MISSING, REGISTRY, OpTable, Registry

FOLDER = Path(aten.__file__).parent
LISTED = FOLDER / "ops.txt"


def first(ctx, n):
    pass


def second(ctx, n):
    pass


def test_a_duplicate_lowering_raises_naming_the_op_and_both_places():
    registry = Registry()
    registry.lowering("aten.mm.default")(first)
    with pytest.raises(ImportError) as err:
        registry.lowering("aten.bmm.default", "aten.mm.default")(second)
    text = str(err.value)
    assert "registers aten.mm.default twice" in text
    assert f"tests/frontends/lowering/test_table.py:{first.__code__.co_firstlineno} (first)" in text
    assert f"tests/frontends/lowering/test_table.py:{second.__code__.co_firstlineno} (second)" in text


def test_an_override_replaces_the_first_lowering():
    registry = Registry()
    registry.lowering("aten.mm.default")(first)
    registry.lowering("aten.mm.default", override=True)(second)
    assert registry.entries["aten.mm.default"].fn is second


def test_an_override_of_no_lowering_raises():
    with pytest.raises(ImportError) as err:
        Registry().lowering("aten.mm.default", override=True)(second)
    assert str(err.value).endswith(f"test_table.py:{second.__code__.co_firstlineno} (second) overrides aten.mm.default, "
                                   "which has no lowering to replace")


def test_the_ops_of_the_table_are_the_checked_in_list():
    listed = LISTED.read_text().split()
    registered = REGISTRY.names()
    missing, unlisted = sorted(set(listed) - set(registered)), sorted(set(registered) - set(listed))
    assert not missing and not unlisted, (f"ops.txt lists ops the table lacks: {', '.join(missing) or 'none'}; "
                                          f"the table holds ops ops.txt does not list: {', '.join(unlisted) or 'none'}")
    assert listed == registered, "ops.txt is sorted, one op a line"


def test_every_op_is_found_in_torch_but_an_optional_one():
    pytest.importorskip("torch")
    table = aten.build_table()
    found = {str(op) if hasattr(op, "_schema") else f"operator.{op.__name__}" for op in table.ops}
    absent = set(REGISTRY.names()) - found
    assert all(REGISTRY.entries[name].optional for name in absent), absent
    assert {str(op) for op in table.cat} == {"aten.cat.default"}
    assert {str(op) for op in table.skip} == set(aten.SKIP)


def test_every_lowering_is_a_module_level_function_of_a_listed_module():
    modules = {m.__name__ for m in aten.MODULES}
    for name, registration in REGISTRY.entries.items():
        fn = registration.fn
        assert fn.__module__ in modules, f"{name}: {fn.__module__} is not in aten.MODULES"
        assert getattr(importlib.import_module(fn.__module__), fn.__name__) is fn, f"{name}: {fn} is not module-level"


def test_every_module_of_lowerings_is_read_into_the_table():
    lowerings = {p.stem for p in FOLDER.glob("*.py")} - {"__init__", "table", "aten", "walk"}
    assert lowerings == {m.__name__.rsplit(".", 1)[1] for m in aten.MODULES}


def test_the_table_of_contents_names_every_module():
    contents = importlib.import_module("tprules.frontends.lowering").__doc__
    for path in sorted(FOLDER.glob("*.py")):
        if path.name != "__init__.py":
            assert f"\n    {path.name} " in contents, f"lowering/__init__.py does not list {path.name}"


def test_an_op_outside_the_table_is_one_line_naming_it():
    torch = pytest.importorskip("torch")
    from tprules.frontends.errors import ImportFailed
    from tprules.frontends.lowering.walk import Lowerer
    from tprules.frontends.source.constants import Constants
    from tprules.frontends.source.core_aten import decompositions

    class Exp(torch.nn.Module):
        def forward(self, x):
            return x.exp()

    module = Exp()
    program = torch.export.export(module, (torch.ones(2, 3),), strict=False).run_decompositions(decompositions())
    with pytest.raises(ImportFailed) as err:
        Lowerer(program, Constants(program, module), "Tiny", table=OpTable()).run()
    assert str(err.value) == f"import: Tiny: aten.exp.default at (top): {MISSING}"
    assert MISSING == "no registry class for it in the op table (tprules/frontends/lowering/aten.py)"
