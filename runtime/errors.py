"""The errors of the runtime-evidence readers, and the checks of untrusted strings that raise them."""

from __future__ import annotations

import re
import reprlib

# Short renderings: an untrusted value may be a list of a million items.
_REPR = reprlib.Repr()
_REPR.maxstring = 40
_REPR.maxother = 40
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 3

# A path or name holding these is not one a program wrote: control characters would break
# lines in a report, a lone surrogate (JSON can escape one) is not text.
_BAD_TEXT = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\ud800-\udfff]")

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


def checked_text(value: object, what: str) -> str:
    """`value` if it is a string of one line of text; `FormatError` naming `what` otherwise."""
    if not isinstance(value, str):
        raise FormatError(f"{what} is not a string ({shown(value)})")
    if _BAD_TEXT.search(value):
        raise FormatError(f"{what} holds a control character or a lone surrogate ({shown(value)})")
    return value


def checked_path(value: object, what: str) -> str:
    """A file path as the profile or report gives it, with `/` separators and no leading `./`
    (absolute paths stay absolute: the rules match them to the assessed files by suffix)."""
    path = checked_text(value, what).replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path
