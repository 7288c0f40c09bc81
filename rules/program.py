"""The rules program an assessment runs: the shipped rules.dl (with the rules/*.dl files it
includes), or a user's --rules file checked for the relations cpq loads and reads, parsed once
and kept in the user cache.  A user's file extends the shipped rules with `#include <cpq>`
(the library `shipped_library` describes) rather than copying them.

It sits below everything that needs the program or its catalogue (config/project.py,
pipeline/, cli/), so none of them has to reach up into another for it.  Of the caches it uses
the keys and the user cache only (pipeline/cache/keys.py, user_cache.py), which import nothing
of the run they sit in.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..engine import (
    DatalogError,
    JoinedText,
    Library,
    Program,
    folder_lister,
    folder_reader,
    join_includes,
    parse_joined,
)
from ..pipeline.cache import keys, user_cache

RULES_ENTRY = "rules.dl"  # the shipped program's entry file; it includes rules/*.dl


@lru_cache(maxsize=4)
def _program_from_joined(joined: JoinedText) -> Program:
    """Parse and check a program, reusing the program an earlier run parsed from the same
    joined text (parsing ~400 rules costs more than the rest of a small assessment)."""
    key = keys.program_key(joined.text, joined.source_map.entry)
    program = user_cache.load_program(key)
    if program is not None and program.text == joined.text and program.source_map == joined.source_map:
        return program
    program = parse_joined(joined)
    user_cache.save_program(key, program)
    return program


def _read_shipped(relative: str) -> str:
    return resources.files("cpq").joinpath(*relative.split("/")).read_text(encoding="utf-8")


def _list_shipped(relative: str) -> list[str]:
    folder = resources.files("cpq").joinpath(*[part for part in relative.split("/") if part])
    return [entry.name for entry in folder.iterdir()] if folder.is_dir() else []


SHIPPED_LIBRARY = "cpq"  # `#include <cpq>`


def shipped_library() -> Library:
    """The shipped rules as a library a user's rules file includes: `#include <cpq>`."""
    return Library(SHIPPED_LIBRARY, RULES_ENTRY, _read_shipped, _list_shipped, str(resources.files("cpq")))


def shipped_rules() -> JoinedText:
    """The shipped program: rules.dl with the files it includes."""
    return join_includes(_read_shipped(RULES_ENTRY), RULES_ENTRY, _read_shipped, _list_shipped)


def rules_text() -> str:
    """The shipped program as one text, its includes expanded: a program of its own (what
    `cpq rules --export` writes), to extend in a copy."""
    return shipped_rules().text


# Relations the pipeline loads or reads: a user's --rules file must declare them.
REQUIRED_RELATIONS = (
    "source_file",
    "skipped_file",
    "partial_file",
    "context_number",
    "context_symbol",
    "suppressed",
    "disabled",
    "api_support",
    "api_alias",
    "code_info",
    "finding",
    "finding_hot",
    "finding_counts",
    "audit_note",
    "verdict",
    "verdict_rule",
    "gate_status",
    "compute_pattern",
    "pattern_evidence",
    "problem_size",
    "inferred_elements_at",
    "per_gpu",
    "api_gap",
    "batching_path",
    "touchpoints",
    "readiness",
    "blocks_sites",
    "refactor_sites",
    "verdict_reason",
    "threshold",
)


def read_rules(rules_path: Path) -> JoinedText:
    """A rules file with the files it includes (from its folder, and the shipped rules for
    `#include <cpq>`)."""
    try:
        text = rules_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DatalogError(
            f"not UTF-8 text ({exc.reason})", source=str(rules_path), line=1, column=1
        ) from None
    except OSError as exc:
        raise DatalogError(f"cannot read: {exc.strerror}", source=str(rules_path), line=1, column=1) from None
    folder = rules_path.parent
    return join_includes(
        text, str(rules_path), folder_reader(folder), folder_lister(folder), [shipped_library()]
    )


def load_program(rules_path: Path | None = None) -> Program:
    if rules_path is None:
        return _program_from_joined(shipped_rules())
    program = _program_from_joined(read_rules(rules_path))
    # Here, not at the top: importing facts/ loads the extractor (ast-grep and the tree
    # walkers), which `cpq rules` and the check of a configuration's codes never use.
    from ..facts.schema import INPUT_RELATIONS

    missing = [r for r in (*INPUT_RELATIONS, *REQUIRED_RELATIONS) if r not in program.relations]
    if missing:
        raise DatalogError(
            "the rules file does not declare relations cpq needs: "
            + ", ".join(missing[:8])
            + (" …" if len(missing) > 8 else "")
            + " (start the file with `#include <cpq>` to extend the shipped rules)",
            source=str(rules_path),
            line=1,
            column=1,
        )
    return program
