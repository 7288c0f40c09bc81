# R108 — mpi4py beside the array code.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r108_mention.py beside the other codes' fixtures (markers: tests/markers.py).
# Array work, and mpi4py only in a docstring, a string and a comment.

"""Ported away from mpi4py: `from mpi4py import MPI` is gone."""  # reject: R108

import numpy as np

NOTE = "import mpi4py"  # reject: R108


def halo(u):  # reject: R108
    # from mpi4py import MPI  (no longer needed)
    return np.roll(u, 1)
