"""`cpq why ... --expand H`: the whole proof of one step of an earlier answer.

A handle names a step by what it holds (ProofNode.handle), so the whole proof of the same
question, built again over the same results, holds the step under the same handle.
A tuple's step expands into its full proof (no depth cut); an absent atom into why nothing
derives it; a rule a first-match aggregate did not take into the literal it misses and why.
"""

from __future__ import annotations

from collections.abc import Callable

from ..engine import Atom, Const, Database, Program, Wildcard
from ..engine.syntax import Term
from .proof import ProofNode, Prover
from .spans import AssessedSources
from .whynot import WhyNot, WhyNotAnalyzer


class ExpandError(LookupError):
    """No step has that handle, or it cannot be expanded."""


def expand(
    db: Database | None,
    program: Program,
    questions: list[tuple[str, tuple]],
    handle: str,
    source_line: Callable[[str, int], str] | None,
    sources: AssessedSources | None = None,
) -> list[ProofNode] | WhyNot:
    """The step with `handle` in the whole proofs of `questions` (relation, tuple), expanded."""
    assert db is not None
    handle = handle.lstrip("#").lower()
    prover = Prover(db, program, source_line=source_line, sources=sources)
    roots = [prover.prove(relation, values) for relation, values in questions]
    node = next((n for root in roots for n in root.walk() if n.handle == handle), None)
    if node is None:
        raise ExpandError(f"no step #{handle} in this answer's proof (`--full` lists the handles)")
    if node.kind in ("derived", "fact", "input", "ref") and node.relation is not None:
        full = Prover(db, program, source_line=source_line, sources=sources)
        return [full.prove(node.relation, node.values)]
    analyzer = WhyNotAnalyzer(db, program, source_line=source_line, sources=sources)
    if node.kind == "absent" and node.relation is not None:
        rel = program.relations[node.relation]
        args: tuple[Term, ...] = tuple(
            Wildcard() if value is None else Const(value, base)
            for value, base in zip(node.pattern, rel.base_types, strict=True)
        )
        shown = node.text.removeprefix("absent: ")
        answer = WhyNot(f"why {shown} does not hold")
        if rel.is_input:
            answer.summary += ": no such fact was extracted (an input relation: no rule derives it)"
            return answer
        answer.failures = analyzer.atom_failures(Atom(node.relation, args), {}, 0)
        if not answer.failures:
            answer.summary += (
                f": {len(program.rules_for(node.relation))} rules derive {node.relation}, none here"
            )
        return answer
    if node.kind == "unmatched" and node.rule is not None:
        rule = program.rules[node.rule.index]
        answer = WhyNot(f"why {node.text.split(' does not apply')[0]} does not apply")
        answer.failures = [analyzer.rule_failure(rule, {})]
        return answer
    raise ExpandError(
        f"step #{handle} is {'an aggregate' if node.kind == 'aggregate' else 'a ' + node.kind}: "
        "expand one of its members, or list them with `cpq query`"
    )
