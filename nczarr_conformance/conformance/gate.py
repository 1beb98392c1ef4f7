"""The gate on our own implementation: ours must do at least as well as any peer, in every cell.

Two sides, each judged under the exact comparison the peer's passing cell made:

- writer: our output of a case deviates or fails in a reader that reads another
  writer's output of the same case right (compared under that other cell's view,
  so a pure-Zarr writer's pass is not held against ours on netCDF types), the other
  writer writing the Zarr format ours writes (``writes-zarr-v3`` or not: a reader
  that reads no v3 or v3 badly is not held against our v3 writer by a v2 writer's pass);
- reader: our reader deviates or fails on a store that another reader reads right
  (again under that reader's view: tensorstore's arrays-only pass says nothing
  about attributes).

A violation that is a peer's fault is listed in ``KNOWN`` with the evidence, and
the evidence is re-checked on every run (``explain``): a known entry whose
evidence no longer holds, or that no longer matches a violation, is itself an
error, so the list cannot outlive the behaviour it excuses.
"""
from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nczarr_conformance.conformance.cases import BY_ID
from nczarr_conformance.conformance.matrix import (
    Cell,
    MatrixRun,
    _read_cell,
    compare,
    view_params,
)
from nczarr_conformance.peers.base import PEERS

OUR_READER = "ours"


def is_ours(implementation: str) -> bool:
    return implementation == "ours" or implementation.startswith("ours-")


def same_format(writer: str, other: str) -> bool:
    """Whether the two writers write one Zarr format, as their capabilities say (``writes-zarr-v3``), and both
    or neither write references (``writes-references``): our reference writer is held to the other reference
    writers' passes, not to a store writer's."""
    def kind(peer_id: str) -> tuple[bool, bool]:
        caps = PEERS[peer_id].capabilities
        return "writes-zarr-v3" in caps, "writes-references" in caps
    return kind(writer) == kind(other)


@dataclass(frozen=True)
class Violation:
    side: str  # writer | reader
    case: str
    writer: str
    reader: str
    status: str
    passing: tuple[str, ...]  # the peer writers (writer side) or readers (reader side) whose cell passes
    what: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.side, self.case, self.writer, self.reader

    def line(self) -> str:
        other = "writer" if self.side == "writer" else "reader"
        return (f"{self.case}: {self.writer} → {self.reader} {self.status} where {other} "
                f"{', '.join(self.passing)} passes: {self.what}")


Evidence = Callable[[MatrixRun, Cell], "str | None"]


@dataclass(frozen=True)
class Known:
    """A violation that is a peer's fault: why, and a check of the evidence on the run itself."""
    side: str
    case: str
    writer: str
    reader: str
    why: str
    evidence: Evidence

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.side, self.case, self.writer, self.reader


def _cells(run: MatrixRun) -> dict[tuple[str, str, str], Cell]:
    return {(c.case, c.writer, c.reader): c for c in run.cells}


def _strip(cell: Cell) -> tuple[str, tuple[str, ...], str]:
    # messages are cut at 300 characters (matrix._one_line), so a longer writer id in a path moves the cut
    return cell.status, tuple(cell.differences), re.sub(rf"/{re.escape(cell.writer)}(?=[/#])", "/<writer>",
                                                           cell.message)[:200]


def _unavailable(run: MatrixRun, reference: str, ref: Cell | None) -> bool:
    """The reference peer did not run here: not installed (its cells skipped), or not part of the run at all
    (declared in nczarr-conformance.toml, as netcdf-c 4.9.0's tools are, and the run had no such config), so
    its evidence cannot be checked in this run. The suite's run has every peer (tests/conformance/test_report.py),
    so there the evidence is always checked."""
    if ref is None:
        return reference not in {i["id"] for i in run.implementations}
    return ref.status == "skipped"


def same_as_writer(reference: str) -> Evidence:
    """The reader treats the reference writer's output of the case exactly as ours (same status, same text)."""
    def check(run: MatrixRun, cell: Cell) -> str | None:
        ref = _cells(run).get((cell.case, reference, cell.reader))
        if _unavailable(run, reference, ref):
            return None
        if ref is None or _strip(ref) != _strip(cell):
            seen = "nothing" if ref is None else f"{ref.status} {ref.differences[:2] or ref.message[:120]}"
            return f"{reference} → {cell.reader} is not the same as ours: {seen}"
        return None
    return check


