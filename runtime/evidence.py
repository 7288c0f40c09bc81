"""The runtime evidence of one run of cpq: a profile and a Doctor report, as the facts the rules
read (rules/runtime.dl), and the digest the saved results are keyed by (a different profile
is a different answer)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import DoctorDiagnostic, Profile

# The relations the evidence fills, in the order they are loaded (facts/schema.py documents them).
RUNTIME_RELATIONS = (
    "profile_run",
    "profile_function",
    "profile_call",
    "profile_line",
    "doctor_run",
    "doctor_diagnostic",
)


@dataclass(frozen=True)
class RuntimeEvidence:
    """What was measured: nothing by default."""

    profile: Profile | None = None
    profile_path: str = ""  # as the user gave it, for the report
    doctor: tuple[DoctorDiagnostic, ...] | None = None
    doctor_path: str = ""

    @property
    def empty(self) -> bool:
        return self.profile is None and self.doctor is None

    def facts(self) -> dict[str, list[tuple[object, ...]]]:
        out: dict[str, list[tuple[object, ...]]] = {name: [] for name in RUNTIME_RELATIONS}
        if self.profile is not None:
            p = self.profile
            out["profile_run"] = [(p.kind, p.unit, p.total)]
            out["profile_function"] = list(p.functions)
            out["profile_call"] = list(p.calls)
            out["profile_line"] = list(p.lines)
        if self.doctor is not None:
            out["doctor_run"] = [(len(self.doctor),)]
            out["doctor_diagnostic"] = sorted({(d.file, d.line, d.check, d.description) for d in self.doctor})
        return out

    def key(self) -> str:
        """A digest of the facts: saved results made with other evidence (or none) are not reused."""
        if self.empty:
            return ""
        digest = hashlib.sha256()
        for name, rows in self.facts().items():
            digest.update(f"{name}:{len(rows)}\n".encode())
            for row in rows:
                digest.update(repr(row).encode("utf-8", "surrogatepass"))
                digest.update(b"\n")
        return digest.hexdigest()
