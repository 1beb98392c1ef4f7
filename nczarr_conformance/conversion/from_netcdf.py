"""netCDF-4 file → NCZarr store, streaming chunk by chunk.

The header comes from netCDF4-python; each chunk's values are read from the
source variable when the writer asks for them, so no variable is ever held
whole in memory. The output is written under a temporary name and committed
only when everything succeeded. An output that equals, holds or lies inside the
input is refused before anything is opened (see safety.py).
"""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nczarr_conformance import keys, safety
from nczarr_conformance.conversion.audience import Audience, decide, strip_codecs
from nczarr_conformance.conversion.transforms import (
    Transforms,
    apply,
    without_direct_copy,
    writable_codecs,
)
from nczarr_conformance.errors import (
    NczarrError,
    StoreError,
    UnsupportedError,
    UsageError,
)
from nczarr_conformance.flavor_names import shard_refusal
from nczarr_conformance.model import Dataset, Group, Variable
from nczarr_conformance.nczarr.writer import DEFAULT_CHAR_AS, FLAVOR_ALIASES, Progress, write_dataset
from nczarr_conformance.sources import hdf5_types
from nczarr_conformance.sources import netcdf4 as nc4
from nczarr_conformance.stores import sniff
from nczarr_conformance.stores.staged import stage_write
from nczarr_conformance.stores.zip import ZipStore
from nczarr_conformance.urls import parse


@dataclass
class ConvertStats:
    objects: int = 0
    bytes_in: int = 0  # uncompressed bytes of every chunk visited
    bytes_out: int = 0  # bytes of the chunks put
    chunks: int = 0
    copied: int = 0  # chunks copied compressed, straight from the HDF5 file
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    #: who reads what was written (conversion/audience.py): the plan for ``for_readers``, or the default's readers
    audience: Audience | None = None


@dataclass
class _Source:
    """An input opened for conversion: what to leave out, and what the HDF5 file says netCDF-4 does not."""

    nc: Any
    path: str  # what netCDF4-python opened: the input, or a copy of it without objects netcdf-c crashes on
    found: hdf5_types.Scan = field(default_factory=hdf5_types.Scan)  # what h5py saw in the input
    findings: list[hdf5_types.Finding] = field(default_factory=list)  # what netCDF-4 or the model cannot hold
    skip: set[str] = field(default_factory=set)  # variable keys left out
    leave_out: dict[str, set[str]] = field(default_factory=dict)  # group or variable key → attribute names
    fills: dict[str, Any] = field(default_factory=dict)  # variable key → the HDF5 fill value its writer set


def _findings(nc: Any, found: hdf5_types.Scan) -> list[hdf5_types.Finding]:
    """Everything to refuse or leave out, one per object: what h5py found (types netCDF-4 hides or
    misreads, filters its HDF5 lacks) and libnetcdf's user-defined types, named as netcdf-c names
    them unless h5py knows better (netcdf-c calls a bitfield dataset "user-defined _AnonymousUnknown2")."""
    merged = {f.where: f for f in found.findings}
    for where, kind in nc4.outside_model(nc):
        if where not in merged or merged[where].why == hdf5_types.OUTSIDE:
            merged[where] = hdf5_types.Finding(*_split(where), kind, hdf5_types.OUTSIDE, hdf5_types.SHOWN)
    for finding in hdf5_types.unavailable_filters(found, lambda fid: nc4.filter_available(nc, fid)):
        merged.setdefault(finding.where, finding)
    return list(merged.values())


def _split(where: str) -> tuple[str, str | None]:
    """``/g/v:attr`` → (``/g/v``, ``attr``); ``/g/v`` → (``/g/v``, None) (libnetcdf's names)."""
    path, colon, attr = where.partition(":")
    return (path, attr) if colon else (where, None)


