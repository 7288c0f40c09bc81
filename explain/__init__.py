"""cpq.explain: why a tuple holds (proofs), why one does not (why-not), and their renderings.

    prover = Prover(db, source_line=assessment.source_line)
    tree = prover.prove("finding", ("R104", "sync_in_loop.py", 12, "descend"))
    print(render_text(tree))

Proofs are rebuilt after evaluation, top-down against the stored relations: each derived tuple
records the round in which it first appeared (`_iter`) and the rule that derived it (`_rule`), so
one query per tuple finds a body instantiation made of strictly older tuples.  That gives the
shortest proof and cannot loop on recursive rules.
"""

from .locations import Location, Locator
from .proof import ProofNode, Prover, prove
from .render_dot import render_dot
from .render_json import proof_to_json, why_not_to_json
from .render_text import render_summary, render_text, render_why_not
from .targets import TargetError, find_findings, gate_tuples, nearby_findings, verdict_tuples
from .whynot import RuleFailure, WhyNot, why_not_finding

__all__ = [
    "Location",
    "Locator",
    "ProofNode",
    "Prover",
    "RuleFailure",
    "TargetError",
    "WhyNot",
    "find_findings",
    "gate_tuples",
    "nearby_findings",
    "proof_to_json",
    "prove",
    "render_dot",
    "render_summary",
    "render_text",
    "render_why_not",
    "verdict_tuples",
    "why_not_finding",
    "why_not_to_json",
]
