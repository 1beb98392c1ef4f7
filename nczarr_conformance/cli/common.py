"""What every CLI shares: one-line errors, documented exit codes, no tracebacks."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from nczarr_conformance.errors import NczarrError

__all__ = ["Parser", "plain", "run", "version"]


def version() -> str:
    """The installed distribution's version (the package's own when run from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("nczarr-conformance")
    except PackageNotFoundError:
        from nczarr_conformance import __version__

        return __version__


def run(prog: str, body: Callable[[], int]) -> int:
    """Run ``body``; map our errors to one stderr line and their exit code.

    Any other exception is a bug: one line that says so and how to report it (exit 2),
    unless NCZARR_DEBUG is set, which re-raises it for a traceback.
    """
    from nczarr_conformance import safety

    safety.program = prog  # a writer lock names its holder by the command's name
    try:
        safety.ignore_signals_at_exit()  # once the outcome is printed, a late signal cannot kill the exit
        safety.install_signal_handlers()  # SIGINT and SIGTERM abort: exit 130 / 143, one line
        return _run(prog, body)
    except KeyboardInterrupt:  # a signal landing while an outcome below was being reported
        safety.stop_raising()
        signum = safety.received() or 2
        print(f"{prog}: {safety.Interrupted(signum)}", file=sys.stderr)
        return 128 + signum
    finally:
        # the outcome is decided: a signal from now until the process exits is recorded, not
        # raised, so it can never escape as Python's own KeyboardInterrupt traceback (exit -2)
        safety.stop_raising()


def _run(prog: str, body: Callable[[], int]) -> int:
    from nczarr_conformance import safety

    try:
        code = body()
        safety.raise_if_interrupted()  # a signal whose exception was swallowed still counts
        return code
    except NczarrError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        safety.stop_raising()
        signum = safety.received() or 2
        print(f"{prog}: {safety.Interrupted(signum)}", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the promise is: never a traceback
        if os.environ.get("NCZARR_DEBUG"):
            raise
        detail = " ".join(str(exc).split())  # one line, whatever the exception's text holds
        print(f"{prog}: unexpected {type(exc).__name__}: {detail}: this is a bug in nczarr-conformance: please "
              "report it with the command and NCZARR_DEBUG=1 output", file=sys.stderr)
        return 2


class _VersionAction(argparse.Action):
    """``--version``: the version is looked up only when asked (importlib.metadata costs --help ~15 ms)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        sys.stdout.write(f"{parser.prog} {version()}\n")
        sys.stdout.flush()
        parser.exit(0)


def plain(text: str | None) -> str | None:
    """Help text in plain words: module docstrings use RST ``literals``; a terminal shows them bare."""
    return None if text is None else text.replace("``", "")


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one stderr line and exit 2, like every other failure.

    Every command gets ``--version`` (the installed distribution's version), and its
    description and epilog are shown without RST markup.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        for key in ("description", "epilog"):
            if key in kwargs:
                kwargs[key] = plain(kwargs[key])
        super().__init__(*args, **kwargs)
        self.add_argument("--version", action=_VersionAction, help="print the version and exit")

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if "help" in kwargs and isinstance(kwargs["help"], str):
            kwargs["help"] = plain(kwargs["help"])
        return super().add_argument(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (see --help)\n")