@contextmanager
def _opened(src: str, skip_unsupported: bool, *, hdf5: Any = None, netcdf: str | None = None) -> Iterator[_Source]:
    """``src`` opened with netCDF4-python once h5py has looked at it (sources/hdf5_types.py).

    ``hdf5`` and ``netcdf`` name what h5py and netCDF4-python open when it is not ``src`` itself (an S3
    object: a file object over its ranged reads, and a loopback byte-range URL; conversion/references.py).

    What netCDF-4 or the model cannot hold is found here and refused or left out by
    :func:`_prepare`, once the header shows what else netCDF-4 did not show. An object netcdf-c
    cannot open a file with, or crashes on, is refused here in one line naming each, or
    (``skip_unsupported``) left out by reading a copy of the file without it (in TMPDIR, removed
    afterwards): netCDF4-python never sees the original.
    """
    with nc4.LOCK:
        found = hdf5_types.scan(src if hdf5 is None else hdf5)
    fatal = [f for f in found.findings if f.fatal]
    if fatal and not skip_unsupported:
        raise UnsupportedError(nc4.refusal(src, _outermost(found.findings), "; --skip-unsupported converts the rest"))
    if fatal and netcdf is not None:
        raise UnsupportedError(nc4.refusal(src, _outermost(found.findings), "; --skip-unsupported reads a copy of the "
                                           "file without them, which is not made of a remote one: download it"))
    path = hdf5_types.without(src, fatal) if fatal else (netcdf or src)
    try:
        try:
            nc = nc4.open_nc(path, check="none")
        except NczarrError as exc:  # name the input, not the copy (nor the byte-range URL)
            raise type(exc)(str(exc).replace(path, src)) from exc
        try:
            source = _Source(nc, path, found=found, findings=_findings(nc, found), fills=found.fills)
            for f in source.findings:
                if f.attribute is None:
                    source.skip.add(f.path)
                else:
                    source.leave_out.setdefault(f.path, set()).add(f.attribute)
            yield source
        finally:
            nc4.close_nc(nc)
    finally:
        if path not in (src, netcdf):
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def _header(ncgroup: Any, path: str, variables: dict[str, Any], skip: frozenset[str] | set[str] = frozenset(),
            skip_outside: bool = False, leave_out: dict[str, set[str]] | None = None) -> Group:
    """The model header of ``ncgroup``; ``skip`` names variables left out, ``skip_outside`` leaves out
    attributes of user-defined types (a file may have those and no such variable), ``leave_out``
    names attributes not read, by group or variable key."""
    from nczarr_conformance.model import Dimension

    names = leave_out or {}
    group = Group()
    for name, dim in ncgroup.dimensions.items():
        group.dimensions[name] = Dimension(len(dim), dim.isunlimited())
    group.attributes = nc4._read_attributes(ncgroup, ncgroup._grpid, nc4.NC_GLOBAL, skip_outside=skip_outside,
                                            leave_out=names.get(path, ()))
    for name, var in ncgroup.variables.items():
        vkey = keys.join(path, name)
        if vkey in skip:
            continue
        group.variables[name] = nc4.variable_header(var, path, skip_outside=skip_outside,
                                                    leave_out=names.get(vkey, ()))
        variables[vkey] = var
        if var.chunking() not in ("contiguous", None):
            var.set_var_chunk_cache(size=0, nelems=0)  # each chunk is read once: a cache only costs memory
    for name, sub in ncgroup.groups.items():
        group.groups[name] = _header(sub, keys.join(path, name), variables, skip, skip_outside, leave_out)
    return group


def _prepare(source: _Source, src: str, variables: dict[str, Any], skip_unsupported: bool,
             transforms: Transforms | None) -> tuple[Dataset, frozenset[str], list[str]]:
    """The dataset to write (transforms applied, HDF5 fill values kept, unwritable codecs replaced), the keys
    whose chunks must be re-encoded, and the warnings to show.

    Nothing in the input is dropped without a word: the header is compared with every object h5py
    saw (hdf5_types.unseen, before -V/-G choose what to keep). What holds values the store will
    not (the findings, and any dataset, group or attribute netCDF-4 did not show) is refused in one
    line naming each, or (``skip_unsupported``) left out with one warning each; what holds no
    variable's values (a named datatype, an attribute of a name netCDF-4 or NCZarr keeps to itself,
    an attribute of a dimension-only scale) is named in one warning line and never refused.
    """
    with nc4.LOCK:  # attributes of user types are left out here and refused below unless skipped
        dataset = Dataset(_header(source.nc, "/", variables, source.skip, True, source.leave_out))
    extra = hdf5_types.unseen(source.found, dataset.root, source.findings)
    refused = _outermost(source.findings + [f for f in extra if not f.noted])
    if refused and not skip_unsupported:
        raise UnsupportedError(nc4.refusal(src, refused, "; --skip-unsupported converts the rest"))
    said = [f"{src}: {f.left_out}" for f in refused]
    noted = [f for f in extra if f.noted]
    if noted:
        said.append(f"{src}: left out, holding no variable's values: {', '.join(f.listed for f in noted)}")
    _keep_hdf5_fill(dataset, source.fills)
    reencode = apply(transforms, dataset, src) if transforms is not None else frozenset()
    replaced, notes = writable_codecs(dataset, src)
    return dataset, reencode | replaced, said + notes


