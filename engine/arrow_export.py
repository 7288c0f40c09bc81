"""Columns handed to DuckDB through Arrow's C data interface, made without pyarrow.

DuckDB (1.1 on) reads any object with `__arrow_c_stream__` (the Arrow PyCapsule interface): a
capsule holding an `ArrowArrayStream`, whose one array here is a struct of the batch's columns.
The structs are made with ctypes and point into Python objects: a number column is the bytes
of a native int64 (or uint64, float64) array, read by DuckDB as they are, and a symbol column
is one bytes object of UTF-8 text with the offsets of its values.  So a large batch costs no
Python work per number and little per symbol, as an Arrow table does, without the 170 MB of
pyarrow (see README, "Install").

Each struct handed out keeps what it points to (its children, the batch's buffers) in
`_owned` until DuckDB releases it.  A DuckDB before 1.5 reads a registered stream once: a
batch is registered for one statement that scans it once (as the loader does).
"""

from __future__ import annotations

import ctypes
import itertools
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, cast

# The interface reads buffers in the machine's byte order, which `array` also uses.
_FORMATS = {"number": b"l", "unsigned": b"L", "float": b"g", "symbol": b"U", "binary": b"Z"}
_ARRAY_CODES = {"number": "q", "unsigned": "Q", "float": "d"}
_ITEM_SIZE = 8


class _ArrowSchema(ctypes.Structure):
    pass


class _ArrowArray(ctypes.Structure):
    pass


class _ArrowArrayStream(ctypes.Structure):
    pass


_ReleaseSchema = ctypes.CFUNCTYPE(None, ctypes.POINTER(_ArrowSchema))
_ReleaseArray = ctypes.CFUNCTYPE(None, ctypes.POINTER(_ArrowArray))
_GetSchema = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_ArrowArrayStream), ctypes.POINTER(_ArrowSchema))
_GetNext = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_ArrowArrayStream), ctypes.POINTER(_ArrowArray))
_GetLastError = ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.POINTER(_ArrowArrayStream))
_ReleaseStream = ctypes.CFUNCTYPE(None, ctypes.POINTER(_ArrowArrayStream))

_ArrowSchema._fields_ = [
    ("format", ctypes.c_char_p),
    ("name", ctypes.c_char_p),
    ("metadata", ctypes.c_char_p),
    ("flags", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("children", ctypes.POINTER(ctypes.POINTER(_ArrowSchema))),
    ("dictionary", ctypes.POINTER(_ArrowSchema)),
    ("release", _ReleaseSchema),
    ("private_data", ctypes.c_void_p),
]
_ArrowArray._fields_ = [
    ("length", ctypes.c_int64),
    ("null_count", ctypes.c_int64),
    ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(_ArrowArray))),
    ("dictionary", ctypes.POINTER(_ArrowArray)),
    ("release", _ReleaseArray),
    ("private_data", ctypes.c_void_p),
]
_ArrowArrayStream._fields_ = [
    ("get_schema", _GetSchema),
    ("get_next", _GetNext),
    ("get_last_error", _GetLastError),
    ("release", _ReleaseStream),
    ("private_data", ctypes.c_void_p),
]

# What each struct handed out needs alive (its children, its buffers, the batch), by the
# number in its `private_data`, until the consumer releases it: an Arrow array may outlive
# the stream it came from, and DuckDB may release either after the statement that read it.
_owned: dict[int, object] = {}
_tokens = itertools.count(1)


def _own(keep: object) -> int:
    token = next(_tokens)
    _owned[token] = keep
    return token


def _release_schema_struct(schema: ctypes._Pointer[_ArrowSchema]) -> None:
    _owned.pop(schema[0].private_data or 0, None)
    schema[0].release = _ReleaseSchema()


def _release_array_struct(arr: ctypes._Pointer[_ArrowArray]) -> None:
    _owned.pop(arr[0].private_data or 0, None)
    arr[0].release = _ReleaseArray()


def _release_stream_struct(stream: ctypes._Pointer[_ArrowArrayStream]) -> None:
    _owned.pop(stream[0].private_data or 0, None)
    stream[0].release = _ReleaseStream()


