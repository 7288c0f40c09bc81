"""`parse_program`: text -> checked, stratified Program."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from .errors import DatalogError
from .include import JoinedText, Library, Reader, SourceMap, join_includes
from .inline import InlineRule
from .plan import BodyPlan
from .stratify import Stratum, stratify
from .syntax import Fact, Relation, Rule


@dataclass(slots=True)
class Program:
    source: str  # the entry file, as the caller named it
    text: str = field(repr=False)  # the joined text: includes expanded (include.py)
    relations: dict[str, Relation]  # in declaration order
    rules: list[Rule]
    facts: list[Fact]  # ground facts written in the program (loaded with `_iter` 0)
    types: dict[str, str] = field(default_factory=dict)  # `.type` name -> base type
    stratification: list[Stratum] = field(default_factory=list)
    plans: list[BodyPlan] = field(default_factory=list, repr=False)  # one per rule
    # The rules of `inline` relations, whose uses `rules` already have replaced (see inline.py).
    inline: dict[str, list[InlineRule]] = field(default_factory=dict, repr=False)
    source_map: SourceMap | None = field(default=None, repr=False)  # where lines of `text` come from

    @property
    def strata(self) -> list[list[str]]:
        """Derived relation names per stratum, in evaluation order."""
        return [list(stratum.relations) for stratum in self.stratification]

    def rules_for(self, relation: str) -> list[Rule]:
        return [rule for rule in self.rules if rule.head.relation == relation]

    def where(self, line: int) -> str:
        """`file:line` of a line of `text` (a position of a term or literal)."""
        return (self.source_map or SourceMap(self.source)).where(line)

    def path(self, file: str) -> str:
        """A file of the program (a Rule's `file`) as a path, for messages."""
        return (self.source_map or SourceMap(self.source)).path(file)


def parse_program(
    text: str, source: str = "<input>", *, read: Reader | None = None, libraries: Sequence[Library] = ()
) -> Program:
    """Parse and check a Datalog program; raises DatalogError on the first problem.

    `#include` lines are expanded first (include.py); `read` reads the included files, by
    default from the folder of `source`, and `libraries` are those `#include <NAME>` may name.
    """
    return parse_joined(join_includes(text, source, read, libraries=libraries))


def parse_joined(joined: JoinedText) -> Program:
    """Parse and check a program whose includes are expanded already."""
    # Imported here: a program read back from its cache never needs lark.
    from .checks import check_program
    from .parser import parse_text

    source_map = joined.source_map
    source = source_map.entry
    try:
        parsed = parse_text(joined.text, source)
        checked = check_program(parsed, source, where_from=source_map.where_from)
        strata = stratify(checked.relations, checked.rules, source)
    except DatalogError as exc:
        raise source_map.relocate(exc) from None
    # Positions shown to people are file:line: Relation, Rule and Fact learn theirs.
    for rel in checked.relations.values():
        rel.file, rel.line = source_map.locate(rel.line)
    rules = [_located(rule, source_map) for rule in checked.rules]
    facts = [_located(fact, source_map) for fact in checked.facts]
    return Program(
        source=source,
        text=joined.text,
        relations=checked.relations,
        rules=rules,
        facts=facts,
        types=checked.types,
        stratification=strata,
        plans=checked.plans,
        inline=checked.inline,
        source_map=source_map,
    )


_Located = TypeVar("_Located", Rule, Fact)


def _located(item: _Located, source_map: SourceMap) -> _Located:
    file, line = source_map.locate(item.line)
    return dataclasses.replace(item, file=file, line=line)
