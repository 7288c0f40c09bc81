"""What the user configures: `[tool.cpq]` in pyproject.toml (project.py), the assessment context
(context.py), the globs of `exclude` and `per-file-ignores` (globs.py) and the inline
`# cpq: ignore[...]` suppressions (suppress.py).

The command-line options that build a context and a configuration stay in cli/options.py: they
are typer's, and this folder is used without the command line (`assess` called from Python,
the cache keys).  This file imports nothing, so that reading a context does not load the rules
program that the check of a configuration's codes needs.
"""
