"""Gather the facts of many files into one id space, ready for the engine.

Each file's node ids start at 0; here they are shifted by the number of
nodes seen before, so ids are unique across the assessed tree.
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa

from .schema import INPUT_RELATIONS, NO_NODE


class FactSet:
    def __init__(self) -> None:
        self.rows: dict[str, list[tuple]] = defaultdict(list)
        self._next_base = 0

    def add_file(self, rows: dict[str, list[tuple]], node_count: int) -> None:
        base = self._next_base
        self._next_base += node_count
        for relation, tuples in rows.items():
            columns = INPUT_RELATIONS[relation]
            node_positions = [i for i, c in enumerate(columns) if c.is_node]
            target = self.rows[relation]
            if not node_positions or base == 0:
                target.extend(tuples)
                continue
            for t in tuples:
                row = list(t)
                for i in node_positions:
                    if row[i] != NO_NODE:
                        row[i] += base
                target.append(tuple(row))

    def add(self, relation: str, row: tuple) -> None:
        self.rows[relation].append(row)

    def count(self) -> int:
        return sum(len(v) for v in self.rows.values())

    def arrow_table(self, relation: str) -> pa.Table:
        columns = INPUT_RELATIONS[relation]
        tuples = self.rows.get(relation, [])
        arrays = []
        for i, col in enumerate(columns):
            values = [t[i] for t in tuples]
            arrays.append(pa.array(values, type=pa.string() if col.type == "symbol" else pa.int64()))
        return pa.Table.from_arrays(arrays, names=[c.name for c in columns])
