"""The five commands' scripts ([project.scripts]) and their registry.

Each script runs its command's ``main`` and ends the process with the exit code through
:func:`~nczarr_conformance.cli.common.exit_process`, so the code a command returns is the one its
caller sees; ``main`` itself only returns it (tests call it in process). ``python -m
nczarr_conformance COMMAND`` (``__main__.py``) dispatches through this registry too.
"""
from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing's constant without importing typing: 4 ms of ``nczarr-dump -h``'s start
if TYPE_CHECKING:
    from typing import NoReturn

#: command name → (module under cli/, what it does); pyproject.toml's [project.scripts] names the same
COMMANDS = {
    "nc2nczarr": ("convert", "convert a netCDF file into an NCZarr or Zarr store (nccopy's flags)"),
    "nczarr-dump": ("dump", "print a store or netCDF file as CDL, as ncdump does, or as JSON"),
    "nczarr-check": ("check", "check a store against the NCZarr rules; predict which readers open it"),
    "nczarr-fix": ("fix", "repair what nczarr-check finds, verified against the readers at hand"),
    "nczarr-conformance": ("report", "run the writer x reader conformance matrix and render its report"),
}


def run_command(name: str, argv: list[str] | None = None) -> int:
    """The exit code of command ``name`` run on ``argv`` (sys.argv[1:] when None), in this process."""
    module = importlib.import_module(f"nczarr_conformance.cli.{COMMANDS[name][0]}")
    code: int = module.main(argv)
    return code


def _script(name: str) -> NoReturn:
    from nczarr_conformance.cli.ending import exit_process

    exit_process(run_command(name))


def nc2nczarr() -> NoReturn:
    _script("nc2nczarr")


def nczarr_dump() -> NoReturn:
    _script("nczarr-dump")


def nczarr_check() -> NoReturn:
    _script("nczarr-check")


def nczarr_fix() -> NoReturn:
    _script("nczarr-fix")


def nczarr_conformance() -> NoReturn:
    _script("nczarr-conformance")
