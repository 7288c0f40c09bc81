"""Incremental maintenance of evaluated results after some input facts changed.

The previous results stay readable, attached read-only as OLD_DB (see change_tables); the
database being updated is a copy of them.  Once engine.update has applied the input relations'
changes, the strata are brought up to date in dependency order, each by a StratumUpdate: delete
and re-derive (DRed: Gupta, Mumick and Subrahmanian, SIGMOD 1993):

1. Over-delete, in the previous state: every tuple with a derivation that used a removed tuple
   of a positive atom, or a net gain of a negated atom's relation ("over:R"; in a recursive
   stratum also, round by round, a tuple with a derivation that used one over-deleted before).
2. Delete those tuples.
3. Re-derive, in the new state, in rounds numbered as evaluate() numbers them: the
   over-deleted tuples that still have a derivation, and every tuple with a derivation that
   uses a tuple added to a positive atom's relation or a net loss of a negated one; then, in a
   recursive stratum, semi-naive rounds as in evaluate().

For the strata that read a relation, its tuples removed are its over-deleted ones and its
tuples added are those step 3 inserted, re-derived ones included: a re-derived tuple has a new
`_iter`, so every tuple whose derivation used it is derived again too, and each derived tuple
keeps a derivation from tuples of smaller `_iter`, as `cpq why` expects (tuples an update makes
are numbered above every earlier one, update.GENERATION_SPAN per update).  Negations and
aggregates, which read the final state, see net changes only ("netlost:R", "netgained:R").  A
rule with an aggregate whose relations changed is evaluated whole, in both states.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import duckdb

from .change_tables import change_columns, change_table, old_table, same_values, value_columns
from .compile_sql import FULL, SqlCompiler, quote, versioned_table
from .compile_sql import _select as select_sql
from .evaluation import ROUND_SPAN, Evaluation, StratumStats
from .plan import AggregatePlan, BodyPlan, ExistsIn, Filter
from .program import Program
from .syntax import (
    Aggregate,
    Atom,
    BinOp,
    Call,
    Comparison,
    Const,
    Literal,
    Relation,
    Rule,
    UnaryMinus,
    Var,
    Wildcard,
)
from .typesys import SQL_TYPES


def _aggregate_relations(plan: BodyPlan) -> set[str]:
    """Relations read inside the aggregates of a body (nested ones included)."""
    found: set[str] = set()
    for _, value in plan.assigns:
        if isinstance(value, AggregatePlan):
            found |= _body_relations(value.body) | _aggregate_relations(value.body)
    return found


def _body_relations(plan: BodyPlan) -> set[str]:
    """Relations of a body's positive and negated atoms (not those of its aggregates)."""
    return {atom.relation for atom in plan.atoms} | {f.relation for _, f in _negated(plan)}


def _negated(plan: BodyPlan) -> list[tuple[int, Atom]]:
    return [(k, f) for k, f in enumerate(plan.filters) if isinstance(f, Atom) and f.negated]


def _with_filter(plan: BodyPlan, index: int, item: ExistsIn, *, keep: bool) -> BodyPlan:
    """The body with `item` in place of its filter `index` (or besides it, with `keep`)."""
    filters: list[Filter] = list(plan.filters)
    if keep:
        filters.append(item)
    else:
        filters[index] = item
    return replace(plan, filters=filters)


@dataclass
class Changes:
    """What each relation lost and gained, as row counts and SQL tables, by kind: "lost" and
    "gained" for positive atoms, "netlost" and "netgained" for negations and aggregates.
    Filled in stratum by stratum: a stratum reads the entries of the strata it depends on,
    which are complete."""

    count: dict[tuple[str, str], int] = field(default_factory=dict)
    table: dict[tuple[str, str], str] = field(default_factory=dict)

    def has(self, kind: str, relation: str) -> bool:
        return bool(self.count.get((kind, relation)))

    def any(self, relation: str) -> bool:
        return self.has("lost", relation) or self.has("gained", relation)

    def any_net(self, relation: str) -> bool:
        return self.has("netlost", relation) or self.has("netgained", relation)

    def set(self, kind: str, relation: str, count: int, table: str) -> None:
        self.table[(kind, relation)] = table
        self.count[(kind, relation)] = count


