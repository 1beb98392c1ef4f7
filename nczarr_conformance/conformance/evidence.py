"""The evidence kinds a known peer fault names: each a check, re-run on every matrix run, that the peer treats
our output (or the store ours reads) as it treats a reference's, so that a pinned fault cannot outlive the
behaviour it excuses (conformance/gate.py).

A known fault is data (conformance/known.py) and names its evidence by kind, with parameters::

    evidence = { kind = "same_as_writer", writer = "netcdf-c-4.10" }

Kinds register with ``@evidence_kind(NAME, PARAM=TYPE, …)``; a name registered twice is refused. A reference
writer is named by its id (``writer``) or by the flavor it writes (``flavor``: the run's implementation, not
ours, that declares it writes that layout), so a built-in fault can rest on a writer declared outside the
package without naming it. A reference that did not run here (not installed, or not part of the run) leaves
the evidence unchecked: it cannot be judged in this run.
"""
from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nczarr_conformance.conformance.cases import BY_ID
from nczarr_conformance.conformance.matrix import Cell, MatrixRun, _read_cell
from nczarr_conformance.errors import DuplicateIdError
from nczarr_conformance.flavor_names import WRITE_FLAVORS
from nczarr_conformance.peers.base import PEERS

#: a check of one cell of a run: None when the evidence holds, else what broke it
Evidence = Callable[[MatrixRun, Cell], "str | None"]


def is_ours(implementation: str) -> bool:
    return implementation == "ours" or implementation.startswith("ours-")


@dataclass(frozen=True)
class EvidenceKind:
    """A named check: ``params`` its parameters' types (``str`` or ``list``), ``make`` the check from them."""

    name: str
    params: dict[str, type]
    make: Callable[..., Evidence]
    doc: str


EVIDENCE: dict[str, EvidenceKind] = {}


def evidence_kind(name: str, **params: type) -> Callable[[Callable[..., Evidence]], Callable[..., Evidence]]:
    """Register ``make`` as the evidence kind ``name`` taking ``params`` (keyword arguments); a name twice is
    refused."""
    def add(make: Callable[..., Evidence]) -> Callable[..., Evidence]:
        if name in EVIDENCE:
            raise DuplicateIdError(f"evidence kind {name!r} registered twice: first by "
                                   f"{EVIDENCE[name].make.__module__}, again by {make.__module__}")
        EVIDENCE[name] = EvidenceKind(name, dict(params), make, (make.__doc__ or "").strip().split("\n")[0])
        return make
    return add


def make_evidence(spec: dict[str, Any]) -> Evidence:
    """The check a data entry's ``evidence`` table names; ValueError (one line) for an unknown kind, an unknown,
    missing or mistyped parameter."""
    kind = spec.get("kind")
    if not isinstance(kind, str) or kind not in EVIDENCE:
        raise ValueError(f"unknown evidence kind {kind!r}; known: {', '.join(sorted(EVIDENCE))}")
    entry = EVIDENCE[kind]
    params = {k: v for k, v in spec.items() if k != "kind"}
    for key, value in params.items():
        if key not in entry.params:
            raise ValueError(f"evidence {kind}: unknown parameter {key!r}; known: {', '.join(entry.params)}")
        wanted = entry.params[key]
        fits = (isinstance(value, list) and all(isinstance(v, str) for v in value)) if wanted is list else \
            isinstance(value, wanted)
        if not fits:
            raise ValueError(f"evidence {kind}: {key} must be {'a list of strings' if wanted is list else 'a string'}")
    return entry.make(**params)


# ---- the reference a kind compares with ---------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    """A reference writer: by id, or by the flavor it writes (any implementation of the run but ours)."""

    writer: str | None
    flavor: str | None

    @classmethod
    def of(cls, kind: str, writer: str | None, flavor: str | None) -> Reference:
        if (writer is None) == (flavor is None):
            raise ValueError(f"evidence {kind}: name the reference by writer or by flavor (one of them)")
        if flavor is not None and flavor not in WRITE_FLAVORS:
            raise ValueError(f"evidence {kind}: unknown flavor {flavor!r}; known: {', '.join(WRITE_FLAVORS)}")
        return cls(writer, flavor)

    def resolve(self, run: MatrixRun) -> str | None:
        if self.writer is not None:
            return self.writer
        return next((i["id"] for i in run.implementations if not is_ours(i["id"]) and i["id"] in PEERS
                     and PEERS[i["id"]].flavor == self.flavor), None)