def within_writer(reference: str) -> Evidence:
    """The reader reads the reference writer's output of the case no better: its status, and every difference
    of ours among its own (netcdf-c 4.9.0 writes _NCZARR_ATTR on more objects than ours, which 4.10.1 shows)."""
    def check(run: MatrixRun, cell: Cell) -> str | None:
        ref = _cells(run).get((cell.case, reference, cell.reader))
        if _unavailable(run, reference, ref):
            return None
        if ref is None or ref.status != cell.status or not set(cell.differences) <= set(ref.differences):
            seen = "nothing" if ref is None else f"{ref.status} {ref.differences[:2] or ref.message[:120]}"
            return f"{reference} → {cell.reader} does not show every difference of ours: {seen}"
        return None
    return check


def same_as_reader(reference: str) -> Evidence:
    """The reference reader reads the same store exactly as our reader does (same status, same differences)."""
    def check(run: MatrixRun, cell: Cell) -> str | None:
        ref = _cells(run).get((cell.case, cell.writer, reference))
        if _unavailable(run, reference, ref):
            return None
        if ref is None or (ref.status, ref.differences) != (cell.status, cell.differences):
            seen = "nothing" if ref is None else f"{ref.status} {ref.differences[:2] or ref.message[:120]}"
            return f"{cell.writer} → {reference} does not read it as ours does: {seen}"
        return None
    return check


def message_is(text: str) -> Evidence:
    """The peer's own error text, exactly."""
    def check(run: MatrixRun, cell: Cell) -> str | None:
        return None if cell.message == text else f"message is {cell.message[:200]!r}, not {text!r}"
    return check


def violations(run: MatrixRun) -> list[Violation]:
    """Every cell where ours does worse than a peer under the peer's own comparison."""
    cells = _cells(run)
    cases = list(dict.fromkeys(c.case for c in run.cells))
    writers = list(dict.fromkeys(c.writer for c in run.cells))
    readers = list(dict.fromkeys(c.reader for c in run.cells))
    found: list[Violation] = []
    for case in cases:
        intended = BY_ID[case].model()
        for ours in [w for w in writers if is_ours(w)]:
            for reader in readers:
                cell = cells.get((case, ours, reader))
                if cell is None or cell.status not in ("deviates", "fails"):
                    continue
                passing = []
                for other in [w for w in writers if not is_ours(w) and same_format(ours, w)]:
                    peer_cell = cells.get((case, other, reader))
                    if peer_cell is None or peer_cell.status != "pass":
                        continue
                    if cell.status == "fails" or compare(intended, run.seen[(case, ours, reader)],
                                                         view_params(PEERS[other], PEERS[reader])):
                        passing.append(other)
                if passing:
                    found.append(Violation("writer", case, ours, reader, cell.status, tuple(passing),
                                           "; ".join(cell.differences[:3]) or cell.message))
        for writer in writers:
            cell = cells.get((case, writer, OUR_READER))
            if cell is None or cell.status not in ("deviates", "fails"):
                continue
            passing = []
            for reader in [r for r in readers if r != OUR_READER]:
                peer_cell = cells.get((case, writer, reader))
                if peer_cell is None or peer_cell.status != "pass":
                    continue
                if cell.status == "fails" or compare(intended, run.seen[(case, writer, OUR_READER)],
                                                     view_params(PEERS[writer], PEERS[reader])):
                    passing.append(reader)
            if passing:
                found.append(Violation("reader", case, writer, OUR_READER, cell.status, tuple(passing),
                                       "; ".join(cell.differences[:3]) or cell.message))
    return found


def known_faults(run: MatrixRun, known: list[Known] | None = None) -> dict[tuple[str, str, str], str]:
    """(case, writer, reader) → why, for each cell of the run that a listed peer fault excuses, its
    evidence holding: what the reports and the JUnit file mark as a known peer fault (an expected
    failure) rather than as a failure."""
    known = KNOWN if known is None else known
    by_key = {k.key: k for k in known}
    cells = _cells(run)
    found: dict[tuple[str, str, str], str] = {}
    for v in violations(run):
        entry = by_key.get(v.key)
        if entry is not None and not entry.evidence(run, cells[(v.case, v.writer, v.reader)]):
            found[(v.case, v.writer, v.reader)] = entry.why
    return found


