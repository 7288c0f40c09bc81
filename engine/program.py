"""`parse_program`: text -> checked, stratified Program."""

from __future__ import annotations

from dataclasses import dataclass, field

from .inline import InlineRule
from .plan import BodyPlan
from .stratify import Stratum, stratify
from .syntax import Fact, Relation, Rule


@dataclass(slots=True)
class Program:
    source: str
    text: str = field(repr=False)
    relations: dict[str, Relation]  # in declaration order
    rules: list[Rule]
    facts: list[Fact]  # ground facts written in the program (loaded with `_iter` 0)
    types: dict[str, str] = field(default_factory=dict)  # `.type` name -> base type
    stratification: list[Stratum] = field(default_factory=list)
    plans: list[BodyPlan] = field(default_factory=list, repr=False)  # one per rule
    # The rules of `inline` relations, whose uses `rules` already have replaced (see inline.py).
    inline: dict[str, list[InlineRule]] = field(default_factory=dict, repr=False)

    @property
    def strata(self) -> list[list[str]]:
        """Derived relation names per stratum, in evaluation order."""
        return [list(stratum.relations) for stratum in self.stratification]

    def rules_for(self, relation: str) -> list[Rule]:
        return [rule for rule in self.rules if rule.head.relation == relation]


def parse_program(text: str, source: str = "<input>") -> Program:
    """Parse and check a Datalog program; raises DatalogError on the first problem."""
    # Imported here: a program read back from its cache never needs lark.
    from .checks import check_program
    from .parser import parse_text

    parsed = parse_text(text, source)
    checked = check_program(parsed, source)
    strata = stratify(checked.relations, checked.rules, source)
    return Program(
        source=source,
        text=text,
        relations=checked.relations,
        rules=checked.rules,
        facts=checked.facts,
        types=checked.types,
        stratification=strata,
        plans=checked.plans,
        inline=checked.inline,
    )
