"""Sentences for the decisions rules.dl made (gate reasons, verdict reasons).

rules.dl decides a status and a reason key; this module only words it, with
the numbers the rules derived.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..pipeline.assessment import Assessment, Finding, Gate

# What each verdict rule says, by the reason rules.dl gives it (verdict_reason); the numbers
# come from its threshold relation.
VERDICT_TEXT = {
    "hardware": "Gate 1 fails: the hardware cannot run cuPyNumeric (compute capability below {cc})",
    "workload": "Gate 4 fails: the workload class ({pattern}) is not what cuPyNumeric accelerates",
    "size": "Gate 2 fails: the hot arrays are below {floor:,} elements per GPU",
    "mpi": "mpi4py sits beside the array code (R108): the decomposition must be removed",
    "several-blocks": "{blocks} BLOCKS sites on hot paths ({several} or more)",
    "few-blocks": "{blocks} recipe-fixable BLOCKS site(s) on hot paths ({few})",
    "refactor-only": "only REFACTOR findings ({refactor} site(s)): mechanical recipes fix them",
    "nothing-found": "nothing blocking or refactorable was found",
    "demotion": "{gaps} on a hot path demotes one tier from {base}",
}

# Rule 2 and Gate 4 on code that does no NumPy array work yet (decision.md); {where} is the
# evidence, if any.
PYTHON_LOOPS = (
    "no NumPy array work{where}: the hot loops are Python element loops; vectorize with NumPy first"
)

BETTER_TOOLS = {
    "ml": "RAPIDS cuML for scikit-learn-style ML (or the framework's own GPU path)",
    "graph": "cuGraph for graph algorithms",
    "sparse": "CuPy with cupyx.scipy.sparse for sparse linear algebra",
    "sequential": "a parallel scan (associative recurrence) or a compiled kernel (Numba)",
    "string": "RAPIDS cuDF string functions, or keep it on the CPU",
    "no-array-work": "nothing here that cuPyNumeric would accelerate: keep it on the CPU",
    "mixed": "cuPyNumeric for the array math, with the SciPy/sklearn part isolated at a boundary",
}

# Gate 2's size bands, by the key rules.dl derives; {floor}, {break_even}, ...: its thresholds.
_SIZE_BANDS = {
    "below-floor": "below the runtime's {floor:,}-element partition floor: runs serially",
    "slower-than-numpy": "{floor_short}–{break_even_short} per GPU: likely slower than NumPy",
    "break-even": "{break_even_short}–{single_short} per GPU: about break-even",
    "single-gpu-speedup": "{single_short}–{multi_gpu_short} per GPU: single-GPU speed-up",
    "multi-gpu": "{multi_gpu_short}+ per GPU: multi-GPU helps",
    "multi-node": "{multi_node_short}+ per GPU: multi-node may be needed",
}

_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


def count_words(n: int) -> str:
    """A small count in words ("three"), a larger one in digits."""
    return _WORDS[n] if 0 <= n < len(_WORDS) else f"{n:,}"


def short_number(n: int) -> str:
    """65,536 → "65K", 1,000,000 → "1M", 1,000,000,000 → "1B"."""
    for unit, size in (("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size:
            return f"{n // size}{unit}"
    return str(n)


def compute_capability(value: int) -> str:
    """The context's compute capability ×10 (70) as NVIDIA writes it (7.0)."""
    return f"{value // 10}.{value % 10}"


def thresholds(a: Assessment) -> dict[str, object]:
    """The framework's numbers as the sentences use them."""
    t = a.decision.thresholds
    several = t["several_blocks"]
    few = (
        "one"
        if several == 2
        else f"{count_words(1)} or {count_words(2)}"
        if several == 3
        else (f"{count_words(1)} to {count_words(several - 1)}")
    )
    return {
        "cc": compute_capability(t["min_compute_capability"]),
        "floor": t["partition_floor"],
        "floor_short": short_number(t["partition_floor"]),
        "break_even_short": short_number(t["break_even"]),
        "single_short": short_number(t["single_gpu_speedup"]),
        "multi_gpu_short": short_number(t["multi_gpu"]),
        "multi_node_short": short_number(t["multi_node"]),
        "several": count_words(several),
        "few": few,
    }


def verdict_reason(a: Assessment) -> str:
    d = a.decision
    base = next((v for r, v in d.matched_rules), d.verdict)
    gaps = ", ".join(sorted({g.api for g in d.api_gaps if g.hot})) or "an unsupported API"
    reason = d.reasons.get(d.verdict_rule, "")
    python_loops = reason == "workload" and d.pattern == "python-loops"
    template = PYTHON_LOOPS if python_loops else VERDICT_TEXT.get(reason, reason)
    text = template.format(
        where="",
        pattern=d.pattern,
        blocks=f"{d.blocks_sites:,}",
        refactor=f"{d.refactor_sites:,}",
        gaps=gaps,
        base=base,
        **thresholds(a),
    )
    return f"Rule {d.verdict_rule}: {text}."