def _stream_schema(stream: ctypes._Pointer[_ArrowArrayStream], out: ctypes._Pointer[_ArrowSchema]) -> int:
    state = _owned[stream[0].private_data or 0]
    assert isinstance(state, _StreamState)
    schema = state.batch.export_schema()
    ctypes.memmove(out, ctypes.addressof(schema), ctypes.sizeof(_ArrowSchema))
    return 0


def _stream_next(stream: ctypes._Pointer[_ArrowArrayStream], out: ctypes._Pointer[_ArrowArray]) -> int:
    state = _owned[stream[0].private_data or 0]
    assert isinstance(state, _StreamState)
    if state.done:  # the end of the stream: a released array
        ctypes.memset(out, 0, ctypes.sizeof(_ArrowArray))
        return 0
    state.done = True
    arr = state.batch.export_array()
    ctypes.memmove(out, ctypes.addressof(arr), ctypes.sizeof(_ArrowArray))
    return 0


def _stream_error(stream: ctypes._Pointer[_ArrowArrayStream]) -> bytes | None:
    return None  # get_schema and get_next never fail


# Module-level, so that they outlive every struct that names them.
_release_schema = _ReleaseSchema(_release_schema_struct)
_release_array = _ReleaseArray(_release_array_struct)
_release_stream = _ReleaseStream(_release_stream_struct)
_get_schema = _GetSchema(_stream_schema)
_get_next = _GetNext(_stream_next)
_get_last_error = _GetLastError(_stream_error)


# The struct each stream capsule holds, by address, for as long as the capsule: a consumer
# moves it out (and marks it released) or uses it in place.
_capsule_streams: dict[int, _ArrowArrayStream] = {}


def _release_unconsumed(capsule: int) -> None:
    """A stream capsule's destructor: release the stream if no consumer took it over."""
    stream = _capsule_streams.pop(_capsule_pointer(capsule, _STREAM_CAPSULE) or 0, None)
    if stream is not None and stream.release:
        stream.release(ctypes.pointer(stream))


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]  # the capsule, not a new reference
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_destructor = _CapsuleDestructor(_release_unconsumed)
# A capsule keeps a pointer to its name: these bytes live as long as the module.
_STREAM_CAPSULE = b"arrow_array_stream"
_STRUCT_FORMAT = b"+s"


@dataclass
class _StreamState:
    batch: ColumnBatch
    done: bool = False  # its one array handed out


def _address(buffer: bytes | array[Any]) -> int:
    if isinstance(buffer, array):
        return buffer.buffer_info()[0]
    return ctypes.cast(ctypes.c_char_p(buffer), ctypes.c_void_p).value or 0


@dataclass(frozen=True, slots=True)
class _Column:
    """One column's Arrow buffers (validity first, always absent: no column holds NULL)."""

    format: bytes
    length: int
    buffers: tuple[bytes | array[Any], ...]


