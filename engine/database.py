"""engine.Database: a program's relations in DuckDB, loaded, evaluated, updated and read.

The class is made of parts with one job each, every one a subclass of storage.Storage (the
connection and the tables):

* loading.Loading: appending input facts;
* evaluation.Evaluation: stratified, semi-naive evaluation of the rules;
* update.Updating: incremental maintenance of evaluated results after the inputs changed;
* queries.Queries: reading relations and answering queries.
"""

from __future__ import annotations

from .loading import Loading
from .queries import Queries
from .update import Updating


class Database(Loading, Updating, Queries):
    """Tables for every relation of `program`, in memory (path=None) or in a DuckDB file:
    `Database(program, path)` makes them, `Database.open` and `Database.from_template` open a
    file that holds them (see storage.Storage)."""
