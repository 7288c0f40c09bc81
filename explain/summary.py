"""The short summary `cpq why` leads with: the proof's steps in words, one source line each.

A proof tree holds every tuple a derivation used, most of them plumbing (which binding a read
sees, the node a loop header is).  The summary keeps the tuples whose relation has words in
`says(relation, words)` (rules/says.dl, and the R-code folders), reads them evidence first
(children before the tuple they prove, as data flows: the array is made, then read, then
synced), and folds the rest away.  Consecutive steps about the same node share a line.  An
aggregate's members are one line each, not proved again (each has its own `cpq why`), and a
first-match rule says, one line per rule, why the rules before it did not apply.

Every line names a source line or a value, never an internal node id; each carries the handle
(`#3fa81c0`) that `cpq why ... --expand 3fa81c0` shows the full subproof of.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..engine import Program
from .locations import Location, Locator
from .proof import ProofNode
from .terms import show_tuple, show_value

# A summary holds at most this many steps; the rest are counted and left to --full.  A
# finding's proof is one chain; the verdict and gates gather several, and get more room.
MAX_STEPS = 9
MAX_DECISION_STEPS = 24
_CODE_WIDTH = 48
_LINE_WIDTH = 150
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


# Tuples that stand for a finding of their own: in another question's summary they are one
# line (the finding has its own `cpq why`), not the proof of that finding again.
_FINDING_RELATIONS = frozenset({"finding", "finding_counts", "counted", "live_site", "site"})


@dataclass(slots=True)
class Step:
    location: Location | None
    subject: object  # the node (or file:line) the step is about: steps about one share a line
    words: list[str]
    handle: str
    depth: int  # in the proof tree: when a summary is too long, the deepest steps go first
    details: list[str] = field(default_factory=list)  # members of an aggregate, rules not applied


def says_table(program: Program) -> dict[str, str]:
    """relation -> words, from the `says` facts of the program."""
    out: dict[str, str] = {}
    for fact in program.facts:
        if fact.atom.relation == "says" and len(fact.atom.args) == 2:
            relation, words = (getattr(arg, "value", None) for arg in fact.atom.args)
            if isinstance(relation, str) and isinstance(words, str):
                out[relation] = words
    return out


class Summarizer:
    def __init__(self, program: Program, locator: Locator) -> None:
        self.program = program
        self.locator = locator
        self.says = says_table(program)

    # -- words -----------------------------------------------------------------------------

    def words(self, relation: str, values: tuple, here: Location | None) -> str | None:
        """The relation's words with the tuple's values filled in; None when it has none."""
        template = self.says.get(relation)
        rel = self.program.relations.get(relation)
        if template is None or rel is None or len(values) != len(rel.column_names):
            return None
        node_cols = self.locator.columns.get(relation, ())
        by_name = {name: (values[i], i in node_cols) for i, name in enumerate(rel.column_names)}

        def fill(match: re.Match[str]) -> str:
            found = by_name.get(match.group(1))
            if found is None:
                return match.group(0)
            value, is_node = found
            return self._value(value, is_node, here)

        return _PLACEHOLDER.sub(fill, template)

    def _value(self, value: object, is_node: bool, here: Location | None) -> str:
        if is_node and isinstance(value, int):
            loc = self.locator.node(value)
            if loc is None:
                return "an unknown place"
            # In a notebook, `cell 3:line 4`, as the reports write lines.
            same_file = here is not None and loc.file == here.file
            where = str(loc) if not same_file else loc.line_label if loc.cell else f":{loc.line}"
            code = _code(loc)
            return f"{where} ({code})" if code and (here is None or loc.line != here.line) else where
        if isinstance(value, bool):
            return str(int(value))
        if isinstance(value, int):
            return f"{value:,}"
        if isinstance(value, str):
            return value
        return show_value(value)

    # -- steps -----------------------------------------------------------------------------

    def steps(self, root: ProofNode) -> list[Step]:
        """The steps in words; absent atoms only when nothing else explains the root (Gate 1
        is uncertain because no GPU was given and the port is not for CPUs only)."""
        out: list[Step] = []
        self._absent_steps: list[Step] = []
        # A finding's own proof goes through the finding relations; other questions stop there.
        self._stop_at = frozenset() if root.relation in _FINDING_RELATIONS else _FINDING_RELATIONS
        self._visit(root, out, 0)
        return out or self._absent_steps

    def _visit(self, node: ProofNode, out: list[Step], depth: int) -> list[str]:
        """Adds the steps of `node`'s proof to `out`, evidence first; returns the details (an
        aggregate's members) that no step of its own took, for the step above."""
        if node.kind == "absent":
            return self._absent(node, out, depth)
        if node.kind not in ("derived", "fact", "input"):
            return []
        details: list[str] = []
        if depth == 0 or node.relation not in self._stop_at:
            for child in node.children:
                if child.kind == "aggregate":
                    details.extend(self._aggregate(child))
                else:
                    details.extend(self._visit(child, out, depth + 1))
        if depth == 0:
            return []
        words = self.words(node.relation or "", node.values, node.location)
        if words is None:
            return details  # plumbing: what it carried goes to the step above
        self._add(out, Step(node.location, self._subject(node), [words], node.handle, depth, details))
        return []

    def _absent(self, node: ProofNode, out: list[Step], depth: int) -> list[str]:
        """A negated atom with no variables and words of its own: `!gpu_known()` reads "not:
        the GPU model is known"."""
        template = self.says.get(node.relation or "")
        if template is None or node.pattern or _PLACEHOLDER.search(template):
            return []
        self._absent_steps.append(Step(None, None, [f"not so: {template}"], node.handle, depth))
        return []

    def _add(self, out: list[Step], step: Step) -> None:
        """Appends the step, or folds it into the last one when both are about the same node,
        or say the same of the same line (`an array`, three times over one expression)."""
        last = out[-1] if out else None
        if last is not None and not last.details and _same_place(last, step):
            for words in step.words:
                if not any(words in said for said in last.words):
                    last.words.append(words)
            last.details.extend(step.details)
            if step.depth < last.depth:
                last.depth, last.handle = step.depth, step.handle
            return
        out.append(step)

    def _subject(self, node: ProofNode) -> object:
        """The first node the tuple is about (not a scope), else its file:line, else nothing."""
        relation = node.relation or ""
        for i in sorted(self.locator.columns.get(relation, ())):
            value = node.values[i]
            if (
                isinstance(value, int)
                and self.locator.node(value) is not None
                and not self.locator.is_scope(value)
            ):
                return value
        loc = node.location
        return None if loc is None else (loc.file, loc.line)

    def _aggregate(self, node: ProofNode) -> list[str]:
        lines: list[str] = []
        for child in node.children:
            if child.kind == "ref" and node.op in ("min", "max"):
                continue  # the witness: the step that uses the aggregate shows it
            if child.member and child.kind in ("derived", "fact", "input", "ref") and child.relation:
                words = self.words(child.relation, child.values, child.location)
                if words is None:
                    columns = self.locator.columns.get(child.relation, ())
                    words = (
                        ""
                        if child.location is not None
                        else show_tuple(child.relation, child.values, columns)
                    )
                lines.append(_line(child.location, words, child.handle))
            elif child.kind == "more":
                lines.append(child.text)
            elif child.kind == "unmatched":
                lines.append(self._unmatched(child))
        return lines

    def _unmatched(self, node: ProofNode) -> str:
        text = node.text
        relation, values = node.pattern if len(node.pattern) == 2 else (None, None)
        if isinstance(relation, str) and isinstance(values, tuple):
            words = self.words(relation, values, None)
            if words is not None:
                cut = text.find("; instead ")
                text = (text[:cut] if cut >= 0 else text) + f"; instead: {words}"
        return f"{text}  #{node.handle}"


