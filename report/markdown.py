"""The Markdown report: a header and the eight sections of report.md, always in order."""

from __future__ import annotations

from collections import defaultdict

from .. import __version__
from ..pipeline.assessment import Assessment, Finding
from ..rules.registry import recipe_text, registry, step_order
from .sketches import sketch
from .wording import (
    BETTER_TOOLS,
    evidence_lines,
    fill_gate_reasons,
    runtime_counts,
    runtime_mark,
    thresholds,
    verdict_reason,
)

NONE = "None for this code."
NA = "n/a — see verdict."

# The order in which next steps address BLOCKS (report.md, section 8).
DOCTOR = (
    "CUPYNUMERIC_DOCTOR=1 CUPYNUMERIC_DOCTOR_FORMAT=json \\\n"
    "CUPYNUMERIC_DOCTOR_FILENAME=doctor-report.json legate --gpus 1 main.py"
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _code(text: str, limit: int = 90) -> str:
    text = text.strip()
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"`{_cell(text)}`" if text else ""


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(_cell(c) if not c.startswith("`") else c for c in r) + " |" for r in rows]
    return out


def render(
    a: Assessment,
    show_suppressed: bool = False,
    new_keys: set[tuple[str, str, int]] | None = None,
) -> str:
    fill_gate_reasons(a)
    d = a.decision
    findings = [f for f in a.findings if not f.suppressed]
    known = 0
    if new_keys is not None:
        shown = [f for f in findings if f.kind == "SCALES" or (f.code, f.file, f.line) in new_keys]
        known = len(findings) - len(shown)
        findings = shown
    by_kind: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_kind[f.kind].append(f)
    reason = d.reasons.get(d.verdict_rule, "")
    workload_stop = d.verdict == "NOT RECOMMENDED" and reason in ("hardware", "workload", "size")
    out: list[str] = []
    out += _header(a)
    out += ["", "## Verdict", "", f"**{d.verdict}** — {verdict_reason(a)}"]
    out += ["", "## What works (SCALES findings)", ""]
    out += _scales(by_kind["SCALES"]) or [NONE]
    out += ["", "## What blocks (BLOCKS findings)", ""]
    out += _blocks(by_kind["BLOCKS"]) or [NONE]
    out += ["", "## What's fixable (REFACTOR findings)", ""]
    out += _refactor(by_kind["REFACTOR"]) or [NONE]
    out += ["", "## Compatibility / cost notes (INFO findings)", ""]
    out += _info(by_kind["INFO"], a) or [NONE]
    out += ["", "## API support gaps", ""]
    out += _api_gaps(a) or [NONE]
    out += ["", "## Decision-framework summary", ""]
    out += _table(
        ["gate", "status", "reason"],
        [[f"{g.number}. {g.name}", g.status, g.reason] for g in d.gates],
    )
    out += ["", "## Recommended next steps", ""]
    out += _next_steps(a, findings, workload_stop)
    out += _footer(a, show_suppressed, known if new_keys is not None else None)
    return "\n".join(out) + "\n"


