"""The indented text form of proofs and why-not answers (the default output of `cpq why`)."""

from __future__ import annotations

from .locations import Location
from .proof import ProofNode, Prover
from .summary import MAX_DECISION_STEPS, MAX_STEPS, summary_lines
from .whynot import RuleFailure, WhyNot

INDENT = "  "
_SOURCE_WIDTH = 90


def _where(location: Location | None) -> str:
    if location is None:
        return ""
    source = location.source
    if len(source) > _SOURCE_WIDTH:
        source = source[: _SOURCE_WIDTH - 1] + "…"
    return f" — {location}" + (f"  {source}" if source else "")


def _head(node: ProofNode) -> str:
    handle = f"  #{node.handle}"
    if node.kind == "ref":
        return f"{node.text}  (shown above){handle}"
    if node.kind in ("fact", "input"):
        return f"{node.text}  [{node.origin}]{_where(node.location)}{handle}"
    if node.kind == "check":
        return f"check: {node.text}"
    if node.kind in ("absent", "unmatched", "aggregate"):
        return node.text + handle
    return node.text + _where(node.location) + handle


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
    lines: list[str] = []
    for root in roots if isinstance(roots, list) else [roots]:
        _lines(root, 0, lines)
    return "\n".join(lines) + "\n"


def _lines(node: ProofNode, depth: int, out: list[str]) -> None:
    pad = INDENT * depth
    out.append(pad + _head(node))
    if node.rule is not None:
        out.append(f"{pad}{INDENT}[{node.rule.where}] {node.rule.text}")
    if node.truncated:
        out.append(f"{pad}{INDENT}… (cut by --depth)")
    for child in node.children:
        _lines(child, depth + 1, out)


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