def number_column(data: bytes, base_type: str = "number") -> _Column:
    """A column of native 64-bit values of `base_type` (number, unsigned or float), as bytes."""
    if len(data) % _ITEM_SIZE:
        raise ValueError("a number column's bytes must be a whole number of 64-bit values")
    return _Column(_FORMATS[base_type], len(data) // _ITEM_SIZE, (data,))


def value_column(values: Sequence[object], base_type: str) -> _Column:
    """A column of Python values (checked by the caller to be of `base_type`'s Python type).
    OverflowError for an integer out of the column's range."""
    if base_type == "symbol":
        return symbol_column(cast("Sequence[str]", values))
    if base_type == "binary":
        return binary_column(cast("Sequence[bytes]", values))
    data = array(_ARRAY_CODES[base_type], cast("Sequence[float]", values))
    return _Column(_FORMATS[base_type], len(data), (data,))


def symbol_column(values: Sequence[str]) -> _Column:
    """A column of strings.  UnicodeEncodeError for a string UTF-8 cannot hold (a lone
    surrogate), which DuckDB would refuse."""
    text = "".join(values)
    if text.isascii():  # then a string's length is its length in bytes: no encoding per value
        return _Column(_FORMATS["symbol"], len(values), (_offsets(map(len, values)), text.encode("ascii")))
    encoded = list(map(str.encode, values))  # UTF-8; a map, not a loop of Python code
    return _Column(_FORMATS["symbol"], len(values), (_offsets(map(len, encoded)), b"".join(encoded)))


def binary_column(values: Sequence[bytes]) -> _Column:
    return _Column(_FORMATS["binary"], len(values), (_offsets(map(len, values)), b"".join(values)))


def _offsets(lengths: Iterable[int]) -> array[int]:
    # int64 offsets (the "large" string and binary types): a batch may hold more than 2 GB.
    return array("q", accumulate(lengths, initial=0))


@dataclass(frozen=True, slots=True)
class Shift:
    """Values of some columns to be moved by a per-row amount when they are loaded, except
    one value that stays as it is (for node ids: each file's ids start at 0 and are moved by
    the file's base, except the id that stands for no node)."""

    by: _Column  # a number column: the amount, row by row
    columns: frozenset[int]  # the positions of the columns moved
    kept: int  # the value never moved


class ColumnBatch:
    """Named columns of equal length, for DuckDB to read (register it as a view, or name it
    in a query) through `__arrow_c_array__`.  With a `shift`, the view has one more column,
    the amounts, named `shift_name`, for the query that reads it to apply (see Shift)."""

    shift_name = "shift_by"

    def __init__(self, names: Sequence[str], columns: Sequence[_Column], shift: Shift | None = None) -> None:
        if len(names) != len(columns):
            raise ValueError("one name per column")
        lengths = {column.length for column in columns}
        if shift is not None:
            lengths.add(shift.by.length)
        if len(lengths) > 1:
            raise ValueError("the columns differ in length")
        self.names = list(names)
        self.columns = list(columns)
        self.shift = shift
        self.num_rows = lengths.pop() if lengths else 0
        self.num_columns = len(columns)

    def renamed(self, names: Sequence[str]) -> ColumnBatch:
        """The same columns under other names."""
        return ColumnBatch(names, self.columns, self.shift)

    def _exported_columns(self) -> list[tuple[bytes, _Column]]:
        pairs = zip(self.names, self.columns, strict=True)
        named = [(name.encode("utf-8"), column) for name, column in pairs]
        if self.shift is not None:
            named.append((self.shift_name.encode("ascii"), self.shift.by))
        return named

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule interface: a stream of one struct array, the batch."""
        if requested_schema is not None:
            raise NotImplementedError("a ColumnBatch exports its own schema only")
        stream = _ArrowArrayStream(
            get_schema=_get_schema,
            get_next=_get_next,
            get_last_error=_get_last_error,
            release=_release_stream,
        )
        stream.private_data = _own(_StreamState(self))
        _capsule_streams[ctypes.addressof(stream)] = stream
        return _capsule_new(ctypes.addressof(stream), _STREAM_CAPSULE, _capsule_destructor)

    def export_schema(self) -> _ArrowSchema:
        """The batch's schema, a struct of its columns, owned until its consumer releases it."""
        named = self._exported_columns()
        children = (ctypes.POINTER(_ArrowSchema) * len(named))()
        kept: list[object] = [children]
        for i, (name, column) in enumerate(named):
            child = _ArrowSchema(format=column.format, name=name, release=_release_schema)
            kept.append(child)
            children[i] = ctypes.pointer(child)
        schema = _ArrowSchema(
            format=_STRUCT_FORMAT,
            name=b"",
            n_children=len(named),
            children=children,
            release=_release_schema,
        )
        schema.private_data = _own(kept)
        return schema

    def export_array(self) -> _ArrowArray:
        """The batch as a struct array, owned (with the batch) until its consumer releases it."""
        columns = [column for _, column in self._exported_columns()]
        children = (ctypes.POINTER(_ArrowArray) * len(columns))()
        kept: list[object] = [self, children]
        for i, column in enumerate(columns):
            buffers = (ctypes.c_void_p * (1 + len(column.buffers)))(None, *map(_address, column.buffers))
            child = _ArrowArray(
                length=column.length,
                n_buffers=len(buffers),
                buffers=buffers,
                release=_release_array,
            )
            kept += [buffers, child]
            children[i] = ctypes.pointer(child)
        validity = (ctypes.c_void_p * 1)(None)
        kept.append(validity)
        arr = _ArrowArray(
            length=self.num_rows,
            n_buffers=1,
            buffers=validity,
            n_children=len(columns),
            children=children,
            release=_release_array,
        )
        arr.private_data = _own(kept)
        return arr
