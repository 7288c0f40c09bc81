"""Shared helpers: where the examples live, and running an assessment on them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
EXAMPLES = TESTS / "examples"
SHARED = TESTS.parent.parent / "shared"


def context_options(args: list[str]) -> dict:
    """`["--elements", "20M", "--gpus", "4"]` -> Context.from_options keyword arguments."""
    opts: dict = {}
    i = 0
    while i < len(args):
        key = args[i].lstrip("-").replace("-", "_")
        if key == "cpu_only":
            opts[key] = True
            i += 1
            continue
        value = args[i + 1]
        opts[key] = int(value) if key in ("gpus", "nodes") else value
        i += 2
    return opts


@pytest.fixture(scope="session")
def expected_cases() -> list[dict]:
    return json.loads((EXAMPLES / "expected.json").read_text())["cases"]


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """A tree of four example programs (for the store and update tests)."""
    import shutil

    root = tmp_path / "tree"
    root.mkdir()
    for name in ["particle_loop.py", "sync_in_loop.py", "wave_equation.py", "refactor_only.py"]:
        shutil.copy(EXAMPLES / name, root / name)
    return root


# A solver whose `.item()` in its loop is an R104; {comment} takes a suppression comment.
SYNC_LOOP = """
import numpy as np


def descend(A, b, lr, iters):
    x = np.zeros(A.shape[1])
    history = []
    for it in range(iters):
        r = A @ x - b
        np.subtract(x, lr * (A.T @ r), out=x)
        loss = np.dot(r, r).item(){comment}
        history.append(loss)
    return x, history
"""


def write_notebook(path: Path, cells: list[dict]) -> None:
    """A Jupyter notebook (nbformat 4, Python kernel) with these cells."""
    nb = {
        "cells": cells,
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))