def _header(a: Assessment) -> list[str]:
    from ..manifest import load

    d = a.decision
    ctx = a.context
    manifest = load()
    prov = manifest.provenance
    out = [
        f"# cpq assessment: {a.root.name or a.root}",
        "",
        f"Assessed {len(a.files)} file(s), {a.lines:,} lines, in {a.seconds:.2f} s"
        f" ({len(a.skipped)} skipped) — cpq {__version__}.",
        f"API manifest: cuPyNumeric {prov.get('cupynumeric_version', '?')}, "
        f"NumPy {prov.get('numpy_version', '?')}, dated {prov.get('date', '?')}.",
    ]
    if a.unresolved:
        out.append(_unresolved_line(a))
    if manifest.stale:
        out.append(
            f"**Warning:** the manifest is {manifest.age_days()} days old; "
            "refresh it with `cpq manifest refresh`."
        )
    if d.size_low is not None:
        size = f"{d.size_low:,}" if d.size_low == d.size_high else f"{d.size_low:,}–{d.size_high:,}"
    else:
        size = "unknown"
    size_src = d.size_source + (f" ({d.size_where})" if d.size_where else "")
    rows = [
        ["elements (hot arrays, total)", size, size_src],
        ["GPUs per node", ctx.gpus.text(), ctx.gpus.source],
        ["nodes", ctx.nodes.text(), ctx.nodes.source],
        [
            "GPU model",
            f"{ctx.gpu.label} (sm_{ctx.gpu.low})" if ctx.gpu.low is not None else "unknown",
            ctx.gpu.source,
        ],
        ["CPU-only run", "yes" if ctx.cpu_only else "no", "given" if ctx.cpu_only else "default"],
        ["compute pattern", d.pattern, "given" if ctx.pattern else "inferred"],
    ]
    out += ["", *_table(["context", "value", "source"], rows)]
    out += ["", *evidence_lines(a)]
    assumed = [r[0] for r in rows if r[2].startswith(("default", "inferred"))]
    if assumed:
        out += [
            "",
            "Defaults and inferences (" + ", ".join(assumed) + ") are assumptions: correct them "
            "with `--elements`, `--gpus`, `--nodes`, `--gpu`, `--cpu-only`, `--pattern`.",
        ]
    return out


def _scales(findings: list[Finding]) -> list[str]:
    if not findings:
        return []
    rows = [[f.location, f.code, f.title, _code(f.source_line)] for f in findings]
    return _table(["location", "code", "idiom", "line"], rows)


def _blocks(findings: list[Finding]) -> list[str]:
    if not findings:
        return []
    rows = [
        [
            f.location,
            f.code,
            f.function,
            f"{f.title}: " + _code(f.source_line, 70) + _marks(f),
            f.recipe,
        ]
        for f in findings
    ]
    out = _table(["location", "code", "function", "what was seen", "recipe"], rows)
    out += _sketches(findings)
    return out


def _marks(f: Finding) -> str:
    """Whether the finding counts, and what the runtime evidence says of it."""
    marks = [runtime_mark(f)] if runtime_mark(f) else []
    if not f.counts and f.runtime != "never-ran":
        marks.insert(0, "boundary")
    return f" ({'; '.join(marks)})" if marks else ""


