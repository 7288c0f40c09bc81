"""The single exception type of the engine: a message pinned to a place in a Datalog text."""

from __future__ import annotations


class DatalogError(Exception):
    """A syntax, declaration, safety, typing or stratification error.

    ``str(err)`` is ``"<source>:<line>:<col>: <message>"`` so that editors and terminals can jump
    to the offending token; line and column are 1-based (0 when no position applies).
    """

    def __init__(self, message: str, *, source: str = "<input>", line: int = 0, column: int = 0):
        self.message = message
        self.source = source
        self.line = line
        self.column = column
        super().__init__(f"{source}:{line}:{column}: {message}")


def error_at(node: object, message: str, source: str) -> DatalogError:
    """Build a DatalogError positioned at ``node`` (any object with line/column attributes)."""
    return DatalogError(
        message,
        source=source,
        line=int(getattr(node, "line", 0) or 0),
        column=int(getattr(node, "column", 0) or 0),
    )
