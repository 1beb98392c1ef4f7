"""``nc2nczarr IN.nc OUT.json --reference``: the NCZarr store we would write, with chunks as references into IN.nc.

No metadata logic of its own: the dataset is read and prepared as :func:`from_netcdf.convert` does
and written by the same :class:`~nczarr_conformance.nczarr.writer.DatasetWriter` (App. D
attributes, char and string mapping, groups, unlimited dimensions, ``_ARRAY_DIMENSIONS``, fill),
into a :class:`~nczarr_conformance.stores.references.ReferenceCollector` instead of a directory.
The writer's direct chunk copy (``sources/hdf5_chunks.py``) hands it each HDF5 chunk as
(file, offset, length), which it records instead of copying: an HDF5 chunk *is* one Zarr chunk,
with the same codecs (shuffle → numcodecs shuffle, deflate → zlib), verified by decoding the
smallest one as the writer does before every direct copy.

What cannot be a reference is said, never dropped:

* a contiguous dataset is one reference of the whole array (its Zarr chunk is its shape);
* what has no byte range of its own (compact datasets, scalars of pure Zarr, variable-length
  strings, materialised at their fixed width; chunks HDF5 never wrote but that read as a
  value other than the fill) is written inline, up to :data:`INLINE_LIMIT` bytes per variable;
  past that the conversion is refused naming the variable and why;
* an HDF5 filter with no Zarr codec reading the same bytes (szip, fletcher32, any plugin) is
  refused by name before anything is written (exit 2).

The input may be an S3 object (``s3://BUCKET/KEY.nc``), read by byte range: h5py reads its header and
chunk index through a file object over ranged GETs (``stores/s3_object.py``), netCDF4-python its netCDF
header through netcdf-c's byte-range mode on a loopback URL answering from those reads
(``stores/http_bridge.py``); the references name ``s3://BUCKET/KEY.nc`` and record its size and ETag.
Every read is held to the ETag first seen, so an object overwritten during the conversion is refused.
Its chunks are not each inflated before being referenced (that would read the whole file): the
smallest of each codec chain is decoded and compared with netCDF-4's values, as for a local file.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.conversion.from_netcdf import ConvertStats, _opened, _prepare
from nczarr_conformance.errors import StoreError, UnsupportedError, UsageError
from nczarr_conformance.model import Dataset, Variable
from nczarr_conformance.nczarr.writer import DEFAULT_CHAR_AS, FLAVOR_ALIASES, ArrayPlan, DatasetWriter
from nczarr_conformance.sources import hdf5_types
from nczarr_conformance.sources import netcdf4 as nc4
from nczarr_conformance.sources.hdf5_chunks import DirectChunks, Stored, _Reader
from nczarr_conformance.stores.references import ReferenceCollector, Target, is_reference_path
from nczarr_conformance.stores.s3_object import S3Object, is_s3_url

#: bytes of one variable's chunks written inline (base64 in the references) before the conversion is refused
INLINE_LIMIT = 16 * 1024**2
#: HDF5 filters whose chunks are Zarr chunks as they are (numcodecs shuffle, zlib)
REFERENCEABLE_FILTERS = {1: "deflate", 2: "shuffle"}
#: char variables default to |S1 here: xarray and zarr-python 3, the readers of references, refuse >S1
REFERENCE_CHAR_AS = "S1"


class ReferenceChunks(DirectChunks):
    """The HDF5 chunk index as references: contiguous datasets too, char variables too; why each is not."""

    def __init__(self, path: Any) -> None:
        super().__init__(path, copy=True)
        self.why: dict[str, str] = {}
        #: the collector's handle of a remote target (ReferenceCollector.register_remote): chunks become
        #: references into it by their HDF5 addresses, none read
        self.handle: int | None = None
        self.read_remote: Callable[[int, int], bytes] | None = None  # (offset, length) of the remote object

    def _reader(self, *args: Any) -> _Reader:
        return _Reader(self, *args) if self.handle is None else _RemoteReader(self, *args)

    def _copyable(self, plan: ArrayPlan, dataset: Any) -> bool:
        if plan.var.type == "char":  # one byte per char in HDF5 and in |S1 / >S1 alike
            return bool(dataset.dtype == np.dtype("S1") and plan.storage.itemsize == 1
                        and self._codecs_match(plan, dataset))
        return super()._copyable(plan, dataset)

    def __call__(self, plan: ArrayPlan) -> Any:
        import h5py

        with self.lock:
            dataset = self.file.get(plan.key.lstrip("/"))
            if dataset is None:
                self.why[plan.key] = "no HDF5 dataset of that name"
                return None
            plist = dataset.id.get_create_plist()
            layout = plist.get_layout()
            offset = dataset.id.get_offset() if layout == h5py.h5d.CONTIGUOUS else None
            size = int(dataset.id.get_storage_size())
            whole = bool(plan.zshape) and tuple(plan.chunks) == tuple(plan.zshape)
            if (offset is not None and size and whole and plist.get_external_count() == 0
                    and size == int(np.prod(plan.zshape)) * plan.storage.itemsize
                    and self._copyable(plan, dataset)):
                return self._reader(dataset, plan, {(0,) * len(plan.zshape): Stored(int(offset), size, 0)}, None,
                                    True)
        reader = super().__call__(plan)
        if isinstance(reader, _Reader) and self.handle is not None:
            reader = self._reader(reader.dataset, reader.plan, reader.stored, reader.unstored, reader.copyable)
        if layout == h5py.h5d.COMPACT:
            self.why[plan.key] = "a compact dataset (its values live in the HDF5 object header)"
        elif plan.var.type == "string":
            self.why[plan.key] = "variable-length strings (materialised at a fixed width)"
        elif not plan.zshape:
            self.why[plan.key] = "a scalar of pure Zarr (no chunk shape to reference)"
        elif not isinstance(reader, _Reader) or not reader.copyable:
            self.why[plan.key] = "HDF5 chunks that are not Zarr chunks as they are (type, byte order or chunk shape)"
        else:
            self.why[plan.key] = "chunks that must be written out (unwritten chunks read as other than the fill)"
        return reader


class _RemoteReader(_Reader):
    """A variable's chunks in a remote object: where each lies is the reference, its bytes are not read."""

    def extent(self, index: tuple[int, ...]) -> tuple[int, int, int] | None:
        owner = self.owner
        assert isinstance(owner, ReferenceChunks) and owner.handle is not None
        where = self.stored.get(self._offset(index))
        if where is None or not self.copyable or where.filter_mask != 0:
            return None
        return owner.handle, where.address, where.size

    def __call__(self, index: tuple[int, ...]) -> bytes | None:
        """One chunk's bytes by its address (the writer decodes the smallest of each codec chain to prove
        them): a range of the object, since h5py reads no contiguous dataset as a chunk."""
        owner = self.owner
        assert isinstance(owner, ReferenceChunks) and owner.read_remote is not None
        where = self.stored.get(self._offset(index))
        if where is None:
            return self.unstored
        if not self.copyable or where.filter_mask != 0:
            return None
        return self._checked(index, where, owner.read_remote(where.address, where.size))


