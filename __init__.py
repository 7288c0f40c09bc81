"""cpq: a Datalog code-query tool that assesses NumPy code before a port to cuPyNumeric."""

__version__ = "0.1.0"
