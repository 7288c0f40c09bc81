"""The errors of the runtime-evidence readers."""

from __future__ import annotations

import re
import reprlib

# Short renderings: an untrusted value may be a list of a million items.
_REPR = reprlib.Repr()
_REPR.maxstring = 40
_REPR.maxother = 40
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 3

# Control characters would break the one-line message (a newline) or the terminal showing it;
# a lone surrogate (an undecodable byte in a file name) cannot be printed.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


class EvidenceError(ValueError):
    """A profile or Doctor report that cannot be read; str(exc) is ONE line: '<path>: <why>'."""


class FormatError(ValueError):
    """Malformed content, raised by a format's parser without the path; `reading` adds it."""


def one_line(text: str) -> str:
    """`text` with control characters escaped (`\\n`, `\\x1b`), so it prints as one line."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def shown(value: object) -> str:
    """A short, one-line rendering of an untrusted value for an error message."""
    return one_line(_REPR.repr(value))
