"""`cpq fix`: the mechanical recipes of some findings applied to the code, ruff-style.

sites.py finds the node of each finding that has a recipe (rules.dl's `live_site`, placed in the
text by facts.spans); recipes.py writes the edit for that node and says whether it is safe;
check.py applies the fixes in memory and assesses the tree again, keeping a fix only where its
finding is gone and no other appeared; output.py shows the diff and the summary; write.py
writes the files back, atomically and in their own encoding and line endings.
"""
