"""``nc2nczarr --concat DIM --reference A.nc B.nc … OUT.json``: one reference store over many files, no chunk copied.

The files are described, ordered by their coordinate along DIM and checked exactly as
``--concat`` does (conversion/concat.py's :func:`~nczarr_conformance.conversion.concat.describe_batch`
and :func:`~nczarr_conformance.conversion.concat.order_and_check`, imported, not copied: the
coordinate rules are append.py's, variables without DIM must hold the same values in every file).
Then each file's references are made as ``--reference`` makes them for one file
(:func:`~nczarr_conformance.conversion.references.collect_file`, one task per file, on
dask.distributed as ``--concat`` runs, or in this process for small work) and merged on the
client: a chunk of a variable along DIM keeps its key with its index along DIM moved by the
file's offset in chunks; variables without DIM come from the first file. The metadata is the
first file's, written by the same writer with its arrays stretched to the total length (as
``--concat`` plans its target).

A variable along DIM whose chunks straddle files (a file but the last whose length along DIM is
not a multiple of its chunk size along DIM: netCDF-4's default chunk of a 1-D unlimited ``time``,
512 or 1024, in daily files) has no chunk that one file holds. When its values of every file fit
the inline bound of ``--reference`` (:data:`~nczarr_conformance.conversion.references.INLINE_LIMIT`
bytes per variable, counted uncompressed) it is written inline: those values, concatenated in file
order (describe()'s :attr:`~nczarr_conformance.conversion.concat.FileInfo.small`, else read by the
first file's task), as one chunk, the whole array, encoded by the first file's writer (its dtype,
fill, codecs, attributes); a warning line names it and why. Past the bound the run is refused.

What cannot be merged without copying is refused before anything is written, naming the file
and the variable: such a straddling variable past the inline bound, and a file whose array
differs from the first file's in chunk shape, dtype, fill or codecs (one Zarr array has one of
each). Every file's size and mtime is recorded under ``nczarr:targets`` as for one file, and the
output is written under a temporary name and renamed into place: a refused or failed run leaves
nothing.

``icechunk://PATH`` instead: one Icechunk repository, one commit. Each file's share is made by the Icechunk
writer of one file (conversion/icechunk_references.py: Zarr v3 with HDF5's codecs) into an in-memory
:class:`~nczarr_conformance.stores.references.V3ReferenceCollector`, merged with Zarr v3's keys
(conversion/reference_keys.py) and committed by
:class:`~nczarr_conformance.stores.icechunk_store.IcechunkCollector` (each chunk a virtual reference recording its
file's modification time; written beside PATH and renamed in once committed, so a refused run leaves an existing
repository as it was).
"""
from __future__ import annotations

import base64
import json
import math
import os
import time
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from nczarr_conformance import keys, nctypes, safety
from nczarr_conformance.conversion.append import Stamp, refuse_if_changed
from nczarr_conformance.conversion.concat import (
    BATCH_BYTES,
    TASKS_PER_WORKER,
    FileInfo,
    InProcess,
    OnCluster,
    Runner,
    batches,
    describe_batch,
    expand_inputs,
    in_process,
    order_and_check,
)
from nczarr_conformance.conversion.icechunk_references import is_icechunk_output, v3_writer
from nczarr_conformance.conversion.reference_keys import KERCHUNK, ZARR_V3, ReferenceKeys, V3Keys
from nczarr_conformance.conversion.references import INLINE_LIMIT, collect_file, plan_file, reference_layout
from nczarr_conformance.errors import UnsupportedError, UsageError
from nczarr_conformance.nczarr.writer import DatasetWriter
from nczarr_conformance.stores.icechunk_store import IcechunkCollector
from nczarr_conformance.stores.references import (
    ReferenceCollector,
    Target,
    V3ReferenceCollector,
    is_reference_path,
)
from nczarr_conformance.urls import parse

if TYPE_CHECKING:
    from nczarr_conformance.conversion.audience import Audience


@dataclass
class ReferenceConcatStats:
    files: int = 0
    records: int = 0
    referenced: int = 0  # chunks that are references into the files
    inline_bytes: int = 0  # bytes of chunks written inline
    objects: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    #: with ``for_readers``: the plan made from the first file and who still loses what, where (``plan_lines()``)
    audience: Audience | None = None