def _outermost(findings: list[hdf5_types.Finding]) -> list[hdf5_types.Finding]:
    """The findings less the attributes of an object itself found: a dataset left out takes its attributes
    with it, and one name says so."""
    objects = {f.path for f in findings if f.attribute is None}
    return [f for f in findings if f.attribute is None or f.path not in objects]


def _keep_hdf5_fill(dataset: Dataset, fills: dict[str, Any]) -> None:
    """The store reports the fill netCDF-4 reports for the source, and unwritten elements read as HDF5 reads them.

    An HDF5 fill value set without a _FillValue attribute (h5py's ``fillvalue=``) is what netcdf-c
    reports as the variable's fill (``get_fill_value()``) and what its never-written chunks read
    as: it becomes the Zarr fill_value (netCDF's default would read 255 where the source reads 7).
    An HDF5 fill left at HDF5's default (zero) netcdf-c reports as NOFILL or as netCDF's default
    fill: the store reports the same (a Zarr fill_value of 0 would also make xarray's zarr backend
    read every real 0 as missing), and sources/hdf5_chunks.py writes out the never-written chunks, as the zeros
    HDF5 reads, instead; so it does when a _FillValue attribute differs from the HDF5 fill value.
    """
    for gkey, group in dataset.root.walk():
        for name, var in group.variables.items():
            value = fills.get(keys.join(gkey, name))
            if value is None or var.no_fill or "_FillValue" in var.attributes or var.type in ("char", "string"):
                continue
            var.storage_fill = value.item() if hasattr(value, "item") else value