def read_columns(program: Program) -> dict[str, frozenset[int]]:
    """Per relation, the positions of its columns that some rule reads (a variable or a
    constant there, in a positive or negated atom or an aggregate's body); a wildcard reads
    nothing, except in the body of an aggregate that counts or adds up its solutions (count,
    sum, mean: two tuples that differ in a wildcard's column are two solutions)."""
    found: dict[str, set[int]] = {}

    def terms(term: object, whole: bool) -> None:
        if isinstance(term, Aggregate):
            literals(term.body, whole or term.op in ("count", "sum", "mean"))
        elif isinstance(term, BinOp):
            terms(term.left, whole)
            terms(term.right, whole)
        elif isinstance(term, UnaryMinus):
            terms(term.operand, whole)
        elif isinstance(term, Call):
            for arg in term.args:
                terms(arg, whole)

    def literals(body: tuple[Literal, ...], whole: bool) -> None:
        for literal in body:
            if isinstance(literal, Atom):
                read = found.setdefault(literal.relation, set())
                for position, arg in enumerate(literal.args):
                    if whole or not isinstance(arg, Wildcard):
                        read.add(position)
                    terms(arg, whole)
            elif isinstance(literal, Comparison):
                terms(literal.left, whole)
                terms(literal.right, whole)

    for rule in program.rules:
        literals(rule.body, False)
    return {name: frozenset(columns) for name, columns in found.items()}


def net_readers(program: Program) -> set[str]:
    """Relations read by a negation or an aggregate somewhere: their net changes are needed."""
    found: set[str] = set()
    for plan in program.plans:
        found.update(f.relation for _, f in _negated(plan))
        found |= _aggregate_relations(plan)
    return found


