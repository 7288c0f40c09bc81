"""Proofs as a Graphviz digraph (`cpq why --format dot | dot -Tsvg`).

A subproof shown once is one graph node; later references become extra edges into it, so the
drawing is the proof DAG.
"""

from __future__ import annotations

from .proof import ProofNode

_STYLE = {
    "derived": 'shape=box, style="rounded"',
    "fact": 'shape=box, style="filled", fillcolor="#eeeeee"',
    "input": 'shape=box, style="filled", fillcolor="#dde8f5"',
    "absent": 'shape=box, style="dashed"',
    "check": "shape=plaintext",
    "aggregate": 'shape=box, style="rounded,bold"',
    "more": "shape=plaintext",
}


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\l")


def _label(node: ProofNode) -> str:
    parts = [node.text]
    if node.rule is not None:
        parts.append(f"[{node.rule.where}]")
    if node.origin:
        parts.append(f"[{node.origin}]")
    if node.location is not None:
        location = node.location
        parts.append(f"{location.position}  {location.code or location.source}".rstrip())
    if node.truncated:
        parts.append("… (cut by --depth)")
    return "\\l".join(_escape(p) for p in parts) + "\\l"


def render_dot(roots: ProofNode | list[ProofNode]) -> str:
    lines = [
        "digraph proof {",
        "  rankdir=TB;",
        '  node [fontname="monospace", fontsize=10];',
    ]
    for root in roots if isinstance(roots, list) else [roots]:
        _emit(root, lines)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _emit(node: ProofNode, lines: list[str]) -> None:
    tooltip = f', tooltip="{_escape(node.rule.text)}"' if node.rule is not None else ""
    style = _STYLE.get(node.kind, "shape=box")
    lines.append(f'  p{node.id} [label="{_label(node)}", {style}{tooltip}];')
    for child in node.children:
        if child.kind == "ref" and child.ref is not None:
            lines.append(f"  p{node.id} -> p{child.ref};")
            continue
        _emit(child, lines)
        lines.append(f"  p{node.id} -> p{child.id};")