def convert(src: str, dst: str, *, flavor: str | None = None, overwrite: bool = False,
            progress: Progress | None = None, direct: bool = True, threads: int = 0,
            transforms: Transforms | None = None, skip_unsupported: bool = False, consolidate: bool | None = None,
            char_as: str | None = None, storage_options: Mapping[str, Any] | None = None,
            zarr_format: int | None = None, shard: int | None = None, for_readers: list[str] | None = None,
            prefer: list[str] | None = None, announce: Callable[[Audience], None] | None = None,
            choices: Mapping[str, object] | None = None) -> ConvertStats:
    """Convert the netCDF file ``src`` into the store ``dst`` (a path or netcdf-c URL).

    Variables and attributes of user-defined types (compound, vlen, opaque, enum), and
    HDF5 objects netCDF-4 hides, misreads or crashes on (float16, bitfield, reference, array
    and time types, filters its HDF5 lacks…: sources/hdf5_types.py) are refused in one line naming
    each, or with ``skip_unsupported`` left out with a warning each in ``stats.warnings``.
    szip and blosc-snappy variables are decoded through HDF5 and written with a codec
    numcodecs has (transforms.writable_codecs, a warning each); an HDF5 fill value set without
    a _FillValue attribute becomes the Zarr fill_value, and never-written chunks read as they
    read through HDF5 (see _keep_hdf5_fill).

    ``direct`` copies compressed HDF5 chunks as they are when the codecs agree
    (see sources/hdf5_chunks.py); ``threads`` (0: 2 per core) read and encode chunks, S3 uploads run
    in the store's own pool (stores/s3_upload.py);
    ``transforms`` (nccopy's -d -s -c -u -V -G, see transforms.py) rewrite the header first;
    ``consolidate`` writes ``.zmetadata`` last (None: unless a char array is ``>S1``, see
    nczarr/writer.py); ``char_as`` ("S1": ``|S1``, ">S1") overrides the
    flavor's char dtype (see nczarr/writer.py for the trade-off); ``storage_options`` go to the
    store's client (urls.parse).

    ``zarr_format`` 3 writes Zarr v3 (zarr3/writer.py; ``flavor`` ``zarr``, its default, is the only v3
    layout written yet: the others are refused in one line), ``shard`` N puts N chunks in one shard
    object; what the v3 layout does not keep is one line in ``stats.warnings``.

    ``for_readers`` (reader ids of reader_needs.READERS) chooses the layout those readers read equal to the source
    (conversion/audience.py: Zarr format, flavor, char dtype, filters, compression, the zip's entries), keeping the
    choices given explicitly; ``prefer`` names the readers whose needs win a conflict. ``stats.audience`` says who
    reads the result and what the others lose, decided before anything is written and handed to ``announce``
    then (the command prints it before the first object is put). ``choices`` makes layout choices of
    reader_needs.KNOBS explicitly (``{"filters": "none", "zip_entries": "top"}``), as a plan would.
    """
    started = time.perf_counter()
    explicit_format = zarr_format
    zarr_format = zarr_format or 2
    if not os.path.exists(src):
        raise StoreError(f"{src}: no such file or directory")
    spec = parse(dst, storage_options)
    misnamed = sniff.output_error(dst)  # out.nc would be a directory named like a netCDF file
    if misnamed is not None:
        raise misnamed
    safety.check_output_is_safe(src, spec.kind, spec.path)
    v3_flavor = flavor or "zarr"
    if zarr_format == 3:
        _v3_options(flavor, char_as, shard)
        v3_flavor, flavor = flavor or "zarr", "zarr"  # the v3 layout (zarr, nz); the v2 planning below sees zarr
    elif zarr_format != 2:
        raise UsageError(f"--zarr-format {zarr_format}: 2 or 3")
    elif (no_shards := shard_refusal(zarr_format, shard)) is not None:
        raise UsageError(no_shards)
    explicit_flavor = flavor
    flavor = flavor or "nczarr-4.10"
    if flavor not in FLAVOR_ALIASES:
        raise UsageError(f"unknown flavor {flavor!r} (one of {', '.join(sorted(FLAVOR_ALIASES))})")
    flavor = FLAVOR_ALIASES[flavor]  # the CLI's "nczarr" is the 4.10 layout
    if spec.pure_zarr and flavor == "nczarr-4.10":  # mode=zarr in the URL asks for pure Zarr
        flavor = "zarr"
    stats = ConvertStats()
    with _opened(src, skip_unsupported) as opened:
        variables: dict[str, Any] = {}
        dataset, reencode, stats.warnings = _prepare(opened, src, variables, skip_unsupported, transforms)
        fixed: dict[str, object] = {"flavor": flavor} if (flavor != "nczarr-4.10" or explicit_flavor) else {}
        fixed.update({"zarr_format": zarr_format} if explicit_format or shard is not None or explicit_flavor else {})
        fixed.update({"char_as": char_as} if char_as is not None else {})
        if transforms is not None and transforms.recompress:
            fixed.update(filters="keep", compression="keep")  # -d / --compressor chose the codecs
        fixed.update(choices or {})
        stats.audience, choice = decide(dataset, spec.kind, for_readers, prefer or (), fixed)
        if for_readers or choices:
            zarr_format = int(str(choice.get("zarr_format", zarr_format)))
            if zarr_format == 3:
                if explicit_format != 3:  # the plan chose v3: xarray's layout (--zarr-format 3 keeps its own)
                    v3_flavor, flavor, char_as = "zarr", "zarr", None
            else:
                flavor = str(choice.get("flavor", flavor))
                char_as = str(choice["char_as"]) if "char_as" in choice and flavor in DEFAULT_CHAR_AS else None
            reencode |= strip_codecs(dataset, choice)

        def source(akey: str, var: Variable, region: tuple[slice, ...]) -> np.ndarray:
            return nc4.read_values(variables[akey], region or None)

        def counting(chunks: int, raw_bytes: int, written: int) -> None:
            stats.chunks += chunks
            stats.bytes_in += raw_bytes
            stats.bytes_out += written
            if progress is not None:
                progress(chunks, raw_bytes, written)

        # the HDF5 chunk index is used on both paths (unwritten chunks); copying only when asked
        raw = _direct_source(opened.path, copy=direct and flavor != "nczarr-2-upper")
        workers = threads or 2 * (os.cpu_count() or 2)
        staged = None
        try:
            staged = stage_write(spec, overwrite=overwrite)
            store = staged.store
            if announce is not None:  # the output can be written: say for whom, before the first object is put
                announce(stats.audience)
            if choice.get("zip_entries") == "top" and isinstance(store, ZipStore):
                store.entries_at_top()  # zarr-python's ZipStore opens a zip's top (netcdf-c: the first folder)
            if zarr_format == 3:
                from nczarr_conformance.zarr3.writer import write_dataset as write_v3

                stats.copied, notes = write_v3(dataset, store, source=source, progress=counting, threads=workers,
                                               raw=without_direct_copy(raw, reencode), consolidate=consolidate,
                                               shard=shard, flavor=v3_flavor)
                stats.warnings += [f"{src}: {note}" for note in notes]
            else:
                stats.copied = write_dataset(dataset, store, flavor=flavor, xarray=spec.xarray, source=source,
                                             progress=counting, threads=workers,
                                             raw=without_direct_copy(raw, reencode), consolidate=consolidate,
                                             char_as=char_as, default_fill=choice.get("default_fill") != "null")
            stats.objects = store.writes
            staged.commit()
        except BaseException:
            if staged is not None:
                staged.abort()
            raise
        finally:
            if raw is not None:
                raw.close()
    stats.seconds = time.perf_counter() - started
    return stats


