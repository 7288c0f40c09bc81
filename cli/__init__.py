"""The command line: `run` is the `cpq` command."""


def run() -> None:
    """Handle Ctrl-C and SIGTERM before anything else is imported (typer and the rest take a
    tenth of a second, during which a signal would otherwise end cpq with Python's traceback
    or no word at all), then run the command line."""
    from .shutdown import install

    install()
    from .app import run as run_app

    run_app()
