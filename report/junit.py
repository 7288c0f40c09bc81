"""JUnit XML, for CI systems that show test results (GitLab, Jenkins, Azure, CircleCI).

One `testsuite` named after the run; one `testcase` per finding listed (report/listing.py):
BLOCKS and REFACTOR findings fail (`<failure type="BLOCKS">`), INFO findings pass and say what
they note in `system-out`.  A last testcase, `verdict`, carries the verdict and its reason; it
fails only when the verdict reaches `--fail-on`, the one thing cpq's exit status fails on.
Findings are classed by file (`classname`, the path relative to the repository root) and
placed by `file` and `line` attributes, as pytest writes them; a notebook's cell and line are in
the test's name.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ..pipeline.assessment import Assessment
from .listing import FindingKeys, kind_counts, listed, message, reported
from .places import Places
from .wording import verdict_reason

FAILING_KINDS = ("BLOCKS", "REFACTOR")
# Characters XML 1.0 cannot hold, even escaped (a source line may have them).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: object) -> str:
    return _NOT_XML.sub("\ufffd", str(value))


def render_junit(a: Assessment, new_keys: FindingKeys | None = None, verdict_fails: bool = False) -> str:
    places = Places(a)
    findings = listed(a, new_keys)
    failures = sum(1 for f in findings if f.kind in FAILING_KINDS) + int(verdict_fails)
    counts = {"tests": str(len(findings) + 1), "failures": str(failures), "errors": "0", "skipped": "0"}
    suites = ET.Element("testsuites", {"name": "cpq", **counts, "time": f"{a.seconds:.3f}"})
    suite = ET.SubElement(
        suites, "testsuite", {"name": _text(f"cpq assess {a.root}"), **counts, "time": f"{a.seconds:.3f}"}
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (("verdict", a.verdict), ("verdict_reason", verdict_reason(a))):
        ET.SubElement(properties, "property", {"name": name, "value": _text(value)})
    for f in findings:
        place = places.place(f)
        where = place.cell_label or str(place.line)
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": _text(place.repo_path),
                "name": _text(f"{f.code} {f.title} ({place.repo_path}:{where})"),
                "file": _text(place.repo_path),
                "line": str(place.line),
                "time": "0",
            },
        )
        text = _text(f"{place.terminal}: {f.code} {message(f)}")
        if f.kind in FAILING_KINDS:
            failure = ET.SubElement(
                case, "failure", {"type": f.kind, "message": _text(f"{f.code} {f.title}")}
            )
            failure.text = text
        else:
            ET.SubElement(case, "system-out").text = text
    verdict = ET.SubElement(suite, "testcase", {"classname": "cpq", "name": "verdict", "time": "0"})
    summary = _text(f"{a.verdict} — {verdict_reason(a)} Findings: {kind_counts(reported(a, new_keys))}.")
    if verdict_fails:
        ET.SubElement(verdict, "failure", {"type": "verdict", "message": _text(a.verdict)}).text = summary
    else:
        ET.SubElement(verdict, "system-out").text = summary
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
