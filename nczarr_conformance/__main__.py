"""``python -m nczarr_conformance COMMAND ARGS``: the five commands without their scripts on PATH.

A virtual environment that is not activated, or ``pip install --user`` without ``~/.local/bin``
on PATH, leaves ``nc2nczarr`` and the rest unreachable by name; ``python -m`` reaches them with
the interpreter that has the package, as ``python -m pip`` does. With no command (or ``-h``)
it says what the package is and lists the commands; exit codes are the command's own (2: no
such command).
"""
from __future__ import annotations

import sys

from nczarr_conformance.cli.console import COMMANDS, run_command


def usage() -> str:
    from nczarr_conformance.cli.common import version

    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {about}" for name, (_, about) in COMMANDS.items())
    return (f"nczarr-conformance {version()}: NCZarr reference reader/writer, converter, validator and "
            f"conformance suite\n\nusage: python -m nczarr_conformance COMMAND [ARGS...]\n\ncommands:\n{rows}\n\n"
            "python -m nczarr_conformance COMMAND --help: that command's options.\n"
            "In Python: import nczarr_conformance; help(nczarr_conformance).\n")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(usage())
        return 0
    if args[0] == "--version":
        from nczarr_conformance.cli.common import version

        sys.stdout.write(f"nczarr-conformance {version()}\n")
        return 0
    if args[0] not in COMMANDS:
        sys.stderr.write(f"python -m nczarr_conformance: no command {args[0]!r} "
                         f"(one of {', '.join(COMMANDS)})\n")
        return 2
    sys.argv[0] = args[0]  # argparse's prog in messages, as when run by name
    return run_command(args[0], args[1:])


if __name__ == "__main__":
    from nczarr_conformance.cli.ending import exit_process

    exit_process(main())