def unreferenceable(src: str, dataset: Dataset, hdf5: Any = None) -> list[str]:
    """Each variable of ``dataset`` whose HDF5 filters no Zarr codec reads, with the filters named (``hdf5``:
    what h5py opens when not ``src``, a file object over an S3 object)."""
    import h5py

    found: list[str] = []
    with nc4.LOCK, h5py.File(src if hdf5 is None else hdf5, "r") as f:
        for gkey, group in dataset.root.walk():
            for name in group.variables:
                vkey = keys.join(gkey, name)
                obj = f.get(vkey.lstrip("/"))
                if not isinstance(obj, h5py.Dataset):
                    continue
                plist = obj.id.get_create_plist()
                other = [(int(fid), fname) for fid, _, _, fname in
                         (plist.get_filter(i) for i in range(plist.get_nfilters()))
                         if int(fid) not in REFERENCEABLE_FILTERS]
                if other:
                    names = ", ".join(f"{n.decode('ascii', 'replace') if isinstance(n, bytes) else n} (HDF5 filter "
                                      f"{i})" for i, n in other)
                    found.append(f"{vkey}: {names}")
    return found


def _whole_chunks(dataset: Dataset) -> None:
    """Contiguous variables (no chunks in the model) get their shape as chunk shape: one reference each."""
    for _, group in dataset.root.walk():
        for var in group.variables.values():
            if var.chunks is None and var.shape and all(var.shape):
                var.chunks = list(var.shape)


