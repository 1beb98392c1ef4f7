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

A violation that is a peer's fault is declared by that peer, as data beside it
(conformance/known.py: a built-in peer's in its module, an outside implementation's
beside its adapter), with the evidence, a named check (conformance/evidence.py) re-run
on every run (``explain``): a known entry whose evidence no longer holds, or that no
longer matches a violation, is itself an error, so the list cannot outlive the
behaviour it excuses.
"""
from __future__ import annotations

from dataclasses import dataclass

from nczarr_conformance.conformance.cases import BY_ID
from nczarr_conformance.conformance.evidence import cells as _cells
from nczarr_conformance.conformance.evidence import is_ours
from nczarr_conformance.conformance.known import OUR_READER, Known, known_of
from nczarr_conformance.conformance.matrix import MatrixRun, compare, view_params
from nczarr_conformance.peers.base import PEERS


def known_entries() -> list[Known]:
    """Every known peer fault the registered implementations declare (built-in, configured, plugins), checked
    on the way (conformance/known.py): a bad or twice-declared entry is a UsageError naming where it is."""
    return known_of(PEERS.values())


def same_format(writer: str, other: str) -> bool:
    """Whether the two writers write one Zarr format, as their capabilities say (``writes-zarr-v3``), and both
    or neither write references (``writes-references``) or Icechunk repositories (``writes-icechunk``): our
    reference writer is held to the other reference writers' passes, not to a store writer's."""
    def kind(peer_id: str) -> tuple[bool, bool, bool]:
        caps = PEERS[peer_id].capabilities
        return "writes-zarr-v3" in caps, "writes-references" in caps, "writes-icechunk" in caps
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
    known = known_entries() if known is None else known
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
    known = known_entries() if known is None else known
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


__all__ = ["OUR_READER", "Known", "Violation", "explain", "is_ours", "known_entries", "known_faults", "same_format",
           "violations"]
