"""The order a run launches its kernels in, on chips that share one machine's cores (the CPU).

Each chip's queue runs its kernels in the order they are launched, and on the CPU a spine
kernel runs once, on chip 0's queue, with every core (runtime/execution/executor.py). Launched in plan order
(program order of each group's first member), a spine kernel that no other chip waits for
can hold chip 0's queue, and the cores, ahead of one that every other chip waits for: in
Qwen2-MoE's layer the shared expert (spine: the plan does not split it) comes before the
routing that each chip's share of the routed experts reads, so at TP 4 the chips idled
through the shared expert.

The launch order is a list schedule instead: of the kernels whose producers are launched,
first the one with the longest estimated path to the end of the run (its *rank*: its own
estimate, codegen/cost.py, plus the largest rank among the kernels that read what it
writes); ties in plan order. Producers still come before their consumers, and no kernel
writes a buffer another reads (a scatter writes in place only into an input no other
kernel reads), so every order of that kind computes the same values: only when each chip's
work starts changes.

>>> from tprules.codegen.ir import Kernel, Param
>>> def k(name, reads, writes, place="spine"):
...     params = tuple(Param(f"p{i}", role, (1,), "f32", t) for i, (t, role) in
...                    enumerate([(t, "in") for t in reads] + [(t, "out") for t in writes]))
...     return Kernel(name, (name,), place, params, ())
>>> ks = [k("shared", ["x"], ["s"]), k("route", ["x"], ["r"]), k("experts", ["r"], ["e"], "chip:1"),
...       k("add", ["s", "e"], ["y"])]
>>> [ks[i].group for i in launch_order(ks, [1.0, 1.0, 5.0, 1.0])]
['route', 'experts', 'shared', 'add']
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def launch_order(kernels: Sequence, seconds: Sequence[float]) -> list[int]:
    """Indices of `kernels` (in an order where producers come first) in launch order;
    `seconds`: each kernel's estimate."""
    writer: dict[str, int] = {}
    readers: list[set[int]] = [set() for _ in kernels]
    waits = [0] * len(kernels)
    for i, kernel in enumerate(kernels):
        reads = [p.tensor for p in kernel.params if p.role == "in"]
        reads += [t for p in kernel.params if p.role == "local" for _, t in p.local]  # a fused fold's partials
        producers = {writer[t] for t in reads if t in writer}
        producers.discard(i)
        for j in producers:
            readers[j].add(i)
        waits[i] = len(producers)
        for p in kernel.params:
            if p.role == "out" and p.tensor is not None:
                writer[p.tensor] = i
    rank = [0.0] * len(kernels)
    for i in reversed(range(len(kernels))):
        rank[i] = seconds[i] + max((rank[j] for j in readers[i]), default=0.0)
    ready = [(-rank[i], i) for i in range(len(kernels)) if not waits[i]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for j in readers[i]:
            waits[j] -= 1
            if not waits[j]:
                heapq.heappush(ready, (-rank[j], j))
    assert len(order) == len(kernels), "the kernels' data flow has a cycle"
    return order
