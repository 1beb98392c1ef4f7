"""What every CLI shares: one-line errors, documented exit codes, no tracebacks."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from ..errors import NczarrError


def run(prog: str, body: Callable[[], int]) -> int:
    """Run ``body``; map our errors to one stderr line and their exit code.

    Unexpected exceptions also end in one line (exit 2) unless NCZARR_DEBUG is
    set, which re-raises them for a traceback.
    """
    from .. import safety

    safety.install_signal_handlers()  # SIGINT and SIGTERM abort: exit 130 / 143, one line
    try:
        code = body()
        safety.raise_if_interrupted()  # a signal whose exception was swallowed still counts
        return code
    except NczarrError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        signum = safety.received() or 2
        print(f"{prog}: {safety.Interrupted(signum)}", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the promise is: never a traceback
        if os.environ.get("NCZARR_DEBUG"):
            raise
        print(f"{prog}: unexpected {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one stderr line and exit 2, like every other failure."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (see --help)\n")
