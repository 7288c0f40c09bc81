"""`python -m cpq` runs the command line."""

from .cli.app import main

main()
