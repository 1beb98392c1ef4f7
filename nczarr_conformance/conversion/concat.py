"""Many netCDF files → one NCZarr store along a dimension, on dask.distributed (``nc2nczarr --concat``).

The daily or monthly archive of the Pangeo use case: the result is exactly what
converting the first file and ``--append``-ing the others one by one gives (same
canonical model, storage included), but the files are converted at once.

Order of work, and why:

1. Every file is stamped (size, mtime, inode, device), then its header, coordinate values
   along DIM and a fingerprint of each variable that does not use DIM are read by the
   workers (in parallel, several files per task), with the values of its small variables
   along DIM (kept for the chunk rows that span many files). The client sorts the files by
   their coordinate values (not their names), then refuses, before anything is written, an
   empty file, a coordinate append.py's ``check_coordinates`` refuses (NaN, not increasing,
   overlapping, a gap: a step between two files over 1.5 times the usual step, unless
   ``allow_gaps``), and any difference append refuses (groups, variables, types, other
   dimensions, chunking, attributes, values of variables without DIM, strings longer than
   the first file sets): one line naming the file and the cause.
2. The target is planned from the first file exactly as ``convert`` plans it (chunks,
   codecs, string width), then stretched along DIM to the total length.
3. One task per file (several files' tasks run as one batch on a cluster) writes the
   chunks that lie wholly in that file at their final place
   (compressed HDF5 chunks copied as they are when the codecs agree, as ``convert`` does,
   with its sampled verification); a chunk that straddles two files is assembled once, by
   one task that reads every file it spans (a small variable's rows: from the values step 1
   kept, no file reopened).
   Every task is given the records it may read and the chunks it may write: it refuses a
   file whose stamp or length is no longer the planned one, and any put outside its share
   (a file that grew cannot add rows, a replaced one cannot overwrite another's).
4. Every input's stamp is checked again once all the chunks are written: a file replaced,
   rewritten or still growing since the checks is refused (one line naming it), before
   the commit. The client writes the metadata last and commits: a directory is built aside and
   swapped in, a zip is built aside as a directory and then zipped under a temporary
   name, S3 chunks are put under the writer's ``.nczarr-partial`` marker and the
   metadata is put at commit. An interrupt (or a failed task) cancels the tasks, closes
   the cluster the command started and aborts: no readable half-store, ever.

Where it runs: on a dask.distributed cluster (batches of about :data:`BATCH_BYTES` of input
per call, at least :data:`TASKS_PER_WORKER` per worker), or, for small work and
``--workers 1``, in this process through the very task functions (no cluster to start).
Why a file is opened twice (step 1, then step 3): where any file's chunks go (its offset,
the rows it owns, the target's chunking from the first file in coordinate order) depends on
every file's coordinate and length, and nothing may be written before every file has
passed the checks; holding every file open from one step to the other would cost about
1 MB of HDF5 state per file (541 MB measured for 500 files). The second open is the cheap
part: no h5py scan (step 1 scanned that very file, as its stamp shows), no header.

``--append`` of several files runs the same way against an existing store: append.py's
checks against the store, the store's own chunks and codecs as the plan, its edge chunk
assembled once from the store and the new files, append.py's metadata update last.
"""
from __future__ import annotations

import glob
import hashlib
import importlib.util
import itertools
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from nczarr_conformance import keys, safety
from nczarr_conformance.conversion.append import (
    MAX_COMPARE_BYTES,
    InputChanged,
    Stamp,
    refuse_if_changed,
)
from nczarr_conformance.errors import StoreError, UsageError
from nczarr_conformance.model import Dataset, Group
from nczarr_conformance.nczarr.writer import (
    ArrayPlan,
    DatasetWriter,
    _all_fill,
    _to_storage,
)
from nczarr_conformance.stores import sniff
from nczarr_conformance.stores.part import PartSpec, open_part
from nczarr_conformance.stores.staged import StagedWrite, stage_write
from nczarr_conformance.urls import StoreSpec, parse

WORKER_THREADS = 2  # copy threads inside one task (a worker process runs one task at a time)
#: (variable, HDF5 filters with their parameters, stored dtype, chunk shape): a codec chain proven once
Chain = tuple[str, tuple[tuple[int, tuple[int, ...]], ...], str, tuple[int, ...]]
#: a file smaller than this is copied on the task's own thread (a copy pool per variable costs more than it saves)
SMALL_FILE_BYTES = 16 * 1024**2
#: values of small variables along DIM kept by describe(), per file (8 bytes a value counted): 8 MB for 500 files
SMALL_VALUES_BYTES = 16 * 1024
#: input bytes per task on a cluster (several files per task: one scheduling round trip each, not one per file)
BATCH_BYTES = 128 * 1024**2
#: tasks per worker at least, when there are enough files: equal shares finish together, and progress moves
TASKS_PER_WORKER = 2
#: less input than this, in fewer than :data:`IN_PROCESS_FILES` files, runs in this process when no
#: --workers/--scheduler is given: a 2-process LocalCluster's start and close cost about 3-4 s
IN_PROCESS_BYTES = 256 * 1024**2
#: as many files as this run on a cluster by default (however small): each file costs about 30 ms of
#: checks, opens and metadata in one process, which a cluster shares among its workers. Measured on 2 cores
#: (benchmarks/concat.py, 2026-11-27, load below 1): 200 daily files 6.1 s in process, 5.9 s on 2 workers;
#: 500 files 16.8 s in process, 9.2 s on 2 workers
IN_PROCESS_FILES = 250


@dataclass(frozen=True)
class FilesDone:
    """Where a run is, for a progress bar: phase "check" (files described) or "write" (files whose chunks are
    written), files and their bytes done so far out of the totals."""

    phase: str
    files: int
    files_total: int
    bytes: int
    bytes_total: int


FilesProgress = Callable[[FilesDone], None]  # called on the client's thread
DRAIN_SECONDS = 60.0  # longest wait, on a caller's cluster, for cancelled tasks still running to end


@dataclass
class ConcatStats:
    files: int = 0
    records: int = 0
    chunks: int = 0
    copied: int = 0
    objects: int = 0
    seconds: float = 0.0


