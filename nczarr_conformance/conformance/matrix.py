"""Run every writer × every reader over every case; each cell is a real run of that peer."""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nczarr_conformance.conformance.cases import CASES, Case
from nczarr_conformance.conformance.views import view
from nczarr_conformance.model import Dataset, diff_json
from nczarr_conformance.peers import implementations  # noqa: F401  (registers the peers)
from nczarr_conformance.peers.base import PEERS, CannotExpress, Peer
from nczarr_conformance.peers.implementations import CORPUS_CASES

MAX_DIFFERENCES = 12
NOT_APPLICABLE = "corpus stores are written by the corpus only"


@dataclass
class Cell:
    case: str
    writer: str
    reader: str
    status: str  # pass | deviates | fails | skipped
    differences: list[str] = field(default_factory=list)
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "writer": self.writer, "reader": self.reader, "status": self.status,
                "differences": self.differences, "message": self.message}


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
    text = f"{type(exc).__name__}: {exc}".replace(str(workdir), "<work>")
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__


def describe(peer: Peer) -> dict[str, Any]:
    return {"id": peer.id, "name": peer.name, "version": peer.version() if peer.available() is None else "",
            "writes": peer.writes, "reads": peer.reads, "available": peer.available() is None,
            "reason": peer.available() or ""}


def run_matrix(workdir: Path | None = None, cases: list[Case] | None = None,
               peer_ids: list[str] | None = None) -> MatrixRun:
    import logging

    for noisy in ("zarr", "numcodecs", "fsspec", "asyncio", "xarray"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)  # peers' failures are findings, not log spam
    workdir = Path(workdir or tempfile.mkdtemp(prefix="ncz-matrix-"))
    peers = [PEERS[p] for p in (peer_ids or list(PEERS))]
    writers = [p for p in peers if p.writes]
    readers = [p for p in peers if p.reads]
    cells: list[Cell] = []
    stores: dict[tuple[str, str], str] = {}
    seen: dict[tuple[str, str, str], Dataset] = {}
    for case in cases or CASES:
        intended = case.model()
        for writer in writers:
            target = workdir / case.id / writer.id
            shutil.rmtree(target, ignore_errors=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            reason = writer.available()
            url = None
            write_status, write_message = "ok", ""
            if reason:
                write_status, write_message = "skipped", reason
            elif case.id in CORPUS_CASES or writer.id == "netcdf-c-corpus":
                # reader-only cases: only the corpus "writes" them, by copying its stored objects
                if case.id in CORPUS_CASES and writer.id == "netcdf-c-corpus":
                    url = writer.copy_case(case.id, target)  # type: ignore[attr-defined]
                    stores[(case.id, writer.id)] = url
                else:
                    write_status, write_message = "skipped", NOT_APPLICABLE
            else:
                try:
                    url = writer.write(case.model(), target, dict(case.options))
                    stores[(case.id, writer.id)] = url
                except CannotExpress as exc:
                    write_status, write_message = "skipped", str(exc)
                except Exception as exc:  # a writer that fails fails every cell of its row
                    write_status, write_message = "fails", "writer failed: " + _one_line(exc, workdir)
            for reader in readers:
                if write_status != "ok":
                    cells.append(Cell(case.id, writer.id, reader.id, write_status, [], write_message))
                    continue
                if reader.available():
                    cells.append(Cell(case.id, writer.id, reader.id, "skipped", [], reader.available() or ""))
                    continue
                cells.append(_read_cell(case, intended, writer, reader, url or "", workdir, seen))
    return MatrixRun([describe(p) for p in peers], cells, stores, workdir, seen)


def view_params(writer: Peer, reader: Peer) -> tuple[str, bool, bool]:
    """(kind, root_only, attributes) of the comparison a writer × reader cell makes."""
    kind = "netcdf" if writer.model == "netcdf" and reader.model == "netcdf" else "zarr"
    return kind, reader.root_only or writer.root_only, reader.attributes and writer.attributes


def compare(intended: Dataset, seen: Dataset, params: tuple[str, bool, bool]) -> list[str]:
    """Every difference between the intended and the seen model under one cell's view."""
    kind, root_only, attrs = params
    return diff_json(view(intended, kind, root_only=root_only, attributes=attrs),
                     view(seen, kind, root_only=root_only, attributes=attrs), limit=10**6)


def _read_cell(case: Case, intended: Any, writer: Peer, reader: Peer, url: str, workdir: Path,
               models: dict[tuple[str, str, str], Dataset]) -> Cell:
    try:
        seen = reader.read(url)
    except Exception as exc:  # the peer raised or exited non-zero: that is the finding
        return Cell(case.id, writer.id, reader.id, "fails", [], _one_line(exc, workdir))
    models[(case.id, writer.id, reader.id)] = seen
    differences = compare(intended, seen, view_params(writer, reader))
    if len(differences) > MAX_DIFFERENCES:
        # the first ones name the problem; the rest may be a peer's uninitialised memory (not reproducible)
        differences = differences[:MAX_DIFFERENCES] + [f"… and {len(differences) - MAX_DIFFERENCES} more differences"]
    extra = seen.root.attributes.get("__gdal_errors__")
    message = extra.value.replace(str(workdir), "<work>") if extra is not None else ""
    return Cell(case.id, writer.id, reader.id, "deviates" if differences else "pass", differences, message)
