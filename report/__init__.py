"""What the user reads: an assessment rendered as Markdown, JSON, SARIF, concise lines, GitHub
workflow commands, GitLab Code Quality, JUnit XML or statistics, the words they share
(wording.py), the before/after sketches of a finding's line (sketches.py), and the baseline that
marks findings already known.

This file imports nothing, so that a command renders only the format it was asked for.
"""
