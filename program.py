"""The rules program an assessment runs: the shipped rules.dl, or a user's --rules file checked
for the relations cpq loads and reads, parsed once and kept in the user cache.

It sits below everything that needs the program or its catalogue (config.py, pipeline.py,
assessment.py, cli/), so none of them has to reach up into another for it.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from .cache import keys, user_cache
from .engine import DatalogError, Program, parse_program


@lru_cache(maxsize=4)
def _program_from_text(text: str, source: str) -> Program:
    """Parse and check rules.dl, reusing the program an earlier run parsed from the same text
    (parsing ~400 rules costs more than the rest of a small assessment)."""
    key = keys.program_key(text, source)
    program = user_cache.load_program(key)
    if program is not None and program.text == text:
        return program
    program = parse_program(text, source=source)
    user_cache.save_program(key, program)
    return program


def rules_text() -> str:
    return resources.files("cpq").joinpath("rules.dl").read_text(encoding="utf-8")


# Relations the pipeline loads or reads: a user's --rules file must declare them.
REQUIRED_RELATIONS = (
    "source_file", "skipped_file", "partial_file", "context_number", "context_symbol",
    "suppressed", "disabled", "api_support", "api_alias", "code_info", "finding", "finding_hot",
    "finding_counts", "audit_note", "verdict", "verdict_rule", "gate_status", "compute_pattern",
    "pattern_evidence", "problem_size", "inferred_elements_at", "per_gpu", "api_gap",
    "batching_path", "touchpoints", "readiness", "blocks_sites", "refactor_sites",
)


def load_program(rules_path: Path | None = None) -> Program:
    if rules_path is None:
        return _program_from_text(rules_text(), "rules.dl")
    try:
        text = rules_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DatalogError(
            f"not UTF-8 text ({exc.reason})", source=str(rules_path), line=1, column=1
        ) from None
    except OSError as exc:
        raise DatalogError(
            f"cannot read: {exc.strerror}", source=str(rules_path), line=1, column=1
        ) from None
    program = _program_from_text(text, str(rules_path))
    # Here, not at the top: importing facts/ loads the extractor (ast-grep and the tree
    # walkers), which `cpq rules` and the check of a configuration's codes never use.
    from .facts.schema import INPUT_RELATIONS

    missing = [r for r in (*INPUT_RELATIONS, *REQUIRED_RELATIONS) if r not in program.relations]
    if missing:
        raise DatalogError(
            "the rules file does not declare relations cpq needs: " + ", ".join(missing[:8])
            + (" …" if len(missing) > 8 else "") + " (extend a copy of the shipped rules.dl)",
            source=str(rules_path),
            line=1,
            column=1,
        )
    return program
