"""How a command's process ends, in a module of its own: a command that answers without argparse (``nczarr-dump
-h`` of a plain store, cdl/quick_header.py) ends through it without loading cli/common.py."""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing's constant without importing typing: 4 ms of ``nczarr-dump -h``'s start
if TYPE_CHECKING:
    from typing import NoReturn


def exit_process(code: int) -> NoReturn:
    """End the process with ``code``: a command's last act once its outcome is printed (its script, ``-m``).

    Where the icechunk library was loaded (an ``icechunk://`` store), its native runtime can abort the
    interpreter's own shutdown (SIGABRT, exit 134, nothing printed: seen 1 run in 10-40 on a loaded
    machine after a failed virtual-chunk read, icechunk 1.1.21 on Python 3.11 and 3.13), turning a
    documented exit code into a crash. So there the exit handlers run (ours: worker pools, child
    processes), output is flushed, and the process ends without the shutdown that aborts; otherwise
    it exits as any Python program does. A function a test calls in process returns its code instead.
    """
    if "icechunk" not in sys.modules:
        sys.exit(code)
    import atexit
    from contextlib import suppress

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a closed pipe or stream: nothing left to say
            stream.flush()
    os._exit(code)
