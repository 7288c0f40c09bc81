"""A strict decoder of the `marshal` format for data values, for files that may be hostile.

`marshal.loads` is documented as unsafe for untrusted data: it builds code objects, and its
C decoder allocates from sizes the data claims. This decoder reads the same format (version
4 and the older ones it can read: CPython's Python/marshal.c) but only *data*: None, True,
False, Ellipsis, int, float, complex, str, bytes, tuple, list, dict, set and frozenset.
Anything else (code objects, StopIteration, slices, unknown type codes) is an error.

Limits, so that a hostile file costs at most its own size: nesting depth, the number of
values decoded, the digits of an integer; a claimed length must fit in the bytes left (every
element takes at least one byte), and nothing is allocated from a claimed size. A back
reference to a container still being decoded (a self-referencing list) is refused, so the
result holds no cycles. Strings must be valid UTF-8 (ASCII for the ASCII codes): marshal's
own writer uses "surrogatepass", a surrogate is not text. Bytes after the value are an
error (one `marshal.dump` writes one value).

On files it accepts, `loads(data) == marshal.loads(data)`.
"""

from __future__ import annotations

import re
import struct
from typing import NoReturn

from .errors import FormatError, shown

# Deep enough for any data a profiler writes (pstats nests four levels).
MAX_DEPTH = 64
# About 8 values per function and 6 per call edge in a pstats file: millions of functions.
MAX_VALUES = 1 << 25
# 64 digits of 15 bits: integers far beyond any count or time a profiler writes.
MAX_LONG_DIGITS = 64

_FLAG_REF = 0x80
_LONG_DIGIT_MAX = (1 << 15) - 1
_INT32 = struct.Struct("<i")
_UINT16 = struct.Struct("<H")
_DOUBLE = struct.Struct("<d")
# What marshal's text floats (type 'f', from Python 2 era writers) look like; float() alone would
# also take underscores and surrounding blanks.
_FLOAT_TEXT = re.compile(rb"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)", re.IGNORECASE)

# Type codes that carry no ref slot even when FLAG_REF is set (marshal.c's R_REF is not
# applied to them; the writer never flags them).
_SINGLETONS: dict[int, object] = {ord("N"): None, ord("T"): True, ord("F"): False, ord("."): Ellipsis}
_REFUSED = {
    ord("c"): "a code object",
    ord("S"): "StopIteration",
    ord(":"): "a slice",
    ord("?"): "an unknown-type marker",
}
_NULL = ord("0")


class _Pending:
    """The ref slot of a container whose elements are still being read."""


_PENDING = _Pending()


def loads(data: bytes) -> object:
    """The value marshalled in `data`; `FormatError` ("bad marshal data at byte N: ...") if malformed."""
    return _Decoder(data).top()


