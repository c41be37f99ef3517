"""On the CPU the chips share the cores, so a run launches its kernels in a list schedule's
order (runtime/execution/launch_order.py): producers first, and of the kernels ready, the one with the
longest estimated path to the end first. The values do not depend on the order."""

from __future__ import annotations

import doctest

import numpy as np
from plans import example

import tprules.runtime.execution.launch_order as launch_order_module
from tprules.codegen.ir import Kernel, Param
from tprules.planner import plan as make_plan
from tprules.runtime import Prepared, execute
from tprules.runtime.execution.launch_order import launch_order


def _kernel(name: str, reads: list[str], writes: list[str], place: str = "spine", local=()) -> Kernel:
    params = [Param(f"i{t}", "in", (1,), "f32", t) for t in reads]
    if local:
        params.append(Param("local", "local", (1,), "f32", None, tuple(local)))
    params += [Param(f"o{t}", "out", (1,), "f32", t) for t in writes]
    return Kernel(name, (name,), place, tuple(params), ())


def test_docstring_examples():
    result = doctest.testmod(launch_order_module)
    assert result.failed == 0 and result.attempted > 0


def test_the_kernel_others_wait_for_goes_first_and_producers_stay_first():
    # a shared expert (no chip waits for it) before the routing (every chip's experts read it)
    ks = [_kernel("norm", ["x"], ["h"]), _kernel("shared", ["h"], ["s"]), _kernel("route", ["h"], ["r"]),
          _kernel("experts0", ["r"], ["e0"], "chip:0"), _kernel("experts1", ["r"], ["e1"], "chip:1"),
          _kernel("fold", ["e0", "e1"], ["e"], "collective"), _kernel("add", ["s", "e"], ["y"])]
    order = [ks[i].group for i in launch_order(ks, [1, 3, 1, 5, 5, 1, 1])]
    assert order == ["norm", "route", "experts0", "experts1", "shared", "fold", "add"]
    # plan order where the estimates say nothing else
    assert launch_order(ks, [0] * len(ks)) == [0, 1, 2, 3, 4, 5, 6]


def test_a_fused_folds_local_partials_are_its_producers():
    ks = [_kernel("p0", ["x"], ["a0"], "chip:0"), _kernel("p1", ["x"], ["a1"], "chip:1"),
          _kernel("sum", [], ["y"], "chip:0", local=((0, "a0"), (1, "a1")))]
    assert launch_order(ks, [1, 1, 9])[-1] == 2


def test_a_run_launches_in_that_order_and_gives_the_values_of_plan_order():
    ws, prog = example("llama-layer-tp4")
    plan = make_plan(ws)
    ready = Prepared(prog, plan, "cpu")
    order = ready.executor.order
    assert order is not None and sorted(order) == list(range(len(ready.kernels)))
    written = {}
    for at, i in enumerate(order):
        for p in ready.kernels[i].params:
            if p.role == "out" and p.tensor is not None:
                written[p.tensor] = at
    for at, i in enumerate(order):  # every kernel after the writers of what it reads
        assert all(written.get(p.tensor, -1) < at for p in ready.kernels[i].params if p.role == "in")
    planned = execute(ws, plan, prog=prog)
    each = execute(ws, plan, prog=prog, share=False)  # a copy a chip: plan order
    assert planned.ok and each.ok
    for t, value in each.values.items():
        np.testing.assert_array_equal(planned.values[t], value, err_msg=t)
