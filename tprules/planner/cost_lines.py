"""`plan --show cost`'s lines: each group's estimate, each collective kernel's overlap
(planner/kernels.py) and what each chip holds of the program's inputs (cost.py's model)."""

from __future__ import annotations

from .cost import MACHINES, KernelCost, Machine, _size, transfers


def cost_lines(prog, plan, machine: Machine | str) -> list[str]:
    """`plan --show cost`: each group's estimate on `machine` and what it is made of, so that a
    fusion's cost can be read: matmul FLOPs, bytes moved, the matmul operands that are views of
    a buffer (layouts that cost nothing) and the bytes of those computed into a buffer first."""
    from ..codegen.cost import Estimate, estimate
    from ..codegen.lowering.lower import lower
    from .kernels import pattern_of

    m = MACHINES[machine] if isinstance(machine, str) else machine
    lines, total, linked = [], 0.0, 0.0
    apart = None  # the members' estimates, made on the first collective kernel
    for g in plan.groups:
        pattern = pattern_of(prog, g.members) if g.place == "collective" else None
        if pattern is not None:  # a collective kernel: its overlap, from its members costed apart
            line, seconds = _kernel_line(prog, g, pattern, apart := apart or KernelCost(prog, m))
            total += seconds
            lines.append(line)
            continue
        kernel = lower(g, prog)
        e = estimate(kernel, m)
        moves = transfers(prog, g, m)
        if [kind for kind, *_ in moves] == ["reduce_scatter"] and len(g.members) == 1:  # chip k adds block k only
            e = Estimate(e.flops / prog.chips, e.bytes / prog.chips, e.ops / prog.chips, e.transcendental / prog.chips,
                         e.launches, e.views, e.copied / prog.chips)
        seconds = m.seconds(e)
        total += seconds
        experts = _expert_weights(kernel, prog)
        parts = [f"{e.flops / 1e6:.1f} MFLOP" if e.flops else "", f"{_size(e.bytes)} moved",
                 f"{_size(experts)} of weights read" if experts else "",
                 f"{e.views} operand{'s' * (e.views != 1)} read as views" if e.views else "",
                 f"{_size(e.copied)} of layouts copied into buffers" if e.copied else ""]
        line = f"[cost] {g.group:<6} {seconds * 1e3:8.3f} ms  {kernel.kind}: {', '.join(p for p in parts if p)}"
        for kind, whole, chips, moved, link_s in moves:
            linked += link_s
            line += (f"; + {link_s * 1e3:.3f} ms {kind.replace('_', '-')} of {_size(whole)} over {chips} chips, "
                     f"{_size(moved)} into each ({m.link.name}, {m.link.algorithm})")
        lines.append(line)
    between = f", {linked * 1e3:.3f} ms of it between chips" if linked else ""
    lines.append(f"[cost] {len(plan.groups)} groups on {m.name}: {(total + linked) * 1e3:.3f} ms estimated{between} "
                 "(one chip's share each; a view costs the bytes its reader loads, a copied layout its buffer stored "
                 "and read back)")
    return lines


def _expert_weights(kernel, prog) -> float:
    """Bytes of the program's inputs that a kernel holding an experts' matmul reads (a grouped
    matmul's experts once each, or a batched matmul of weights gathered per (token, expert)
    pair: codegen/cost.py's weight_bytes); 0 for any other kernel, whose line says nothing."""
    from ..codegen.cost import weight_bytes
    from ..codegen.ir import BatchedMatmulStage, GroupedMatmulStage, params_read

    weights = {p.name for p in getattr(kernel, "params", ()) if p.role == "in" and p.tensor in prog.inputs}
    experts = [s for s in getattr(kernel, "stages", ()) if isinstance(s, GroupedMatmulStage) or
               isinstance(s, BatchedMatmulStage) and any(params_read(mm.b) & weights for mm in s.matmuls)]
    return weight_bytes(kernel, frozenset(prog.inputs)) if experts else 0.0


def input_lines(prog) -> list[str]:
    """`plan --show cost` on more than one chip: the program inputs (weights) each chip reads,
    its own and the spine's: where a plan splits weights, what each chip holds of them (expert
    parallelism: E/N whole experts each; tensor parallelism: 1/N of every expert)."""
    if prog.chips < 2:
        return []
    own = [0.0] * prog.chips
    spine = 0.0
    for name in prog.inputs:
        t = prog.tensors[name]
        nbytes = float(t.size * t.storage.itemsize)
        if t.home is None:
            spine += nbytes
        else:
            own[t.home] += nbytes
    chips = ", ".join(f"chip {k} {_size(n)}" for k, n in enumerate(own))
    return [f"[inputs] each chip's own: {chips} (together {_size(sum(own))}); the spine's {_size(spine)} on every chip"]


def _kernel_line(prog, group, pattern: str, cost: KernelCost) -> tuple[str, float]:
    """`plan --show cost`'s line of a collective kernel: its overlap (planner/kernels.py)."""
    from .kernels import overlap

    o = overlap(prog, cost, pattern, group.members)
    ms = 1e3
    return (f"[cost] {group.group:<6} {o.kernel * ms:8.3f} ms  collective kernel {pattern}: transfer "
            f"{o.transfer * ms:.3f} ms, compute {o.compute * ms:.3f} ms, {o.hidden * ms:.3f} ms hidden by overlap "
            f"(max of the two + one launch {o.launch * ms:.3f} ms, against {o.unfused * ms:.3f} ms unfused)", o.kernel)