class _Decoder:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.refs: list[object] = []
        self.values = 0

    def top(self) -> object:
        if not self.data:
            raise FormatError("bad marshal data: empty")
        value = self.value(0)
        if self.pos != len(self.data):
            self.fail(f"{len(self.data) - self.pos} bytes after the value", self.pos)
        return value

    def fail(self, why: str, at: int) -> NoReturn:
        raise FormatError(f"bad marshal data at byte {at}: {why}")

    # --- raw reads -----------------------------------------------------------

    def take(self, size: int) -> bytes:
        end = self.pos + size
        if end > len(self.data):
            self.fail(f"truncated (needs {size} bytes, {len(self.data) - self.pos} left)", self.pos)
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def byte(self) -> int:
        return self.take(1)[0]

    def int32(self) -> int:
        value: int = _INT32.unpack(self.take(4))[0]
        return value

    def double(self) -> float:
        value: float = _DOUBLE.unpack(self.take(8))[0]
        return value

    def length(self, size: int, what: str) -> int:
        """A claimed element count: each element takes at least one byte, so it must fit."""
        left = len(self.data) - self.pos
        if size < 0 or size > left:
            self.fail(f"{what} claims {size} elements, {left} bytes left", self.pos - 4)
        return size

    # --- values --------------------------------------------------------------

    def value(self, depth: int) -> object:
        if depth > MAX_DEPTH:
            self.fail(f"nested deeper than {MAX_DEPTH} levels", self.pos)
        self.values += 1
        if self.values > MAX_VALUES:
            self.fail(f"more than {MAX_VALUES:,} values", self.pos)
        at = self.pos
        code = self.byte()
        kind = code & ~_FLAG_REF
        if kind in _SINGLETONS:
            return _SINGLETONS[kind]
        if kind == ord("r"):
            return self.reference(at)
        if kind in _REFUSED:
            self.fail(f"{_REFUSED[kind]} (type {chr(kind)!r}) is not data", at)
        if kind == _NULL:
            self.fail("a null marker outside a dict", at)
        slot = -1
        if code & _FLAG_REF:
            # Reserved before the elements are read, as marshal.c numbers its refs.
            slot = len(self.refs)
            self.refs.append(_PENDING)
        result = self.flagged_value(kind, depth, at)
        if slot >= 0:
            self.refs[slot] = result
        return result

    def reference(self, at: int) -> object:
        index = self.int32()
        if not 0 <= index < len(self.refs):
            self.fail(f"reference {index} to none of the {len(self.refs)} values so far", at)
        target = self.refs[index]
        if target is _PENDING:
            self.fail("a reference to a container from inside itself", at)
        return target

    def flagged_value(self, kind: int, depth: int, at: int) -> object:
        code = chr(kind)
        if code == "i":
            return self.int32()
        if code == "l":
            return self.long(at)
        if code == "g":
            return self.double()
        if code == "f":
            return self.text_float(at)
        if code == "y":
            return complex(self.double(), self.double())
        if code == "x":
            return complex(self.text_float(at), self.text_float(at))
        if code == "s":
            return self.take(self.length(self.int32(), "a bytes object"))
        if code in "ut":
            return self.text(self.take(self.length(self.int32(), "a string")), "utf-8", at)
        if code in "aA":
            return self.text(self.take(self.length(self.int32(), "a string")), "ascii", at)
        if code in "zZ":
            return self.text(self.take(self.byte()), "ascii", at)
        if code == "(":
            return tuple(self.elements(self.length(self.int32(), "a tuple"), depth))
        if code == ")":
            return tuple(self.elements(self.length(self.byte(), "a tuple"), depth))
        if code == "[":
            return self.elements(self.length(self.int32(), "a list"), depth)
        if code == "{":
            return self.dict(depth)
        if code in "<>":
            items = self.elements(self.length(self.int32(), "a set"), depth)
            for item in items:
                self.hashable(item, at)
            return set(items) if code == "<" else frozenset(items)
        self.fail(f"unknown type code {shown(code)}", at)

    def long(self, at: int) -> int:
        claimed = self.int32()
        size = abs(claimed)
        if size > MAX_LONG_DIGITS:
            self.fail(f"an integer of {size} digits (at most {MAX_LONG_DIGITS})", at)
        value = 0
        digit = 0
        for position in range(size):
            digit = _UINT16.unpack(self.take(2))[0]
            if digit > _LONG_DIGIT_MAX:
                self.fail("an integer digit out of range", at)
            value |= digit << (15 * position)
        if size and digit == 0:
            self.fail("an unnormalized integer (leading zero digit)", at)
        return -value if claimed < 0 else value

    def text_float(self, at: int) -> float:
        raw = self.take(self.byte())
        if not _FLOAT_TEXT.fullmatch(raw):
            self.fail(f"a text float {shown(raw)} is not a number", at)
        return float(raw)

    def text(self, raw: bytes, encoding: str, at: int) -> str:
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise FormatError(
                f"bad marshal data at byte {at}: a string that is not valid {encoding.upper()} ({exc.reason})"
            ) from None

    def elements(self, count: int, depth: int) -> list[object]:
        # Appended one by one: `count` is checked against the bytes left, not trusted to allocate.
        items: list[object] = []
        for _ in range(count):
            items.append(self.value(depth + 1))
        return items

    def dict(self, depth: int) -> dict[object, object]:
        result: dict[object, object] = {}
        while True:
            at = self.pos
            if at < len(self.data) and self.data[at] == _NULL:
                self.pos += 1
                return result
            key = self.value(depth + 1)
            self.hashable(key, at)
            result[key] = self.value(depth + 1)

    def hashable(self, key: object, at: int) -> None:
        try:
            hash(key)
        except TypeError:
            self.fail(f"a dict key or set element that cannot be one ({type(key).__name__})", at)
