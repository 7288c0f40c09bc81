"""A run: the files found, their facts extracted and loaded, the rules evaluated (run.py), and
the assessment read back from the database (assessment.py), through the caches (cache/) unless
told not to.

This file imports nothing: the rules program's loading (rules/program.py) uses the cache's keys
and user cache, and importing those must not load the run above them.
"""
