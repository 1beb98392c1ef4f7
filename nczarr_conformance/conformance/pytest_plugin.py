"""A pytest plugin (entry point ``pytest11``): another project's own ``pytest`` grades its reader or writer
against every conformance case, one test per case, with no test file of ours in its checkout::

    pytest --nczarr-reader='mytool dump --json {url}' --nczarr-caps=nczarr,attributes,groups

``--nczarr-reader``/``--nczarr-writer`` take a command exactly as ``nczarr-conformance report --reader`` does
(peers/command.py: placeholders, exit status, the model JSON); ``--nczarr-caps`` declares what it can do, which
chooses the cases as in the matrix, and ``--nczarr-cases`` picks some by id (globs). A reader test reads the store
our reference writer made of the case (for a corpus case, netcdf-c's own committed store); a writer test's store
is read by our reader. Each test is the
matrix's own cell (``matrix.one_cell``): it passes, is skipped with the matrix's reason, or fails with the
canonical differences worded by side (``render.sided``) and the command's stderr. Without these options the
plugin adds nothing, so installing this package changes no other project's test run.
"""
from __future__ import annotations

import fnmatch
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nczarr_conformance.conformance.cases import CASES, Case
from nczarr_conformance.conformance.matrix import Cell, one_cell
from nczarr_conformance.conformance.render import sided
from nczarr_conformance.peers.base import PEERS, Peer
from nczarr_conformance.peers.capabilities import ALL
from nczarr_conformance.peers.capabilities import parse as parse_caps
from nczarr_conformance.peers.command import CommandPeer
from nczarr_conformance.peers.corpus import CORPUS_CASES

OPTIONS = ("--nczarr-reader", "--nczarr-writer", "--nczarr-caps", "--nczarr-cases")
#: the id the graded implementation has in its tests' names and messages
GRADED = "graded"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nczarr", "NCZarr conformance (nczarr_conformance)")
    group.addoption("--nczarr-reader", metavar="CMD", help="a reader command: one test per case it reads")
    group.addoption("--nczarr-writer", metavar="CMD", help="a writer command: one test per case it writes")
    group.addoption("--nczarr-caps", metavar="CAP,…", default="all",
                    help="the capabilities it declares (nczarr-conformance report --list-caps)")
    group.addoption("--nczarr-cases", metavar="GLOB,…", default="",
                    help="only these cases (ids or glob patterns, as report --cases); default: every case")


def chosen_cases(patterns: str) -> list[Case]:
    """The cases whose id matches one of the comma-separated globs (all for none); a pattern matching no case
    is a usage error naming the ids, as ``report --cases`` says it."""
    wanted = [p.strip() for p in patterns.split(",") if p.strip()]
    if not wanted:
        return list(CASES)
    ids = [case.id for case in CASES]
    for pattern in wanted:
        if not any(fnmatch.fnmatchcase(i, pattern) for i in ids):
            raise pytest.UsageError(f"--nczarr-cases {pattern!r} matches no case; known: {', '.join(ids)}")
    return [case for case in CASES if any(fnmatch.fnmatchcase(case.id, p) for p in wanted)]


class CaseFailed(Exception):
    """A cell that deviates or fails: its text is the test's whole failure report."""


class CellItem(pytest.Item):
    """One case for the graded reader or writer: ``read[CASE]`` or ``write[CASE]``."""

    def __init__(self, *, case: Case, writer: Peer, reader: Peer, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case, self.writer, self.reader = case, writer, reader

    def runtest(self) -> None:
        with tempfile.TemporaryDirectory(prefix="nczarr-pytest-") as work:
            cell = one_cell(self.case, self.writer, self.reader, Path(work))
        if cell.status == "skipped":
            pytest.skip(cell.message)
        if cell.status != "pass":
            raise CaseFailed(failure_text(cell))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return Path(__file__), 0, f"nczarr conformance: {self.name}"


def failure_text(cell: Cell) -> str:
    """The canonical diff by side, as interop.html words it, then what the command said."""
    lines = [f"{cell.case}: {cell.writer} → {cell.reader} {cell.status}"]
    lines += [f"  {sided(d)}" for d in cell.differences]
    if cell.message:
        lines.append(f"  {cell.message}")
    if cell.detail.strip():
        lines += ["  stderr:", *(f"    {line}" for line in cell.detail.strip().splitlines()[-20:])]
    return "\n".join(lines)


class Cases(pytest.Collector):
    """The tests the options ask for (a collector of the session: there is no file to collect them from)."""

    def collect(self) -> Iterator[pytest.Item]:
        opt = self.config.getoption
        try:
            caps = parse_caps(opt("--nczarr-caps"), where="--nczarr-caps") if opt("--nczarr-caps") else ALL
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        cases = chosen_cases(opt("--nczarr-cases") or "")
        for option, side in (("--nczarr-reader", "read"), ("--nczarr-writer", "write")):
            command = opt(option)
            if not command:
                continue
            graded = CommandPeer(GRADED, caps=caps, source=option, reader=command if side == "read" else None,
                                 writer=command if side == "write" else None)
            for case in cases:
                if side == "read":
                    writer = PEERS["netcdf-c-corpus" if case.id in CORPUS_CASES else "ours"]
                    yield CellItem.from_parent(self, name=f"read[{case.id}]", case=case, writer=writer,
                                               reader=graded)
                elif case.id not in CORPUS_CASES:  # a corpus case is netcdf-c's committed store: nothing to write
                    yield CellItem.from_parent(self, name=f"write[{case.id}]", case=case, writer=graded,
                                               reader=PEERS["ours"])


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect, so that they choose among these tests too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if not (config.getoption("--nczarr-reader") or config.getoption("--nczarr-writer")):
        return
    items.extend(Cases.from_parent(session, name="nczarr-conformance").collect())