def explain(run: MatrixRun, known: list[Known] | None = None, *, complete: bool = True) -> tuple[list[str], list[str]]:
    """(errors, excused): each violation not excused by a known disagreement whose evidence holds is an error;
    so is a known entry that matches no violation (the peer changed: drop the entry). ``complete=False``
    (a run of some cases or some peers: ``--cases``/``--peers``): the evidence may name a peer or a cell
    that did not run, so a listed entry is neither checked nor found stale; unlisted violations still count."""
    known = KNOWN if known is None else known
    by_key = {k.key: k for k in known}
    cells = _cells(run)
    errors: list[str] = []
    excused: list[str] = []
    matched: set[tuple[str, str, str, str]] = set()
    for v in violations(run):
        entry = by_key.get(v.key)
        if entry is None:
            errors.append(f"{v.side} gate: {v.line()}")
            continue
        matched.add(v.key)
        problem = entry.evidence(run, cells[(v.case, v.writer, v.reader)]) if complete else None
        if problem:
            errors.append(f"{v.side} gate: {v.line()} — listed as a peer's fault, but the evidence fails: {problem}")
        else:
            excused.append(f"{v.side}: {v.case}: {v.writer} → {v.reader}: {entry.why}")
    # a known entry is stale only where its cell and every peer it is judged against ran
    ran = {(c.case, c.writer, c.reader) for c in run.cells if c.status != "skipped"}
    if not complete or any(not i["available"] for i in run.implementations):
        ran = set()  # with a peer missing, a violation can vanish because its passing peer did not run
    for k in known:
        if k.key not in matched and (k.case, k.writer, k.reader) in ran:
            errors.append(f"known disagreement no longer seen (remove it): {k.side} {k.case}: {k.writer} → {k.reader}")
    return errors, excused


def same_paths_as_writer(reference: str) -> Evidence:
    """Like same_as_writer, but only each difference's path and intended value: the values netcdf-c 4.9.0 shows
    past the end of a compressed chunk are uninitialised memory (they change from run to run)."""
    def check(run: MatrixRun, cell: Cell) -> str | None:
        ref = _cells(run).get((cell.case, reference, cell.reader))

        def left(c: Cell) -> list[str]:
            return [d.split(" != ", 1)[0] for d in c.differences]
        if _unavailable(run, reference, ref):
            return None
        if ref is None or ref.status != cell.status or left(ref) != left(cell):
            return f"{reference} → {cell.reader} is not the same as ours"
        return None
    return check


def same_errors_as_writer(reference: str) -> Evidence:
    """Like same_as_writer, but the reader's messages as a set of distinct lines: GDAL reports a filter it lacks
    once per metadata read, so once with .zmetadata and twice without it."""
    def check(run: MatrixRun, cell: Cell) -> str | None:
        ref = _cells(run).get((cell.case, reference, cell.reader))

        def seen(c: Cell) -> tuple[str, tuple[str, ...], frozenset[str]]:
            return c.status, tuple(c.differences), frozenset(c.message.split("; "))
        if _unavailable(run, reference, ref):
            return None
        if ref is None or seen(ref) != seen(cell):
            found = "nothing" if ref is None else f"{ref.status} {ref.differences[:2] or ref.message[:120]}"
            return f"{reference} → {cell.reader} is not the same as ours: {found}"
        return None
    return check


def shows_410_keys_like(reference: str) -> Evidence:
    """Both outputs deviate in the reader, which shows the same 4.10-layout keys (_nczarr_*) as attributes."""
    def check(run: MatrixRun, cell: Cell) -> str | None:
        ref = _cells(run).get((cell.case, reference, cell.reader))

        def keys(c: Cell) -> list[str]:
            return [d for d in c.differences if "/attributes/_nczarr_" in d and d.endswith(": only in second")]
        if _unavailable(run, reference, ref):
            return None
        if ref is None or ref.status != cell.status or not keys(cell) or keys(ref) != keys(cell):
            return f"{reference} → {cell.reader} does not show the same _nczarr_ keys as attributes"
        return None
    return check


#: the keys netcdf-c 4.9.1 introduced in .zgroup and .zarray (4.9.0 knows their upper-case names only)
KEYS_491 = ("_nczarr_superblock", "_nczarr_group", "_nczarr_array")


def _without_keys(doc: dict[str, object], names: tuple[str, ...]) -> dict[str, object]:
    return {k: v for k, v in doc.items() if k not in names}