@dataclass(frozen=True)
class FileJob:
    """One file's share: its references, and (the first file) the metadata stretched to ``total`` along ``dim``."""

    path: str
    stamp: Stamp
    dim: str
    total: int
    first: bool
    flavor: str
    char_as: str | None
    consolidate: bool | None
    skip_unsupported: bool
    inline_limit: int
    #: the first file's task only: the variables written inline (their chunks straddle files), and every file in
    #: order (where values describe() did not keep are read)
    inline: tuple[Inlined, ...] = ()
    files: tuple[str, ...] = ()
    #: the output's layout: kerchunk's Zarr v2 (the NCZarr writer) or an Icechunk repository's Zarr v3 (its writer)
    layout: ReferenceKeys = KERCHUNK
    #: False: fill_value null for number and char variables without a _FillValue (planned by ``--for`` on the client,
    #: from the first file: every task writes the same layout, on a dask worker too)
    default_fill: bool = True


@dataclass(frozen=True)
class Inlined:
    """A variable along DIM whose chunks straddle files, written inline: its values of every file as one chunk."""

    key: str  # the variable (``/time``)
    axis: int  # of DIM
    path: str  # the first file (but the last) whose length along DIM is not a multiple of its chunk size
    warning: str  # why, as the warning line says it (after "written inline, N bytes: ")
    #: every file's values, concatenated in file order from describe()'s; None: the first file's task reads them
    values: np.ndarray | None = field(default=None, compare=False)


@dataclass
class FileRefs:
    """What a task hands back: the file's references as kerchunk has them, its target record, its .zarray docs."""

    path: str
    refs: dict[str, Any]
    target: dict[str, Target]
    zarrays: dict[str, dict[str, Any]]  # array key (no leading /) -> its fields one array has once, before any stretch
    referenced: int
    inline_bytes: int
    warnings: list[str]


def reference_file(job: FileJob) -> FileRefs:
    """:func:`collect_file` of one input (a worker task), refused if it changed since it was described."""
    refuse_if_changed(job.path, job.stamp, device=False)
    v3 = isinstance(job.layout, V3Keys)  # a copy on a dask worker: not the very object ZARR_V3
    collector = (V3ReferenceCollector if v3 else ReferenceCollector)(None, inline_limit=job.inline_limit)
    own: dict[str, dict[str, Any]] = {}

    def stretch(writer: DatasetWriter) -> None:
        """The first file's metadata again, its arrays along DIM as long as every file together."""
        for name, value in collector.refs.items():
            if job.layout.is_metadata(name) and (found := job.layout.array_fields(name, value)) is not None:
                own[found[0]] = found[1]
        if not job.first:
            return
        writer.ds.find_dimension(job.dim).size = job.total
        for plan in writer.plans.values():
            if job.dim in plan.var.dimensions:
                axis = plan.var.dimensions.index(job.dim)
                shape = list(plan.zshape)
                shape[axis] = job.total
                plan.zshape = tuple(shape)
                plan.var.shape = tuple(shape)
        for item in job.inline:
            inlined[item.key] = write_inline(writer, collector, item, job.files, job.layout)
        writer.metadata.clear()
        writer.write_metadata()

    inlined: dict[str, int] = {}
    writer_of: dict[str, Any] = {"make_writer": v3_writer} if v3 else {}
    stats = collect_file(job.path, collector, flavor=job.flavor, char_as=job.char_as, consolidate=job.consolidate,
                         skip_unsupported=job.skip_unsupported, then=stretch, default_fill=job.default_fill,
                         **writer_of)
    refuse_if_changed(job.path, job.stamp, device=False)
    stats.warnings += [f"{item.path}: {item.key}: written inline, {inlined[item.key]} bytes: {item.warning}"
                       for item in job.inline]
    return FileRefs(job.path, collector.refs, collector.targets, own, collector.referenced,
                    stats.bytes_out, stats.warnings)