@dataclass
class FileInfo:
    """What the client needs of one input to order and check it (computed on a worker)."""

    path: str
    dataset: Dataset
    dim: str
    length: int
    coord: np.ndarray | None
    fingerprints: dict[str, str] = field(default_factory=dict)
    longest: dict[str, int] = field(default_factory=dict)
    stamp: Stamp | None = None  # as the worker saw the file before reading it
    #: values of the small variables along DIM (the coordinate, bounds), as read while describing: a chunk row
    #: spanning many files (a 1-D coordinate's, often all of them) is assembled from these, no file reopened
    small: dict[str, np.ndarray] = field(default_factory=dict)


# ---- inputs -------------------------------------------------------------------------------
def expand_inputs(patterns: list[str]) -> list[str]:
    """Files named or matched by glob patterns, each once; a pattern matching nothing is refused."""
    out: list[str] = []
    for pattern in patterns:
        if glob.has_magic(pattern) and not os.path.exists(pattern):
            found = sorted(glob.glob(pattern))
            if not found:
                raise UsageError(f"{pattern}: matches no file")
            out.extend(found)
        elif not os.path.isfile(pattern):
            raise StoreError(f"{pattern}: no such file")
        else:
            out.append(pattern)
    seen: set[str] = set()
    unique = []
    for path in out:
        real = os.path.realpath(path)
        if real in seen:
            raise UsageError(f"{path}: named twice")
        seen.add(real)
        unique.append(path)
    if not unique:
        raise UsageError("no input files")
    return unique


def _fingerprint(values: np.ndarray) -> str:
    """A digest of values independent of byte order (strings by their text)."""
    arr = np.asarray(values)
    if arr.dtype == object:
        payload = repr(arr.tolist()).encode()
    else:
        payload = arr.astype(arr.dtype.newbyteorder("="), copy=False).tobytes()
    return hashlib.sha256(repr((arr.shape, arr.dtype.kind)).encode() + payload).hexdigest()


def _find_dim(model: Dataset, name: str, where: str) -> str:
    if name.startswith("/"):
        try:
            model.find_dimension(name)
        except KeyError:
            raise UsageError(f"{where}: no dimension {name!r}") from None
        return name
    for gkey, group in model.root.walk():
        if name in group.dimensions:
            return keys.join(gkey, name)
    raise UsageError(f"{where}: no dimension {name!r}")


def describe(path: str, dim_name: str) -> FileInfo:
    """Header, coordinate along DIM and fingerprints of one input (a worker task), with its stamp.

    The file is stamped before it is opened and must be unchanged after it is closed: what
    was read is what the stamp names (a file still being written is refused here already).
    """
    stamp = Stamp.of(path)
    try:
        info = _describe(path, dim_name)
    except Exception as exc:
        if not isinstance(exc, InputChanged):
            refuse_if_changed(path, stamp)  # a read error from a file being rewritten is that, not a bug
        raise
    refuse_if_changed(path, stamp)
    info.stamp = stamp
    return info


def _describe(path: str, dim_name: str) -> FileInfo:
    from nczarr_conformance.conversion.from_netcdf import _header
    from nczarr_conformance.sources import netcdf4 as nc4

    nc = nc4.open_nc(path, check="all")  # what netCDF-4 hides would be lost without a word: refused
    try:
        variables: dict[str, Any] = {}
        with nc4.LOCK:
            dataset = Dataset(_header(nc, "/", variables))
        dim = _find_dim(dataset, dim_name, path)
        info = FileInfo(path, dataset, dim, dataset.find_dimension(dim).size, None)
        if dim in variables:
            info.coord = np.asarray(nc4.read_values(variables[dim]))
            info.small[dim] = info.coord
        kept = SMALL_VALUES_BYTES  # what the client holds per file, whatever the number of variables
        for gkey, group in dataset.root.walk():
            for vname, var in group.variables.items():
                vkey = keys.join(gkey, vname)
                if dim not in var.dimensions:
                    if math.prod(var.shape) * 8 <= MAX_COMPARE_BYTES:  # compared up to append's size
                        info.fingerprints[vkey] = _fingerprint(nc4.read_values(variables[vkey]))
                elif var.type == "string":
                    values = nc4.read_values(variables[vkey])
                    info.longest[vkey] = max((len(str(v).encode("utf-8")) for v in values.ravel().tolist()),
                                             default=0)
                elif vkey not in info.small and math.prod(var.shape) * 8 <= kept:
                    info.small[vkey] = np.asarray(nc4.read_values(variables[vkey]))
                    kept -= math.prod(var.shape) * 8
        return info
    finally:
        nc4.close_nc(nc)


def describe_batch(paths: list[str], dim_name: str) -> list[FileInfo]:
    """:func:`describe` of several inputs in one task (one scheduling round trip for a batch of files)."""
    out = []
    for path in paths:
        safety.raise_if_interrupted()
        out.append(describe(path, dim_name))
    return out


# ---- checks (before any write) ---------------------------------------------------------------
def order_and_check(infos: list[FileInfo], *, allow_gaps: bool = False, stored: np.ndarray | None = None,
                    store: str = "the store") -> list[FileInfo]:
    """The inputs sorted by their coordinate along DIM; UsageError naming a file and the cause.

    The coordinate rules are append.py's :func:`~nczarr_conformance.conversion.append.check_coordinates`
    (``stored``: the coordinate of the store a multi-file ``--append`` extends), so one file
    appended at a time and many at once are held to the same rules.
    """
    from nczarr_conformance.conversion.append import _compare, check_coordinates

    for info in infos:
        if info.length == 0:
            raise UsageError(f"{info.path}: dimension {info.dim} is empty; nothing to concatenate")
    dims = {info.dim for info in infos}
    if len(dims) > 1:
        raise UsageError(f"{infos[1].path}: the dimension is {infos[1].dim}, not {infos[0].dim} as in {infos[0].path}")
    dim = infos[0].dim
    with_coord = [i for i in infos if i.coord is not None]
    if with_coord and len(with_coord) != len(infos):
        lacking = next(i for i in infos if i.coord is None)
        raise UsageError(f"{lacking.path}: has no coordinate variable {dim} (the others have)")
    ordered = list(infos)
    if with_coord:
        order = check_coordinates(dim, [(i.path, np.asarray(i.coord)) for i in infos], stored=stored, store=store,
                                  allow_gaps=allow_gaps)
        ordered = [infos[n] for n in order]
    first = ordered[0]
    for info in ordered[1:]:
        problems: list[str] = []
        _compare(first.dataset.root, info.dataset.root, "/", dim, problems)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise UsageError(f"{info.path}: differs from {first.path}: "
                             + problems[0].replace("the store", "the first file") + more)
        for vkey, digest in first.fingerprints.items():
            if info.fingerprints.get(vkey, digest) != digest:
                raise UsageError(f"{info.path}: {vkey} does not use {dim} but its values differ from {first.path}")
    return ordered


