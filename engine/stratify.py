"""Dependency graph, strongly connected components and stratification.

A relation depends on every relation in the bodies of its rules; the dependency is *negative*
when the body atom is negated or sits inside an aggregate.  Each strongly connected component
(SCC) that contains a rule head becomes one stratum; strata come in dependency order.  A
negative dependency inside an SCC is recursion through negation/aggregation and is rejected.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import DatalogError, error_at
from .syntax import Aggregate, Atom, Comparison, Constraint, Literal, PickledByFields, Rule, Term


@dataclass(frozen=True, slots=True)
class Stratum(PickledByFields):
    relations: list[str]
    rules: list[int]  # indices into Program.rules whose head is in this stratum
    recursive: bool  # the SCC depends on itself (possibly through several relations)


@dataclass(frozen=True, slots=True)
class _Edge(PickledByFields):
    head: str
    body: str
    negative: bool
    why: str  # "negation" or "aggregation"
    node: object  # the literal to point at in error messages


def stratify(relation_names: Iterable[str], rules: list[Rule], source: str) -> list[Stratum]:
    names = list(relation_names)
    edges: list[_Edge] = []
    for rule in rules:
        edges.extend(rule_edges(rule))
    deps: dict[str, list[str]] = {name: [] for name in names}
    for edge in edges:
        if edge.body not in deps[edge.head]:
            deps[edge.head].append(edge.body)

    component = _tarjan(names, deps)
    for edge in edges:
        if edge.negative and component[edge.head] == component[edge.body]:
            raise _cycle_error(edge, deps, component, source)

    rules_by_head: dict[str, list[int]] = {}
    for rule in rules:
        rules_by_head.setdefault(rule.head.relation, []).append(rule.index)
    strata: list[Stratum] = []
    for members in _components_in_order(names, component):
        heads = [name for name in members if name in rules_by_head]
        if not heads:
            continue
        recursive = len(members) > 1 or members[0] in deps[members[0]]
        rule_ids = sorted(i for name in heads for i in rules_by_head[name])
        strata.append(Stratum(heads, rule_ids, recursive))
    return strata


def rule_edges(rule: Rule) -> list[_Edge]:
    head = rule.head.relation
    out: list[_Edge] = []
    for lit in rule.body:
        if isinstance(lit, Atom):
            why = "negation" if lit.negated else ""
            out.append(_Edge(head, lit.relation, lit.negated, why, lit))
        for atom in aggregate_atoms(lit):
            out.append(_Edge(head, atom.relation, True, "aggregation", atom))
    return out


def aggregate_atoms(lit: Literal) -> list[Atom]:
    """The atoms inside a literal's aggregates, nested ones included."""
    return [atom for agg in _aggregates_in(lit) for atom in _atoms_in_aggregate(agg)]


def _aggregates_in(lit: Literal) -> list[Aggregate]:
    terms: list[Term] = []
    if isinstance(lit, Atom | Constraint):
        terms = list(lit.args)
    elif isinstance(lit, Comparison):
        terms = [lit.left, lit.right]
    return [term for term in terms if isinstance(term, Aggregate)]


def _atoms_in_aggregate(agg: Aggregate) -> list[Atom]:
    out: list[Atom] = []
    for lit in agg.body:
        if isinstance(lit, Atom):
            out.append(lit)
        for nested in _aggregates_in(lit):
            out.extend(_atoms_in_aggregate(nested))
    return out


def _tarjan(names: list[str], deps: dict[str, list[str]]) -> dict[str, int]:
    """Iterative Tarjan; component ids are assigned dependencies-first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    component: dict[str, int] = {}
    counter = 0
    for root in names:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, child_pos = work.pop()
            if child_pos == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            children = deps[node]
            if child_pos < len(children):
                work.append((node, child_pos + 1))
                child = children[child_pos]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if low[node] == index[node]:
                comp_id = len(set(component.values()))
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = comp_id
                    if member == node:
                        break
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return component


def _components_in_order(names: list[str], component: dict[str, int]) -> list[list[str]]:
    by_id: dict[int, list[str]] = {}
    for name in names:
        by_id.setdefault(component[name], []).append(name)
    return [by_id[comp_id] for comp_id in sorted(by_id)]


def _cycle_error(
    edge: _Edge, deps: dict[str, list[str]], component: dict[str, int], source: str
) -> DatalogError:
    path = _path(edge.body, edge.head, deps, component)
    cycle = " -> ".join([edge.head, *path])
    return error_at(
        edge.node,
        f"recursion through {edge.why}: '{edge.head}' depends on '{edge.body}' through "
        f"{edge.why}, and '{edge.body}' depends on '{edge.head}' (cycle: {cycle})",
        source,
    )


def _path(start: str, goal: str, deps: dict[str, list[str]], component: dict[str, int]) -> list[str]:
    """Shortest dependency path start -> ... -> goal inside one SCC (both ends included)."""
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            break
        for nxt in deps[node]:
            if nxt not in previous and component[nxt] == component[start]:
                previous[nxt] = node
                queue.append(nxt)
    path: list[str] = []
    step: str | None = goal
    while step is not None:
        path.append(step)
        step = previous.get(step)
    return list(reversed(path))
