# R108 — mpi4py beside the array code.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r108_plain_import.py beside the other codes' fixtures (markers: tests/markers.py).

import mpi4py  # expect: R108
import numpy as np


def make(n):
    return np.zeros(n)