def write_inline(writer: DatasetWriter, collector: ReferenceCollector, item: Inlined, files: tuple[str, ...],
                 layout: ReferenceKeys = KERCHUNK) -> int:
    """Put the variable ``item`` inline in place of the first file's references: its values of every file (``files``
    in order) as one chunk, the whole array, encoded by ``writer`` (the first file's, its plan stretched, keyed as
    ``layout`` keys chunks); the bytes."""
    plan = writer.plans[item.key]
    values = item.values if item.values is not None else read_along(files, item.key, item.axis)
    if values.shape != plan.zshape:
        raise UnsupportedError(f"{files[0]}: {item.key}: the files hold {values.shape[item.axis]} records along DIM, "
                               f"not the {plan.zshape[item.axis]} planned (a file changed while it was read)")
    plan.chunks = tuple(max(1, s) for s in plan.zshape)
    plan.var.chunks = list(plan.chunks)
    array = item.key.lstrip("/")
    for name in [n for n in collector.refs if n.startswith(array + "/") and not layout.is_metadata(n)
                 and layout.split(n)[0] == array]:
        del collector.refs[name]  # the first file's own chunks of it: references into that file alone
    collector.inlined.pop(item.key, None)
    source, raw = writer.source, writer.raw

    def concatenated(akey: str, var: Any, region: tuple[slice, ...]) -> np.ndarray:
        return values[region] if region else values

    writer.source, writer.raw = concatenated, None
    try:
        writer._write_chunks(plan)
    finally:
        writer.source, writer.raw = source, raw
    return collector.inlined.pop(item.key, 0)  # said by its own warning, not collect_file's


def read_along(files: tuple[str, ...], vkey: str, axis: int) -> np.ndarray:
    """The values of ``vkey`` in every file of ``files``, concatenated along ``axis`` in that order."""
    from nczarr_conformance.sources import netcdf4 as nc4

    parts = []
    for path in files:
        nc = nc4.open_nc(path, check="none")  # describe() scanned it
        try:
            with nc4.LOCK:
                var = nc[vkey.lstrip("/")]
            parts.append(nc4.read_values(var))
        finally:
            nc4.close_nc(nc)
    return np.concatenate(parts, axis=axis)


def reference_batch(jobs: list[FileJob]) -> list[FileRefs]:
    """:func:`reference_file` of several inputs in one task (one scheduling round trip for a batch of files)."""
    out = []
    for job in jobs:
        safety.raise_if_interrupted()
        out.append(reference_file(job))
    return out


def straddling(ordered: list[FileInfo], inline_limit: int) -> dict[str, Inlined]:
    """The variables along DIM whose chunks straddle files, each to be written inline (:func:`write_inline`).

    A file (but the last) whose length along DIM is not a multiple of a variable's chunk size along DIM ends
    in a chunk that holds the first rows of the next file's: no file holds that chunk, only a copy can make
    it. The chunk size is the file's HDF5 chunking (a contiguous variable's: its whole length, one reference).
    Such a variable is inlined when its values of every file (uncompressed) fit ``inline_limit`` bytes, the
    bound of ``--reference``; past it the run is refused naming the file, the variable and the bound.
    """
    total = sum(info.length for info in ordered)
    found: dict[str, Inlined] = {}
    for info in ordered[:-1]:
        for gkey, group in info.dataset.root.walk():
            for vname, var in group.variables.items():
                vkey = keys.join(gkey, vname)
                if info.dim not in var.dimensions or vkey in found:
                    continue
                axis = var.dimensions.index(info.dim)
                chunk = int(var.chunks[axis]) if var.chunks else int(var.shape[axis])
                if not info.length % chunk:
                    continue
                size = total * math.prod(int(s) for n, s in enumerate(var.shape) if n != axis)
                size *= _itemsize(var.type, [other.longest.get(vkey, 0) for other in ordered])
                straddles = (f"{info.length} records along {info.dim} are not a multiple of its chunk size {chunk} "
                             f"along {info.dim}, so its last chunk would straddle the next file's")
                if size > inline_limit:
                    raise UnsupportedError(
                        f"{info.path}: {vkey}: {straddles}: cannot be referenced without copying, and its {size} "
                        f"bytes (all files) exceed the inline bound of {inline_limit} bytes per variable (convert "
                        "without --reference)")
                values = None
                if all(vkey in other.small for other in ordered):  # describe() kept them: no file reopened
                    values = np.concatenate([np.asarray(other.small[vkey]) for other in ordered], axis=axis)
                found[vkey] = Inlined(vkey, axis, info.path, f"its chunk size {chunk} along {info.dim} straddles "
                                      f"files of {info.length} records; its {size} bytes (all files) are within the "
                                      f"inline bound of {inline_limit} bytes per variable", values)
    return found


