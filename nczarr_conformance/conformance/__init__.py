"""The conformance matrix: every writer × every reader on one-feature cases, and spec rules × implementations.

Cases (the intended models), the matrix run, spec-rule grading, the known-fault gate and the
md/html/json rendering. May import ``peers`` and everything below; only ``cli`` imports it.
"""
