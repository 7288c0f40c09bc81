"""Gather the facts of many files into one id space, column by column, ready for the engine.

Each file's node ids start at 0; here they are shifted by the file's base (see
`facts.node_ids`; by default, the number of nodes seen before), so ids are unique
across the assessed tree. Facts travel as columns (an int64 array's bytes per number
column, a list per symbol column); for many facts the shift is left to DuckDB, which
reads the columns as they are (see engine.arrow_export).
With a sink, the set hands full batches to it (the database) and frees them,
so a large tree never sits in Python lists all at once.
"""

from __future__ import annotations

import marshal
import struct
import threading
import zlib
from array import array
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from ..engine.list_params import LIST_BATCH_VALUES
from .schema import INPUT_RELATIONS, NO_NODE

if TYPE_CHECKING:
    # Imported where first needed (with ctypes): a small tree's facts go as lists.
    from ..engine.arrow_export import ColumnBatch
    from .extract import Row, Rows

# A file's facts, by relation, column by column: a number column is the bytes of an int64
# array (made in the worker, read here without a conversion per value), a symbol column a list.
Columns = dict[str, list[bytes | list[str]]]
# What a sink takes for a relation: a column batch, or a list of values per column.
ValueColumns = list[list[int] | list[str]]
# What takes batches of whole relations (the database's load_disjoint), and returns how many
# tuples it kept.
Sink = Callable[[dict[str, "ColumnBatch | ValueColumns"]], int]

FLUSH_VALUES = 8_000_000  # values buffered before a batch goes to the sink


SINK_GROUP_VALUES = 500_000  # relations handed over together up to this many values
_INT_SIZE = 8  # bytes of an int64


def _int64_bytes(values: tuple[int, ...]) -> bytes:
    """The values as native 64-bit integers.  struct packs a column of a few hundred values or
    more two to three times faster than array, which parses each item as a call's argument
    (3 % of an extraction worker's instructions); a value struct refuses raises what array
    raises for it."""
    try:
        return struct.pack(f"{len(values)}q", *values)
    except struct.error:
        return array("q", values).tobytes()


def rows_to_columns(rows: Rows) -> Columns:
    out: Columns = {}
    for rel, tuples in rows.items():
        if not tuples:
            continue
        defs = INPUT_RELATIONS[rel]
        width = len(defs)
        # Transposed by zip: twice as fast as flattening and slicing once the cycle collector
        # is off (see facts.parallel), which it is whenever facts are packed.
        try:
            out[rel] = [
                _int64_bytes(column) if d.type == "number" else list(column)
                for column, d in zip(zip(*tuples, strict=True), defs, strict=True)
            ]
        except ValueError:  # rows of another width, or of different widths
            raise ValueError(f"rows of '{rel}' must have {width} values") from None
    return out


# The codec (b"L" lz4, b"D" zlib, b"R" none) and the uncompressed size, which lz4's
# decompressor wants first.
_HEADER = struct.Struct("<cQ")
_MAX_RATIO = 1000  # more than facts ever compress by: a larger size is a damaged header
# No file's facts come near this: a larger size is a damaged header, refused before allocating.
MAX_UNPACKED_BYTES = 1 << 30
# Nor do they come near this many bytes per character of their source (35 at most on NumPy;
# contrived lines of one-letter operands over 80): a store entry claiming more for its file
# is damaged or hostile, and is refused before its size is allocated (the absolute cap alone
# would let a 1 MB entry of a 1 kB file claim a gigabyte).
MAX_UNPACKED_PER_CHAR = 256
_UNPACKED_SLACK = 64 * 1024


def max_unpacked(text_length: int) -> int:
    """The most bytes the packed facts of a source of `text_length` characters unpack to."""
    return min(MAX_UNPACKED_BYTES, MAX_UNPACKED_PER_CHAR * text_length + _UNPACKED_SLACK)


@cache
def _lz4() -> Any:
    """lz4's block codec (a dependency), or None where it cannot be imported (zlib then)."""
    try:
        import lz4.block
    except ImportError:
        return None
    return lz4.block


def pack_facts(rows: Rows, node_count: int, lines: int, *, compress: bool = True) -> bytes:
    """One file's facts, compact, and in the form the loader wants; with `compress`, compressed
    as `compress_packed` does (without it, as the workers hand them over: see facts.parallel)."""
    columns = rows_to_columns(rows)
    payload = marshal.dumps((columns, node_count, lines))
    if not compress:
        return _HEADER.pack(b"R", len(payload)) + payload
    return _compressed(payload)


def compress_packed(data: bytes) -> bytes:
    """Packed facts compressed (as they are, if they are already), for the fact store: with
    lz4 (the facts of SciPy + Astropy, 239 MB, in 0.25 s of CPU where zlib's fastest level
    took 1.26 s, and read back in 0.19 s instead of 0.5 s; 64 MB of entries instead of 37).
    Where lz4 cannot be imported, with zlib's fastest level."""
    if data[:1] != b"R":
        return data
    return _compressed(memoryview(data)[_HEADER.size :])


