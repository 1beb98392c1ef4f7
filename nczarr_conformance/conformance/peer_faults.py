"""Faults of an outside writer's own cells, as data beside its adapter (``adapters/NAME/faults.toml``).

Each entry names the cells it covers (a writer, a case, the readers) and what they show exactly: the status,
the canonical differences, or the one-line message of a failing call. A test grades them strictly
(tests/conformance/test_reference_writers.py): a listed cell that shows anything else, a pass included (the
peer fixed it: drop the entry), fails; so the list cannot outlive the behaviour it records. They describe
cells where the *peer* is wrong against the case (values, attributes, a crash), not our code: ours has no
known faults, only fixes to make.

File format (TOML)::

    [[fault]]
    writer = "mytool-json"                      # the implementation id of nczarr-conformance.toml
    case = "scalar"
    readers = ["ours", "zarr-python", "xarray"] # one entry for every reader that shows it alike
    status = "deviates"                         # deviates | fails
    differences = ["/arrays//d[0]: 2.5 != 9.969209968386869e+36"]   # deviates: every difference, in order
    message = ""                                # fails: the cell's one-line message
    why = "what the peer does wrong, and the evidence"

Kept in a loader of its own (the standard library's ``tomllib``) so that the gate's ``KNOWN`` list, moving
into data beside each implementation's declaration, can read these files too.
"""
from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STATUSES = ("deviates", "fails")


@dataclass(frozen=True)
class PeerFault:
    """One cell's known, exact outcome: a peer's fault."""

    writer: str
    reader: str
    case: str
    status: str
    differences: tuple[str, ...]
    message: str
    why: str

    @property
    def key(self) -> tuple[str, str, str]:
        """(case, writer, reader): the matrix's key of a cell."""
        return self.case, self.writer, self.reader

    def mismatch(self, status: str, differences: Iterable[str], message: str) -> str | None:
        """How a cell's outcome differs from this record, or None when it is exactly the fault recorded."""
        seen = (status, tuple(differences), message)
        want = (self.status, self.differences, self.message)
        if seen == want:
            return None
        if status == "pass":
            return f"{'/'.join(self.key)}: passes now (the peer fixed it?): remove the known fault"
        return f"{'/'.join(self.key)}: expected {want!r}, saw {seen!r}"


def load(path: Path) -> list[PeerFault]:
    """The faults of one ``faults.toml``; a malformed entry is refused (ValueError) naming the file and entry."""
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    out: list[PeerFault] = []
    for n, entry in enumerate(doc.get("fault", []), 1):
        where = f"{path}: fault {n}"
        out.extend(_entry(entry, where))
    return out


def _entry(entry: dict[str, Any], where: str) -> list[PeerFault]:
    unknown = set(entry) - {"writer", "readers", "case", "status", "differences", "message", "why"}
    if unknown:
        raise ValueError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    status = entry.get("status")
    if status not in STATUSES:
        raise ValueError(f"{where}: status must be one of {', '.join(STATUSES)}, not {status!r}")
    if not entry.get("why"):
        raise ValueError(f"{where}: a known fault says why (key 'why')")
    return [PeerFault(str(entry["writer"]), str(reader), str(entry["case"]), status,
                      tuple(str(d) for d in entry.get("differences", [])), str(entry.get("message", "")),
                      str(entry["why"]))
            for reader in entry["readers"]]


def load_all(paths: Iterable[Path]) -> dict[tuple[str, str, str], PeerFault]:
    """Every fault of ``paths`` by (case, writer, reader); a cell listed twice is refused (ValueError)."""
    found: dict[tuple[str, str, str], PeerFault] = {}
    for path in paths:
        for fault in load(path):
            if fault.key in found:
                raise ValueError(f"{path}: {'/'.join(fault.key)} is listed twice")
            found[fault.key] = fault
    return found
