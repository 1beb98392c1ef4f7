"""A command's ``main(argv)`` run in the test's own process, its outcome shaped as ``subprocess.run``'s.

Starting an interpreter and importing numpy, netCDF4, h5py and numcodecs costs about half a CPU second
per run, which dominated the suite's time (issue 37). A test about what a command decides (its exit
code, its stderr line, what it writes) rather than about the process (a crash, a signal, start-up, a
hang) calls :func:`run_main` instead: the same ``main`` the console script calls. Given pytest's ``capfd``,
the process's file descriptors are captured, so what a C library writes to fd 2 (HDF5's error stack) is seen
as a subprocess would see it; without it, Python's ``sys.stdout`` (text and ``.buffer``) and ``sys.stderr``.
Every file keeps at least one real subprocess per behaviour, and
``tests/test_convert_valid.py::test_the_command_in_a_process_says_what_main_says`` holds the two equal.
"""
from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any


def run_main(main: Callable[[list[str]], int], argv: Sequence[str], capfd: Any = None, *,
             show_warnings: bool = False) -> subprocess.CompletedProcess[str]:
    """``main(argv)`` as ``python -m`` runs it with ``PYTHONWARNINGS=ignore`` and no ``NCZARR_DEBUG``; with
    ``show_warnings``, as it runs with Python's default warning filters instead: each warning it raises is
    in its stderr, formatted as Python prints it (pytest would otherwise catch it unseen). A ``SystemExit``
    (argparse's usage errors, ``--help``) gives its code, as the process would have exited with.

    What the command changes in this process is put back: the SIGINT/SIGTERM handlers and the
    unraisable hook it installs, the signal it may have recorded, whether signals are deferred (a command
    ends with them deferred), the command name a lock records, so a later test is not affected.
    """
    from nczarr_conformance import safety

    if capfd is not None:
        capfd.readouterr()  # what earlier code printed is not this command's output
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook
    program, deferring = safety.program, safety._defer
    debug = os.environ.pop("NCZARR_DEBUG", None)
    try:
        with warnings.catch_warnings(record=True) as raised, _captured(capfd is None) as python_output:
            warnings.simplefilter("default" if show_warnings else "ignore")
            for quiet in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                warnings.filterwarnings("ignore", category=quiet)  # what a new interpreter leaves unsaid
            try:
                code = main(list(argv))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])
        sys.unraisablehook = saved[2]
        safety._received = None
        safety.program, safety._defer = program, deferring  # a command ends deferring signals (stop_raising)
        if debug is not None:
            os.environ["NCZARR_DEBUG"] = debug
    if python_output is not None:
        out, err = python_output
    else:
        sys.stdout.flush()
        sys.stderr.flush()
        out, err = capfd.readouterr()
    said = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line) for w in raised)
    return subprocess.CompletedProcess(list(argv), code, out, said + err)


@contextlib.contextmanager
def _captured(wanted: bool) -> Iterator[list[str] | None]:
    """Python's stdout (text and ``.buffer``: the commands write bytes) and stderr redirected, when ``wanted``;
    the list holds their text once the block ends."""
    if not wanted:
        yield None
        return
    result: list[str] = []
    out, err = io.BytesIO(), io.StringIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8")
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
            yield result
    finally:
        stdout.flush()
        result[:] = [out.getvalue().decode("utf-8"), err.getvalue()]