def gate_reason(gate: Gate, a: Assessment) -> str:
    d = a.decision
    ctx = a.context
    key = gate.reason_key
    numbers = thresholds(a)
    if key == "hardware-stop":
        return "skipped: the hardware gate failed"
    if key == "class-stop":
        return "skipped: problem size or workload class already decides the verdict"
    if gate.number == 1:
        if key == "cpu-only":
            return "CPU-only Legate run: no GPU requirement"
        if key == "gpu-unknown":
            return f"GPU model not given (--gpu): needs compute capability ≥ {numbers['cc']} (Volta or newer)"
        cc = ctx.gpu.low or 0
        label = ctx.gpu.label or "GPU"
        if key == "pre-volta":
            return f"{label} is sm_{cc}: Pascal and older are not supported (needs ≥ {numbers['cc']})"
        return f"{label} is sm_{cc} (≥ {numbers['cc']}), Linux and CUDA 12/13 assumed"
    if gate.number == 2:
        if key == "cpu-only":
            return "CPU-only run: no per-GPU size floor"
        size = _size_text(a)
        band = _SIZE_BANDS[key].format(**numbers) if key in _SIZE_BANDS else key
        text = f"{size} → {_per_gpu_text(a)} per GPU; {band}"
        if key == "below-floor" and d.batching:
            f, line = d.batching[0]
            text += (
                f"; batching path: the small array allocated per item at {f}:{line} can be "
                f"stacked into one (N, item) array so that N × item ≥ {numbers['break_even_short']}"
            )
        return text
    if gate.number == 3:
        return {
            "no-findings": "no BLOCKS or REFACTOR findings on hot paths",
            "refactor-only": f"{d.refactor_sites} REFACTOR site(s), no BLOCKS",
            "few-blocks": f"{d.blocks_sites} BLOCKS site(s): recipe-fixable",
            "several-blocks": f"{d.blocks_sites} BLOCKS sites on hot paths",
            "mpi": "mpi4py decomposition beside the array code (R108)",
        }.get(key, key)
    if gate.number == 4:
        where = _evidence(d, d.pattern)
        if gate.status == "fail" and d.pattern == "no-array-work":
            return "no NumPy array work and no numeric loop: nothing here that cuPyNumeric would accelerate"
        if gate.status == "fail":
            return f"{d.pattern} workload{where}: not what cuPyNumeric accelerates"
        if key == "mixed":
            return (
                "mixed: array math beside SciPy/sklearn/graph code — migrate the array math, "
                "isolate the boundary"
            )
        if key == "unknown":
            return "no dominant array pattern recognised"
        if key == "python-loops":
            return PYTHON_LOOPS.format(where=where)
        return f"{d.pattern}{where}"
    if gate.number == 5 and key == "measured" and d.runtime.measured_split is not None:
        host, array, own = d.runtime.measured_split
        # Amdahl's law: the host share is what no GPU speeds up.
        ceiling = (
            f"; the port can speed the run up {1000 / host:.1f}× at most"
            if host >= 10
            else "; the host side leaves room for a speed-up of 100× or more"
        )
        return (
            f"measured: {percent(host)} of the profiled run at host touchpoints (SciPy, I/O, "
            f"plotting, conversions), {percent(array)} in array calls, {percent(own)} in the "
            f"assessed code itself{ceiling}"
        )
    if gate.number == 6 and key == "doctor-ran":
        ev = a.context.runtime
        count = len(ev.doctor or ())
        return (
            f"the cuPyNumeric Doctor ran ({ev.doctor_path}): {count} diagnostic(s), "
            f"{d.runtime.confirmed} confirming findings"
        )
    if gate.number == 5:
        total, hot = d.touchpoints
        if total == 0:
            return "no host touchpoints (I/O, SciPy/sklearn, plotting, host conversions) found"
        return (
            f"{total} host touchpoint(s), {hot} on a hot path; the share of wall time inside "
            "array code needs a profile"
        )
    if gate.number == 6:
        if not d.readiness:
            return "no benchmark, golden test or launcher found; run the Doctor (next steps)"
        found = ", ".join(sorted({item for item, _ in d.readiness}))
        return f"found: {found}; confirm with a benchmark run and the Doctor (next steps)"
    return key


def _evidence(d, pattern: str) -> str:  # type: ignore[no-untyped-def]
    lines = [f"{f}:{line}" for p, f, line in d.pattern_evidence if p == pattern]
    if not lines:
        return ""
    more = f" and {len(lines) - 2} more" if len(lines) > 2 else ""
    return f" ({', '.join(lines[:2])}{more})"


