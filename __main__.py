"""`python -m cpq` runs the command line."""

from .cli import run

run()
