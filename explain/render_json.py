"""Proofs and why-not answers as JSON-ready dicts (`cpq why --format json`)."""

from __future__ import annotations

from typing import Any

from .locations import Location, NodeLocation
from .proof import ProofNode
from .whynot import RuleFailure, WhyNot


def _location(location: Location | None) -> dict[str, Any] | None:
    """file, line (of the assessed module), column (from 1, or null), code (the node's own text,
    or ""), source (the whole line); in a notebook, cell and cell_line as the reports show them."""
    if location is None:
        return None
    out: dict[str, Any] = {
        "file": location.file,
        "line": location.line,
        "column": location.column,
        "code": location.code,
        "source": location.source,
    }
    if location.cell is not None:
        out["cell"], out["cell_line"] = location.cell
    if location.kind:
        out["node_kind"] = location.kind
    return out


def _node_location(other: NodeLocation) -> dict[str, Any]:
    """One node column of a tuple: its name, the node id and where the node is (null if unknown)."""
    return {"name": other.name, "node": other.node, "location": _location(other.location)}


def proof_to_json(node: ProofNode) -> dict[str, Any]:
    out: dict[str, Any] = {"id": node.id, "handle": node.handle, "kind": node.kind, "text": node.text}
    if node.relation is not None and node.kind in ("derived", "fact", "input", "ref"):
        out["relation"] = node.relation
        out["tuple"] = list(node.values)
    if node.iteration is not None:
        out["iteration"] = node.iteration
    if node.rule is not None:
        rule = node.rule
        out["rule"] = {"index": rule.index, "file": rule.source, "line": rule.line, "text": rule.text}
    if node.origin:
        out["origin"] = node.origin
    if node.location is not None:
        out["location"] = _location(node.location)
    if node.node_locations:
        out["locations"] = [_node_location(other) for other in node.node_locations]
    if node.kind == "aggregate":
        out["value"] = node.value
    if node.ref is not None:
        out["ref"] = node.ref
    if node.truncated:
        out["truncated"] = True
    if node.children:
        out["children"] = [proof_to_json(child) for child in node.children]
    return out


def _failure(failure: RuleFailure) -> dict[str, Any]:
    return {
        "rule": {"index": failure.rule_index, "where": failure.rule_where, "text": failure.rule_text},
        "holds": failure.holds,
        "failing": failure.failing,
        "satisfied": failure.satisfied,
        "binding": failure.binding,
        "message": failure.message,
        "causes": [_failure(c) for c in failure.causes],
    }


def why_not_to_json(answer: WhyNot) -> dict[str, Any]:
    return {
        "summary": answer.summary,
        "exists": answer.exists,
        "location": _location(answer.location),
        "candidates": answer.candidates,
        "rules": [_failure(f) for f in answer.failures],
    }
