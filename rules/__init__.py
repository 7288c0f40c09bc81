"""The query library: rules.dl's topic files and the R-code registry (rules/codes/)."""
