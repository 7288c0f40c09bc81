# R304 — random numbers with several GPUs.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r304.py beside the other codes' fixtures (markers: tests/markers.py).

import random

import numpy as np


def r304_pos(n):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n)  # expect: R304
    return x + np.random.rand(n)  # expect: R304


def r304_neg(n):  # reject: R304
    return [random.random() for _ in range(n)]