class StratumUpdate:
    """Brings one stratum up to date (see the module's docstring)."""

    def __init__(
        self,
        db: Evaluation,
        index: int,
        changes: Changes,
        generation_base: int,
        con: duckdb.DuckDBPyConnection,
        needs_net: set[str],
        old_sizes: dict[str, int],
    ) -> None:
        self.db = db
        self.old_sizes = old_sizes
        self.program = db.program
        self.index = index
        self.stratum = self.program.stratification[index]
        self.own = set(self.stratum.relations)
        self.changes = changes
        self.con = con
        self.needs_net = needs_net
        self.first_round = generation_base + index * ROUND_SPAN + 1
        self.old = SqlCompiler(self.program.relations, old_table)
        self.new = SqlCompiler(self.program.relations)
        self._group_tables: dict[int, tuple[str, int]] = {}
        self._over_tables: set[str] = set()

    # -- which rules a change reaches ----------------------------------------------------------

    def _touched(self, rule: Rule) -> bool:
        plan = self.program.plans[rule.index]
        changes = self.changes
        return (
            any(changes.any(atom.relation) for atom in plan.atoms if atom.relation not in self.own)
            or any(changes.any_net(neg.relation) for _, neg in _negated(plan))
            or bool(self._changed_aggregates(plan))
        )

    def _empty(self, plan: BodyPlan, state: str, replaced: int | None = None) -> bool:
        """Whether a positive atom of the body, but the one `replaced` by a change table, reads
        a relation with no tuple in `state` ("old", "new": as it is now): the SELECT yields
        nothing, and is left out, as evaluate() leaves such rules out (DuckDB's cost per
        statement is most of a small update's).  Sizes may count deleted rows, never too few."""
        sizes = self.old_sizes if state == "old" else self.db._sizes
        return any(sizes.get(atom.relation, 1) == 0 for j, atom in enumerate(plan.atoms) if j != replaced)

    def _whole(self, plan: BodyPlan) -> bool:
        """An aggregate of the rule reads a changed relation and the groups it changes cannot
        be told apart (see _narrowed): the rule is evaluated whole."""
        return bool(self._changed_aggregates(plan)) and self._narrowing(plan) is None

    def _changed_aggregates(self, plan: BodyPlan) -> list[AggregatePlan]:
        """The aggregates of the body that read a relation with net changes."""
        return [
            value
            for _, value in plan.assigns
            if isinstance(value, AggregatePlan)
            and any(
                self.changes.any_net(name)
                for name in _aggregate_relations(value.body) | _body_relations(value.body)
            )
        ]

    def _narrowing(self, plan: BodyPlan) -> Relation | None:
        """When exactly one aggregate of the rule reads a changed relation, and the variables
        it shares with the rule are bound by positive atoms both inside it and outside: the
        relation (of those variables) of the groups whose aggregate may have changed.  The
        rule is then evaluated again for those groups only."""
        changed = self._changed_aggregates(plan)
        if len(changed) != 1:
            return None
        agg = changed[0]
        inner, shared = agg.body, agg.correlated
        if not shared or any(isinstance(v, AggregatePlan) for _, v in inner.assigns):
            return None
        for atoms in (inner.atoms, plan.atoms):
            bound = {arg.name for atom in atoms for arg in atom.args if isinstance(arg, Var)}
            if not set(shared) <= bound:
                return None
        types = [plan.types.get(name) or "number" for name in shared]
        return Relation(
            name=f"groups:{id(agg)}",
            columns=[(name, base) for name, base in zip(shared, types, strict=True)],
            base_types=types,
        )

    def _groups(self, rule: Rule, plan: BodyPlan, groups: Relation) -> tuple[str, int]:
        """Make the table of the groups of `groups` (see _narrowing) whose aggregate may have
        changed: those a solution of the aggregate's body lost or gained belongs to."""
        (agg,) = self._changed_aggregates(plan)
        inner = agg.body
        changes = self.changes
        selects = []
        for state, compiler in (("old", self.old), ("new", self.new)):
            kind = "netlost" if state == "old" else "netgained"
            negated_kind = "netgained" if state == "old" else "netlost"
            variants: list[tuple[BodyPlan, dict[int, str]]] = []
            for j, atom in enumerate(inner.atoms):
                if changes.has(kind, atom.relation):
                    variants.append((inner, {j: changes.table[(kind, atom.relation)]}))
            for k, neg in _negated(inner):
                if changes.has(negated_kind, neg.relation):
                    test = ExistsIn(neg, changes.table[(negated_kind, neg.relation)])
                    variants.append((_with_filter(inner, k, test, keep=state == "new"), {}))
            for body, refs in variants:

                def ref(index: int, atom: Atom, refs: dict[int, str] = refs, state: str = state) -> str:
                    if index in refs:
                        return refs[index]
                    return old_table(atom.relation) if state == "old" else quote(atom.relation)

                from_items, conds, env = compiler.body(body, {}, ref)
                cols = [f"{env[name]} AS {quote(name)}" for name in groups.column_names]
                selects.append(select_sql(cols, from_items, conds, distinct=True))
        table = change_table("groups", str(rule.index))
        union = " UNION ".join(f"({sql})" for sql in selects)
        definitions = ", ".join(f"{quote(name)} {SQL_TYPES[base]}" for name, base in groups.columns)
        self.con.execute(f"CREATE TABLE {table} ({definitions})")
        count = self.db._execute_count(f"INSERT INTO {table} {union}", self.con) if selects else 0
        return table, count

    def _narrowed(self, rule: Rule, state: str) -> str | None:
        """The rule's SELECT for the groups its changed aggregate may have changed (None when
        there are none), in the given state."""
        plan = self.program.plans[rule.index]
        groups = self._narrowing(plan)
        if groups is None:
            return None
        key = rule.index
        if key not in self._group_tables:
            self._group_tables[key] = self._groups(rule, plan, groups)
        table, count = self._group_tables[key]
        if not count:
            return None
        extra = Atom(groups.name, tuple(Var(name) for name in groups.column_names))
        narrowed = replace(plan, atoms=[*plan.atoms, extra])
        relations = {**self.program.relations, groups.name: groups}
        compiler = SqlCompiler(relations, old_table) if state == "old" else SqlCompiler(relations)
        return self._select(compiler, rule, narrowed, {len(plan.atoms): table}, state)

    def _select(
        self, compiler: SqlCompiler, rule: Rule, plan: BodyPlan, refs: dict[int, str], state: str
    ) -> str:
        own = self.own

        def ref(index: int, atom: Atom) -> str:
            if index in refs:
                return refs[index]
            if state == "old":
                return old_table(atom.relation)
            if atom.relation in own:
                return versioned_table(atom.relation, FULL)
            return quote(atom.relation)

        return compiler.select_head(rule.head, plan, ref, distinct=False)

    # -- the three steps -----------------------------------------------------------------------

    def run(self) -> StratumStats:
        started = time.perf_counter()
        rules = [self.program.rules[i] for i in self.stratum.rules]
        touched = [rule for rule in rules if self._touched(rule)]
        rounds, gained = 0, dict.fromkeys(self.stratum.relations, 0)
        over = dict.fromkeys(self.stratum.relations, 0)
        if touched:
            over = self._over_delete(touched, rules)
            self._delete(over)
            rounds, gained = self._rederive(touched, over)
        # The tuples each relation gained, as tables: the later strata join them with whole
        # relations, and DuckDB orders those joins by the sizes it knows, a table's exactly, a
        # filter's by guess (a fifth of the relation, after which it hashes the whole ones).
        making = [
            f"CREATE TABLE {change_table('gained', name)} AS "
            f'SELECT * FROM {quote(name)} WHERE "_iter" >= {self.first_round}'
            for name in self.stratum.relations
            if gained.get(name)
        ]
        if making:
            self.con.execute(";\n".join(making))
        for name in self.stratum.relations:
            self.changes.set("lost", name, over.get(name, 0), change_table("over", name))
            self.changes.set("gained", name, gained.get(name, 0), change_table("gained", name))
            if name in self.needs_net:
                if over.get(name) or gained.get(name):
                    self._net_changes(name)
                else:
                    self.changes.set("netlost", name, 0, "")
                    self.changes.set("netgained", name, 0, "")
        return StratumStats(
            index=self.index,
            relations=list(self.stratum.relations),
            recursive=self.stratum.recursive,
            iterations=rounds,
            first_iter=self.first_round,
            last_iter=self.first_round + max(rounds - 1, 0),
            seconds=time.perf_counter() - started,
            new_tuples=gained,
        )

    def _over_delete(self, touched: list[Rule], rules: list[Rule]) -> dict[str, int]:
        changes = self.changes
        selects: dict[str, list[str]] = {}
        for rule in touched:
            plan = self.program.plans[rule.index]
            parts = selects.setdefault(rule.head.relation, [])
            empty = self._empty(plan, "old")
            if self._whole(plan):
                if not empty:
                    parts.append(self._select(self.old, rule, plan, {}, "old"))
                continue
            narrowed = None if empty else self._narrowed(rule, "old")
            if narrowed is not None:
                parts.append(narrowed)
            for i, atom in enumerate(plan.atoms):
                if (
                    atom.relation not in self.own
                    and changes.has("lost", atom.relation)
                    and not self._empty(plan, "old", replaced=i)
                ):
                    lost = changes.table[("lost", atom.relation)]
                    parts.append(self._select(self.old, rule, plan, {i: lost}, "old"))
            for k, neg in _negated(plan):
                if not empty and changes.has("netgained", neg.relation):
                    gained = ExistsIn(neg, changes.table[("netgained", neg.relation)])
                    gaining = _with_filter(plan, k, gained, keep=False)
                    parts.append(self._select(self.old, rule, gaining, {}, "old"))
        over = self._add_over(selects, 1)
        if self.stratum.recursive:
            round_no = 1
            new = dict(over)
            while any(new.values()):
                round_no += 1
                selects = {}
                for rule in rules:
                    plan = self.program.plans[rule.index]
                    for i, atom in enumerate(plan.atoms):
                        if (
                            atom.relation in self.own
                            and new.get(atom.relation)
                            and not self._empty(plan, "old", replaced=i)
                        ):
                            lost = (
                                f"(SELECT * FROM {change_table('over', atom.relation)} "
                                f'WHERE "_r" = {round_no - 1})'
                            )
                            selects.setdefault(rule.head.relation, []).append(
                                self._select(self.old, rule, plan, {i: lost}, "old")
                            )
                new = self._add_over(selects, round_no)
                for name, count in new.items():
                    over[name] = over.get(name, 0) + count
        return over

    def _add_over(self, selects: dict[str, list[str]], round_no: int) -> dict[str, int]:
        """Add to over:R the tuples of the SELECTs that R held, derived (not program facts)."""
        added: dict[str, int] = {}
        for head, parts in selects.items():
            if not parts:
                continue
            rel = self.program.relations[head]
            union = " UNION ALL ".join(f"({part})" for part in parts)
            table = change_table("over", head)
            if head not in self._over_tables:  # made when first needed: most strata need none
                self.con.execute(f'CREATE TABLE {table} ({", ".join(change_columns(rel))}, "_r" INTEGER)')
                self._over_tables.add(head)
            names = [f"c{i}" for i in range(rel.arity)] or ["c_unit"]
            held = same_values(rel, "h", "s", positional=True)
            known = same_values(rel, "o", "s", positional=True)
            sql = (
                f"INSERT INTO {table} SELECT {', '.join('s.' + n for n in names)}, {round_no} "
                f"FROM (SELECT DISTINCT * FROM ({union})) AS s JOIN {old_table(head)} AS h ON {held} "
                f'WHERE h."_iter" > 0 AND NOT EXISTS (SELECT 1 FROM {table} AS o WHERE {known})'
            )
            added[head] = self.db._execute_count(sql, self.con)
        return added

    def _delete(self, over: dict[str, int]) -> None:
        for name, count in over.items():
            if not count:
                continue
            rel = self.program.relations[name]
            table = quote(name)
            match = same_values(rel, table, "o")
            deleted = self.db._execute_count(
                f"DELETE FROM {table} USING {change_table('over', name)} AS o WHERE {match}",
                self.con,
            )
            self.db._sizes[name] -= deleted

    def _rederive(self, touched: list[Rule], over: dict[str, int]) -> tuple[int, dict[str, int]]:
        changes = self.changes
        selects: dict[str, list[tuple[int, str]]] = {}
        for rule in touched:
            plan = self.program.plans[rule.index]
            parts = selects.setdefault(rule.head.relation, [])
            empty = self._empty(plan, "new")
            if self._whole(plan):
                if not empty:
                    parts.append((rule.index, self._select(self.new, rule, plan, {}, "new")))
                continue
            narrowed = None if empty else self._narrowed(rule, "new")
            if narrowed is not None:
                parts.append((rule.index, narrowed))
            for i, atom in enumerate(plan.atoms):
                if (
                    atom.relation not in self.own
                    and changes.has("gained", atom.relation)
                    and not self._empty(plan, "new", replaced=i)
                ):
                    added = changes.table[("gained", atom.relation)]
                    parts.append((rule.index, self._select(self.new, rule, plan, {i: added}, "new")))
            for k, neg in _negated(plan):
                if not empty and changes.has("netlost", neg.relation):
                    # A tuple lost matches the atom; with a wildcard, others may still match it.
                    lost = ExistsIn(neg, changes.table[("netlost", neg.relation)])
                    losing = _with_filter(plan, k, lost, keep=True)
                    parts.append((rule.index, self._select(self.new, rule, losing, {}, "new")))
        # The over-deleted tuples that still have a derivation, by any rule of their relation.
        for index in self.stratum.rules:
            rule = self.program.rules[index]
            plan = self.program.plans[index]
            if over.get(rule.head.relation) and not self._whole(plan) and not self._empty(plan, "new"):
                selects.setdefault(rule.head.relation, []).append((index, self._rederivation(rule)))
        selects = {head: parts for head, parts in selects.items() if parts}
        round_no = self.first_round
        new = self.db._insert_round(selects, round_no, self.con) if selects else {}
        gained = {name: new.get(name, 0) for name in self.stratum.relations}
        rounds = 1
        if self.stratum.recursive:
            compiled = [
                self.db._compile_rule(self.program.rules[i], self.stratum) for i in self.stratum.rules
            ]
            while any(new.values()):
                round_no += 1
                rounds += 1
                new = self.db._run_round(compiled, round_no, self.con, initial=False, previous=new)
                for name, count in new.items():
                    gained[name] += count
        return rounds, gained

    def _rederivation(self, rule: Rule) -> str:
        """The rule's SELECT in the new state, for head tuples that were over-deleted only."""
        plan = self.program.plans[rule.index]
        over = change_table("over", rule.head.relation)
        bound = {arg.name for atom in plan.atoms for arg in atom.args if isinstance(arg, Var)}
        head = rule.head.args
        if all(isinstance(a, Const) or (isinstance(a, Var) and a.name in bound) for a in head):
            # The head as one more atom, read from the over-deleted tuples: DuckDB starts the
            # joins from them instead of evaluating the whole rule.
            extra = Atom(rule.head.relation, head)
            narrowed = replace(plan, atoms=[*plan.atoms, extra])
            return self._select(self.new, rule, narrowed, {len(plan.atoms): over}, "new")
        rel = self.program.relations[rule.head.relation]
        match = same_values(rel, "o", "s", positional=True)
        whole = self._select(self.new, rule, plan, {}, "new")
        return f"SELECT * FROM ({whole}) AS s WHERE EXISTS (SELECT 1 FROM {over} AS o WHERE {match})"

    def _net_changes(self, name: str) -> None:
        """netgained:R and netlost:R: the tuples R gained and lost, re-derived ones left out."""
        rel = self.program.relations[name]
        cols = ", ".join(change_columns(rel))
        values = value_columns(rel)
        made = f"SELECT {values} FROM {change_table('gained', name)}"
        kept = f'SELECT {values} FROM {quote(name)} WHERE "_iter" >= {self.first_round} OR "_iter" = 0'
        lost = (
            f"SELECT {values} FROM {change_table('over', name)}"
            if name in self._over_tables
            else f"SELECT {values} FROM {quote(name)} WHERE FALSE"
        )
        gained_table, lost_table = change_table("netgained", name), change_table("netlost", name)
        self.con.execute(f"CREATE TABLE {gained_table} ({cols});\nCREATE TABLE {lost_table} ({cols})")
        changes = self.changes
        count = 0
        if changes.has("gained", name):
            sql = f"INSERT INTO {gained_table} {made} EXCEPT {lost}"
            count = self.db._execute_count(sql, self.con)
        changes.set("netgained", name, count, gained_table)
        count = 0
        if changes.has("lost", name):
            count = self.db._execute_count(f"INSERT INTO {lost_table} {lost} EXCEPT {kept}", self.con)
        changes.set("netlost", name, count, lost_table)