def _sketches(findings: list[Finding]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for f in findings:
        # A code of a user's --rules file has no sketch (rules/codes/RXXX/code.toml): its
        # recipe, in the table, is all there is to say.
        if f.recipe in seen or not f.source_line or f.code not in registry():
            continue
        seen.add(f.recipe)
        s = sketch(f.code, f.source_line)
        out += [
            "",
            f"**{f.recipe}** — {recipe_text(f.code, f.recipe)} ({f.location}):",
            "",
            "```python",
            "# before",
            s.before,
            "# after",
            s.after,
            "```",
        ]
    return out


def _refactor(findings: list[Finding]) -> list[str]:
    if not findings:
        return []
    groups: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        groups[f.recipe].append(f)
    out: list[str] = []
    for recipe, items in groups.items():
        codes = ", ".join(sorted({f.code for f in items}))
        text = recipe_text(items[0].code, recipe)
        out += [f"### {recipe} ({codes})" + (f" — {text}" if text != recipe else ""), ""]
        out += _table(
            ["location", "code", "function", "line"],
            [[f.location, f.code, f.function, _code(f.source_line) + _marks(f)] for f in items],
        )
        first = items[0]
        if first.source_line and first.code in registry():
            s = sketch(first.code, first.source_line)
            out += ["", "```python", "# before", s.before, "# after", s.after, "```", ""]
    return out


def _info(findings: list[Finding], a: Assessment) -> list[str]:
    out: list[str] = []
    if findings:
        out += _table(
            ["location", "code", "note", "line"],
            [[f.location, f.code, f.title, _code(f.source_line)] for f in findings],
        )
    doctor_only = a.decision.runtime.doctor_only
    if doctor_only:
        out += ["", "Seen at runtime by the cuPyNumeric Doctor, with no R-code for it:", ""]
        for check, file, line, words in doctor_only:
            out.append(f"- {a.where(file, line)} ({check}): {words}: {_code(a.source_line(file, line))}")
    if a.audit_notes:
        out += ["", "Audit by hand (implicit syncs pattern matching can miss):", ""]
        for n in a.audit_notes:
            out.append(
                f"- {n.file}:{n.line} ({n.function}): an f-string formats an array value inside "
                f"a loop — each iteration syncs: {_code(n.source_line)}"
            )
    return out


def _api_gaps(a: Assessment) -> list[str]:
    gaps = a.decision.api_gaps
    if not gaps:
        return []
    rows = [
        [
            g.api,
            f"{g.glyph} " + ("not implemented" if g.level == "none" else "single-GPU only"),
            f"{g.file}:{g.line}",
            "yes" if g.hot else "no (boundary)",
            g.note,
        ]
        for g in gaps
    ]
    return _table(["API", "support", "location", "hot path", "note"], rows)


def _next_steps(a: Assessment, findings: list[Finding], workload_stop: bool) -> list[str]:
    d = a.decision
    reason = d.reasons.get(d.verdict_rule, "") if workload_stop else ""
    numbers = thresholds(a)
    if d.pattern == "python-loops":
        return [
            "1. Not a NumPy program yet: rewrite the Python element loops as NumPy array "
            "operations (lists of numbers → arrays, per-element loops → whole-array expressions).",
            "2. Then assess the NumPy version: cuPyNumeric accelerates array code, not Python loops.",
        ]
    if reason == "workload":
        tool = BETTER_TOOLS.get(d.pattern, "a tool suited to this workload")
        return [
            f"1. This is a {d.pattern} workload: cuPyNumeric's Doctor does not apply here. "
            f"Better suited: {tool}.",
            "2. If part of the code is dense array math, isolate it and assess that part alone.",
        ]
    steps: list[str] = []
    if reason == "size":
        enough = numbers["break_even_short"]
        path = (
            f"batch the per-item arrays into one (N, item) array so that N × item ≥ {enough}"
            if d.batching
            else f"only larger problems (≥ {enough} elements per GPU) will benefit"
        )
        steps.append(f"Problem size is the blocker: {path}; then re-assess with `--elements`.")
    if reason == "hardware":
        steps.append(
            f"Move to a Volta-or-newer GPU (sm_{a.decision.thresholds['min_compute_capability']}+); "
            "the findings below still apply there."
        )
    blocks = [f for f in findings if f.kind == "BLOCKS"]
    stepped = step_order()
    # The codes of a user's --rules file come after the catalogue's, in code order.
    for code in stepped + sorted({f.code for f in blocks} - set(stepped)):
        sites = [f for f in blocks if f.code == code]
        if sites:
            where = ", ".join(f.location for f in sites[:4]) + (" …" if len(sites) > 4 else "")
            steps.append(f"{code} ({sites[0].title}) → {sites[0].recipe}: {where}.")
    refactor = [f for f in findings if f.kind == "REFACTOR"]
    if refactor:
        recipes = sorted({f.recipe for f in refactor})
        steps.append(f"Then the REFACTOR recipes: {', '.join(recipes)} ({len(refactor)} site(s)).")
    if d.api_gaps:
        apis = ", ".join(sorted({g.api for g in d.api_gaps}))
        steps.append(f"Replace or isolate unsupported APIs: {apis}.")
    files = sorted({f.file for f in blocks + refactor})
    if len(a.files) > 1:
        pilot = files[0] if files else a.files[0]
        steps.append(
            f"Pilot one module first ({pilot}): swap `import numpy as np` for "
            "`import cupynumeric as np`, check results against NumPy, then time it."
        )
    else:
        steps.append(
            "Swap `import numpy as np` for `import cupynumeric as np`, check results "
            "against NumPy on a small input, then time it on the real size."
        )
    steps.append(_doctor_step(a))
    return [f"{i}. {s}" for i, s in enumerate(steps, 1)]


def _doctor_step(a: Assessment) -> str:
    """The Doctor hand-off; once its report is in (--doctor), what it said and when to rerun it."""
    run = "\n\n   ```\n   " + DOCTOR.replace("\n", "\n   ") + "\n   ```\n\n   "
    evidence = a.context.runtime
    if evidence.doctor is None:
        return (
            "Run the cuPyNumeric Doctor on a representative run:"
            + run
            + "In doctor-report.json look for host fallbacks (APIs run by NumPy), implicit syncs "
            "(scalar conversions, array-valued conditions) on hot paths, and tasks too small to "
            "scale (arrays below the partition floor); `cpq assess --doctor doctor-report.json` "
            "joins it to these findings."
        )
    r = a.decision.runtime
    added = runtime_counts(a).doctor_added
    return (
        f"The cuPyNumeric Doctor's report ({evidence.doctor_path}) is joined above: "
        f"{len(evidence.doctor)} diagnostic(s), {r.confirmed} confirming findings, {added} finding(s) "
        f"only the run showed, {len(r.doctor_only)} without an R-code. After the recipes, run it again:"
        + run.rstrip()
    )


def _unresolved_line(a: Assessment) -> str:
    loops, calls = a.unresolved_counts()
    return (
        f"Unresolved: {loops} loop(s) and {calls} call(s) could not be judged — their values "
        "show no evidence of being arrays, so no finding is made there (listed at the end)."
    )


# The footer lists this many unresolved sites; JSON lists them all.
UNRESOLVED_SHOWN = 20


def _footer(a: Assessment, show_suppressed: bool, known_in_baseline: int | None) -> list[str]:
    out: list[str] = ["", "---", ""]
    out.append(
        f"Files: {len(a.files)} assessed, {len(a.skipped)} skipped"
        + (f", {len(a.notebooks)} notebook(s)" if a.notebooks else "")
        + "."
    )
    if known_in_baseline is not None:
        out.append(
            f"Baseline: {known_in_baseline} finding(s) already recorded are not shown; "
            "the verdict counts them all."
        )
    if a.partial:
        out += ["", f"Assessed in part ({len(a.partial)}):", ""]
        out += [f"- {file}: {reason}" for file, reason in a.partial]
    if a.skipped:
        out += ["", f"Skipped files ({len(a.skipped)}):", ""]
        out += [f"- {s.relpath}: {s.reason}" for s in a.skipped]
    if a.unresolved:
        out += ["", f"Unresolved sites ({len(a.unresolved)}; no evidence of an array there):", ""]
        out += [f"- {a.where(file, line)}: {kind}" for kind, file, line in a.unresolved[:UNRESOLVED_SHOWN]]
        if len(a.unresolved) > UNRESOLVED_SHOWN:
            more = len(a.unresolved) - UNRESOLVED_SHOWN
            out.append(f"- … and {more} more (`--format json` lists them all)")
    cells = [(f, c, r) for f, nb in sorted(a.notebooks.items()) for c, r in nb.skipped_cells]
    if cells:
        out += ["", "Notebook cells left out:", ""]
        out += [f"- {f}:cell {c}: {r}" for f, c, r in cells]
    suppressed = [f for f in a.findings if f.suppressed]
    if suppressed:
        out += ["", f"Suppressed findings: {len(suppressed)} (`# cpq: ignore`), not counted in the verdict."]
        if show_suppressed:
            out += [""]
            out += [f"- {f.location} {f.code} ({f.function}): {_code(f.source_line)}" for f in suppressed]
    if a.unused_suppressions:
        out += ["", f"Unused suppressions ({len(a.unused_suppressions)}): they match no finding.", ""]
        out += [f"- {file}:{s.line}: {s.describe()}" for file, s in a.unused_suppressions]
    return out
