"""SQL that enumerates the solutions of one rule body, with each positive atom's tuple exposed.

The engine's own compiler turns the body into joins (so expressions, aggregates, negation and
constraint functors behave exactly as in evaluation); this module only changes how each
positive atom reads its table: through a projection that repeats the atom's columns, `_iter`
and `_rule` under names unique to the atom (`__p{atom}_{column}`), optionally restricted to
tuples older than a round.  Those names need no table alias, which the engine keeps private.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..engine import Atom, Const, Relation
from ..engine.compile_sql import SqlCompiler, quote, sql_literal
from ..engine.plan import BodyPlan
from ..engine.syntax import Term

Value = str | int | float


def literal(value: Value, base_type: str | None = None) -> str:
    """A SQL literal for a stored value, typed like the column it is compared with."""
    if base_type is None:
        base_type = "symbol" if isinstance(value, str) else "float" if isinstance(value, float) else "number"
    return sql_literal(Const(value, base_type))


def column_alias(atom_index: int, column: int | str) -> str:
    return quote(f"__p{atom_index}_{column}")


def var_alias(name: str) -> str:
    return quote(f"__v_{name}")


@dataclass(frozen=True, slots=True)
class BodyRow:
    """One solution: variable values and, per positive atom, its tuple, `_iter` and `_rule`."""

    binding: dict[str, Value]
    atoms: list[tuple[tuple[Value, ...], int, int | None]]


class BodyQuery:
    """Solutions of a planned body, with variables fixed by equalities on head terms or names."""

    def __init__(
        self, relations: Mapping[str, Relation], plan: BodyPlan, recursive: frozenset[str] | None = None
    ) -> None:
        """`recursive`: the relations whose tuples must be older than the one being proved
        (those of the head's recursive stratum); None: every relation's."""
        self.relations = relations
        self.plan = plan
        self.recursive = recursive

    def _ordered(self, relation: str) -> bool:
        return self.recursive is None or relation in self.recursive

    def table_ref(self, before_iter: int | None):  # type: ignore[no-untyped-def]
        relations = self.relations

        def ref(index: int, atom: Atom) -> str:
            rel = relations[atom.relation]
            cols = [f"{quote(name)} AS {column_alias(index, j)}" for j, name in enumerate(rel.column_names)]
            cols += [f'"_iter" AS {column_alias(index, "it")}', f'"_rule" AS {column_alias(index, "ru")}']
            older = before_iter is not None and self._ordered(atom.relation)
            where = f' WHERE "_iter" < {int(before_iter)}' if older else ""
            return f"(SELECT *, {', '.join(cols)} FROM {quote(atom.relation)}{where})"

        return ref

    def sql(
        self,
        *,
        fixed_terms: Sequence[tuple[Term, Value, str]] = (),
        outer: Mapping[str, str] | None = None,
        extra_from: Sequence[str] = (),
        extra_conditions: Sequence[str] = (),
        before_iter: int | None = None,
        shortest_first: bool = False,
        by_values: bool = False,
        limit: int | None = None,
    ) -> str:
        """SELECT of every bound variable and every atom column.

        `fixed_terms` are (term, value, column type) pairs the solution must satisfy (a head
        argument against the tuple being proved); `outer` binds variables to SQL expressions
        before the body is read (why-not candidates); `before_iter` keeps only older tuples.
        `shortest_first` orders the solutions by the rounds of their tuples (the shortest proof
        first), `by_values` by their tuples alone (an order that does not depend on how the
        results were evaluated: afresh, or brought up to date)."""
        compiler = SqlCompiler(dict(self.relations))
        from_items, conds, env = compiler.body(self.plan, dict(outer or {}), self.table_ref(before_iter))
        for term, value, base_type in fixed_terms:
            sql, _ = compiler.term(term, env, self.plan.types)
            conds.append(f"{sql} = {literal(value, base_type)}")
        conds.extend(extra_conditions)
        cols = [f"{env[name]} AS {var_alias(name)}" for name in self.variable_names(env)]
        for index, atom in enumerate(self.plan.atoms):
            arity = self.relations[atom.relation].arity
            cols += [column_alias(index, j) for j in range(arity)]
            cols += [column_alias(index, "it"), column_alias(index, "ru")]
        sql = "SELECT " + ", ".join(cols or ["1"])
        items = list(extra_from) + from_items
        if items:
            sql += " FROM " + ", ".join(items)
        if conds:
            sql += " WHERE " + " AND ".join(conds)
        # The rounds that order a proof: those of the head's own (recursive) stratum; a tuple of
        # a lower stratum is proved whatever its round, and chosen by its values (so that the
        # same question gets the same answer after an update as after a fresh evaluation).
        iters = [
            column_alias(i, "it") for i, atom in enumerate(self.plan.atoms) if self._ordered(atom.relation)
        ]
        values = [
            column_alias(i, j)
            for i, atom in enumerate(self.plan.atoms)
            for j in range(self.relations[atom.relation].arity)
        ]
        if shortest_first and iters:
            # The shortest proof: the newest body tuple as old as possible, then the fewest rounds;
            # then the tuples themselves, so that the same question always gets the same answer.
            newest = iters[0] if len(iters) == 1 else f"greatest({', '.join(iters)})"
            sql += f" ORDER BY {', '.join([newest, ' + '.join(iters), *values])}"
        elif (by_values or shortest_first) and values:
            # No atom of the head's stratum: the tuples themselves choose (a plain table order
            # differs between an updated and a fresh evaluation).
            sql += f" ORDER BY {', '.join(values)}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return sql

    def variable_names(self, env: Mapping[str, str]) -> list[str]:
        return [name for name in self.plan.types if name in env]

    def rows(self, con, sql: str) -> list[BodyRow]:  # type: ignore[no-untyped-def]
        """Run `sql` (from `self.sql`) and split each row into binding and atom tuples."""
        cursor = con.execute(sql)
        names = [d[0] for d in cursor.description]
        out = []
        for raw in cursor.fetchall():
            record = dict(zip(names, raw, strict=True))
            binding = {name[4:]: value for name, value in record.items() if name.startswith("__v_")}
            atoms = []
            for index, atom in enumerate(self.plan.atoms):
                arity = self.relations[atom.relation].arity
                values = tuple(record[f"__p{index}_{j}"] for j in range(arity))
                atoms.append((values, int(record[f"__p{index}_it"]), record[f"__p{index}_ru"]))
            out.append(BodyRow(binding, atoms))
        return out