# ---- planning ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Source:
    """Rows [start, stop) of an input, placed at row ``at`` of a target chunk.

    ``path`` "" is the store being appended to: its existing chunk is the starting point.
    """

    path: str
    start: int
    stop: int
    at: int
    values: np.ndarray | None = field(default=None, compare=False)  # the file's values, read by describe()


@dataclass
class Task:
    """One worker's share: copy one file's aligned chunks and/or assemble listed chunk rows."""

    part: PartSpec
    dim: str
    flavor: str
    xarray: bool
    direct: bool
    plans: dict[str, ArrayPlan]
    along: dict[str, int]
    path: str | None = None  # the file whose own chunks are copied (None: assembling only)
    offset: int = 0
    length: int = 0  # the planned records of ``path``: a file that grew since cannot add rows
    whole: bool = False  # also every variable without DIM (the first file)
    base: StoreSpec | None = None  # --append: the store appended to (its edge chunks are read)
    assemble: list[tuple[str, int, list[Source]]] = field(default_factory=list)  # (variable, chunk row, sources)
    inputs: dict[str, tuple[Stamp, int]] = field(default_factory=dict)  # every file read: stamp, planned records

    def rows(self) -> dict[str, set[int]]:
        """The chunk rows along DIM this task may write, per variable."""
        out: dict[str, set[int]] = {vkey: set() for vkey in self.along}
        for vkey, axis in self.along.items():
            c = self.plans[vkey].chunks[axis]
            if self.path is not None and self.offset % c == 0:
                out[vkey] |= _owned_rows(self.offset, self.length, self.plans[vkey].zshape[axis], c)
        for vkey, k, _ in self.assemble:
            out[vkey].add(k)
        return out

    def may_write(self, key: str, rows: dict[str, set[int]]) -> bool:
        """Whether ``key`` is one of the chunks the plan gave this task (``rows``: :meth:`rows`)."""
        plan = self.plans.get(keys.parent(key))
        if plan is None:
            return False
        name = keys.basename(key)
        if not plan.zshape:
            return name == "0" and self.whole
        try:
            index = [int(i) for i in name.split(".")]
        except ValueError:
            return False
        grid = [math.ceil(s / c) for s, c in zip(plan.zshape, plan.chunks, strict=True)]
        if len(index) != len(grid) or not all(0 <= i < g for i, g in zip(index, grid, strict=True)):
            return False
        axis = self.along.get(plan.key)
        return self.whole if axis is None else index[axis] in rows[plan.key]


def _pieces(ordered: list[FileInfo], start: int) -> list[tuple[FileInfo, int]]:
    out = []
    offset = start
    for info in ordered:
        out.append((info, offset))
        offset += info.length
    return out


def _owned_rows(offset: int, length: int, total: int, c: int) -> set[int]:
    """Chunk rows (along DIM) whose target rows all come from the file at ``offset``."""
    first, last = offset // c, (offset + length - 1) // c
    return {k for k in range(first, last + 1) if offset <= k * c and min((k + 1) * c, total) <= offset + length}


