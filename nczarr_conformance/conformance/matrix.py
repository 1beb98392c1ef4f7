"""Run every writer × every reader over every case; each cell is a real run of that peer.

Which cells run is chosen by capability (peers/capabilities.py): a case runs for a writer and a reader
that both declare the features it needs (``Case.requires``), and is recorded as skipped, with the
features named, otherwise; never by an implementation's id. ``jobs`` > 1 runs the writes and the reads
on that many threads (the peers spend their time in subprocesses and in netCDF4-python, which holds
its own lock: peers/netcdf4.py), and the cells come out in the same order, with the same content, as
a run on one thread.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

from nczarr_conformance.conformance.cases import CASES, Case
from nczarr_conformance.conformance.views import view
from nczarr_conformance.model import Dataset, diff_json
from nczarr_conformance.peers import implementations  # noqa: F401  (registers the peers)
from nczarr_conformance.peers.base import PEERS, CannotExpress, Peer, PeerFailed
from nczarr_conformance.peers.capabilities import requirements, spelled
from nczarr_conformance.peers.corpus import CORPUS_CASES

MAX_DIFFERENCES = 12
NOT_APPLICABLE = "corpus stores are written by the corpus only"
T = TypeVar("T")


@dataclass
class Cell:
    case: str
    writer: str
    reader: str
    status: str  # pass | deviates | fails | skipped
    differences: list[str] = field(default_factory=list)
    message: str = ""
    #: what the peer said on the way (a command adapter's stderr, its end), when it said anything
    detail: str = ""
    #: wall time of the read (the write's is shared by its row): JUnit's ``time``; not in the report
    seconds: float = field(default=0.0, compare=False)

    def to_json(self) -> dict[str, Any]:
        doc = {"case": self.case, "writer": self.writer, "reader": self.reader, "status": self.status,
               "differences": self.differences, "message": self.message}
        if self.detail:
            doc["detail"] = self.detail
        return doc


@dataclass
class MatrixRun:
    implementations: list[dict[str, Any]]
    cells: list[Cell]
    stores: dict[tuple[str, str], str]  # (case, writer) → URL written
    workdir: Path
    #: (case, writer, reader) → the model the reader returned, for the gate (conformance/gate.py) to compare
    #: ours under the exact view another cell passed under
    seen: dict[tuple[str, str, str], Dataset] = field(default_factory=dict)


def _one_line(exc: BaseException, workdir: Path) -> str:
    said = str(exc) if isinstance(exc, PeerFailed) else f"{type(exc).__name__}: {exc}"  # a command's own words
    text = said.replace(str(workdir), "<work>")
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__


def describe(peer: Peer, reason: str | None = None) -> dict[str, Any]:
    """The report's entry for a peer (``reason``: its ``available()``, when already asked)."""
    reason = peer.available() if reason is None else reason
    return {"id": peer.id, "name": peer.name, "version": peer.version() if not reason else "",
            "writes": peer.writes, "reads": peer.reads, "available": not reason, "reason": reason or "",
            "capabilities": spelled(peer.capabilities), "source": peer.source}


class Progress(Protocol):
    """What a caller sees of a run while it goes (cli/report.py draws a bar from it)."""

    def start(self, total: int) -> None: ...

    def advance(self, cell: Cell) -> None: ...


def undeclared(case: Case, peer: Peer, writer: Peer | None = None) -> str:
    """Why ``peer`` does not take part in ``case`` (as written by ``writer``, by default itself) by its
    capabilities, or "" when it does: a Zarr v3 writer's cells need ``zarr-v3`` of the reader too."""
    needs = requirements(case.requires, (writer or peer).capabilities)
    missing = [name for name in sorted(needs) if name not in peer.capabilities]
    return f"{peer.id} does not declare {', '.join(missing)} (its capabilities)" if missing else ""


@dataclass
class _Written:
    status: str  # ok | skipped | fails
    message: str = ""
    url: str | None = None
    detail: str = ""


class _Inline:
    """An executor that runs each task at once on the calling thread: ``jobs=1`` is the plain loop."""

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # handed to whoever asks for the result, as a pool does
            future.set_exception(exc)
        return future

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _write_one(case: Case, writer: Peer, reason: str | None, workdir: Path) -> _Written:
    target = workdir / case.id / writer.id
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    if reason:
        return _Written("skipped", reason)
    if case.id in CORPUS_CASES or writer.id == "netcdf-c-corpus":
        # reader-only cases: only the corpus "writes" them, by copying its stored objects
        if case.id in CORPUS_CASES and writer.id == "netcdf-c-corpus":
            return _Written("ok", url=writer.copy_case(case.id, target))  # type: ignore[attr-defined]
        return _Written("skipped", NOT_APPLICABLE)
    lacking = undeclared(case, writer)
    if lacking:
        return _Written("skipped", lacking)
    try:
        return _Written("ok", url=writer.write(case.model(), target, dict(case.options)))
    except CannotExpress as exc:
        return _Written("skipped", str(exc))
    except Exception as exc:  # a writer that fails fails every cell of its row
        detail = str(getattr(exc, "detail", "")).replace(str(workdir), "<work>")
        return _Written("fails", "writer failed: " + _one_line(exc, workdir), detail=detail)


