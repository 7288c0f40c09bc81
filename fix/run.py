"""A fix run: assess, plan a fix for each fixable finding, keep the ones the re-assessment bears
out.  Nothing is written here (write.py does, when asked)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..config.context import Context
from ..config.project import Config
from ..pipeline.assessment import Assessment
from ..pipeline.progress import Progress
from ..pipeline.run import discover
from ..rules.catalogue import code_names
from ..rules.program import load_program
from .check import Findings, assess_inputs, failures, fixed_texts, with_texts
from .edits import overlaps
from .recipes import FIXABLE_CODES, ArrayModule, Fix, array_module, plan_fix
from .sites import FileNodes, Site, module_bases, read_sites


@dataclass
class FixRun:
    root: Path
    texts: dict[str, str] = field(default_factory=dict)  # file -> text as assessed
    shas: dict[str, str] = field(default_factory=dict)  # file -> sha256 of its bytes as read
    fixed: dict[str, str] = field(default_factory=dict)  # file -> text with the applied fixes
    applied: list[Fix] = field(default_factory=list)
    dropped: list[tuple[Fix, str]] = field(default_factory=list)  # (fix, why the re-assessment refused it)
    hidden: list[Fix] = field(default_factory=list)  # unsafe fixes left out (no --unsafe-fixes)
    notebooks: Counter[str] = field(default_factory=Counter)  # notebook -> fixes not applied there
    unfixed: list[tuple[Site, str]] = field(default_factory=list)  # sites with no fix, and why
    rounds: int = 0  # assessments of fixed texts


def plan_fixes(
    path: Path, context: Context, config: Config, unsafe: bool = False, progress: Progress | None = None
) -> FixRun:
    """The fixes for the findings under `path` that survive re-assessment (see check.py)."""
    program = load_program(None)
    inputs = discover(path, config, codes=code_names(program))
    run = FixRun(path, dict(inputs.sources), {s.relpath: s.sha for s in inputs.texts})
    result = assess_inputs(path, context, program, inputs, progress)
    try:
        before = Findings(result)
        candidates = _candidates(run, result, before)
    finally:
        _close(result)
    chosen = [fix for fix in candidates if fix.safe or unsafe]
    run.hidden = [fix for fix in candidates if not (fix.safe or unsafe)]
    chosen = _without_conflicts(chosen, run)
    # Each round drops at least one fix, or ends: the fixes kept are those of a round that
    # found nothing to refuse, assessed together as they will be written.
    while chosen:
        texts = fixed_texts(run.texts, chosen)
        run.rounds += 1
        fixed = assess_inputs(path, context, program, with_texts(inputs, texts), progress)
        try:
            failed = failures(chosen, run.texts, before, Findings(fixed))
        finally:
            _close(fixed)
        if not failed:
            run.applied, run.fixed = chosen, texts
            break
        run.dropped += failed.items()
        chosen = [fix for fix in chosen if fix not in failed]
    return run


def _close(result: Assessment) -> None:
    if result.db is not None:
        result.db.close()


def _candidates(run: FixRun, result: Assessment, before: Findings) -> list[Fix]:
    """A fix for each site of a fixable finding, files the run could not read whole left alone;
    the fixes in notebooks are counted, not kept."""
    db = before.db
    # A site of a code turned off by [tool.cpq] is no finding; a suppressed one is left alone.
    wanted = {(f.code, f.file, f.line) for f in result.findings if not f.suppressed}
    bases = module_bases(db)
    files: dict[str, tuple[FileNodes, ArrayModule | None]] = {}
    fixes: list[Fix] = []
    for site in read_sites(db, FIXABLE_CODES):
        if (site.code, site.file, site.line) not in wanted or site.file in before.broken:
            continue
        if site.file not in files:
            nodes = FileNodes(site.file, run.texts[site.file])
            files[site.file] = nodes, array_module(nodes.root)
        nodes, module = files[site.file]
        planned = plan_fix(site, nodes, site.node - bases[site.file], module)
        if isinstance(planned, str):
            run.unfixed.append((site, planned))
        elif site.file in result.notebooks:
            run.notebooks[site.file] += 1
        else:
            fixes.append(planned)
    return fixes


def _without_conflicts(fixes: list[Fix], run: FixRun) -> list[Fix]:
    """Safe fixes first, then in the order of the text; a fix whose edits touch a kept one's is
    dropped."""
    kept: list[Fix] = []
    for fix in sorted(fixes, key=lambda f: (not f.safe, f.file, f.edits[0].start)):
        clash = any(
            other.file == fix.file and overlaps(a, b)
            for other in kept
            for a in fix.edits
            for b in other.edits
        )
        if clash:
            run.dropped.append((fix, "another fix changes the same code"))
        else:
            kept.append(fix)
    return sorted(kept, key=lambda f: (f.file, f.edits[0].start))