def plan_tasks(pieces: list[tuple[FileInfo, int]], dim: str, total: int, plans: dict[str, ArrayPlan],
               along: dict[str, int], part: PartSpec, *, flavor: str, xarray: bool, direct: bool,
               base: StoreSpec | None = None, old_len: int = 0) -> list[Task]:
    """One task per file, plus one per chunk row that straddles files (or the store appended to and a file)."""
    tasks: list[Task] = []
    straddle: dict[tuple[str, int], list[Source]] = {}
    planned = {info.path: (info.stamp or Stamp.of(info.path), info.length) for info, _ in pieces}
    for n, (info, offset) in enumerate(pieces):
        task = Task(part, dim, flavor, xarray, direct, plans, along, path=info.path, offset=offset,
                    length=info.length, whole=n == 0 and base is None)
        for vkey, axis in along.items():
            c = plans[vkey].chunks[axis]
            owned = _owned_rows(offset, info.length, total, c)
            if offset % c:  # not aligned with the file's own chunks: assemble each row from this file
                task.assemble.extend((vkey, k, [Source(info.path, k * c - offset, min((k + 1) * c, total) - offset,
                                                       0)]) for k in sorted(owned))
            for k in range(offset // c, (offset + info.length - 1) // c + 1):
                if k not in owned:
                    lo, hi = k * c, min((k + 1) * c, total)
                    s, e = max(lo, offset), min(hi, offset + info.length)
                    straddle.setdefault((vkey, k), []).append(Source(info.path, s - offset, e - offset, s - lo,
                                                                     info.small.get(vkey)))
        tasks.append(task)
    for (vkey, k), sources in straddle.items():
        c = plans[vkey].chunks[along[vkey]]
        if k * c < old_len:  # the store's edge chunk: its old rows first
            sources.insert(0, Source("", 0, 0, 0))
        tasks.append(Task(part, dim, flavor, xarray, direct, plans, along, assemble=[(vkey, k, sources)], base=base))
    for task in tasks:
        read = {task.path} if task.path is not None else set()
        read |= {src.path for _, _, sources in task.assemble for src in sources if src.path and src.values is None}
        task.inputs = {path: planned[path] for path in sorted(read)}
    return tasks


def chunk_keys(plans: dict[str, ArrayPlan]) -> Iterator[str]:
    """Every chunk key of the target (for an S3 abort: what the workers may have put)."""
    for plan in plans.values():
        for index, _ in plan.regions():
            yield keys.join(plan.key, ".".join(str(i) for i in index) if index else "0")


# ---- worker side ---------------------------------------------------------------------------------
def run_task(task: Task, proven: set[Chain] | None = None) -> tuple[int, int, list[str]]:
    """Write one task's chunks; (chunks, chunks copied compressed, keys put).

    Each input is checked against its stamp and planned length when opened and again when
    the task is done, and a put outside the task's share is refused: a file that changed
    since the checks never puts a row it was not planned for.
    """
    try:
        return _run_task(task, set() if proven is None else proven)
    except Exception as exc:
        if not isinstance(exc, InputChanged):
            for path, (stamp, _) in task.inputs.items():  # a read error from a file being rewritten is that
                refuse_if_changed(path, stamp, device=False)
        raise


@dataclass
class BatchDone:
    """What one batch of tasks did: chunks, chunks copied compressed, keys put, input files and their bytes."""

    chunks: int = 0
    copied: int = 0
    written: list[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0


def run_batch(tasks: list[Task], proven: set[Chain] | None = None) -> BatchDone:
    """:func:`run_task` of several tasks in one worker call, one after the other (each keeps its own guards).

    ``proven``: the codec chains whose copied chunks were already decoded and compared with
    netCDF4's values (see :func:`_copy_file`); a new set per batch unless the caller keeps one
    for the whole run (the in-process path).
    """
    done = BatchDone()
    proven = set() if proven is None else proven
    for task in tasks:
        safety.raise_if_interrupted()
        chunks, copied, written = run_task(task, proven)
        done.chunks += chunks
        done.copied += copied
        done.written.extend(written)
        if task.path is not None:
            done.files += 1
            done.bytes += task.inputs[task.path][0].size
    return done


def _run_task(task: Task, proven: set[Chain]) -> tuple[int, int, list[str]]:
    from nczarr_conformance.sources import netcdf4 as nc4

    store = open_part(task.part)
    put: list[str] = []
    plain_put = store.put
    rows = task.rows()

    plain_extent = store.put_extent

    def planned(key: str) -> None:
        if not task.may_write(key, rows):
            raise StoreError(f"{task.path or ', '.join(task.inputs)}: would write {key.lstrip('/')}, outside the "
                             "chunks planned for it; refused")

    def planned_put(key: str, data: bytes) -> None:
        planned(key)
        plain_put(key, data)
        put.append(key)

    def planned_extent(key: str, fd: int, offset: int, size: int) -> None:  # a chunk copied file to file
        planned(key)
        plain_extent(key, fd, offset, size)
        put.append(key)

    store.put = planned_put  # type: ignore[method-assign]
    store.put_extent = planned_extent  # type: ignore[method-assign]
    opened: dict[str, tuple[Any, dict[str, Any], Any]] = {}

    def nc_of(path: str) -> tuple[Any, dict[str, Any], Any]:
        if path not in opened:
            stamp, length = task.inputs[path]
            refuse_if_changed(path, stamp, device=False)  # another host may number the device otherwise
            # describe() scanned this very file (the stamp just compared) with check="all", a superset of
            # what a read needs: scanning again would double the cost of a small file for nothing
            nc = nc4.open_nc(path, check="none")
            try:
                with nc4.LOCK:  # no header (attributes): describe() read it, and the plan is made of it
                    variables = _handles(nc, "/", {})
                    now = _dim_size(nc, task.dim)
            except BaseException:
                nc4.close_nc(nc)
                raise
            opened[path] = (nc, variables, None)
            if now != length:
                what = f"{task.dim}: {now}" if isinstance(now, str) else f"{task.dim} has {now} records"
                raise InputChanged(f"{path}: changed since it was checked ({what}, {length} were planned); refused "
                                   "before the commit, the output is unchanged")
        return opened[path]

    copied = 0
    counted = [0]
    try:
        if task.path is not None:
            _, variables, _ = nc_of(task.path)
            copied = _copy_file(task, variables, store, counted, proven)
        for vkey, k, sources in task.assemble:
            counted[0] += _assemble(task.plans[vkey], task.along[vkey], k, sources, nc_of, store, task.base)
    finally:
        for nc, _, _ in opened.values():
            nc4.close_nc(nc)
        store.close()
    for path in opened:  # every read done: what was read is what was checked
        refuse_if_changed(path, task.inputs[path][0], device=False)
    return counted[0], copied, put


def _handles(group: Any, path: str, out: dict[str, Any]) -> dict[str, Any]:
    """netCDF4 variables by key, each read once (no chunk cache), as from_netcdf._header leaves them."""
    for name, var in group.variables.items():
        out[keys.join(path, name)] = var
        if var.chunking() not in ("contiguous", None):
            var.set_var_chunk_cache(size=0, nelems=0)
    for name, sub in group.groups.items():
        _handles(sub, keys.join(path, name), out)
    return out


def _dim_size(nc: Any, dim: str) -> int | str:
    """The size of dimension ``dim`` (a key) in the open file now, or why there is none (a file replaced)."""
    group = nc
    for name in [p for p in keys.parent(dim).split("/") if p]:
        group = group.groups.get(name)
        if group is None:
            return f"no group {keys.parent(dim)}"
    found = group.dimensions.get(keys.basename(dim))
    return len(found) if found is not None else "no such dimension"


def _chain(raw: Any, key: str) -> Chain | None:
    """What decides whether a variable's HDF5 chunk bytes decode as the plan's codecs: its filters with their
    parameters, its stored type and chunk shape (None: not an HDF5 chunked dataset)."""
    with raw.lock:
        dataset = raw.file.get(key.lstrip("/"))
        if dataset is None or dataset.chunks is None:
            return None
        plist = dataset.id.get_create_plist()
        filters = tuple((f[0], tuple(int(v) for v in f[2])) for f in (plist.get_filter(i)
                                                                    for i in range(plist.get_nfilters())))
        return key, filters, dataset.dtype.str, tuple(dataset.chunks)


def _copy_file(task: Task, variables: dict[str, Any], store: Any, counted: list[int], proven: set[Chain]) -> int:
    """The file's chunks that are wholly its own and aligned, through the converter's writer."""
    from nczarr_conformance.conversion.from_netcdf import _direct_source
    from nczarr_conformance.sources import netcdf4 as nc4

    assert task.path is not None
    length = task.length  # the plan's, not the file's header: rows past it belong to no one

    def source(akey: str, var: Any, region: tuple[slice, ...]) -> np.ndarray:
        return nc4.read_values(variables[akey], region or None)

    def progress(chunks: int, raw_bytes: int, written: int) -> None:
        counted[0] += chunks

    raw = _direct_source(task.path, copy=task.direct and task.flavor != "nczarr-2-upper")
    small = task.inputs[task.path][0].size < SMALL_FILE_BYTES
    # the writer writes the task's plans only: its dataset (for planning and metadata) is never read here
    writer = DatasetWriter(Dataset(Group()), store, flavor=task.flavor, xarray=task.xarray, source=source,
                           progress=progress, threads=1 if small else WORKER_THREADS, raw=raw)
    if raw is not None:
        sample = writer._raw_copy_verified

        def once_per_chain(plan: ArrayPlan, pipeline: Any, raw_copy: Callable[[tuple[int, ...]], bytes | None],
                           fill_chunk: np.ndarray) -> bool:
            named = getattr(raw_copy, "chain", None)  # the variable's reader holds its dataset: no second lookup
            chain = (plan.key, *named(), tuple(plan.chunks)) if named is not None else _chain(raw, plan.key)
            if chain is not None and chain in proven:
                return True  # the same filters, parameters, type and chunks decoded right in an earlier file
            verified = sample(plan, pipeline, raw_copy, fill_chunk)
            if verified and chain is not None:
                proven.add(chain)
            return verified

        writer._raw_copy_verified = once_per_chain  # type: ignore[method-assign]
    try:
        for vkey, plan in task.plans.items():
            axis = task.along.get(vkey)
            if axis is None:
                if task.whole:
                    writer._write_chunks(plan)
                continue
            c = plan.chunks[axis]
            if task.offset % c:
                continue  # assembled row by row (see plan_tasks)
            total = plan.zshape[axis]
            zshape = list(plan.zshape)
            zshape[axis] = length
            owned = _owned_rows(task.offset, length, total, c)
            shift = task.offset // c

            def select(index: tuple[int, ...], axis: int = axis, shift: int = shift,
                       owned: set[int] = owned) -> tuple[int, ...] | None:
                k = index[axis] + shift
                return (*index[:axis], k, *index[axis + 1:]) if k in owned else None

            writer._write_chunks(replace(plan, zshape=tuple(zshape)), select)
    finally:
        if raw is not None:
            raw.close()
    return writer.copied


def _assemble(plan: ArrayPlan, axis: int, k: int, sources: list[Source],
              nc_of: Callable[[str], tuple[Any, dict[str, Any], Any]], store: Any,
              base: StoreSpec | None = None) -> int:
    """Every chunk of row ``k`` along DIM, filled from the sources it spans, encoded once; how many."""
    from nczarr_conformance.codecs import Pipeline

    pipeline = Pipeline(plan.compressor, plan.filters, plan.storage.itemsize)
    fill_chunk = np.full(plan.chunks, plan.fill_storage, dtype=plan.storage)
    skip_fill = plan.storage.byteorder != ">" and not plan.var.no_fill
    grid = [math.ceil(s / c) for s, c in zip(plan.zshape, plan.chunks, strict=True)]
    ranges = [range(k, k + 1) if i == axis else range(g) for i, g in enumerate(grid)]
    reader = None
    if base is not None and any(src.path == "" for src in sources):
        from nczarr_conformance.nczarr.reader import DatasetReader
        from nczarr_conformance.stores import open_store

        reader = DatasetReader(open_store(base))
    try:
        return _assemble_rows(plan, axis, k, sources, nc_of, store, base, reader, ranges, pipeline, fill_chunk,
                              skip_fill)
    finally:
        if reader is not None:
            reader.store.close()


def _assemble_rows(plan: ArrayPlan, axis: int, k: int, sources: list[Source],
                   nc_of: Callable[[str], tuple[Any, dict[str, Any], Any]], store: Any, base: StoreSpec | None,
                   reader: Any, ranges: list[range], pipeline: Any, fill_chunk: np.ndarray, skip_fill: bool) -> int:
    from nczarr_conformance.sources import netcdf4 as nc4

    done = 0
    for index in itertools.product(*ranges):
        done += 1
        chunk = fill_chunk.copy()
        for src in sources:
            if src.path == "":
                assert reader is not None
                existing = reader.read_chunk(reader.arrays[plan.key], index)
                if existing is not None:
                    chunk = np.array(existing, dtype=plan.storage).reshape(plan.chunks)
                continue
            region = tuple(slice(src.start, src.stop) if i == axis else
                           slice(j * c, min((j + 1) * c, s))
                           for i, (j, c, s) in enumerate(zip(index, plan.chunks, plan.zshape, strict=True)))
            if src.values is not None:  # read by describe(); the commit checks the file is still what it read
                values = src.values[region]
            else:
                values = nc4.read_values(nc_of(src.path)[1][plan.key], region)
            block = _to_storage(values, plan.var.type, plan.storage, plan.key)
            dst = tuple(slice(src.at, src.at + src.stop - src.start) if i == axis else slice(0, r.stop - r.start)
                        for i, r in enumerate(region))
            chunk[dst] = block
        if skip_fill and base is None and _all_fill(chunk, fill_chunk):
            continue  # (an append writes its edge chunks whatever they hold, as append.py does)
        store.put(keys.join(plan.key, ".".join(str(i) for i in index)), pipeline.encode(chunk))
    return done


# ---- where the tasks run: a dask cluster, or this process ----------------------------------------------
class Runner:
    """Runs a task function over a list of items and hands each result to ``consume`` on the client's thread.

    Any exception (a refusal from a task, an interrupt, a failure in ``consume``) stops the
    run: what has not started is cancelled before the exception goes on.
    """

    workers = 1

    def each(self, fn: Callable[[Any], Any], items: list[Any], consume: Callable[[Any], None]) -> None:
        raise NotImplementedError


class InProcess(Runner):
    """The task functions called one after the other in this process: no cluster to start or to feed.

    Small work (:data:`IN_PROCESS_BYTES`, :data:`IN_PROCESS_FILES`) and ``--workers 1`` run here: a one-process cluster
    computes nothing faster and costs its start-up (seconds) and a scheduling round trip per task.
    """

    def each(self, fn: Callable[[Any], Any], items: list[Any], consume: Callable[[Any], None]) -> None:
        for item in items:
            safety.raise_if_interrupted()
            consume(fn(item))


class OnCluster(Runner):
    """Tasks on a ``distributed.Client``; ``own``: the command started the cluster (and stops its workers)."""

    def __init__(self, client: Any, own: bool) -> None:
        import importlib

        self.client = client
        self.own = own
        self.as_completed: Any = importlib.import_module("distributed").as_completed
        try:
            self.workers = max(1, len(client.scheduler_info().get("workers", {})))
        except Exception:  # a scheduler that cannot say: batches as for one worker
            self.workers = 1

    def each(self, fn: Callable[[Any], Any], items: list[Any], consume: Callable[[Any], None]) -> None:
        futures = self.client.map(fn, items, pure=False)
        try:
            for future in self.as_completed(futures):
                consume(future.result())
        except BaseException:
            self.client.cancel(futures)
            if not self.own:  # its workers live on: the abort must not race a task still writing
                _drain(self.client, {f.key for f in futures})
            raise


def batches(items: list[Any], sizes: list[int], *, target: int, least: int) -> list[list[Any]]:
    """``items`` cut, in order, into consecutive batches of about ``target`` bytes (``sizes``: each item's).

    At least ``least`` batches when there are that many items (every worker gets work), and
    no batch much bigger than the total divided by their number: batches of about as many
    bytes finish together, so no worker idles at the end while another reads a last big one.
    """
    if not items:
        return []
    total = sum(sizes)
    count = min(len(items), max(least, math.ceil(total / max(1, target))))
    share = total / count
    out: list[list[Any]] = [[]]
    filled = 0
    for item, size in zip(items, sizes, strict=True):
        if out[-1] and filled + size / 2 > share * len(out) and len(out) < count:
            out.append([])
        out[-1].append(item)
        filled += size
    return out


def _task_bytes(task: Task) -> int:
    """The input bytes a task reads (its file, else the planned sizes of the files its chunk rows span)."""
    if task.path is not None:
        return task.inputs[task.path][0].size
    return 1 + sum(stamp.size // max(1, length) for stamp, length in task.inputs.values())


# ---- the command ----------------------------------------------------------------------------------
def concat(inputs: list[str], dst: str, dim_name: str, *, flavor: str = "nczarr-4.10", overwrite: bool = False,
           scheduler: str | None = None, workers: int | None = None, direct: bool = True,
           allow_gaps: bool = False, progress: FilesProgress | None = None,
           client: Any = None, append: bool = False, consolidate: bool | None = None,
           char_as: str | None = None) -> ConcatStats:
    """Concatenate the netCDF files ``inputs`` (paths or glob patterns) along ``dim_name`` into ``dst``.

    ``client``: an open ``distributed.Client`` to use (else one on ``scheduler``, or a
    LocalCluster of ``workers`` processes, closed at the end). Neither, and ``workers`` 1 or
    small work (:data:`IN_PROCESS_BYTES`, :data:`IN_PROCESS_FILES`): the same tasks run in this process, no
    cluster started (see :func:`in_process`). ``progress``: called with a :class:`FilesDone` as files
    are checked, then written. ``append``: extend the
    existing store ``dst`` instead (``--append`` of several files): the same checks as
    append.py against the store, then the same machinery. ``consolidate`` and ``char_as`` are
    :func:`~nczarr_conformance.nczarr.writer.write_dataset`'s (a new store only).
    """
    from nczarr_conformance.conversion.cluster import open_client
    from nczarr_conformance.nczarr.writer import FLAVOR_ALIASES
    from nczarr_conformance.stores import lock_for_writing

    started = time.perf_counter()
    files = expand_inputs(inputs)
    spec = parse(dst)
    misnamed = None if append else sniff.output_error(dst)  # a new store named out.nc: refused (an old one appends)
    if misnamed is not None:
        raise misnamed
    for path in files:
        safety.check_output_is_safe(path, spec.kind, spec.path)
    if flavor not in FLAVOR_ALIASES:
        raise UsageError(f"unknown flavor {flavor!r} (one of {', '.join(sorted(FLAVOR_ALIASES))})")
    flavor = FLAVOR_ALIASES[flavor]
    if spec.pure_zarr and flavor == "nczarr-4.10":
        flavor = "zarr"
    if spec.kind in ("file", "zip") and not append and not overwrite and os.path.lexists(spec.path):
        raise StoreError(f"{spec.path}: exists (use --overwrite to replace it)")  # before starting a cluster
    stats = ConcatStats(files=len(files))
    if append and (consolidate is not None or char_as is not None):
        raise UsageError("--append keeps the store's layout: it takes no consolidate or char_as")
    job = _Job(files, spec, dim_name, flavor, overwrite, direct, allow_gaps, progress, stats, append=append,
               consolidate=consolidate, char_as=char_as)
    held = lock_for_writing(spec) if append else None  # before the checks read the store, and before a cluster
    try:
        if append and _v3_append(files, dst, dim_name, allow_gaps, stats):
            pass  # a Zarr v3 store: grown in this process, one transaction (conversion/append_v3.py)
        elif client is not None:
            job.run(OnCluster(client, own=False))
        elif in_process(files, scheduler, workers):
            job.run(InProcess())
        else:
            with open_client(scheduler, workers) as own:
                job.run(OnCluster(own, own=True))
    except BaseException:
        job.abort()  # after the cluster this command started is closed: no worker still writing
        raise
    finally:
        if held is not None:
            held.release()  # (a new store's writer lock is its own, from stage_write to commit or abort)
    stats.seconds = time.perf_counter() - started
    return stats


def _v3_append(files: list[str], dst: str, dim_name: str, allow_gaps: bool, stats: ConcatStats) -> bool:
    """Append ``files`` to ``dst`` when it is a Zarr v3 store (no cluster: append_v3.py's single
    transaction); False for a v2 store, which the cluster machinery below grows."""
    from nczarr_conformance.conversion import append_v3

    if not append_v3.is_v3_store(dst):
        return False
    done = append_v3.append_v3(files, dst, dim_name, allow_gaps=allow_gaps)
    stats.records, stats.chunks, stats.objects = done.records, done.chunks_written, done.objects_written
    return True


def in_process(files: list[str], scheduler: str | None, workers: int | None) -> bool:
    """Whether the run needs no cluster: ``--workers 1``, or neither ``--scheduler`` nor ``--workers`` and less
    than :data:`IN_PROCESS_BYTES` of input in fewer than :data:`IN_PROCESS_FILES` files (or one core, or
    dask.distributed not installed: the optional extra is asked for only by the options that name a cluster).
    ``--workers N`` (N > 1) and ``--scheduler`` are obeyed."""
    if scheduler:
        return False
    if workers is not None:
        return workers == 1
    if (os.cpu_count() or 1) == 1:
        return True
    small = len(files) < IN_PROCESS_FILES and sum(os.stat(path).st_size for path in files) < IN_PROCESS_BYTES
    return small or importlib.util.find_spec("distributed") is None  # the extra looked for only when wanted


def _plan_target(first: FileInfo, total: int, flavor: str, xarray: bool, *, consolidate: bool | None = None,
                 char_as: str | None = None) -> DatasetWriter:
    """The writer ``convert`` would use on the first file, its arrays stretched to ``total`` along DIM."""
    from nczarr_conformance.conversion.from_netcdf import _header
    from nczarr_conformance.sources import netcdf4 as nc4
    from nczarr_conformance.stores.memory import MemoryStore

    nc = nc4.open_nc(first.path)
    try:
        variables: dict[str, Any] = {}
        with nc4.LOCK:
            dataset = Dataset(_header(nc, "/", variables))
        writer = DatasetWriter(dataset, MemoryStore(), flavor=flavor, xarray=xarray, consolidate=consolidate,
                               char_as=char_as,
                               source=lambda akey, var, region: nc4.read_values(variables[akey], region or None))
        writer.validate()
        writer.plan()
    finally:
        nc4.close_nc(nc)
    dataset.find_dimension(first.dim).size = total
    for plan in writer.plans.values():
        if first.dim in plan.var.dimensions:
            axis = plan.var.dimensions.index(first.dim)
            shape = list(plan.zshape)
            shape[axis] = total
            plan.zshape = tuple(shape)
            plan.var.shape = tuple(shape)
    return writer


@dataclass
class _Job:
    files: list[str]
    spec: StoreSpec
    dim_name: str
    flavor: str
    overwrite: bool
    direct: bool
    allow_gaps: bool
    progress: FilesProgress | None
    stats: ConcatStats
    append: bool = False
    consolidate: bool | None = None
    char_as: str | None = None
    target: StagedWrite | None = None
    plans: dict[str, ArrayPlan] = field(default_factory=dict)

    def run(self, runner: Runner) -> None:
        stats, spec = self.stats, self.spec
        base = _Base.open(spec, self.dim_name) if self.append else None
        try:
            stamps = {path: Stamp.of(path) for path in self.files}  # before any worker reads them
            infos = self._describe(runner, stamps)
            for info in infos:
                assert info.stamp is not None
                if stamps[info.path].changes(info.stamp, device=False):  # changed before the worker read it
                    refuse_if_changed(info.path, stamps[info.path])
            ordered = order_and_check(infos, allow_gaps=self.allow_gaps,
                                      stored=base.coordinate() if base is not None else None, store=spec.url)
            if base is not None:
                base.check(ordered)
                old_len = base.length
            else:
                old_len = 0
            total = old_len + sum(i.length for i in ordered)
            writer = None
            if base is not None:
                self.plans = base.plans(total)
            else:
                writer = _plan_target(ordered[0], total, self.flavor, spec.xarray, consolidate=self.consolidate,
                                      char_as=self.char_as)
                self.plans = writer.plans
            dim = ordered[0].dim
            along = {vkey: plan.var.dimensions.index(dim) for vkey, plan in self.plans.items()
                     if dim in plan.var.dimensions}
            for info in ordered:
                for vkey, longest in info.longest.items():
                    if longest > self.plans[vkey].maxstrlen:
                        raise UsageError(f"{info.path}: {vkey}: a string of {longest} bytes, longer than the "
                                         f"{self.plans[vkey].maxstrlen} the {'store' if base else 'first file'} sets")
            stats.records = total - old_len
            self.target = target = stage_write(spec, overwrite=self.overwrite, append=base is not None, workers=True)
            tasks = plan_tasks(_pieces(ordered, old_len), dim, total, self.plans, along, target.part,
                               flavor=self.flavor, xarray=spec.xarray, direct=self.direct,
                               base=_absolute(spec) if base is not None else None, old_len=old_len)

            count = self._counter("write", sum(stamps[path].size for path in self.files))

            def written(done: BatchDone) -> None:
                target.adopt(done.written)
                stats.chunks += done.chunks
                stats.copied += done.copied
                stats.objects += len(done.written)
                count(done.files, done.bytes)

            # in this process the chains proven by one file's task hold for the next (one set for the run);
            # a cluster's batch proves its own
            write = partial(run_batch, proven=set()) if isinstance(runner, InProcess) else run_batch
            runner.each(write, self._batches(runner, tasks, [_task_bytes(t) for t in tasks]), written)
            safety.raise_if_interrupted()
            # metadata last, by the client
            if base is not None:
                for key, value in base.metadata(along, total).items():
                    target.put(key, value)
            else:
                assert writer is not None  # as the writer does: children first, the root group, .zmetadata
                writer.store = target  # type: ignore[assignment]
                writer.write_metadata()
            stats.objects += target.metadata_written
            for path, stamp in stamps.items():  # the records written are the ones checked, or no commit
                refuse_if_changed(path, stamp)
            target.commit()
        finally:
            if base is not None:
                base.close()

    def _describe(self, runner: Runner, stamps: dict[str, Stamp]) -> list[FileInfo]:
        """Every input described (in batches on a cluster), in the order given (refusals name the same file
        whatever order the workers finish in)."""
        found: dict[str, FileInfo] = {}
        count = self._counter("check", sum(stamp.size for stamp in stamps.values()))

        def described(infos: list[FileInfo]) -> None:
            for info in infos:
                found[info.path] = info
            count(len(infos), sum(stamps[i.path].size for i in infos))

        work = self._batches(runner, self.files, [stamps[path].size for path in self.files])
        runner.each(partial(describe_batch, dim_name=self.dim_name), work, described)
        return [found[path] for path in self.files]

    def _counter(self, phase: str, total: int) -> Callable[[int, int], None]:
        """Adds (files, bytes) done to the phase's running totals and reports them (none when no progress)."""
        done = [0, 0]

        def count(files: int, nbytes: int) -> None:
            done[0] += files
            done[1] += nbytes
            if self.progress is not None:
                self.progress(FilesDone(phase, done[0], len(self.files), done[1], total))

        count(0, 0)
        return count

    @staticmethod
    def _batches(runner: Runner, items: list[Any], sizes: list[int]) -> list[list[Any]]:
        """One item per batch in this process (nothing to save, finest progress); on a cluster, by bytes."""
        if isinstance(runner, InProcess):
            return [[item] for item in items]
        return batches(items, sizes, target=BATCH_BYTES, least=TASKS_PER_WORKER * runner.workers)

    def abort(self) -> None:
        if self.target is not None:
            plans = self.plans
            self.target.abort(lambda: chunk_keys(plans))


def _drain(client: Any, ours: set[Any], timeout: float = DRAIN_SECONDS) -> None:
    """Wait, at most ``timeout`` seconds, until no worker still runs one of the tasks ``ours``.

    A cancelled task keeps running in its worker thread (dask cannot stop a thread); on a
    cluster the command did not start, and so does not stop, such a task could still put
    chunks into the tree the abort is removing and leave part of it behind.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            running = client.call_stack()  # {worker: {key: stack}} of every task running now
        except Exception:  # a client going away runs nothing of ours any more
            return
        if not any(key in ours for stacks in running.values() for key in stacks):
            return
        time.sleep(0.05)


def _absolute(spec: StoreSpec) -> StoreSpec:
    """The spec with an absolute path: workers may run elsewhere."""
    return replace(spec, path=os.path.abspath(spec.path)) if spec.kind in ("file", "zip") else spec


@dataclass
class _Base:
    """The store an ``--append`` of several files extends: its checks, plans and updated metadata."""

    store: Any
    reader: Any
    dim: str
    length: int

    @classmethod
    def open(cls, spec: StoreSpec, dim_name: str) -> _Base:
        from nczarr_conformance.conversion.append import _find_dim
        from nczarr_conformance.nczarr.reader import DatasetReader
        from nczarr_conformance.stores import open_store

        store = open_store(spec, "r")
        try:
            reader = DatasetReader(store)
            dim = _find_dim(reader.dataset, dim_name)
            return cls(store, reader, dim, reader.dataset.find_dimension(dim).size)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        self.store.close()

    def variables(self) -> Iterator[tuple[str, Any]]:
        for gkey, group in self.reader.dataset.root.walk():
            for vname, var in group.variables.items():
                yield keys.join(gkey, vname), var

    def check(self, ordered: list[FileInfo]) -> None:
        """What append checks but the coordinate (see order_and_check), against the first of the new files;
        the others equal it."""
        from nczarr_conformance.conversion.append import PureZarrAttributes, _compare

        first = ordered[0]
        problems: list[str] = []
        # no file is open here: a calendar xarray added is kept as a difference (attribute_json._from_gregorian_reform)
        pure = PureZarrAttributes(self.reader, {}) if self.reader.flavor == "zarr" else None
        _compare(self.reader.dataset.root, first.dataset.root, "/", self.dim, problems, pure=pure)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            hint = ("; several files are placed chunk for chunk, so their chunks must be the store's: append them "
                    "one at a time" if any(": chunks " in p for p in problems) else "")
            raise UsageError(f"cannot append {first.path}: {problems[0]}{more}{hint}")
        for vkey, var in self.variables():
            info = self.reader.arrays[vkey]
            if self.dim in var.dimensions:
                if info.order != "C" or info.separator != ".":
                    raise UsageError(f"{vkey}: order {info.order}, chunk keys with {info.separator!r}: append the "
                                     "files one at a time")
            elif (vkey in first.fingerprints
                  and _fingerprint(self.reader.read_variable(vkey)) != first.fingerprints[vkey]):
                raise UsageError(f"{first.path}: {vkey} does not use {self.dim} but its values differ from the "
                                 "store's")

    def coordinate(self) -> np.ndarray | None:
        """The store's coordinate values along its dimension (None when it has no coordinate variable)."""
        if self.dim not in self.reader.arrays:
            return None
        return np.asarray(self.reader.read_variable(self.dim))

    def plans(self, total: int) -> dict[str, ArrayPlan]:
        """The store's arrays as the writer's plans (chunks, codecs, dtype, fill as stored), stretched."""
        out: dict[str, ArrayPlan] = {}
        for vkey, var in self.variables():
            info = self.reader.arrays[vkey]
            zshape = list(info.zshape)
            if self.dim in var.dimensions:
                zshape[var.dimensions.index(self.dim)] = total
            z = info.zarray
            out[vkey] = ArrayPlan(vkey, var, tuple(zshape), tuple(info.chunks), str(z.get("dtype")),
                                  info.storage.numpy, z.get("fill_value"), info.fill, z.get("compressor"),
                                  z.get("filters"), info.storage.numpy.itemsize if var.type == "string" else 0)
        return out

    def metadata(self, along: dict[str, int], total: int) -> dict[str, bytes]:
        """append's updated .zarray shapes and dimension size, ``.zmetadata`` last when the store has one."""
        from nczarr_conformance.conversion.append import (
            _updated_consolidated,
            _updated_metadata,
        )

        updated = _updated_metadata(self.reader, along, self.dim, total)
        consolidated = _updated_consolidated(self.store, updated)
        if consolidated is not None:
            updated["/.zmetadata"] = consolidated
        return updated