def cells(run: MatrixRun) -> dict[tuple[str, str, str], Cell]:
    return {(c.case, c.writer, c.reader): c for c in run.cells}


def strip(cell: Cell) -> tuple[str, tuple[str, ...], str]:
    # messages are cut at 300 characters (matrix._one_line), so a longer writer id in a path moves the cut
    return cell.status, tuple(cell.differences), re.sub(rf"/{re.escape(cell.writer)}(?=[/#])", "/<writer>",
                                                          cell.message)[:200]


def _unavailable(run: MatrixRun, reference: str | None, ref: Cell | None) -> bool:
    """The reference peer did not run here: not installed (its cells skipped), or not part of the run at all
    (declared in nczarr-conformance.toml and the run had no such config, or no implementation of the run writes
    the flavor named), so its evidence cannot be checked in this run. The suite's run has every peer
    (tests/conformance/test_report.py), so there the evidence is always checked."""
    if reference is None:
        return True
    if ref is None:
        return reference not in {i["id"] for i in run.implementations}
    return ref.status == "skipped"


def _seen(ref: Cell | None) -> str:
    return "nothing" if ref is None else f"{ref.status} {ref.differences[:2] or ref.message[:120]}"


def _writer_check(kind: str, writer: str | None, flavor: str | None,
                  differs: Callable[[Cell, Cell], bool], says: str) -> Evidence:
    """A check of the reference writer's cell of the same case and reader: ``differs(ref, ours)`` breaks it."""
    reference = Reference.of(kind, writer, flavor)

    def check(run: MatrixRun, cell: Cell) -> str | None:
        name = reference.resolve(run)
        ref = cells(run).get((cell.case, name, cell.reader)) if name is not None else None
        if _unavailable(run, name, ref):
            return None
        if ref is None or differs(ref, cell):
            return says.format(reference=name, reader=cell.reader, seen=_seen(ref))
        return None
    return check


# ---- the kinds -----------------------------------------------------------------------------------------


@evidence_kind("same_as_writer", writer=str, flavor=str)
def same_as_writer(writer: str | None = None, flavor: str | None = None) -> Evidence:
    """The reader treats the reference writer's output of the case exactly as ours (same status, same text)."""
    return _writer_check("same_as_writer", writer, flavor, lambda ref, cell: strip(ref) != strip(cell),
                         "{reference} → {reader} is not the same as ours: {seen}")


@evidence_kind("within_writer", writer=str, flavor=str)
def within_writer(writer: str | None = None, flavor: str | None = None) -> Evidence:
    """The reader reads the reference writer's output of the case no better: its status, and every difference
    of ours among its own (netcdf-c 4.9.0 writes _NCZARR_ATTR on more objects than ours, which 4.10.1 shows)."""
    def worse(ref: Cell, cell: Cell) -> bool:
        return ref.status != cell.status or not set(cell.differences) <= set(ref.differences)
    return _writer_check("within_writer", writer, flavor, worse,
                         "{reference} → {reader} does not show every difference of ours: {seen}")


@evidence_kind("same_paths_as_writer", writer=str, flavor=str)
def same_paths_as_writer(writer: str | None = None, flavor: str | None = None) -> Evidence:
    """Like same_as_writer, but only each difference's path and intended value: the values netcdf-c 4.9.0 shows
    past the end of a compressed chunk are uninitialised memory (they change from run to run)."""
    def left(c: Cell) -> list[str]:
        return [d.split(" != ", 1)[0] for d in c.differences]
    return _writer_check("same_paths_as_writer", writer, flavor,
                         lambda ref, cell: ref.status != cell.status or left(ref) != left(cell),
                         "{reference} → {reader} is not the same as ours")


