"""`python -m cpq` runs the command line."""

from .cli.app import run

run()
