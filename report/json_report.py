"""The JSON report (schema `cpq.report/1`, the minimum of report.md plus extras)."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..config.context import ContextValue
from ..pipeline.assessment import Assessment, Finding, nothing_to_assess
from .wording import fill_gate_reasons, runtime_counts, verdict_reason

SCHEMA = "cpq.report/1"


def _ctx(value: ContextValue, where: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"value": value.low if value.low == value.high else None, "source": value.source}
    if value.low is not None and value.high is not None and value.high != value.low:
        out["range"] = [value.low, value.high]
    if value.label:
        out["label"] = value.label
    if where:
        out["where"] = where
    return out


def report_dict(a: Assessment, new_keys: set[tuple[str, str, int]] | None = None) -> dict[str, Any]:
    from ..manifest import load

    fill_gate_reasons(a)
    d = a.decision
    manifest = load()
    prov = manifest.provenance
    elements = ContextValue(d.size_low, d.size_high, d.size_source)
    context = {
        "elements": _ctx(elements, d.size_where),
        "gpus": _ctx(a.context.gpus),
        "nodes": _ctx(a.context.nodes),
        "gpu": _ctx(a.context.gpu),
        "cpu_only": {"value": a.context.cpu_only, "source": "given" if a.context.cpu_only else "default"},
    }
    if d.per_gpu is not None:
        context["elements_per_gpu"] = {"range": list(d.per_gpu), "source": "derived"}
    # No file assessed: no verdict (null), and the reason says why (cpq assess exits 3).
    nothing = nothing_to_assess(a)
    return {
        "schema": SCHEMA,
        "tool": {"name": "cpq", "version": __version__},
        "path": str(a.root),
        "verdict": None if nothing else d.verdict,
        "verdict_reason": f"Nothing to assess: {nothing}." if nothing else verdict_reason(a),
        "verdict_rule": None if nothing else d.verdict_rule,
        "context": context,
        "findings": [
            {
                "code": f.code,
                "kind": f.kind,
                "file": f.file,
                "line": f.line,
                "end_line": f.line,
                "function": f.function,
                "hot": f.hot,
                "counts_for_verdict": f.counts,
                "message": f"{f.title}: {f.source_line}" if f.source_line else f.title,
                "recipe": f.recipe or None,
                "suppressed": f.suppressed,
                **({"location": f.location} if f.location != f"{f.file}:{f.line}" else {}),
                **({"runtime": _finding_runtime(f)} if f.runtime or f.doctor else {}),
                **(
                    {"baseline": "new" if (f.code, f.file, f.line) in new_keys else "unchanged"}
                    if new_keys is not None and not f.suppressed
                    else {}
                ),
            }
            for f in a.findings
        ],
        "suppressions": {
            "suppressed": sum(1 for f in a.findings if f.suppressed),
            "unused": [
                {"file": file, "line": s.line, "codes": list(s.codes) if s.codes else None}
                for file, s in a.unused_suppressions
            ],
        },
        "audit_notes": [
            {"kind": n.kind, "file": n.file, "line": n.line, "function": n.function} for n in a.audit_notes
        ],
        "api_gaps": [
            {
                "api": g.api,
                "support": g.glyph,
                "level": g.level,
                "file": g.file,
                "line": g.line,
                "hot": g.hot,
                "note": g.note,
            }
            for g in d.api_gaps
        ],
        "gates": [
            {"gate": g.number, "name": g.name, "status": g.status, "reason": g.reason} for g in d.gates
        ],
        "pattern": d.pattern,
        "files": {
            "assessed": len(a.files),
            "lines": a.lines,
            "skipped": [{"file": s.relpath, "reason": s.reason} for s in a.skipped],
            "notebooks": sorted(a.notebooks),
            "partial": [{"file": f, "reason": r} for f, r in a.partial],
        },
        "unresolved": _unresolved(a),
        "manifest": {
            "source": prov.get("source", ""),
            "cupynumeric_version": prov.get("cupynumeric_version", ""),
            "date": prov.get("date", ""),
            "stale": manifest.stale,
        },
        "runtime_evidence": _runtime_evidence(a),
        "stats": {"facts": a.fact_count, "seconds": round(a.seconds, 3)},
    }


def _finding_runtime(f: Finding) -> dict[str, object]:
    """What a profile and the Doctor say of a finding: status measured-hot / ran / never-ran
    (null: not measured), the share of the run (0–1), the Doctor's confirmed / added and checks."""
    return {
        "profile": f.runtime or None,
        "share": round(f.share / 1000, 3) if f.share is not None else None,
        "doctor": f.doctor or None,
        "doctor_checks": list(f.doctor_checks),
    }


def _runtime_evidence(a: Assessment) -> dict[str, object]:
    """What was measured (null parts: not given)."""
    ev = a.context.runtime
    r = a.decision.runtime
    counts = runtime_counts(a)
    profile: dict[str, object] | None = None
    if ev.profile is not None:
        split = r.measured_split
        profile = {
            "path": ev.profile_path,
            "kind": ev.profile.kind,
            "unit": ev.profile.unit,
            "total": ev.profile.total,
            "workload": r.work_total,
            "shares": (
                {"host": split[0] / 1000, "array_calls": split[1] / 1000, "assessed_code": split[2] / 1000}
                if split is not None
                else None
            ),
            "never_ran": counts.never_ran,
            "measured_hot": counts.measured_hot,
            "stale_files": r.stale_files,
        }
    doctor: dict[str, object] | None = None
    if ev.doctor is not None:
        doctor = {
            "path": ev.doctor_path,
            "diagnostics": len(ev.doctor),
            "confirmed": r.confirmed,
            "added": counts.doctor_added,
            "without_code": [
                {"check": check, "file": file, "line": line, "description": words}
                for check, file, line, words in r.doctor_only
            ],
            "not_assessed": [{"path": p, "line": line, "check": k} for p, line, k in r.doctor_elsewhere],
        }
    return {"profile": profile, "doctor": doctor}


def dump_json(value: object, indent: int = 2, depth: int = 2) -> str:
    """Indented JSON down to `depth` levels, each deeper value on one line: a finding per
    line reads as well, and the C encoder then does the bulk of the work (json.dumps with
    an indent runs in Python, a tenth of the speed on reports with thousands of findings)."""
    import json

    # One encoder for every value: json.dumps with a non-default option builds one per call.
    one_line = json.JSONEncoder(ensure_ascii=False).encode

    def encode(item: object, level: int) -> str:
        if level >= depth or not isinstance(item, dict | list) or not item:
            return one_line(item)
        pad = " " * (indent * (level + 1))
        end = " " * (indent * level)
        if isinstance(item, dict):
            parts = [f"{pad}{one_line(str(k))}: {encode(v, level + 1)}" for k, v in item.items()]
            return "{\n" + ",\n".join(parts) + "\n" + end + "}"
        parts = [f"{pad}{encode(v, level + 1)}" for v in item]
        return "[\n" + ",\n".join(parts) + "\n" + end + "]"

    return encode(value, 0) + "\n"


def _unresolved(a: Assessment) -> dict[str, Any]:
    loops, calls = a.unresolved_counts()
    sites = []
    for kind, file, line in a.unresolved:
        site: dict[str, Any] = {"kind": kind, "file": file, "line": line}
        where = a.where(file, line)
        if where != f"{file}:{line}":  # a notebook cell
            site["location"] = where
        sites.append(site)
    return {"loops": loops, "calls": calls, "sites": sites}
