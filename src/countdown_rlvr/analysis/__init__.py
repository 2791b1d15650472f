"""Analysis: paired and replicate comparisons, the seed claims and the arm checks, the
report, its figures and the DVC headline, and the branch diff. Reads the stages' JSON
outputs; imports no model code.
"""