def _size_text(a: Assessment) -> str:
    d = a.decision
    if d.size_low is None:
        return "size unknown"
    if d.size_high and d.size_high != d.size_low:
        return f"{d.size_low:,}–{d.size_high:,} elements ({d.size_source})"
    where = f" at {d.size_where}" if d.size_where else ""
    return f"{d.size_low:,} elements ({d.size_source}{where})"


def _per_gpu_text(a: Assessment) -> str:
    d = a.decision
    if d.per_gpu is None:
        return "unknown"
    lo, hi = d.per_gpu
    return f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"


def percent(permille: int) -> str:
    """A share of the run, per mille, in words: 34%, 0.4%, <0.1%."""
    if permille >= 100:
        return f"{round(permille / 10)}%"
    if permille >= 1:
        return f"{permille / 10:.1f}%"
    return "<0.1%"


def runtime_mark(f: Finding) -> str:
    """What the runtime evidence says of a finding, in a few words ("" when nothing)."""
    marks = []
    if f.runtime == "never-ran":
        marks.append("never ran in the profile: not counted")
    elif f.runtime == "measured-hot":
        marks.append(f"measured hot: {percent(f.share or 0)} of the run")
    elif f.runtime == "ran":
        marks.append(f"ran: {percent(f.share)} of the run" if f.share is not None else "ran")
    if f.doctor == "confirmed":
        marks.append(f"confirmed at runtime by the Doctor ({', '.join(f.doctor_checks)})")
    elif f.doctor == "added":
        marks.append(f"seen at runtime by the Doctor ({', '.join(f.doctor_checks)})")
    return "; ".join(marks)


@dataclass(frozen=True)
class RuntimeCounts:
    """The findings the runtime evidence moved, as every report counts them: those that could
    count (not SCALES, not suppressed) in measured-hot code and in code that never ran, and
    those only the Doctor saw."""

    measured_hot: int
    never_ran: int
    doctor_added: int


def runtime_counts(a: Assessment) -> RuntimeCounts:
    weighed = [f for f in a.findings if f.kind != "SCALES" and not f.suppressed]
    return RuntimeCounts(
        measured_hot=sum(1 for f in weighed if f.runtime == "measured-hot"),
        never_ran=sum(1 for f in weighed if f.runtime == "never-ran"),
        doctor_added=sum(1 for f in a.findings if f.doctor == "added"),
    )


def _amount(value: int, unit: str) -> str:
    return f"{value / 1e6:,.2f} s" if unit == "us" else f"{value:,} samples"


def evidence_lines(a: Assessment) -> list[str]:
    """What was measured and what was guessed, a sentence each."""
    ev = a.context.runtime
    r = a.decision.runtime
    out = []
    if ev.profile is not None:
        p = ev.profile
        size = _amount(p.total, p.unit)
        if r.work_total is not None and r.work_total < p.total:
            size += f", {_amount(r.work_total, p.unit)} without the imports"
        kind = "cProfile, by function" if p.kind == "cprofile" else "sampled, by line"
        which = (
            "which code ran (code it never entered does not count)"
            if p.kind == "cprofile"
            else "where the time went (a sampled profile cannot show what never ran)"
        )
        counts = runtime_counts(a)
        hot = never = ""
        if counts.measured_hot:
            hot = f"; {counts.measured_hot} finding(s) in measured-hot code come first"
        if counts.never_ran:
            never = f"; {counts.never_ran} finding(s) in code that never ran are not counted"
        out.append(
            f"Measured by the profile {ev.profile_path} ({kind}, {size}): {which}, the functions "
            f"called over and over (hot whatever calls them), Gate 5's share of time{hot}{never}."
        )
        if r.stale_files:
            shown = ", ".join(r.stale_files[:3]) + (
                f" and {len(r.stale_files) - 3} more" if len(r.stale_files) > 3 else ""
            )
            out.append(
                f"The profile does not match {shown} (edited since the run?): what ran there is not "
                "judged from it."
            )
    if ev.doctor is not None:
        elsewhere = f", {len(r.doctor_elsewhere)} in files not assessed" if r.doctor_elsewhere else ""
        added = runtime_counts(a).doctor_added + len(r.doctor_only)
        out.append(
            f"Measured by the cuPyNumeric Doctor ({ev.doctor_path}): {len(ev.doctor)} diagnostic(s); "
            f"{r.confirmed} finding(s) confirmed at runtime, {added} seen at runtime only{elsewhere}."
        )
    if out:
        out.append("Everything else is read from the code, not measured.")
    else:
        out.append(
            "Nothing was measured: hot paths are inferred from the code (loops and what they call). "
            "`--profile` and `--doctor` add a run's evidence."
        )
    return out


def fill_gate_reasons(a: Assessment) -> None:
    for gate in a.decision.gates:
        gate.reason = gate_reason(gate, a)
