"""netCDF-4 file → NCZarr store, streaming chunk by chunk.

The header comes from netCDF4-python; each chunk's values are read from the
source variable when the writer asks for them, so no variable is ever held
whole in memory. The output is written under a temporary name and committed
only when everything succeeded. An output that equals, holds or lies inside the
input is refused before anything is opened (see safety.py).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import keys, safety
from .errors import StoreError, UnsupportedError, UsageError
from .model import Dataset, Group, Variable
from .nczarr.writer import FLAVOR_ALIASES, Progress, write_dataset
from .peers import netcdf4 as nc4
from .stores import open_store
from .transforms import Transforms, apply, without_direct_copy
from .urls import parse


@dataclass
class ConvertStats:
    objects: int = 0
    bytes_in: int = 0  # uncompressed bytes of every chunk visited
    bytes_out: int = 0  # bytes of the chunks put
    chunks: int = 0
    copied: int = 0  # chunks copied compressed, straight from the HDF5 file
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)


def _outside_model(nc: Any, src: str, skip: bool) -> tuple[set[str], list[str]]:
    """Variables and attributes of user-defined types: refused in one line, or (``skip``) left out.

    Returns the variable keys to leave out and one warning per object left out.
    """
    found = nc4.outside_model(nc)
    if found and not skip:
        listed = ", ".join(f"{where} ({kind})" for where, kind in found)
        raise UnsupportedError(f"{src}: types outside the NCZarr model: {listed}; "
                               "--skip-unsupported converts the rest")
    return ({where for where, _ in found if ":" not in where},
            [f"{src}: {where} left out: {kind} is outside the NCZarr model" for where, kind in found])


def _header(ncgroup: Any, path: str, variables: dict[str, Any], skip: frozenset[str] | set[str] = frozenset(),
            skip_outside: bool = False) -> Group:
    """The model header of ``ncgroup``; ``skip`` names variables left out, ``skip_outside`` leaves out
    attributes of user-defined types (a file may have those and no such variable)."""
    from .model import Dimension

    group = Group()
    for name, dim in ncgroup.dimensions.items():
        group.dimensions[name] = Dimension(len(dim), dim.isunlimited())
    group.attributes = nc4._read_attributes(ncgroup, ncgroup._grpid, nc4.NC_GLOBAL, skip_outside=skip_outside)
    for name, var in ncgroup.variables.items():
        if keys.join(path, name) in skip:
            continue
        group.variables[name] = nc4.variable_header(var, path, skip_outside=skip_outside)
        variables[keys.join(path, name)] = var
        if var.chunking() not in ("contiguous", None):
            var.set_var_chunk_cache(size=0, nelems=0)  # each chunk is read once: a cache only costs memory
    for name, sub in ncgroup.groups.items():
        group.groups[name] = _header(sub, keys.join(path, name), variables, skip, skip_outside)
    return group


def convert(src: str, dst: str, *, flavor: str = "nczarr-4.10", overwrite: bool = False,
            progress: Progress | None = None, direct: bool = True, threads: int = 0,
            transforms: Transforms | None = None, skip_unsupported: bool = False, consolidate: bool | None = None,
            char_as: str | None = None) -> ConvertStats:
    """Convert the netCDF file ``src`` into the store ``dst`` (a path or netcdf-c URL).

    Variables and attributes of user-defined types (compound, vlen, opaque, enum) are
    refused, or with ``skip_unsupported`` left out with a warning in ``stats.warnings``.

    ``direct`` copies compressed HDF5 chunks as they are when the codecs agree
    (see direct.py); ``threads`` (0: 2 per core) read and encode chunks, S3 uploads run
    in the store's own pool (stores/s3_upload.py);
    ``transforms`` (nccopy's -d -s -c -u -V -G, see transforms.py) rewrite the header first;
    ``consolidate`` writes ``.zmetadata`` last (None: unless a char array is ``>S1``, see
    nczarr/writer.py); ``char_as`` ("S1": ``|S1``, ">S1") overrides the
    flavor's char dtype (see nczarr/writer.py for the trade-off).
    """
    started = time.perf_counter()
    if not os.path.exists(src):
        raise StoreError(f"{src}: no such file or directory")
    spec = parse(dst)
    safety.check_output_is_safe(src, spec.kind, spec.path)
    if flavor not in FLAVOR_ALIASES:
        raise UsageError(f"unknown flavor {flavor!r} (one of {', '.join(sorted(FLAVOR_ALIASES))})")
    flavor = FLAVOR_ALIASES[flavor]  # the CLI's "nczarr" is the 4.10 layout
    if spec.pure_zarr and flavor == "nczarr-4.10":  # mode=zarr in the URL asks for pure Zarr
        flavor = "zarr"
    stats = ConvertStats()
    nc = nc4.open_nc(src)
    try:
        variables: dict[str, Any] = {}
        skip, stats.warnings = _outside_model(nc, src, skip_unsupported)
        with nc4.LOCK:
            dataset = Dataset(_header(nc, "/", variables, skip, skip_unsupported))
        reencode = apply(transforms, dataset, src) if transforms is not None else frozenset()

        def source(akey: str, var: Variable, region: tuple[slice, ...]) -> np.ndarray:
            return nc4.read_values(variables[akey], region or None)

        def counting(chunks: int, raw_bytes: int, written: int) -> None:
            stats.chunks += chunks
            stats.bytes_in += raw_bytes
            stats.bytes_out += written
            if progress is not None:
                progress(chunks, raw_bytes, written)

        # the HDF5 chunk index is used on both paths (unwritten chunks); copying only when asked
        raw = _direct_source(src, copy=direct and flavor != "nczarr-2-upper")
        workers = threads or 2 * (os.cpu_count() or 2)
        store = None
        try:
            store = open_store(spec, "w", overwrite=overwrite)
            stats.copied = write_dataset(dataset, store, flavor=flavor, xarray=spec.xarray, source=source,
                                         progress=counting, threads=workers,
                                         raw=without_direct_copy(raw, reencode), consolidate=consolidate,
                                         char_as=char_as)
            stats.objects = store.writes
            store.commit()
        except BaseException:
            if store is not None:
                store.abort()
            raise
        finally:
            if raw is not None:
                raw.close()
    finally:
        with nc4.LOCK:
            nc.close()
    stats.seconds = time.perf_counter() - started
    return stats


def _direct_source(src: str, *, copy: bool = True):  # type: ignore[no-untyped-def]
    """A DirectChunks over ``src`` when it is HDF5 and h5py is installed, else None."""
    try:
        with open(src, "rb") as fh:
            if fh.read(4) != b"\x89HDF":
                return None
        from .direct import DirectChunks

        return DirectChunks(src, copy=copy)
    except (ImportError, OSError):
        return None


def total_bytes(src: str, *, flavor: str = "nczarr-4.10", transforms: Transforms | None = None,
                char_as: str | None = None) -> int:
    """The bytes a conversion of ``src`` reports to its progress callback (a progress bar's total).

    The writer reports every chunk of the plan at its full, unencoded size (edge chunks
    padded, all-fill and copied chunks included), so the total comes from that same plan,
    transforms applied, strings at their planned width.
    """
    import math

    from .nczarr.writer import DatasetWriter
    from .stores.memory import MemoryStore

    nc = nc4.open_nc(src)
    try:
        variables: dict[str, Any] = {}
        with nc4.LOCK:
            dataset = Dataset(_header(nc, "/", variables))
        if transforms is not None:
            apply(transforms, dataset, src)
        writer = DatasetWriter(dataset, MemoryStore(), flavor=flavor, char_as=char_as,
                               source=lambda akey, var, region: nc4.read_values(variables[akey], region or None))
        writer.validate()
        writer.plan()
        return sum(math.prod(math.ceil(s / c) for s, c in zip(p.zshape, p.chunks)) * math.prod(p.chunks or (1,))
                   * p.storage.itemsize for p in writer.plans.values())
    finally:
        with nc4.LOCK:
            nc.close()
