"""A command's ``main(argv)`` run inside the test process, its output captured.

For tests about what a command finds or prints, not about how it starts, exits or handles a signal
(those start the command itself: tests/cli/, tests/test_interrupts.py): an interpreter started per
call, importing the package from source, cost more than the work under test (issue 37).
"""
from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import NamedTuple


class Ran(NamedTuple):
    """What ``subprocess.run(..., capture_output=True, text=True)`` would have handed back."""

    returncode: int
    stdout: str
    stderr: str


def run_main(main: Callable[[list[str]], int], *args: str) -> Ran:
    """``main(list(args))`` with stdout (text and ``.buffer``, as the commands write bytes) and stderr captured;
    a ``SystemExit`` (argparse's usage errors) gives its code, as the process would have exited with."""
    out, err = io.BytesIO(), io.StringIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8")
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's own errors end the process: exit 2 and its message
            code = exc.code if isinstance(exc.code, int) else 1
        stdout.flush()
    return Ran(code, out.getvalue().decode("utf-8"), err.getvalue())
