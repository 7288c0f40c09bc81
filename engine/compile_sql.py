"""Planned bodies -> DuckDB SQL text.

* positive atoms -> a comma join of tables; first occurrence of a variable names its column,
  later occurrences and constants become equalities in WHERE (DuckDB turns them into hash joins);
* assignments are substituted inline; aggregates become LATERAL scalar subqueries correlated on
  the outer variables (DuckDB decorrelates them into grouped joins);
* negated atoms -> an ANTI JOIN of the body's solutions (NOT EXISTS inside an aggregate, or
  for an atom of wildcards only); comparisons and constraint functors -> WHERE conditions.

Every identifier is quoted, so relations called `call`, `order` or `file` need no renaming.
Statements for recursive strata contain the markers CUR/PREV, replaced by round numbers at run
time, so each statement is compiled once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from .plan import AggregatePlan, AtomArgFilter, BodyPlan, ExistsIn, Filter
from .syntax import (
    Atom,
    BinOp,
    BoolLit,
    Call,
    Comparison,
    Const,
    Constraint,
    Fact,
    Relation,
    Term,
    UnaryMinus,
    Var,
    Wildcard,
)
from .typesys import SQL_TYPES

CUR = "__CPQ_CUR_ITER__"
PREV = "__CPQ_PREV_ITER__"

ITER_COLUMN = '"_iter"'
RULE_COLUMN = '"_rule"'

# How a positive atom of a recursive stratum reads its relation in a semi-naive round.
FULL, DELTA, OLD = "full", "delta", "old"

TableRef = Callable[[int, Atom], str]


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def plain_table(_index: int, atom: Atom) -> str:
    return quote(atom.relation)


def versioned_table(relation: str, version: str) -> str:
    """The part of a relation visible to a semi-naive round (see evaluation.py)."""
    condition = {
        FULL: f"{ITER_COLUMN} < {CUR}",  # everything derived before this round
        DELTA: f"{ITER_COLUMN} = {PREV}",  # what the previous round added
        OLD: f"{ITER_COLUMN} < {PREV}",  # everything but the previous round
    }[version]
    return f"(SELECT * FROM {quote(relation)} WHERE {condition})"


def sql_literal(const: Const) -> str:
    if const.type == "symbol":
        return "'" + str(const.value).replace("'", "''") + "'"
    if const.type == "float":
        return f"CAST({float(const.value)!r} AS DOUBLE)"
    return f"CAST({int(const.value)} AS {SQL_TYPES[const.type]})"


class SqlCompiler:
    def __init__(self, relations: dict[str, Relation], relation_sql: Callable[[str], str] = quote) -> None:
        """`relation_sql`: how negated atoms and the atoms of aggregates name a relation's
        table (incremental maintenance reads them in the previous results)."""
        self.relations = relations
        self.relation_sql = relation_sql
        self.aliases = 0

    def _relation_ref(self, _index: int, atom: Atom) -> str:
        return self.relation_sql(atom.relation)

    def alias(self, prefix: str) -> str:
        self.aliases += 1
        return f"{prefix}{self.aliases}"

    # -- statements ------------------------------------------------------------------------

    def select_head(
        self, head: Atom, plan: BodyPlan, table_ref: TableRef = plain_table, *, distinct: bool = True
    ) -> str:
        """SELECT (DISTINCT) of the head tuple as columns c0..cn-1 (typed as the relation)."""
        anti = [f for f in plan.filters if isinstance(f, Atom) and f.negated and _matches_on(f)]
        if anti:
            plan = replace(plan, filters=[f for f in plan.filters if not (isinstance(f, Atom) and f in anti)])
        from_items, conds, env = self.body(plan, {}, table_ref)
        rel = self.relations[head.relation]
        cols: list[str] = []
        for i, (arg, base) in enumerate(zip(head.args, rel.base_types, strict=True)):
            sql, nullable = self.term(arg, env, plan.types)
            if not (isinstance(arg, Var) and plan.types.get(arg.name) == base):
                # A value that does not fit the column (say -1 into unsigned) makes the rule not
                # fire rather than abort the whole evaluation.
                sql, nullable = f"TRY_CAST({sql} AS {SQL_TYPES[base]})", True
            if nullable:
                conds.append(f"{sql} IS NOT NULL")
            cols.append(f"{sql} AS c{i}")
        if not anti:
            return _select(cols or ["1 AS c_unit"], from_items, conds, distinct=distinct)
        return self._anti_joined(cols, from_items, conds, env, plan.types, anti, distinct=distinct)

    def _anti_joined(
        self,
        cols: list[str],
        from_items: list[str],
        conds: list[str],
        env: dict[str, str],
        types: dict[str, str | None],
        negated: list[Atom],
        *,
        distinct: bool,
    ) -> str:
        """The body's solutions (the head's columns `cols`, c0..cn-1) that match no tuple of
        the `negated` atoms: an anti join of them (see insert_new_tuples for why not NOT
        EXISTS).  Both keep a solution whose value is NULL: it equals nothing."""
        names = ", ".join(f"b.c{i}" for i in range(len(cols))) or "1 AS c_unit"
        keys: list[str] = []
        joins: list[str] = []
        for atom in negated:
            alias = self.alias("n")
            on = []
            for (col_name, _), arg in zip(self.relations[atom.relation].columns, atom.args, strict=True):
                if isinstance(arg, Wildcard):
                    continue
                value, _ = self.term(arg, env, types)
                on.append(f"{alias}.{quote(col_name)} = b.k{len(keys)}")
                keys.append(f"{value} AS k{len(keys)}")
            joins.append(f" ANTI JOIN {self.relation_sql(atom.relation)} AS {alias} ON {' AND '.join(on)}")
        inner = _select(cols + keys, from_items, conds, distinct=False)
        return f"SELECT {'DISTINCT ' if distinct else ''}{names} FROM ({inner}) AS b{''.join(joins)}"

    def select_facts(self, relation: str, facts: Sequence[Fact]) -> str:
        """Distinct tuples of ground facts of one relation, as columns c0..cn-1 (arity > 0)."""
        rel = self.relations[relation]
        rows = []
        for fact in facts:
            values = []
            for arg, base in zip(fact.atom.args, rel.base_types, strict=True):
                sql, _ = self.term(arg, {}, {})
                values.append(f"TRY_CAST({sql} AS {SQL_TYPES[base]})")
            rows.append("(" + ", ".join(values) + ")")
        names = [f"c{i}" for i in range(rel.arity)]
        # A failed conversion (e.g. to_number("x")) gives NULL: such a fact does not hold.
        conds = [f"{name} IS NOT NULL" for name in names]
        source = f"(VALUES {', '.join(rows)}) AS v({', '.join(names)})"
        return _select(names, [source], conds, distinct=True)

    def select_query(self, names: Sequence[str], plan: BodyPlan) -> str:
        from_items, conds, env = self.body(plan, {}, plain_table)
        cols = [f"{env[name]} AS {quote(name)}" for name in names]
        return _select(cols or ["1 AS c_unit"], from_items, conds, distinct=True)

    # -- bodies ----------------------------------------------------------------------------

    def body(
        self, plan: BodyPlan, outer: dict[str, str], table_ref: TableRef
    ) -> tuple[list[str], list[str], dict[str, str]]:
        """FROM items, WHERE conditions and the variable -> SQL expression environment."""
        env = dict(outer)
        from_items: list[str] = []
        conds: list[str] = []
        atom_aliases: list[str] = []
        for index, atom in enumerate(plan.atoms):
            rel = self.relations[atom.relation]
            alias = self.alias("t")
            atom_aliases.append(alias)
            from_items.append(f"{table_ref(index, atom)} AS {alias}")
            for (col_name, _), arg in zip(rel.columns, atom.args, strict=True):
                col = f"{alias}.{quote(col_name)}"
                if isinstance(arg, Var):
                    if arg.name in env:
                        conds.append(f"{col} = {env[arg.name]}")
                    else:
                        env[arg.name] = col
                elif isinstance(arg, Const):
                    conds.append(f"{col} = {sql_literal(arg)}")
                # Wildcards constrain nothing; expressions are AtomArgFilters of the plan.

        for name, value in plan.assigns:
            if isinstance(value, AggregatePlan):
                subquery, not_null = self.aggregate(value, env)
                alias = self.alias("a")
                lateral = "LATERAL " if from_items else ""
                from_items.append(f"{lateral}({subquery}) AS {alias}")
                env[name] = f"{alias}.v"
                if not_null:
                    conds.append(f"{alias}.v IS NOT NULL")
            else:
                sql, nullable = self.term(value, env, plan.types)
                env[name] = sql
                if nullable:
                    conds.append(f"{sql} IS NOT NULL")

        for item in plan.filters:
            conds.append(self.filter(item, env, plan.types, atom_aliases, plan.atoms))
        return from_items, conds, env

    def aggregate(self, agg: AggregatePlan, env: dict[str, str]) -> tuple[str, bool]:
        """Scalar subquery computing the aggregate; the flag says 'NULL -> rule does not fire'."""
        outer = {name: env[name] for name in agg.correlated}
        from_items, conds, inner_env = self.body(agg.body, outer, self._relation_ref)
        op = agg.aggregate.op
        if op == "count":
            expr, empty_is_none = "count(*)", False
        else:
            assert agg.aggregate.target is not None
            target, _ = self.term(agg.aggregate.target, inner_env, agg.body.types)
            if op == "sum":
                sql_type = SQL_TYPES.get(agg.result_type or "number", "BIGINT")
                # Never empty (COALESCE); NULL only when the total overflows the column type.
                expr = f"TRY_CAST(COALESCE(sum({target}), 0) AS {sql_type})"
                empty_is_none = True
            elif op == "mean":
                expr, empty_is_none = f"avg({target})", True
            else:
                expr, empty_is_none = f"{op}({target})", True
        return _select([f"{expr} AS v"], from_items, conds, distinct=False), empty_is_none

    def filter(
        self,
        item: Filter,
        env: dict[str, str],
        types: dict[str, str | None],
        atom_aliases: list[str],
        atoms: list[Atom],
    ) -> str:
        if isinstance(item, AtomArgFilter):
            atom = atoms[item.atom_index]
            col_name = self.relations[atom.relation].columns[item.column_index][0]
            value, _ = self.term(item.term, env, types)
            return f"{atom_aliases[item.atom_index]}.{quote(col_name)} = {value}"
        if isinstance(item, Comparison):
            left, _ = self.term(item.left, env, types)
            right, _ = self.term(item.right, env, types)
            op = "<>" if item.op == "!=" else item.op
            return f"{left} {op} {right}"
        if isinstance(item, Constraint):
            first, _ = self.term(item.args[0], env, types)
            second, _ = self.term(item.args[1], env, types)
            if item.name == "contains":  # contains(sub, s): s contains sub
                cond = f"contains({second}, {first})"
            else:  # match(regex, s): Soufflé matches the whole string
                cond = f"regexp_full_match({second}, {first})"
            return f"NOT {cond}" if item.negated else cond
        if isinstance(item, BoolLit):
            return "TRUE" if item.value else "FALSE"
        if isinstance(item, ExistsIn):
            return f"EXISTS ({self.matching(item.atom, item.table, env, types)})"
        assert isinstance(item, Atom) and item.negated
        matching = self.matching(item, self.relation_sql(item.relation), env, types)
        return f"NOT EXISTS ({matching})"

    def matching(self, atom: Atom, table: str, env: dict[str, str], types: dict[str, str | None]) -> str:
        """SELECT 1 from `table` (of the atom's columns) where a row matches the atom."""
        rel = self.relations[atom.relation]
        alias = self.alias("n")
        conds = []
        for (col_name, _), arg in zip(rel.columns, atom.args, strict=True):
            if isinstance(arg, Wildcard):
                continue
            value, _ = self.term(arg, env, types)
            conds.append(f"{alias}.{quote(col_name)} = {value}")
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        return f"SELECT 1 FROM {table} AS {alias}{where}"

    # -- terms -----------------------------------------------------------------------------

    def term(self, term: Term, env: dict[str, str], types: dict[str, str | None]) -> tuple[str, bool]:
        """SQL for a term, and whether it may be NULL (a failed conversion or division by 0)."""
        if isinstance(term, Var):
            return env[term.name], False
        if isinstance(term, Const):
            return sql_literal(term), False
        if isinstance(term, UnaryMinus):
            sql, nullable = self.term(term.operand, env, types)
            return f"(-{sql})", nullable
        if isinstance(term, BinOp):
            return self.binop(term, env, types)
        if isinstance(term, Call):
            return self.call(term, env, types)
        raise AssertionError(f"cannot compile term {term!r}")  # planner rejects the rest

    def binop(self, term: BinOp, env: dict[str, str], types: dict[str, str | None]) -> tuple[str, bool]:
        left, left_null = self.term(term.left, env, types)
        right, right_null = self.term(term.right, env, types)
        nullable = left_null or right_null
        integral = self.is_integral(term.left, types) and self.is_integral(term.right, types)
        if term.op == "/":
            # Soufflé divides integers with truncation; `/` in DuckDB would yield a DOUBLE.
            # Division by zero yields NULL (see connect.py), so the rule does not fire.
            return (f"({left} // {right})" if integral else f"({left} / {right})"), True
        if term.op == "%":
            return f"({left} % {right})", True
        if term.op == "^":
            power = f"pow({left}, {right})"
            return (f"TRY_CAST({power} AS BIGINT)" if integral else power), integral or nullable
        if integral:
            # Soufflé wraps around on overflow, DuckDB raises; TRY turns an overflow into NULL so
            # that the rule does not fire for that tuple instead of aborting the evaluation.
            # (SQL may also evaluate it before the guards written next to it in the body.)
            return f"TRY({left} {term.op} {right})", True
        return f"({left} {term.op} {right})", nullable

    def is_integral(self, term: Term, types: dict[str, str | None]) -> bool:
        if isinstance(term, Const):
            return term.type in ("number", "unsigned")
        if isinstance(term, Var):
            return types.get(term.name) in ("number", "unsigned", None)
        if isinstance(term, UnaryMinus):
            return self.is_integral(term.operand, types)
        if isinstance(term, BinOp):
            return self.is_integral(term.left, types) and self.is_integral(term.right, types)
        if isinstance(term, Call):
            if term.name in ("min", "max"):
                return all(self.is_integral(arg, types) for arg in term.args)
            return term.name in ("strlen", "ord", "to_number", "to_unsigned")
        return False

    def call(self, term: Call, env: dict[str, str], types: dict[str, str | None]) -> tuple[str, bool]:
        parts = [self.term(arg, env, types) for arg in term.args]
        args = [sql for sql, _ in parts]
        nullable = any(null for _, null in parts)
        name = term.name
        if name == "cat":
            return "(" + " || ".join(args) + ")", nullable
        if name == "strlen":
            return f"length({args[0]})", nullable
        if name == "substr":
            # Soufflé counts from 0, SQL from 1.
            return f"substr({args[0]}, ({args[1]}) + 1, {args[2]})", nullable
        if name == "ord":
            return f"unicode({args[0]})", nullable
        if name == "to_string":
            return f"CAST({args[0]} AS VARCHAR)", nullable
        if name in ("to_number", "to_float", "to_unsigned"):
            sql_type = {"to_number": "BIGINT", "to_float": "DOUBLE", "to_unsigned": "UBIGINT"}[name]
            return f"TRY_CAST({args[0]} AS {sql_type})", True
        if name in ("min", "max"):
            return f"{'least' if name == 'min' else 'greatest'}({', '.join(args)})", nullable
        raise AssertionError(f"unknown functor {name}")  # the parser rejects unknown functors


def _matches_on(atom: Atom) -> bool:
    """Whether the atom constrains a column (an anti join needs a condition to join on)."""
    return any(not isinstance(arg, Wildcard) for arg in atom.args)


def _select(cols: list[str], from_items: list[str], conds: list[str], *, distinct: bool) -> str:
    sql = "SELECT " + ("DISTINCT " if distinct else "") + ", ".join(cols)
    if from_items:
        sql += " FROM " + ", ".join(from_items)
    if conds:
        sql += " WHERE " + " AND ".join(conds)
    return sql


def _insert_into(relation: Relation, table: str | None = None) -> str:
    """`INSERT INTO table (columns, _iter, _rule)`; the relation's own table by default."""
    target = [quote(name) for name in relation.column_names] + [ITER_COLUMN, RULE_COLUMN]
    return f"INSERT INTO {table or quote(relation.name)} ({', '.join(target)})"


def insert_facts(relation: Relation, rows: Sequence[Sequence[str]]) -> str:
    """INSERT the given rows of SQL literals as facts (`_iter` 0); they must be distinct and
    new to the table."""
    values = ", ".join(f"({', '.join(row)}, 0, NULL)" for row in rows)
    return f"{_insert_into(relation)} VALUES {values}"


def insert_new_tuples(
    relation: Relation,
    select_sql: str,
    iter_sql: str,
    rule_sql: str,
    *,
    anti_join: bool,
    table: str | None = None,
) -> str:
    """INSERT the rows c0..cn-1 of `select_sql` that are not yet in the relation.

    `select_sql` must already be duplicate-free; the anti-join keeps the table a set across
    statements (several rules, several rounds, several loads).
    """
    picked = [f"s.c{i}" for i in range(relation.arity)] + [iter_sql, rule_sql]
    sql = f"{_insert_into(relation, table)} SELECT {', '.join(picked)} FROM ({select_sql}) AS s"
    if not anti_join:
        return sql
    target = table or quote(relation.name)
    if not relation.arity:
        return f"{sql} WHERE NOT EXISTS (SELECT 1 FROM {target})"
    # ANTI JOIN, not NOT EXISTS: DuckDB plans a correlated NOT EXISTS as a mark join that
    # hashes the whole relation, even for the handful of tuples of a late round or an update;
    # an anti join hashes the smaller side.
    match = " AND ".join(f"e.{quote(name)} = s.c{i}" for i, name in enumerate(relation.column_names))
    return f"{sql} ANTI JOIN {target} AS e ON {match}"