def _itemsize(nctype: str, longest: list[int]) -> int:
    """Bytes of one value as written: a string's, the longest of any file (materialised at a fixed width)."""
    if nctype == "string":
        return max([1, *longest])
    return int(nctypes.numpy_dtype(nctype).itemsize)


def _refuse_other_arrays(first: FileRefs, other: FileRefs) -> None:
    """One Zarr array has one chunk shape, dtype, fill and codec chain: refuse a file whose array differs."""
    for array, mine in first.zarrays.items():
        theirs = other.zarrays.get(array)
        if theirs is None:
            raise UnsupportedError(f"{other.path}: /{array}: not an array there, as in {first.path}")
        differ = [name for name in mine if mine.get(name) != theirs.get(name)]
        if differ:
            what = "; ".join(f"{name} {json.dumps(theirs.get(name))} (first file: {json.dumps(mine.get(name))})"
                             for name in differ)
            raise UnsupportedError(f"{other.path}: /{array}: {what}, differs from {first.path}: one array cannot "
                                   "reference both (convert without --reference)")


def _shifted(name: str, axis: int, shift: int, layout: ReferenceKeys = KERCHUNK) -> str:
    """The chunk key ``name`` (``array/i.j.k``, or as ``layout`` keys chunks) with its index along ``axis`` moved
    by ``shift`` chunks."""
    array, index = layout.split(name)
    index[axis] += shift
    return layout.join(array, index)


