"""The verdict: budgets as markers, options and ini keys give them, floors, the verdict from a
test's snapshot, contracts, and why a test compiled more than once (reasons, guard classes and their
usual fixes).

May import: record/ (its snapshot), observe/ (signal names, installed versions), vocabulary/.
Imported by output/ and the pytest layer.
"""
