"""Stratification: order the rules so that negation and aggregates never go through recursion."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import RuleError
from ..lang import ast


@dataclass(frozen=True)
class Stratum:
    """Relations evaluated together: one strongly connected component of the dependency graph."""

    index: int
    relations: tuple[str, ...]
    rules: tuple[ast.Rule, ...]
    recursive: bool
    subsumptions: tuple[ast.Rule, ...] = ()  # the rules that find dominated tuples (subsumption.py)


def dependency_graph(rules: tuple[ast.Rule, ...]):
    """Edges body relation → head relation, each labelled with how the body uses it."""
    import networkx as nx

    graph = nx.MultiDiGraph()
    for rule in rules:
        graph.add_node(rule.head.rel)
        for atom, use in ast.body_atoms(rule.body):
            graph.add_edge(atom.rel, rule.head.rel, use=use, pos=atom.pos)
    return graph


def _through_recursion(graph, use: str, body_rel: str, head_rel: str) -> str:
    """Why a negation or aggregate cannot be stratified, naming the recursion it goes through."""
    import networkx as nx

    verb = "negates" if use == "negative" else "aggregates over"
    kind = "a negation" if use == "negative" else "an aggregate"
    if body_rel == head_rel:
        cycle = f"{body_rel} itself"
    else:
        path = nx.shortest_path(graph, head_rel, body_rel)
        cycle = f"{body_rel}, which depends on {head_rel} ({' -> '.join(path)})"
    return f"not stratifiable: this rule for {head_rel} {verb} {cycle}; {kind} may not go through recursion"


def stratify(rules: tuple[ast.Rule, ...]) -> tuple[list[Stratum], list[RuleError]]:
    """Strata in evaluation order, and an error for each negation or aggregate through recursion."""
    import networkx as nx

    graph = dependency_graph(rules)
    component_of: dict[str, int] = {}
    components = list(nx.strongly_connected_components(graph))
    for index, component in enumerate(components):
        for rel in component:
            component_of[rel] = index
    problems: list[RuleError] = []
    for body_rel, head_rel, data in graph.edges(data=True):
        if data["use"] != "positive" and component_of[body_rel] == component_of[head_rel]:
            problems.append(RuleError(_through_recursion(graph, data["use"], body_rel, head_rel), data["pos"],
                                      "stratification"))
    condensed = nx.condensation(graph, components)
    heads = {rule.head.rel for rule in rules}
    order = nx.lexicographical_topological_sort(condensed, key=lambda n: min(condensed.nodes[n]["members"]))
    strata: list[Stratum] = []
    for node in order:
        members = condensed.nodes[node]["members"]
        relations = tuple(sorted(r for r in members if r in heads))
        if not relations:
            continue  # input-only relations need no evaluation
        own = tuple(r for r in rules if r.head.rel in members)
        recursive = len(members) > 1 or any(
            atom.rel in members for rule in own for atom, _ in ast.body_atoms(rule.body)
        )
        strata.append(Stratum(len(strata), relations, own, recursive))
    return strata, problems


def with_subsumptions(strata: list[Stratum], deleting: tuple[ast.Rule, ...]) -> list[Stratum]:
    """The strata stratified with stand-ins for the deleting rules, given the rules themselves."""
    if not deleting:
        return strata
    out = []
    for stratum in strata:
        own = tuple(r for r in deleting if r.head.rel in stratum.relations)
        rules = tuple(r for r in stratum.rules if r.dominating is None)
        out.append(Stratum(stratum.index, stratum.relations, rules, stratum.recursive, own))
    return out


def needed_strata(strata, targets) -> list:
    """The strata that the target relations depend on, in order (all of them without targets)."""
    if targets is None:
        return list(strata)
    needed = set(targets)
    chosen = []
    for stratum in reversed(strata):
        if needed & set(stratum.relations):
            chosen.append(stratum)
            for rule in stratum.rules + stratum.subsumptions:
                needed.update(atom.rel for atom, _ in ast.body_atoms(rule.body))
    return list(reversed(chosen))