@evidence_kind("same_errors_as_writer", writer=str, flavor=str)
def same_errors_as_writer(writer: str | None = None, flavor: str | None = None) -> Evidence:
    """Like same_as_writer, but the reader's messages as a set of distinct lines: GDAL reports a filter it lacks
    once per metadata read, so once with .zmetadata and twice without it."""
    def seen(c: Cell) -> tuple[str, tuple[str, ...], frozenset[str]]:
        return c.status, tuple(c.differences), frozenset(c.message.split("; "))
    return _writer_check("same_errors_as_writer", writer, flavor, lambda ref, cell: seen(ref) != seen(cell),
                         "{reference} → {reader} is not the same as ours: {seen}")


@evidence_kind("shows_410_keys_like", writer=str, flavor=str)
def shows_410_keys_like(writer: str | None = None, flavor: str | None = None) -> Evidence:
    """Both outputs deviate in the reader, which shows the same 4.10-layout keys (_nczarr_*) as attributes."""
    def keys(c: Cell) -> list[str]:
        return [d for d in c.differences if "/attributes/_nczarr_" in d and d.endswith(": only in second")]
    return _writer_check("shows_410_keys_like", writer, flavor,
                         lambda ref, cell: ref.status != cell.status or not keys(cell) or keys(ref) != keys(cell),
                         "{reference} → {reader} does not show the same _nczarr_ keys as attributes")


@evidence_kind("same_as_reader", reader=str)
def same_as_reader(reader: str) -> Evidence:
    """The reference reader reads the same store exactly as our reader does (same status, same differences)."""
    def check(run: MatrixRun, cell: Cell) -> str | None:
        ref = cells(run).get((cell.case, cell.writer, reader))
        if _unavailable(run, reader, ref):
            return None
        if ref is None or (ref.status, ref.differences) != (cell.status, cell.differences):
            return f"{cell.writer} → {reader} does not read it as ours does: {_seen(ref)}"
        return None
    return check


@evidence_kind("message_is", text=str)
def message_is(text: str) -> Evidence:
    """The peer's own error text, exactly."""
    def check(run: MatrixRun, cell: Cell) -> str | None:
        return None if cell.message == text else f"message is {cell.message[:200]!r}, not {text!r}"
    return check


def _without_keys(doc: dict[str, object], names: tuple[str, ...]) -> dict[str, object]:
    return {k: v for k, v in doc.items() if k not in names}


@evidence_kind("ignores_keys", keys=list)
def ignores_keys(keys: list[str]) -> Evidence:
    """The reader reads a copy of the store with ``keys`` deleted from every ``.zgroup`` and ``.zarray`` (and
    their ``.zmetadata`` entries) exactly as it read the store: it does not know those keys, so it reads the
    layout as pure Zarr, and so it would read netcdf-c's own output of that layout."""
    names = tuple(keys)

    def check(run: MatrixRun, cell: Cell) -> str | None:
        url = run.stores.get((cell.case, cell.writer))
        if url is None:
            return f"no store of {cell.writer} for {cell.case}"
        copy = Path(run.workdir) / "evidence" / cell.case / cell.writer
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(url, copy)
        for path in [*copy.rglob(".zgroup"), *copy.rglob(".zarray")]:
            path.write_text(json.dumps(_without_keys(json.loads(path.read_text()), names)))
        consolidated = copy / ".zmetadata"
        if consolidated.exists():
            doc = json.loads(consolidated.read_text())
            doc["metadata"] = {k: _without_keys(v, names) if k.endswith((".zgroup", ".zarray")) else v
                               for k, v in doc["metadata"].items()}
            consolidated.write_text(json.dumps(doc))
        case = BY_ID[cell.case]
        again, _seen_model = _read_cell(case, case.model(), PEERS[cell.writer], PEERS[cell.reader], str(copy),
                                        Path(run.workdir))
        again.message = again.message.replace("/evidence/", "/")
        if strip(again) != strip(cell):
            return (f"{cell.reader} reads the store without {', '.join(names)} otherwise: {again.status} "
                    f"{again.differences[:2] or again.message[:120]}")
        return None
    return check


__all__ = ["EVIDENCE", "Evidence", "EvidenceKind", "cells", "evidence_kind", "is_ours", "make_evidence", "strip"]
