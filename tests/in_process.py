"""A command's ``main(argv)`` run in the test's own process, its outcome shaped as ``subprocess.run``'s.

Starting an interpreter and importing numpy, netCDF4, h5py and numcodecs costs about half a CPU second
per run, which dominated the suite's time (issue 37). A test about what a command decides (its exit
code, its stderr line, what it writes) rather than about the process (a crash, a signal, start-up, a
hang) calls :func:`run_main` instead: the same ``main`` the console script calls, with the process's
file descriptors captured (pytest's ``capfd``), so what a C library writes to fd 2 (HDF5's error stack)
is seen as a subprocess would see it. Every file keeps at least one real subprocess per behaviour.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any


def run_main(main: Callable[[list[str] | None], int], argv: Sequence[str], capfd: Any, *,
             show_warnings: bool = False) -> subprocess.CompletedProcess[str]:
    """``main(argv)`` as ``python -m`` runs it with ``PYTHONWARNINGS=ignore`` and no ``NCZARR_DEBUG``; with
    ``show_warnings``, as it runs with Python's default warning filters instead: each warning it raises is
    in its stderr, formatted as Python prints it (pytest would otherwise catch it unseen).

    What the command changes in this process is put back: the SIGINT/SIGTERM handlers and the
    unraisable hook it installs, the signal it may have recorded, the command name a lock records,
    so a later test is not affected.
    """
    from nczarr_conformance import safety

    capfd.readouterr()  # what earlier code printed is not this command's output
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook
    program = safety.program
    debug = os.environ.pop("NCZARR_DEBUG", None)
    try:
        with warnings.catch_warnings(record=True) as raised:
            warnings.simplefilter("default" if show_warnings else "ignore")
            for quiet in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                warnings.filterwarnings("ignore", category=quiet)  # what a new interpreter leaves unsaid
            try:
                code = main(list(argv))
            except SystemExit as exc:  # argparse's usage errors and --help end the parse this way
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])
        sys.unraisablehook = saved[2]
        safety._received = None
        safety.program = program
        if debug is not None:
            os.environ["NCZARR_DEBUG"] = debug
    sys.stdout.flush()
    sys.stderr.flush()
    out, err = capfd.readouterr()
    said = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line) for w in raised)
    return subprocess.CompletedProcess(list(argv), code, out, said + err)