def ignores_keys(names: tuple[str, ...]) -> Evidence:
    """The reader reads a copy of the store with ``names`` deleted from every ``.zgroup`` and ``.zarray`` (and
    their ``.zmetadata`` entries) exactly as it read the store: it does not know those keys, so it reads the
    layout as pure Zarr, and so it would read netcdf-c's own output of that layout."""
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
        again, _seen = _read_cell(case, case.model(), PEERS[cell.writer], PEERS[cell.reader], str(copy),
                                  Path(run.workdir))
        again.message = again.message.replace("/evidence/", "/")
        if _strip(again) != _strip(cell):
            return (f"{cell.reader} reads the store without {', '.join(names)} otherwise: {again.status} "
                    f"{again.differences[:2] or again.message[:120]}")
        return None
    return check


def _entries(side: str, cases: tuple[str, ...], writer: str, reader: str, why: str,
             evidence: Evidence) -> list[Known]:
    return [Known(side, case, writer, reader, why, evidence) for case in cases]


_LAYOUT_410 = ("numeric-types", "char-var", "fill-partial", "default-fill", "big-endian",
               "shuffle-zlib", "char-attr-json-object", "char-attr-text", "typed-attrs")
_LAYOUT_492_IN_490 = (*_LAYOUT_410, "groups-nested", "char-attr-json-number")

#: the readers that read through Debian's netcdf-c 4.9.0 (both declared in nczarr-conformance.toml) → how a
#: known fault names it: its ncdump (adapters/netcdf-c-4.9), and NCO's ncks, which links that netcdf-c. A fault
#: of 4.9.0's reading is listed once for the family, with the same evidence for each.
NETCDF_C_490_READERS = {"netcdf-c-4.9": "ncdump", "ncks": "ncks"}
#: cases where a family reader reads no writer's output right, for a fault of its own beyond 4.9.0's, so that
#: ours reading as badly there is no violation to excuse: ncks' NcML prints doubles with too few digits
#: (numeric-types, default-fill), and ncks reads no char variable right (char-var: it crashes on >S1 and shows
#: 4.9.0's own <U1 padded wrong)
_NO_WRITER_PASSES = {"ncks": ("numeric-types", "char-var", "default-fill")}


def _family_entries(cases: tuple[str, ...], writer: str, why: str, evidence: Evidence) -> list[Known]:
    """One writer-side known fault of netcdf-c 4.9.0 for each reader of the family: ``why`` names the reader
    where it says ``{reader}``."""
    return [Known("writer", case, writer, reader, why.format(reader=name), evidence)
            for reader, name in NETCDF_C_490_READERS.items()
            for case in cases if case not in _NO_WRITER_PASSES.get(reader, ())]


