"""cpq.engine: a Datalog (Soufflé subset) evaluator compiled to SQL and run in DuckDB.

prog = parse_program(text, source="rules.dl")   # parse + check, raises DatalogError;
                                                 # `#include "f.dl"` reads f.dl beside rules.dl
db = Database(prog)                              # in-memory DuckDB (or a file path)
db.load("edge", [(1, 2), (2, 3)])                # bulk load, tuples or a pyarrow.Table
stats = db.evaluate()                            # stratified, semi-naive evaluation
db.rows("path"); db.query('path(1, X), X > 2')
ext = parse_extension(".decl p2(x: number) p2(X) :- path(1, X). p2(X)", prog)  # a query's own
with Database.beside(db, ext.program) as own:   # relations, evaluated over db's results
    own.evaluate(); own.query(ext.body)
"""

from .database import Database
from .errors import DatalogError
from .evaluation import EvalStats, StratumStats
from .extend import Extension, parse_extension
from .include import JoinedText, Library, SourceMap, folder_lister, folder_reader, join_includes
from .program import Program, parse_joined, parse_program
from .query import CompiledQuery, compile_query, query_warnings
from .stratify import Stratum
from .syntax import (
    Aggregate,
    Atom,
    BinOp,
    BoolLit,
    Call,
    Comparison,
    Const,
    Constraint,
    Fact,
    Literal,
    Relation,
    Rule,
    Term,
    UnaryMinus,
    Var,
    Wildcard,
)

__all__ = [
    "Aggregate",
    "Atom",
    "BinOp",
    "BoolLit",
    "Call",
    "Comparison",
    "CompiledQuery",
    "Const",
    "Constraint",
    "DatalogError",
    "Database",
    "EvalStats",
    "Extension",
    "Fact",
    "JoinedText",
    "Library",
    "Literal",
    "Program",
    "Relation",
    "Rule",
    "SourceMap",
    "Stratum",
    "StratumStats",
    "Term",
    "UnaryMinus",
    "Var",
    "Wildcard",
    "compile_query",
    "query_warnings",
    "folder_lister",
    "folder_reader",
    "join_includes",
    "parse_joined",
    "parse_extension",
    "parse_program",
]
