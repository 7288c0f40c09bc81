# R108 — mpi4py beside the array code.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r108.py beside the other codes' fixtures (markers: tests/markers.py).

import numpy as np
from mpi4py import MPI  # expect: R108


def exchange(n):
    comm = MPI.COMM_WORLD
    local = np.zeros(n)
    total = np.empty_like(local)
    comm.Allreduce(local, total, op=MPI.SUM)
    return total
