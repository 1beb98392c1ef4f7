"""The command lines: nc2nczarr, nczarr-dump, nczarr-check, nczarr-fix, nczarr-conformance.

Argument parsing, exit codes and one-line errors only; the work is done by the wings below.
The top floor: it may import any wing, and no wing imports it.
"""