def merge(ordered: list[FileInfo], done: dict[str, FileRefs], dim: str, inline: frozenset[str] = frozenset(),
          layout: ReferenceKeys = KERCHUNK) -> tuple[dict[str, Any], dict[str, Target]]:
    """The references of every file as one store: the first file's metadata (stretched), variables without DIM
    and ``inline`` ones (array keys, no leading /: the first file's task wrote every file's values), each file's
    chunks along DIM at their index offset by the rows before it (in chunks); keys as ``layout`` spells them."""
    first = done[ordered[0].path]
    along = {array: None if array in inline else _axis(ordered[0], array, dim) for array in first.zarrays}
    refs: dict[str, Any] = {}
    targets: dict[str, Target] = {}
    offset = 0
    for n, info in enumerate(ordered):
        got = done[info.path]
        if n:
            _refuse_other_arrays(first, got)
        targets.update(got.target)
        for name, ref in got.refs.items():
            if layout.is_metadata(name):  # the first file's, stretched
                if n == 0:
                    refs[name] = ref
                continue
            array = layout.split(name)[0]
            axis = along.get(array)
            if axis is None:
                if n == 0:  # without DIM (order_and_check compared their values) or inline: the first file's
                    refs[name] = ref
                continue
            chunk = layout.chunk_shape(first.zarrays[array])[axis]
            refs[_shifted(name, axis, offset // chunk, layout)] = ref
        offset += info.length
    return refs, targets


def _axis(info: FileInfo, array: str, dim: str) -> int | None:
    """The axis of DIM in the variable ``array`` (no leading /), None when it does not use DIM."""
    for gkey, group in info.dataset.root.walk():
        for vname, var in group.variables.items():
            if keys.join(gkey, vname) == "/" + array:
                return var.dimensions.index(dim) if dim in var.dimensions else None
    return None


def concat_references(inputs: list[str], dst: str, dim_name: str, *, flavor: str | None = None,
                      overwrite: bool = False, char_as: str | None = None, consolidate: bool | None = None,
                      skip_unsupported: bool = False, allow_gaps: bool = False, scheduler: str | None = None,
                      workers: int | None = None, client: Any = None, inline_limit: int = INLINE_LIMIT,
                      for_readers: list[str] | None = None, prefer: list[str] | None = None,
                      accept_losses: bool = False) -> ReferenceConcatStats:
    """Kerchunk references (``dst``: ``.json`` or ``.parq``), or a new Icechunk repository (``dst``:
    ``icechunk://PATH``, one commit, Zarr v3 as ``nc2nczarr IN.nc icechunk://PATH --reference`` writes it: no
    ``flavor`` or ``char_as`` there), of the files ``inputs`` concatenated along ``dim_name``.

    The files are ordered and checked as :func:`~nczarr_conformance.conversion.concat.concat` does
    (``allow_gaps`` as there), each referenced as
    :func:`~nczarr_conformance.conversion.references.convert_references` does (``flavor``, ``char_as``,
    ``consolidate``, ``skip_unsupported``, ``inline_limit`` as there), on ``client``, a cluster on
    ``scheduler`` or of ``workers`` processes, or in this process for small work
    (:func:`~nczarr_conformance.conversion.concat.in_process`).

    ``for_readers`` (``nc2nczarr --for``; ``prefer`` and ``accept_losses`` as there) writes the Zarr v2 layout those
    readers read equal to the files, planned once from the first file along ``dim_name`` once the files are
    ordered, before any file is referenced, and refused as
    :func:`~nczarr_conformance.conversion.references.convert_references` refuses it for one file (a plan needing
    other chunks or codecs; a named reader still reading some object otherwise, unless ``accept_losses``); every
    file is then written with that plan (``stats.audience`` holds it). Not into an Icechunk repository: Zarr v3.
    """
    from nczarr_conformance.conversion.cluster import open_client

    started = time.perf_counter()
    files = expand_inputs(inputs)
    icechunk = is_icechunk_output(dst)
    if not icechunk and not is_reference_path(dst):
        raise UsageError(f"{dst}: --reference writes kerchunk references: name a .json file (kerchunk JSON) or a "
                         ".parq directory (kerchunk Parquet), or icechunk://PATH (a new Icechunk repository)")
    out_path = parse(dst).path if icechunk else dst
    real_dst = os.path.realpath(out_path)
    for path in files:
        if os.path.realpath(path) == real_dst:
            raise UsageError(f"{dst}: the output would replace its own input")
    if for_readers and (flavor is not None or char_as is not None):
        raise UsageError("--for chooses the flavor and char dtype: give no --flavor or --char-as with it")
    if (prefer or accept_losses) and not for_readers:
        raise UsageError("--prefer and --accept-losses go with --for: give --for")
    if for_readers and icechunk:
        raise UsageError(f"{dst}: --for plans a Zarr v2 layout (flavor, char dtype, default fill), and an Icechunk "
                         "repository is written as Zarr v3: write kerchunk references (.json or .parq) for --for")
    collector: ReferenceCollector
    layout: ReferenceKeys
    if icechunk:
        given = [name for name, value in (("flavor", flavor), ("char_as", char_as)) if value is not None]
        if given:
            raise UsageError(f"{dst}: an Icechunk repository is written as Zarr v3: no {', '.join(given)} to choose")
        flavor, layout = "zarr", ZARR_V3  # both dropped by its writer (icechunk_references.v3_writer)
        collector = IcechunkCollector(out_path, overwrite=overwrite, inline_limit=inline_limit,  # refuses it existing
                                      message=f"nc2nczarr --concat {dim_name} --reference ({len(files)} files)")
    else:
        (flavor, char_as), layout = reference_layout(flavor, char_as), KERCHUNK
        collector = ReferenceCollector(dst, overwrite=overwrite, inline_limit=inline_limit)  # refuses it existing
    stats = ReferenceConcatStats(files=len(files))
    options: dict[str, Any] = {"flavor": flavor, "char_as": char_as, "consolidate": consolidate,
                               "skip_unsupported": skip_unsupported, "allow_gaps": allow_gaps, "layout": layout,
                               "where": dst, "for_readers": for_readers, "prefer": prefer or [],
                               "accept_losses": accept_losses}
    try:
        if client is not None:
            _run(OnCluster(client, own=False), files, collector, dim_name, stats, **options)
        elif in_process(files, scheduler, workers):
            _run(InProcess(), files, collector, dim_name, stats, **options)
        else:
            with open_client(scheduler, workers) as own:
                _run(OnCluster(own, own=True), files, collector, dim_name, stats, **options)
    except BaseException:
        collector.abort()
        raise
    stats.seconds = time.perf_counter() - started
    return stats


def _in_batches(runner: Runner, items: list[Any], sizes: list[int]) -> list[list[Any]]:
    """One item per batch in this process; on a cluster, by bytes (concat.py's ``_Job._batches``, copied: private)."""
    if isinstance(runner, InProcess):
        return [[item] for item in items]
    return batches(items, sizes, target=BATCH_BYTES, least=TASKS_PER_WORKER * runner.workers)


def _run(runner: Runner, files: list[str], collector: ReferenceCollector, dim_name: str,
         stats: ReferenceConcatStats, *, flavor: str, char_as: str | None, consolidate: bool | None,
         skip_unsupported: bool, allow_gaps: bool, layout: ReferenceKeys, where: str,
         for_readers: list[str] | None, prefer: list[str], accept_losses: bool) -> None:
    stamps = {path: Stamp.of(path) for path in files}
    sizes = [stamps[path].size for path in files]
    found: dict[str, FileInfo] = {}

    def described(infos: list[FileInfo]) -> None:
        found.update((info.path, info) for info in infos)

    runner.each(partial(describe_batch, dim_name=dim_name), _in_batches(runner, files, sizes), described)
    for path in files:  # changed between our stamp and the worker's read
        seen = found[path].stamp
        if seen is not None and stamps[path].changes(seen, device=False):
            refuse_if_changed(path, stamps[path])
    ordered = order_and_check([found[path] for path in files], allow_gaps=allow_gaps, store=where)
    inline = straddling(ordered, collector.inline_limit)
    dim = ordered[0].dim
    total = sum(info.length for info in ordered)
    in_order = tuple(info.path for info in ordered)
    default_fill = True
    if for_readers:  # one plan, the first file's, for every file: refused here before any file is referenced
        flavor, char_as, default_fill, planned = plan_file(ordered[0].path, for_readers, prefer,
                                                           accept_losses=accept_losses,
                                                           skip_unsupported=skip_unsupported)
        stats.audience = planned.audience
    jobs = [FileJob(info.path, stamps[info.path], dim, total, n == 0, flavor, char_as, consolidate,
                    skip_unsupported, collector.inline_limit, tuple(inline.values()) if n == 0 else (),
                    in_order if n == 0 else (), layout, default_fill) for n, info in enumerate(ordered)]
    done: dict[str, FileRefs] = {}

    def referenced(results: list[FileRefs]) -> None:
        done.update((result.path, result) for result in results)

    runner.each(reference_batch, _in_batches(runner, jobs, [stamps[j.path].size for j in jobs]), referenced)
    safety.raise_if_interrupted()
    refs, targets = merge(ordered, done, dim, frozenset(key.lstrip("/") for key in inline), layout)
    collector.refs = refs
    collector.targets = {path: targets[path] for path in sorted(targets)}
    for info in ordered:  # the files referenced are the ones checked, or no commit
        refuse_if_changed(info.path, stamps[info.path])
        stats.warnings += done[info.path].warnings
    # a line that names no file (what the Zarr v3 layout does not keep) is every file's: said once
    stats.warnings = list(dict.fromkeys(stats.warnings))
    stats.referenced, stats.inline_bytes = _counted(refs, layout)
    stats.records = total
    stats.objects = len(refs)
    collector.commit()


def _counted(refs: dict[str, Any], layout: ReferenceKeys = KERCHUNK) -> tuple[int, int]:
    """The chunks of the merged ``refs`` that are references, and the bytes of those written inline (what the store
    holds: a file's share dropped in the merge, the other files' variables without DIM, is not counted)."""
    referenced = inline = 0
    for name, ref in refs.items():
        if layout.is_metadata(name):
            continue
        if isinstance(ref, list):
            referenced += 1
        elif isinstance(ref, str) and ref.startswith("base64:"):
            inline += len(base64.b64decode(ref[7:]))
    return referenced, inline

