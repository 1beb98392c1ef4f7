"""The conformance matrix: every writer × every reader on one-feature cases, and spec rules × implementations."""