def convert_references(src: str, dst: str, *, flavor: str | None = None, overwrite: bool = False,
                       char_as: str | None = None, consolidate: bool | None = None, skip_unsupported: bool = False,
                       inline_limit: int = INLINE_LIMIT,
                       storage_options: dict[str, Any] | None = None, for_readers: list[str] | None = None,
                       prefer: list[str] | None = None, accept_losses: bool = False) -> ConvertStats:
    """Write kerchunk references (``dst``: ``.json`` or ``.parq``) of the NCZarr store ``src`` converts to.

    ``for_readers`` (``nc2nczarr --for``; ``prefer`` as there) writes the Zarr v2 metadata layout those readers
    read equal to the source (flavor, char dtype, a type's default fill written or null), the chunks still
    the file's: a plan that needs other chunks or codecs (netcdf-c 4.9 reads no compressed chunk) is refused
    in one line naming what it needs, and so is a plan where a named reader would still read something
    otherwise than the file (xarray reads a float32 ``scale_factor`` as float64), naming each object, unless
    ``accept_losses``: then the references are written and ``stats.audience`` says who loses what, where.

    ``flavor``, ``char_as`` and ``consolidate`` as for :func:`from_netcdf.convert` (char defaults to
    ``|S1`` here: :data:`REFERENCE_CHAR_AS`). ``stats.copied`` counts the chunks written as references.
    ``src`` may be an S3 object, ``s3://BUCKET/KEY.nc`` (``storage_options`` as for any s3:// URL here):
    read by byte range (not fetched whole), its references recording its size and ETag.
    """
    started = time.perf_counter()
    if is_s3_url(src):
        if not is_reference_path(dst):
            raise UsageError(f"{dst}: --reference writes kerchunk references: name a .json file (kerchunk JSON) or "
                             "a .parq directory (kerchunk Parquet)")
        flavor, char_as = reference_layout(flavor, char_as)
        collector = ReferenceCollector(dst, overwrite=overwrite, inline_limit=inline_limit)
        return collect_and_commit(src, collector, started, flavor=flavor, char_as=char_as, consolidate=consolidate,
                                  skip_unsupported=skip_unsupported, storage_options=storage_options,
                                  for_readers=for_readers, prefer=prefer, accept_losses=accept_losses)
    if not os.path.exists(src):
        raise StoreError(f"{src}: no such file or directory")
    if not is_reference_path(dst):
        raise UsageError(f"{dst}: --reference writes kerchunk references: name a .json file (kerchunk JSON) or a "
                         ".parq directory (kerchunk Parquet)")
    if os.path.abspath(dst) == os.path.abspath(src):
        raise UsageError(f"{dst}: the output would replace its own input")
    flavor, char_as = reference_layout(flavor, char_as)
    collector = ReferenceCollector(dst, overwrite=overwrite, inline_limit=inline_limit)
    return collect_and_commit(src, collector, started, flavor=flavor, char_as=char_as, consolidate=consolidate,
                              skip_unsupported=skip_unsupported, for_readers=for_readers, prefer=prefer,
                              accept_losses=accept_losses)


def collect_and_commit(src: str, collector: Any, started: float, **options: Any) -> ConvertStats:
    """:func:`collect_file` into ``collector``, committed, or aborted (nothing left) on any failure; the
    stats timed from ``started``."""
    try:
        stats = collect_file(src, collector, **options)
        collector.commit()
    except BaseException:
        collector.abort()
        raise
    stats.seconds = time.perf_counter() - started
    return stats


def reference_layout(flavor: str | None, char_as: str | None) -> tuple[str, str | None]:
    """The flavor (an alias resolved; nczarr-4.10 by default) and char dtype (:data:`REFERENCE_CHAR_AS` where the
    flavor takes one) references are written with."""
    resolved = FLAVOR_ALIASES.get(flavor or "nczarr-4.10")
    if resolved is None:
        raise UsageError(f"unknown flavor (one of {', '.join(sorted(FLAVOR_ALIASES))})")
    if char_as is None and resolved in DEFAULT_CHAR_AS:
        char_as = REFERENCE_CHAR_AS
    return resolved, char_as


