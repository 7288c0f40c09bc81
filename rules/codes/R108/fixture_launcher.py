# R108 — mpi4py beside the array code.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r108_launcher.py beside the other codes' fixtures (markers: tests/markers.py).
# A launcher: imports mpi4py but does no array work.

import subprocess

from mpi4py import MPI  # reject: R108


def launch(script):
    if MPI.COMM_WORLD.Get_rank() == 0:
        subprocess.run(["python", script], check=True)
