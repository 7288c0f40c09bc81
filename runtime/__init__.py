"""Runtime evidence: a profile of a representative run and the cuPyNumeric Doctor's report.

`read_profile` reads a cProfile/pstats file (function level) or a speedscope JSON profile as
py-spy writes it (line level); `read_doctor` reads the Doctor's JSON report. Both treat the
file as hostile: nothing in it is executed or unpickled, and anything malformed raises
`EvidenceError` with a one-line message `<path>: <why>`. Importing this package loads no
parser (they are imported when a file is read).
"""

from .errors import EvidenceError
from .reading import DoctorDiagnostic, Profile, read_doctor, read_profile

__all__ = ["DoctorDiagnostic", "EvidenceError", "Profile", "read_doctor", "read_profile"]
