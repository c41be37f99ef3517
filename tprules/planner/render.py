"""A plan as text (a table grouped by place) and as a Graphviz DOT picture.

Both take the plan, each statement's class, the folds (statement → collective) and the
data flow between statements; neither needs Graphviz installed.
"""

from __future__ import annotations

from .plan import Group, Plan

# One colour per chip (cycled), grey for the spine, white for collectives.
CHIP_COLOURS = ("#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69", "#fccde5", "#ffffb3",
                "#bc80bd", "#ccebc5", "#ffed6f", "#d9d9d9")
SPINE_COLOUR = "#e0e0e0"


def place_order(place: str) -> tuple:
    """spine first, then chips in number order, then collectives."""
    if place.startswith("chip:"):
        return (1, int(place[5:]), place)
    return (0 if place == "spine" else 2, 0, place)


def by_place(plan: Plan) -> dict[str, list[Group]]:
    sections: dict[str, list[Group]] = {}
    for g in plan.groups:
        sections.setdefault(g.place, []).append(g)
    return {p: sections[p] for p in sorted(sections, key=place_order)}


def render_text(plan: Plan, classes: dict[str, str], folds: dict[str, str], header: str,
                modules: dict[str, str] | None = None) -> str:
    """The plan as a table: one section per place (spine, chip:0, ..., collective); with
    `modules` (statement → module path, an imported model's `module` attrs) each group
    ends with the module path its members share."""
    statements = sum(len(g.members) for g in plan.groups)
    fused = [g for g in plan.groups if len(g.members) > 1]
    share = 100 * len(plan.groups) / statements if statements else 0
    lines = [header, "",
             f"{statements} statements in {len(plan.groups)} groups ({share:.0f}%); "
             f"{len(fused)} fused ops holding {sum(len(g.members) for g in fused)} statements", ""]
    rows = {g.group: (g.group, ", ".join(g.members), _detail(g, classes, folds) + _module(g, modules or {}))
            for g in plan.groups}
    widths = [max((len(r[i]) for r in rows.values()), default=0) for i in range(2)]
    for place, groups in by_place(plan).items():
        count = sum(len(g.members) for g in groups)
        lines.append(f"{place}  ({_count(len(groups), 'group')}, {_count(count, 'statement')})")
        for g in groups:
            name, members, detail = rows[g.group]
            lines.append(f"  {name:<{widths[0]}}  {members:<{widths[1]}}  {detail}".rstrip())
        lines.append("")
    return "\n".join(lines)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _module(g: Group, modules: dict[str, str]) -> str:
    """The longest module path all of a group's members lie in, if they have one."""
    paths = [modules[o].split(".") for o in g.members if o in modules]
    if not paths:
        return ""
    common = paths[0]
    for p in paths[1:]:
        n = 0
        while n < min(len(common), len(p)) and common[n] == p[n]:
            n += 1
        common = common[:n]
    return "  " + (".".join(common) or "(top)")


def _detail(g: Group, classes: dict[str, str], folds: dict[str, str]) -> str:
    """The classes of a group's members, or the collective a fold belongs to."""
    if len(g.members) == 1 and g.members[0] in folds:
        return f"[collective: {folds[g.members[0]]}]"
    held = [folds[o] for o in g.members if o in folds]
    if g.place == "collective" and len(held) == 1:  # a collective kernel (SPEC §3)
        return f"[collective kernel: {held[0]}] " + "+".join(classes.get(o, "?") for o in g.members)
    return "+".join(classes.get(o, "?") for o in g.members)


def group_edges(plan: Plan, flows: dict[str, list[str]]) -> list[tuple[str, str]]:
    """Edges between groups (producer group → consumer group), in plan order."""
    of = plan.group_of()
    rank = {g.group: i for i, g in enumerate(plan.groups)}
    edges = {(of[a].group, of[b].group) for a, bs in flows.items() for b in bs if of[a].group != of[b].group}
    return sorted(edges, key=lambda e: (rank[e[0]], rank[e[1]]))


def render_dot(plan: Plan, classes: dict[str, str], folds: dict[str, str], flows: dict[str, list[str]],
               title: str = "") -> str:
    """Graphviz DOT: a cluster per place, one colour per chip, the spine grey, collectives
    as white octagons marked with their kind (`all-reduce C`, `all-gather C`). `dot -Tpng plan.dot -o plan.png` draws it."""
    out = ["digraph plan {",
           f"  label={_quote(title)}; labelloc=t; fontname=Helvetica; rankdir=TB; newrank=true;",
           '  node [shape=box, style="rounded,filled", fontname=Helvetica, fontsize=10];',
           "  edge [color=\"#555555\", arrowsize=0.6];"]
    for place, groups in by_place(plan).items():
        colour = _colour(place)
        if place == "collective":
            for g in groups:
                label = "\\n".join([g.group] + [f"{o} ({'fold' if o in folds else classes.get(o, '?')})"
                                               for o in g.members] + [folds[o] for o in g.members if o in folds])
                out.append(f"  {_quote(g.group)} [label={_quote(label)}, shape=octagon, style=\"filled,bold\", "
                           f"fillcolor=white, penwidth=2];")
            continue
        out.append(f"  subgraph {_quote('cluster_' + place)} {{")
        out.append(f"    label={_quote(place)}; style=\"rounded,filled\"; color=\"#999999\"; "
                   f"fillcolor={_quote(_tint(colour))};")
        for g in groups:
            lines = [f"{o} ({classes.get(o, '?')})" for o in g.members]
            label = g.group + "\\n" + "\\n".join(lines)
            out.append(f"    {_quote(g.group)} [label={_quote(label)}, fillcolor={_quote(colour)}];")
        out.append("  }")
    for a, b in group_edges(plan, flows):
        out.append(f"  {_quote(a)} -> {_quote(b)};")
    out.append("}")
    return "\n".join(out) + "\n"


def _colour(place: str) -> str:
    if place.startswith("chip:"):
        return CHIP_COLOURS[int(place[5:]) % len(CHIP_COLOURS)]
    return SPINE_COLOUR if place == "spine" else "#ffffff"


def _tint(colour: str) -> str:
    """A lighter shade of a colour, for the cluster behind its groups."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{(c + 3 * 255) // 4:02x}" for c in rgb)


def _quote(text: str) -> str:
    return '"' + text.replace('"', '\\"') + '"'


def fold_labels(facts) -> dict[str, str]:
    """Each fold → its collective as reports show it: `all-reduce C` or `all-gather C`."""
    kinds = dict(facts.tuples("collective"))
    return {o: f"{kinds.get(c, 'all_reduce').replace('_', '-')} {c}" for o, c in facts.tuples("fold")}