def summary_lines(
    root: ProofNode, program: Program, locator: Locator, headline: str, max_steps: int = MAX_STEPS
) -> list[str]:
    """The summary of one proof: the headline, then its steps (at most `max_steps`)."""
    summarizer = Summarizer(program, locator)
    steps = [step for step in summarizer.steps(root) if "; ".join(step.words) != headline]
    if root.location is not None and not any(step.location for step in steps):
        # Nothing located on the way (a knowledge table decided): the line itself, first.
        steps.insert(0, Step(root.location, None, [], root.handle, 0))
    kept = _keep(steps, max_steps)
    lines = [headline]
    for i, step in enumerate(steps):
        if i in kept:
            lines.append("  " + _line(step.location, "; ".join(step.words), step.handle))
            lines.extend(f"      {detail}" for detail in step.details)
    if len(kept) < len(steps):
        left_out = len(steps) - len(kept)
        lines.append(f"  … and {left_out} more step{'s' if left_out > 1 else ''} (--full shows them)")
    return lines


def _keep(steps: list[Step], max_steps: int) -> set[int]:
    """Which steps a long summary keeps: the first (where the evidence starts: the array made,
    the file imported) and then the ones nearest the conclusion, in their order."""
    if len(steps) <= max_steps:
        return set(range(len(steps)))
    by_depth = sorted(range(1, len(steps)), key=lambda i: (steps[i].depth, -i))
    return {0, *by_depth[: max_steps - 1]}


def _same_place(last: Step, step: Step) -> bool:
    if last.subject is not None and last.subject == step.subject:
        return True
    if last.location is None or step.location is None:
        return last.location is None and step.location is None and last.words == step.words
    same_line = (last.location.file, last.location.line) == (step.location.file, step.location.line)
    return same_line and all(any(w in said for said in last.words) for w in step.words)


def _code(loc: Location) -> str:
    code = loc.code or loc.source
    code = " ".join(code.split())
    return code if len(code) <= _CODE_WIDTH else code[: _CODE_WIDTH - 1] + "…"


def _line(location: Location | None, text: str, handle: str | None = None) -> str:
    """`file:line  code  — words  #handle`, the words cut to fit the width, never the handle."""
    tag = f"  #{handle}" if handle is not None else ""
    if location is None:
        line = text
    else:
        # The code of the node tells apart nodes of one line: no column needed.
        line = f"{location}  {_code(location)}" + (f"  — {text}" if text else "")
    width = _LINE_WIDTH - len(tag)
    if len(line) > width:
        line = line[: width - 1] + "…"
    return line + tag
