"""The options of `cpq` itself (`-q/--quiet`, `-v/--verbose`, `--no-color`), taken after the
command too: `cpq assess . -q` as well as `cpq -q assess .`, as ruff and most tools take them.

Each command (and each command of a group, such as `cpq manifest show`) gets the three flags
as click options of its own that set the same state (`options.state`) as the group's, so
click parses them where they stand: an option's value that happens to read `-q` stays a value.

Colour: cpq's own output has none; typer draws help with rich, in colour on a terminal.
`--no-color` anywhere on the command line, or `NO_COLOR` set to anything but "" (no-color.org),
turns rich off for the run: help is then click's plain text, with no ANSI escapes at all
(rich alone would keep bold and dim under NO_COLOR).  It must be decided before click parses:
`--help` is acted on as soon as it is read, before any option after it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import typer.core

from .options import state

# Whether typer found rich, as it was at import: each run turns it off or leaves it so.
_RICH = typer.core.HAS_RICH

_FLAGS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("--quiet", "-q"), "quiet", "Only results, no progress."),
    (("--verbose", "-v"), "verbose", "Timings and details."),
    (("--no-color",), "color", "No colour in output (also NO_COLOR=1)."),
)


def colour_wanted(args: Sequence[str]) -> bool:
    """Colour, unless `--no-color` is among `args` or NO_COLOR is set (and not empty)."""
    return "--no-color" not in args and not os.environ.get("NO_COLOR")


def start_run(args: Sequence[str]) -> None:
    """The state of a new run of the command line (the same process may run several: tests)."""
    state.quiet = False
    state.verbose = False
    state.color = colour_wanted(args)
    # typer reads HAS_RICH each time it formats help: off, help is click's plain text
    # (what TYPER_USE_RICH=0 gives, which is read only when typer is imported).
    typer.core.HAS_RICH = _RICH and state.color


def accept_global_options(command: Any) -> None:
    """Give the click `command`, and the commands of a group, the three flags (once).  Made as
    typer makes options: typer may bring its own copy of click, whose classes must match."""
    taken = {name for param in command.params for name in param.opts}
    for names, attribute, help_text in _FLAGS:
        if not taken.intersection(names):
            command.params.append(
                typer.core.TyperOption(
                    param_decls=list(names),
                    is_flag=True,
                    default=False,
                    expose_value=False,
                    help=help_text,
                    callback=_setter(attribute),
                )
            )
    for sub in getattr(command, "commands", {}).values():  # a group's commands
        accept_global_options(sub)


def _setter(attribute: str) -> Any:
    def given(ctx: Any, param: Any, value: bool) -> None:
        if value:  # a flag not given leaves what the group's options set
            setattr(state, attribute, attribute != "color")
            if attribute == "color":
                typer.core.HAS_RICH = False

    return given
