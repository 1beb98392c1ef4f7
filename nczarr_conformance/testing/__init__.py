"""Test support shipped with the package: the rich sample, Hypothesis strategies, source adapters.

Used by the test suite (and by users writing their own property tests); nothing in the package
imports it, and it imports only the model and the format (docs/architecture.md).
"""
