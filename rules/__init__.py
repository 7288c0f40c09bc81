"""The query library: rules.dl's topic files, the R-code registry (rules/codes/, registry.py),
the program they make, parsed once and kept in the user cache (program.py), and the catalogue
of codes it states (catalogue.py).

This file imports nothing, so that reading the registry does not load the engine.
"""