def collect_file(src: str, collector: ReferenceCollector, *, flavor: str, char_as: str | None,
                 consolidate: bool | None, skip_unsupported: bool = False,
                 then: Callable[[DatasetWriter], None] | None = None,
                 make_writer: Callable[..., DatasetWriter] = DatasetWriter,
                 storage_options: dict[str, Any] | None = None, for_readers: list[str] | None = None,
                 prefer: list[str] | None = None, accept_losses: bool = False,
                 default_fill: bool = True) -> ConvertStats:
    """The references of ``src`` put into ``collector`` (not committed: the caller commits or aborts).

    ``default_fill=False`` writes fill_value null for number and char variables without a _FillValue (what
    ``for_readers`` may plan; ``--concat --reference --for`` plans once, from the first file, and hands each
    file's task the plan: :func:`plan_file`).
    ``then`` is handed the writer once its chunks and metadata are written (``--concat --reference``
    stretches the first file's arrays along DIM and writes their metadata again: conversion/reference_concat.py).
    ``make_writer`` builds the writer (the Zarr v3 one for an Icechunk repository: conversion/icechunk_references.py).
    ``src`` may be an S3 object (:func:`_s3_input`).
    """
    if is_s3_url(src):
        with _s3_input(src, storage_options) as (obj, netcdf, errors):
            try:
                return _collect(src, collector, flavor=flavor, char_as=char_as, consolidate=consolidate,
                                skip_unsupported=skip_unsupported, then=then, make_writer=make_writer, obj=obj,
                                netcdf=netcdf, for_readers=for_readers, prefer=prefer, accept_losses=accept_losses,
                                default_fill=default_fill)
            except Exception:
                if errors:  # what netcdf-c saw as an HTTP error: the object's own cause, named
                    raise errors[0] from None
                raise
    if not hdf5_types.is_hdf5(src):
        raise UnsupportedError(f"{src}: not a netCDF-4 (HDF5) file; only HDF5 chunks can be referenced "
                               "(convert it without --reference)")
    return _collect(src, collector, flavor=flavor, char_as=char_as, consolidate=consolidate,
                    skip_unsupported=skip_unsupported, then=then, make_writer=make_writer, for_readers=for_readers,
                    prefer=prefer, accept_losses=accept_losses, default_fill=default_fill)


def plan_file(src: str, readers: list[str], prefer: list[str], *, accept_losses: bool = False,
              skip_unsupported: bool = False) -> tuple[str, str | None, bool, ConvertStats]:
    """The flavor, char dtype and default fill (False: fill_value null) of the Zarr v2 layout ``readers`` read
    equal to the local file ``src``, and the stats whose ``audience`` says who loses what, where; refused as
    :func:`convert_references` refuses a plan (:func:`_planned`). Only the header is read: ``--concat --reference
    --for`` plans once from the first file, before any file's task runs, and hands every task this plan as plain
    values (a dask worker cannot plan it again and be sure to agree)."""
    if not hdf5_types.is_hdf5(src):
        raise UnsupportedError(f"{src}: not a netCDF-4 (HDF5) file; only HDF5 chunks can be referenced "
                               "(convert it without --reference)")
    stats = ConvertStats()
    with _opened(src, skip_unsupported) as opened:
        dataset, _, _ = _prepare(opened, src, {}, skip_unsupported, None)
        flavor, char_as, layout = _planned(src, dataset, readers, prefer, stats, accept_losses)
    return flavor, char_as, bool(layout.get("default_fill", True)), stats


def _planned(src: str, dataset: Dataset, readers: list[str], prefer: list[str], stats: ConvertStats,
             accept_losses: bool = False) -> tuple[str, str | None, dict[str, Any]]:
    """The flavor, char dtype and writer options of the Zarr v2 layout ``readers`` read equal to ``src``
    (conversion/audience.py, as ``nc2nczarr --for`` plans a copy), or UnsupportedError where that layout needs
    chunks or codecs other than the file's (references keep them as stored), or where a named reader would
    still read some object otherwise than the file, each named (unless ``accept_losses``): references are
    made to be read as the file reads, and a user who named the readers is told before anything is written,
    not by a reader's values afterwards."""
    import copy

    from nczarr_conformance.conversion.audience import decide, strip_codecs

    stats.audience, choice = decide(dataset, "file", readers, prefer, {"zarr_format": 2})
    changed = strip_codecs(copy.deepcopy(dataset), choice)
    if changed:
        needs = ", ".join(f"{knob} {choice[knob]}" for knob in ("filters", "compression", "chunks")
                          if choice.get(knob) not in (None, "keep"))
        raise UnsupportedError(f"{src}: --for {','.join(readers)}: those readers need {needs} of "
                               f"{', '.join(sorted(changed))}, and references keep the file's chunks and codecs as "
                               "stored (convert without --reference)")
    plan = stats.audience.plan
    if plan is not None and plan.losses and not accept_losses:
        lost = "; ".join(f"{loss.reader} {loss.need.loses.split(' (')[0]}{stats.audience.where(loss)}"
                         for loss in plan.losses)
        raise UnsupportedError(f"{src}: --for {','.join(readers)}: references would still be read otherwise than the "
                               f"file: {lost} (--accept-losses writes the references anyway)")
    flavor = str(choice.get("flavor", "nczarr-4.10"))
    char_as = str(choice["char_as"]) if "char_as" in choice and flavor in DEFAULT_CHAR_AS else None
    return flavor, char_as, {"default_fill": choice.get("default_fill") != "null"}