def run_matrix(workdir: Path | None = None, cases: list[Case] | None = None, peer_ids: list[str] | None = None,
               *, jobs: int = 1, progress: Progress | None = None) -> MatrixRun:
    import logging

    for noisy in ("zarr", "numcodecs", "fsspec", "asyncio", "xarray"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)  # peers' failures are findings, not log spam
    workdir = Path(workdir or tempfile.mkdtemp(prefix="ncz-matrix-"))
    peers = [PEERS[p] for p in (peer_ids or list(PEERS))]
    reasons = {p.id: p.available() for p in peers}  # asked once: a command adapter looks on PATH
    writers = [p for p in peers if p.writes]
    readers = [p for p in peers if p.reads]
    cases = list(cases or CASES)
    models = {case.id: case.model() for case in cases}
    done: dict[tuple[str, str, str], Cell] = {}
    stores: dict[tuple[str, str], str] = {}
    seen: dict[tuple[str, str, str], Dataset] = {}
    if progress is not None:
        progress.start(len(cases) * len(writers) * len(readers))

    def record(cell: Cell) -> None:
        done[(cell.case, cell.writer, cell.reader)] = cell
        if progress is not None:
            progress.advance(cell)

    pool: Any = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="ncz-cell") if jobs > 1 else _Inline()
    with pool:
        # the versions first: each may start a process (a venv's interpreter importing its library), so they
        # run while the writes do, not one after another once the cells are read
        described = [pool.submit(describe, p, reasons[p.id]) for p in peers]
        written = {(case.id, writer.id): pool.submit(_write_one, case, writer, reasons[writer.id], workdir)
                   for case in cases for writer in writers}
        reads: list[Future[tuple[Cell, Dataset | None]]] = []
        for case in cases:
            for writer in writers:
                outcome = written[(case.id, writer.id)].result()
                if outcome.url is not None:
                    stores[(case.id, writer.id)] = outcome.url
                for reader in readers:
                    why = (outcome.message if outcome.status != "ok" else reasons[reader.id]
                           or undeclared(case, reader, writer))
                    if outcome.status != "ok" or why:
                        record(Cell(case.id, writer.id, reader.id, "skipped" if outcome.status == "ok"
                                    else outcome.status, [], why or "", outcome.detail))
                        continue
                    reads.append(pool.submit(_read_cell, case, models[case.id], writer, reader, outcome.url or "",
                                             workdir))
        try:
            for future in reads:
                cell, model = future.result()
                if model is not None:
                    seen[(cell.case, cell.writer, cell.reader)] = model
                record(cell)
        finally:
            for peer in peers:
                peer.close()  # its workers (a command peer's `serve`, a writer's fork servers) end with the run
    cells = [done[(case.id, w.id, r.id)] for case in cases for w in writers for r in readers]
    return MatrixRun([d.result() for d in described], cells, stores, workdir, seen)


def one_cell(case: Case, writer: Peer, reader: Peer, workdir: Path) -> Cell:
    """One writer × reader × case, exactly as the matrix runs it (skips, capabilities, the comparison): for a
    caller that grades one cell at a time, such as a test per case in another project's suite."""
    written = _write_one(case, writer, writer.available(), workdir)
    if written.status != "ok":
        return Cell(case.id, writer.id, reader.id, written.status, [], written.message, written.detail)
    why = reader.available() or undeclared(case, reader, writer)
    if why:
        return Cell(case.id, writer.id, reader.id, "skipped", [], why)
    return _read_cell(case, case.model(), writer, reader, written.url or "", workdir)[0]


def view_params(writer: Peer, reader: Peer) -> tuple[str, bool, bool]:
    """(kind, root_only, attributes) of the comparison a writer × reader cell makes."""
    kind = "netcdf" if writer.model == "netcdf" and reader.model == "netcdf" else "zarr"
    return kind, reader.root_only or writer.root_only, reader.attributes and writer.attributes


def compare(intended: Dataset, seen: Dataset, params: tuple[str, bool, bool]) -> list[str]:
    """Every difference between the intended and the seen model under one cell's view."""
    kind, root_only, attrs = params
    return diff_json(view(intended, kind, root_only=root_only, attributes=attrs),
                     view(seen, kind, root_only=root_only, attributes=attrs), limit=10**6)


def _read_cell(case: Case, intended: Dataset, writer: Peer, reader: Peer, url: str,
               workdir: Path) -> tuple[Cell, Dataset | None]:
    started = time.perf_counter()
    try:
        seen, detail = reader.read_detailed(url)
    except Exception as exc:  # the peer raised or exited non-zero: that is the finding
        detail = str(getattr(exc, "detail", "")).replace(str(workdir), "<work>")
        return Cell(case.id, writer.id, reader.id, "fails", [], _one_line(exc, workdir), detail,
                    time.perf_counter() - started), None
    differences = compare(intended, seen, view_params(writer, reader))
    if len(differences) > MAX_DIFFERENCES:
        # the first ones name the problem; the rest may be a peer's uninitialised memory (not reproducible)
        differences = [*differences[:MAX_DIFFERENCES], f"… and {len(differences) - MAX_DIFFERENCES} more differences"]
    extra = seen.root.attributes.get("__gdal_errors__")
    message = extra.value.replace(str(workdir), "<work>") if extra is not None else ""
    return Cell(case.id, writer.id, reader.id, "deviates" if differences else "pass", differences, message,
                detail.replace(str(workdir), "<work>"), time.perf_counter() - started), seen
