"""The indented text form of proofs and why-not answers (the default output of `cpq why`)."""

from __future__ import annotations

from collections.abc import Iterable

from .locations import Location
from .proof import ProofNode, Prover
from .summary import MAX_DECISION_STEPS, MAX_STEPS, summary_lines
from .whynot import RuleFailure, WhyNot

INDENT = "  "
_SOURCE_WIDTH = 90

# A line of the user's code, (file, line): where more than one column locates nodes on it.
Lines = set[tuple[str, int]]


def _shown_text(location: Location) -> str:
    """The node's own code, else its whole line (cut)."""
    if location.code:
        return location.code
    source = location.source
    return source[: _SOURCE_WIDTH - 1] + "…" if len(source) > _SOURCE_WIDTH else source


def _place(location: Location, columned: Lines) -> str:
    # A column only where it tells apart the nodes a proof has on one line.
    return location.position if (location.file, location.line) in columned else str(location)


def _where(node: ProofNode, columned: Lines) -> str:
    """` — file:line[:col]  code`, then `; l → file:line  code` for each other node of the tuple."""
    location = node.location
    if location is None:
        return ""
    text = _shown_text(location)
    out = f" — {_place(location, columned)}" + (f"  {text}" if text else "")
    shown = {location.node}
    for other in node.node_locations:
        where = other.location
        # The module says nothing a file name does not; a node already named is not again.
        if where is None or other.node in shown or where.kind == "module":
            continue
        shown.add(other.node)
        text = _shown_text(where)
        out += f"; {other.name} → {_place(where, columned)}" + (f"  {text}" if text else "")
    return out


def _columned(roots: Iterable[ProofNode]) -> Lines:
    """The lines on which the proofs locate nodes at different columns."""
    columns: dict[tuple[str, int], set[int]] = {}
    for root in roots:
        for node in root.walk():
            located = [node.location, *(other.location for other in node.node_locations)]
            for location in located:
                if location is not None and location.column is not None:
                    columns.setdefault((location.file, location.line), set()).add(location.column)
    return {line for line, found in columns.items() if len(found) > 1}


def _head(node: ProofNode, columned: Lines) -> str:
    handle = f"  #{node.handle}"
    if node.kind == "ref":
        return f"{node.text}  (shown above){handle}"
    if node.kind in ("fact", "input"):
        return f"{node.text}  [{node.origin}]{_where(node, columned)}{handle}"
    if node.kind == "check":
        return f"check: {node.text}"
    if node.kind in ("absent", "unmatched", "aggregate"):
        return node.text + handle
    return node.text + _where(node, columned) + handle


def render_summary(
    roots: list[ProofNode], prover: Prover, headlines: list[str], question: str, full: bool
) -> str:
    """The summary of each proof, and how to see more."""
    lines: list[str] = []
    for root, headline in zip(roots, headlines, strict=True):
        room = MAX_STEPS if root.relation == "finding" else MAX_DECISION_STEPS
        lines.extend(summary_lines(root, prover.program, prover.locator, headline, room))
    if not full:
        lines.append(f"(the whole proof: `{question} --full`; one step's: `--expand H` for #H)")
    return "\n".join(lines) + "\n"


def render_text(roots: ProofNode | list[ProofNode]) -> str:
    """The proofs indented, each tuple with where it is: `file:line:column` where a line holds
    nodes of the proofs at different columns (else `file:line`), and the node's code."""
    trees = roots if isinstance(roots, list) else [roots]
    columned = _columned(trees)
    lines: list[str] = []
    for root in trees:
        _lines(root, 0, lines, columned)
    return "\n".join(lines) + "\n"


def _lines(node: ProofNode, depth: int, out: list[str], columned: Lines) -> None:
    pad = INDENT * depth
    out.append(pad + _head(node, columned))
    if node.rule is not None:
        out.append(f"{pad}{INDENT}[{node.rule.where}] {node.rule.text}")
    if node.truncated:
        out.append(f"{pad}{INDENT}… (cut by --depth)")
    for child in node.children:
        _lines(child, depth + 1, out, columned)


def render_why_not(answer: WhyNot) -> str:
    out = [answer.summary]
    if answer.location is not None:
        out.append(f"{INDENT}{answer.location}  {answer.location.source}".rstrip())
    if answer.candidates:
        out.append(f"{INDENT}nodes on that line: {answer.candidates}")
    for failure in answer.failures:
        out.append("")
        _failure_lines(failure, 0, out)
    return "\n".join(out) + "\n"


def _failure_lines(failure: RuleFailure, depth: int, out: list[str]) -> None:
    pad = INDENT * depth
    out.append(f"{pad}[{failure.rule_where}] {failure.rule_text}")
    for line in failure.message.splitlines():
        out.append(f"{pad}{INDENT}{line}")
    if failure.satisfied and not failure.holds:
        out.append(f"{pad}{INDENT}given {', '.join(failure.satisfied)}")
    for sub in failure.causes:
        _failure_lines(sub, depth + 2, out)