def _v3_options(flavor: str | None, char_as: str | None, shard: int | None) -> None:
    """Refuse, in one line, what a Zarr v3 conversion does not take."""
    from nczarr_conformance.zarr3.writer import refuse_flavor

    refuse_flavor(flavor or "zarr", draft=True)
    if char_as is not None:
        raise UsageError("--char-as is for Zarr v2; Zarr v3 writes char as null_terminated_bytes of 1 byte "
                         "(numpy S1), as xarray and zarr-python 3 do")
    if shard is not None and shard < 1:
        raise UsageError(f"--shard {shard}: a shard holds at least one chunk")


def _direct_source(src: str, *, copy: bool = True):  # type: ignore[no-untyped-def]
    """A DirectChunks over ``src`` when it is HDF5 and h5py is installed, else None."""
    try:
        if not hdf5_types.is_hdf5(src):
            return None
        from nczarr_conformance.sources.hdf5_chunks import DirectChunks

        return DirectChunks(src, copy=copy)
    except (ImportError, OSError):
        return None


def total_bytes(src: str, *, flavor: str | None = None, transforms: Transforms | None = None,
                char_as: str | None = None, skip_unsupported: bool = False, zarr_format: int = 2,
                shard: int | None = None) -> int:
    """The bytes a conversion of ``src`` reports to its progress callback (a progress bar's total).

    The writer reports every chunk of the plan at its full, unencoded size (edge chunks
    padded, all-fill and copied chunks included), so the total comes from that same plan,
    transforms applied, strings at their planned width.
    """
    import math

    from nczarr_conformance.nczarr.writer import DatasetWriter
    from nczarr_conformance.stores.memory import MemoryStore

    with _opened(src, skip_unsupported) as opened:
        variables: dict[str, Any] = {}
        dataset, _, _ = _prepare(opened, src, variables, skip_unsupported, transforms)
        def values(akey: str, var: Variable, region: tuple[slice, ...]) -> np.ndarray:
            return nc4.read_values(variables[akey], region or None)

        writer: DatasetWriter
        if zarr_format == 3:
            from nczarr_conformance.zarr3.writer import V3Writer

            writer = V3Writer(dataset, MemoryStore(), source=values, shard=shard)
        else:
            writer = DatasetWriter(dataset, MemoryStore(), flavor=flavor or "nczarr-4.10", char_as=char_as,
                                   source=values)
        writer.validate()
        writer.plan()
        return sum(math.prod(math.ceil(s / c) for s, c in zip(p.zshape, p.chunks, strict=True))
                   * math.prod(p.chunks or (1,))
                   * p.storage.itemsize for p in writer.plans.values())