def _compressed(payload: bytes | memoryview) -> bytes:
    lz4 = _lz4()
    if lz4 is None:
        return _HEADER.pack(b"D", len(payload)) + zlib.compress(payload, 1)
    compressed: bytes = lz4.compress(payload, store_size=False)
    return _HEADER.pack(b"L", len(payload)) + compressed


def unpack_facts(
    data: bytes, max_size: int = MAX_UNPACKED_BYTES, *, verify: bool = True
) -> tuple[Columns, int, int]:
    """The inverse of `pack_facts`; ValueError when the data is not such a file's facts, or
    would unpack to more than `max_size` bytes (see `max_unpacked`).  `verify=False` skips
    the check of every column (a second of a cold run on SciPy + Astropy) for facts this
    run's own workers just packed; whatever comes from the fact store is checked."""
    header = _HEADER.size
    if len(data) < header:
        raise ValueError("not packed facts: too short")
    codec, size = _HEADER.unpack_from(data, 0)
    if size > _MAX_RATIO * (len(data) - header) + 4096 or size > min(max_size, MAX_UNPACKED_BYTES):
        raise ValueError("not packed facts: bad size")
    lz4 = _lz4() if codec == b"L" else None
    if codec not in (b"D", b"R") and lz4 is None:
        raise ValueError(f"not packed facts: codec {codec!r} not available")
    payload: bytes | memoryview
    try:
        if codec == b"R":
            payload = memoryview(data)[header:]
        elif lz4 is not None:
            payload = lz4.decompress(memoryview(data)[header:], uncompressed_size=size)
        else:
            payload = zlib.decompress(data[header:], bufsize=size)
    except Exception as exc:  # zlib.error, or lz4's LZ4BlockError
        raise ValueError(f"not packed facts: {exc}") from None
    if len(payload) != size:
        raise ValueError("not packed facts: bad size")
    try:
        columns, node_count, lines = marshal.loads(payload)
    except (EOFError, TypeError, ValueError) as exc:  # no marshal data, or not three values
        raise ValueError(f"not packed facts: {exc}") from None
    if not isinstance(columns, dict) or not isinstance(node_count, int) or not isinstance(lines, int):
        raise ValueError("not packed facts")
    if not verify:
        return columns, node_count, lines
    for rel, cols in columns.items():
        defs = INPUT_RELATIONS.get(rel)
        if defs is None or not isinstance(cols, list) or len(cols) != len(defs):
            raise ValueError(f"bad relation {rel!r} in packed facts")
        sizes = set()
        for col_def, col in zip(defs, cols, strict=True):
            if col_def.type == "number":
                if not isinstance(col, bytes) or len(col) % _INT_SIZE:
                    raise ValueError(f"bad column in {rel!r}")
                sizes.add(len(col) // _INT_SIZE)
            else:
                if not isinstance(col, list) or not set(map(type, col)) <= {str}:
                    raise ValueError(f"bad column in {rel!r}")
                sizes.add(len(col))
        if len(sizes) != 1:
            raise ValueError(f"ragged columns in {rel!r}")
    return columns, node_count, lines


def _column_length(col: bytes | list[str]) -> int:
    return len(col) // _INT_SIZE if isinstance(col, bytes) else len(col)


class FactSet:
    def __init__(self, sink: Sink | None = None) -> None:
        """`sink` (e.g. Database.load_disjoint) takes batches of whole relations."""
        # Per column: the byte chunks of a number column (one per file), or a symbol column's values.
        self._cols: dict[str, list[list[bytes | str]]] = {}
        self._runs: dict[str, list[tuple[int, int]]] = {}  # (node id base, row count) per file
        self._next_base = 0
        self._buffered = 0
        self._total = 0
        self._kept = 0  # tuples the sink reported as new (a set drops duplicates)
        self._sink = sink

    def add_file(self, columns: Columns, node_count: int, base: int | None = None) -> int:
        """Add a file's facts with its ids shifted by `base` (by default, right after the ids of
        the files added before: numbered densely, as Soufflé's 32-bit numbers want); returns
        the base."""
        if base is None:
            base = self._next_base
        self._next_base = max(self._next_base, base + node_count)
        for relation, cols in columns.items():
            n = _column_length(cols[0]) if cols else 0
            if n == 0:
                continue
            target = self._cols.setdefault(relation, [[] for _ in INPUT_RELATIONS[relation]])
            for into, col in zip(target, cols, strict=True):
                if isinstance(col, bytes):
                    into.append(col)
                else:
                    into.extend(col)
            self._runs.setdefault(relation, []).append((base, n))
            self._buffered += n * len(cols)
            self._total += n
        if self._sink is not None and self._buffered >= FLUSH_VALUES:
            self.flush()
        return base

    def add(self, relation: str, row: Row) -> None:
        self.add_file(rows_to_columns({relation: [row]}), 0)

    def count(self) -> int:
        """Facts gathered: as kept by the sink once flushed, else as added."""
        return self._total

    def column_batch(self, relation: str) -> ColumnBatch:
        """A relation's facts as a column batch: each number column the join of its files'
        int64 chunks, and the node ids moved by their file's base when DuckDB reads them (see
        arrow_export.Shift), so no value is touched here one by one."""
        from ..engine.arrow_export import ColumnBatch, Shift, number_column, symbol_column

        columns = INPUT_RELATIONS[relation]
        cols = self._cols.get(relation) or [[] for _ in columns]
        runs = self._runs.get(relation, [])
        made = [
            symbol_column(cast("list[str]", values))
            if col_def.type == "symbol"
            else number_column(b"".join(cast("list[bytes]", values)))
            for col_def, values in zip(columns, cols, strict=True)
        ]
        shift = None
        node_columns = frozenset(i for i, col_def in enumerate(columns) if col_def.is_node)
        if node_columns and any(base for base, _ in runs):
            by = b"".join(struct.pack("=q", base) * n for base, n in runs)
            shift = Shift(number_column(by), node_columns, NO_NODE)
        return ColumnBatch([c.name for c in columns], made, shift)

    def value_columns(self, relation: str) -> ValueColumns:
        """A relation's facts as one list of values per column (ids shifted): for few facts,
        where a column batch would cost more than it saves (see list_params)."""
        columns = INPUT_RELATIONS[relation]
        cols = self._cols.get(relation) or [[] for _ in columns]
        runs = self._runs.get(relation, [])
        out: ValueColumns = []
        for col_def, values in zip(columns, cols, strict=True):
            if col_def.type == "symbol":
                out.append(list(cast("list[str]", values)))
                continue
            numbers: list[int] = []
            # One byte chunk per file, in the order of the runs.
            for chunk, (base, _) in zip(cast("list[bytes]", values), runs, strict=True):
                ids = array("q")
                ids.frombytes(chunk)
                if col_def.is_node and base:
                    numbers.extend([v if v == NO_NODE else v + base for v in ids])
                else:
                    numbers.extend(ids)
            out.append(numbers)
        return out

    def rows(self, relation: str) -> list[Row]:
        return list(zip(*self.value_columns(relation), strict=True))

    def flush(self, also: Sink | None = None) -> None:
        """Hand every buffered relation to the sink and forget it.  `also`: a second sink (the
        database on a connection of its own) that takes batches meanwhile, from a thread."""
        if self._sink is None:
            return
        # Every row carries its file or a node id of its file, and each file comes once:
        # a batch never repeats a row of an earlier one.  Small relations go together (one
        # call for many saves DuckDB's cost per statement), large ones alone (each batch's
        # joined columns are freed before the next is made).
        if self._buffered <= LIST_BATCH_VALUES:
            # Few facts: lists (see list_params).
            self._kept += self._sink({relation: self.value_columns(relation) for relation in self._cols})
        elif also is None:
            for group in self._groups():
                self._kept += self._sink(group)
        else:
            self._kept += _drain_together(self._groups(), self._sink, also)
        self._total = self._kept
        self._cols.clear()
        self._runs.clear()
        self._buffered = 0

    def _groups(self) -> Iterator[dict[str, ColumnBatch | ValueColumns]]:
        """The buffered relations as column batches, in groups of about SINK_GROUP_VALUES."""
        group: dict[str, ColumnBatch | ValueColumns] = {}
        values = 0
        for relation in list(self._cols):
            table = group[relation] = self.column_batch(relation)
            values += table.num_rows * table.num_columns
            if values >= SINK_GROUP_VALUES:
                yield group
                group, values = {}, 0
        if group:
            yield group


def _drain_together(
    groups: Iterator[dict[str, ColumnBatch | ValueColumns]], first: Sink, second: Sink
) -> int:
    """Hand `groups` to two sinks, each taking the next group once it is free, `second` in a
    thread of its own (DuckDB appends to different tables side by side, without the GIL);
    returns how many tuples they kept.  Once either fails, neither takes another group."""
    lock = threading.Lock()
    failed = threading.Event()

    def drain(sink: Sink) -> int:
        kept = 0
        try:
            while not failed.is_set():
                with lock:
                    group = next(groups, None)
                if group is None:
                    break
                kept += sink(group)
        except BaseException:  # an interrupt too: the other stops after the group in hand
            failed.set()
            raise
        return kept

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cpq-load") as pool:
        other = pool.submit(drain, second)
        kept = drain(first)
        return kept + other.result()