@contextmanager
def _s3_input(src: str, storage_options: dict[str, Any] | None) -> Iterator[tuple[S3Object, str, list[Any]]]:
    """The S3 object ``src`` (HEADed: its size and ETag), refused unless it starts as HDF5 does, and the
    loopback byte-range URL netCDF4-python reads it through, for as long as the block lasts."""
    from nczarr_conformance.stores.http_bridge import serving
    from nczarr_conformance.stores.sniff import HDF5_SIGNATURE

    obj = S3Object(src, storage_options)
    try:
        obj.stamp()
        if obj.read(0, len(HDF5_SIGNATURE)) != HDF5_SIGNATURE:
            raise UnsupportedError(f"{src}: not a netCDF-4 (HDF5) file (no HDF5 signature at its start); only "
                                   "HDF5 chunks can be referenced")
        with serving(obj) as (url, errors):
            yield obj, url, errors
    finally:
        obj.close()


def _collect(src: str, collector: ReferenceCollector, *, flavor: str, char_as: str | None,
             consolidate: bool | None, skip_unsupported: bool, then: Callable[[DatasetWriter], None] | None,
             make_writer: Callable[..., DatasetWriter], obj: S3Object | None = None,
             netcdf: str | None = None, for_readers: list[str] | None = None,
             prefer: list[str] | None = None, accept_losses: bool = False,
             default_fill: bool = True) -> ConvertStats:
    """:func:`collect_file` of a local file, or of the S3 object ``obj`` (netCDF4-python reading ``netcdf``)."""
    stats = ConvertStats()
    inline_limit = collector.inline_limit
    with _opened(src, skip_unsupported, hdf5=obj.open() if obj else None, netcdf=netcdf) as opened:
        variables: dict[str, Any] = {}
        dataset, reencode, stats.warnings = _prepare(opened, src, variables, skip_unsupported, None)
        layout: dict[str, Any] = {} if default_fill else {"default_fill": False}
        if for_readers:
            flavor, char_as, layout = _planned(src, dataset, for_readers, prefer or [], stats, accept_losses)
        refused = unreferenceable(src, dataset, obj.open() if obj else None)
        if refused:
            raise UnsupportedError(f"{src}: cannot be referenced, no Zarr codec reads these HDF5 filters' chunks: "
                                   f"{'; '.join(refused)} (convert without --reference to re-encode them)")
        _whole_chunks(dataset)
        raw = ReferenceChunks(obj.open() if obj else src)  # the original, even when netCDF4-python read a copy

        def refuse(array: str, size: int) -> Exception:
            why = raw.why.get(array, "chunks that are not references")
            return UnsupportedError(f"{src}: {array}: cannot be referenced ({why}) and its {size} bytes exceed the "
                                    f"inline bound of {inline_limit} bytes per variable")

        def source(akey: str, var: Variable, region: tuple[slice, ...]) -> np.ndarray:
            return nc4.read_values(variables[akey], region or None)

        def counting(chunks: int, raw_bytes: int, written: int) -> None:
            stats.chunks += chunks
            stats.bytes_in += raw_bytes
            stats.bytes_out += written

        collector.refuse = refuse
        inlined_before, referenced_before = sum(collector.inlined.values()), collector.referenced
        try:
            if raw.userblock:
                raise UnsupportedError(f"{src}: has an HDF5 user block; its chunk addresses are not file offsets "
                                       "and cannot be referenced")
            if obj is not None:
                stamp = obj.stamp()
                target = Target(stamp.size, etag=stamp.etag, anonymous=obj.anonymous)
                raw.handle = collector.register_remote(obj.url, target, obj.read)
                raw.read_remote = obj.read
            else:
                collector.register(raw.fd, src)
            from nczarr_conformance.conversion.transforms import without_direct_copy

            writer = make_writer(dataset, collector, flavor=flavor, source=source, progress=counting, threads=1,
                                 raw=without_direct_copy(raw, reencode), consolidate=consolidate, char_as=char_as,
                                 **layout)
            writer.write()
            if then is not None:
                then(writer)
            stats.objects = len(collector.refs)
            stats.warnings += list(getattr(writer, "notes", []))  # what a Zarr v3 layout does not hold (V3Writer)
            stats.warnings += [f"{src}: {array}: written inline, {size} bytes: {raw.why.get(array, 'not referenced')}"
                               for array, size in sorted(collector.inlined.items())]
            stats.copied = collector.referenced - referenced_before
            stats.bytes_out = sum(collector.inlined.values()) - inlined_before
        finally:
            raw.close()
    return stats