KNOWN: list[Known] = [
    # netcdf-c 4.9.0 predates the 4.10 layout (lower-case _nczarr_* keys in .zattrs, >S1 char): it shows the keys
    # as attributes and crashes on >S1 — on netcdf-c 4.10's own output exactly as on ours.
    *_entries("writer", _LAYOUT_410, "ours", "netcdf-c-4.9",
              "netcdf-c 4.9.0 predates the 4.10 layout; it reads netcdf-c 4.10's output of this case identically",
              same_as_writer("netcdf-c-4.10")),
    # 4.9.0 shows the same keys; the rest differs because netcdf-c 4.10 puts _ARRAY_DIMENSIONS on /g1/w against
    # nczarr.md "XArray" (rules X.dims), where 4.9.0 then finds the names ours leaves for NCZarr to carry
    *_entries("writer", ("groups-nested",), "ours", "netcdf-c-4.9",
              "netcdf-c 4.9.0 predates the 4.10 layout; it shows netcdf-c 4.10's _nczarr_* keys the same way",
              shows_410_keys_like("netcdf-c-4.10")),
    # netcdf-c 4.9.0 knows the 4.8–4.9.0 keys (_NCZARR_*) only: it reads the 4.9.1–4.9.2 layout (_nczarr_* in
    # .zgroup/.zarray) as pure Zarr, _nczarr_attr shown as text, attribute types guessed, and crashes on its >S1
    # char and |Sn strings as on every NCZarr char and string; evidence: the store without those keys reads the same.
    *_family_entries(_LAYOUT_492_IN_490, "ours-nczarr-2",
                     "{reader} reads through netcdf-c 4.9.0, which predates the 4.9.1 keys; it reads the store "
                     "with them deleted identically", ignores_keys(KEYS_491)),
    # what the 4.10 layout meets in these readers, the 4.9.1–4.9.2 layout meets alike (same dtypes, same codecs)
    *[k for r in ("zarr-python", "xarray", "xarray-datatree", "zarr-python-3.4") for k in _entries(
        "writer", ("char-var",), "ours-nczarr-2", r, "zarr-python 3.1 has no >S1 dtype (Appendix E's char, which "
        "netcdf-c needs); it refuses netcdf-c 4.10's output of this case identically",
        same_as_writer("netcdf-c-4.10"))],
    *_entries("writer", ("shuffle-zlib",), "ours-nczarr-2", "gdal",
              "GDAL 3.6 has no shuffle filter; it drops netcdf-c 4.10's output of this case identically",
              same_errors_as_writer("netcdf-c-4.10")),
    *_entries("writer", ("shuffle-zlib",), "ours-nczarr-2", "tensorstore",
              "TensorStore's zarr driver refuses a filters list; it refuses netcdf-c 4.10's output identically",
              same_as_writer("netcdf-c-4.10")),
    # netcdf-c 4.10.1 no longer reads the 4.8–4.9.0 layout it wrote itself (<U1 char, upper-case keys).
    *_entries("writer", ("char-var", "typed-attrs"), "ours-nczarr-2-upper", "netcdf-c-4.10",
              "netcdf-c 4.10.1 mis-reads the 4.8–4.9.0 layout; it reads netcdf-c 4.9.0's output of this case "
              "identically", same_as_writer("netcdf-c-4.9")),
    *_entries("writer", ("groups-nested",), "ours-nczarr-2-upper", "netcdf-c-4.10",
              "netcdf-c 4.10.1 mis-reads the 4.8–4.9.0 layout; it reads netcdf-c 4.9.0's output of this case "
              "with every difference of ours (and _NCZARR_ATTR shown on more objects)", within_writer("netcdf-c-4.9")),
    # netcdf-c 4.10.1 does not take the 4.8–4.9.0 layout's upper-case _NCZARR_ATTR for its own key and shows it as
    # a user attribute (the matrix's netcdf-c reader keeps the reserved names netcdf-c shows: issue 34), on
    # netcdf-c 4.9.0's own output as on ours; 4.9.0 needs the key for its attribute types. Ours writes it only
    # where an object has attributes, so 4.10.1 shows it on fewer objects of ours than of 4.9.0's.
    *_entries("writer", ("fill-partial", "char-attr-json-number", "char-attr-json-object", "char-attr-text"),
              "ours-nczarr-2-upper", "netcdf-c-4.10",
              "netcdf-c 4.10.1 shows the 4.8–4.9.0 layout's _NCZARR_ATTR as a user attribute; it shows it on "
              "netcdf-c 4.9.0's output of this case too, with every other difference of ours",
              within_writer("netcdf-c-4.9")),
    # zarr-python 3.1 and 3.4 (nczarr-conformance.toml) / xarray refuse >S1 (zarr-python 2.18 reads it), the char
    # dtype nczarr.md Appendix E prescribes and netcdf-c needs (it reads |S1 as a string): no char dtype serves
    # both, nczarr-check warns (NCZ-INTEROP-ZARR-CHAR) and nc2nczarr --char-as=S1 writes |S1; our pure-Zarr flavor
    # writes |S1 and passes there.
    *[k for r in ("zarr-python", "xarray", "xarray-datatree", "zarr-python-3.4") for k in _entries(
        "writer", ("char-var",), "ours", r, "zarr-python 3.1 has no >S1 dtype (Appendix E's char, which netcdf-c "
        "needs); it refuses netcdf-c 4.10's output of this case identically", same_as_writer("netcdf-c-4.10"))],
    *[k for r in ("zarr-python", "xarray", "xarray-datatree", "zarr-python-2.18", "zarr-python-3.4")
      for k in _entries("writer", ("char-var",), "ours-nczarr-2-upper", r, "netcdf-c 4.9.0's <U1 char holds one "
        "byte per item, not four: zarr-python refuses netcdf-c 4.9.0's output of this case identically",
        same_as_writer("netcdf-c-4.9"))],
    *_entries("writer", ("char-var",), "ours-zarr", "netcdf-c-4.9",
              "netcdf-c 4.9.0 crashes on >S1 char; it crashes identically on netcdf-c 4.10's output",
              same_as_writer("netcdf-c-4.10")),
    *_entries("writer", ("char-var",), "ours-zarr", "netcdf-c-4.10",
              "netcdf-c 4.10.1 reads a pure-Zarr char array's NUL padding as empty strings; it reads zarr-python's "
              "output of this case identically", same_as_writer("zarr-python")),
    *_entries("writer", ("scalar",), "ours-zarr", "netcdf-c-4.10",
              "netcdf-c 4.10.1 does not show Zarr arrays of shape [] (netcdf-c issue #3108); zarr-python's output "
              "of this case is read identically", same_as_writer("zarr-python")),
    *_family_entries(("big-endian",), "ours-zarr",
                     "{reader} reads through netcdf-c 4.9.0, which ignores a pure-Zarr dtype's byte order; it reads "
                     "zarr-python's output identically", same_as_writer("zarr-python")),
    *_family_entries(("shuffle-zlib",), "ours-zarr",
                     "{reader} reads through Debian's netcdf-c 4.9.0, which has no codecs: it shows zlib-compressed "
                     "bytes as data, as for zarr-python's output", same_paths_as_writer("zarr-python")),
    *_entries("writer", ("shuffle-zlib",), "ours", "gdal",
              "GDAL 3.6 has no shuffle filter; it drops netcdf-c 4.10's output of this case identically",
              same_errors_as_writer("netcdf-c-4.10")),
    *_entries("writer", ("shuffle-zlib",), "ours-zarr", "gdal",
              "GDAL 3.6 has no shuffle filter; it drops zarr-python's output of this case identically",
              same_errors_as_writer("zarr-python")),
    *_entries("writer", ("shuffle-zlib",), "ours", "tensorstore",
              "TensorStore's zarr driver refuses a filters list; it refuses netcdf-c 4.10's output identically",
              same_as_writer("netcdf-c-4.10")),
    *_entries("writer", ("shuffle-zlib",), "ours-zarr", "tensorstore",
              "TensorStore's zarr driver refuses a filters list; it refuses zarr-python's output identically",
              same_as_writer("zarr-python")),
    # char "42": ours writes the text (lossless default), netcdf-c 4.10 the JSON number 42; 4.9.0 shows the same
    # _nczarr_* keys of the 4.10 layout as attributes on both (and, on 4.10's, the number as a byte)
    *_entries("writer", ("char-attr-json-number",), "ours", "netcdf-c-4.9",
              "netcdf-c 4.9.0 predates the 4.10 layout; it shows netcdf-c 4.10's _nczarr_* keys the same way",
              shows_410_keys_like("netcdf-c-4.10")),
    # NCO's ncks, a command adapter (nczarr-conformance.toml, adapters/nco/): it reads through Debian's netcdf-c
    # 4.9.0, so it has 4.9.0's faults, each on netcdf-c 4.10's (or zarr-python's) output exactly as on ours
    *_entries("writer", ("groups-nested", "fill-partial", "big-endian", "char-attr-json-number",
                         "char-attr-json-object", "char-attr-text", "typed-attrs"), "ours", "ncks",
              "ncks reads through netcdf-c 4.9.0, which predates the 4.10 layout; it shows netcdf-c 4.10's "
              "_nczarr_* keys the same way", shows_410_keys_like("netcdf-c-4.10")),
    *_entries("writer", ("shuffle-zlib",), "ours", "ncks",
              "ncks' netcdf-c 4.9.0 (Debian) has no codecs: it shows zlib-compressed bytes as data, as for "
              "netcdf-c 4.10's output", same_paths_as_writer("netcdf-c-4.10")),
    # zarrita 0.7.5 (Node.js, nczarr-conformance.toml, adapters/zarrita/): a big-endian >S1 char array comes back with
    # each row's bytes reversed, and netcdf-c 4.9.0's one-byte <U1 is refused — on netcdf-c's own output identically
    *[k for w in ("ours", "ours-nczarr-2")
      for k in _entries("writer", ("char-var",), w, "zarrita", "zarrita 0.7.5 reverses the bytes of a >S1 (Appendix "
                        "E char) array; it reads netcdf-c 4.10's output of this case identically",
                        same_as_writer("netcdf-c-4.10"))],
    *_entries("writer", ("char-var",), "ours-nczarr-2-upper", "zarrita",
              "netcdf-c 4.9.0's <U1 char holds one byte per item, not four: zarrita refuses netcdf-c 4.9.0's output "
              "of this case identically", same_as_writer("netcdf-c-4.9")),
]
