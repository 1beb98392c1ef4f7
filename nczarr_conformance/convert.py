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
from .errors import StoreError
from .model import Dataset, Group, Variable
from .nczarr.writer import Progress, write_dataset
from .peers import netcdf4 as nc4
from .stores import open_store
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


def _header(ncgroup: Any, path: str, variables: dict[str, Any]) -> Group:
    from .model import Dimension

    group = Group()
    for name, dim in ncgroup.dimensions.items():
        group.dimensions[name] = Dimension(len(dim), dim.isunlimited())
    group.attributes = nc4._read_attributes(ncgroup, ncgroup._grpid, nc4.NC_GLOBAL)
    for name, var in ncgroup.variables.items():
        group.variables[name] = nc4.variable_header(var, path)
        variables[keys.join(path, name)] = var
        if var.chunking() not in ("contiguous", None):
            var.set_var_chunk_cache(size=0, nelems=0)  # each chunk is read once: a cache only costs memory
    for name, sub in ncgroup.groups.items():
        group.groups[name] = _header(sub, keys.join(path, name), variables)
    return group


def convert(src: str, dst: str, *, flavor: str = "nczarr-4.10", overwrite: bool = False,
            progress: Progress | None = None, direct: bool = True, threads: int = 0) -> ConvertStats:
    """Convert the netCDF file ``src`` into the store ``dst`` (a path or netcdf-c URL).

    ``direct`` copies compressed HDF5 chunks as they are when the codecs agree
    (see direct.py); ``threads`` 0 picks 2 per core for files, 16 for S3.
    """
    started = time.perf_counter()
    if not os.path.exists(src):
        raise StoreError(f"{src}: no such file or directory")
    spec = parse(dst)
    safety.check_output_is_safe(src, spec.kind, spec.path)
    if spec.pure_zarr and flavor == "nczarr-4.10":
        flavor = "zarr"
    stats = ConvertStats()
    nc = nc4.open_nc(src)
    try:
        variables: dict[str, Any] = {}
        with nc4.LOCK:
            dataset = Dataset(_header(nc, "/", variables))

        def source(akey: str, var: Variable, region: tuple[slice, ...]) -> np.ndarray:
            return nc4.read_values(variables[akey], region or None)

        def counting(chunks: int, raw_bytes: int, written: int) -> None:
            stats.chunks += chunks
            stats.bytes_in += raw_bytes
            stats.bytes_out += written
            if progress is not None:
                progress(chunks, raw_bytes, written)

        raw = _direct_source(src) if direct and flavor != "nczarr-2-upper" else None
        workers = threads or (16 if spec.kind == "s3" else 2 * (os.cpu_count() or 2))
        store = open_store(spec, "w", overwrite=overwrite)
        try:
            stats.copied = write_dataset(dataset, store, flavor=flavor, xarray=spec.xarray, source=source,
                                         progress=counting, threads=workers, raw=raw)
            stats.objects = store.writes
            store.commit()
        except BaseException:
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


def _direct_source(src: str):  # type: ignore[no-untyped-def]
    """A DirectChunks over ``src`` when it is HDF5 and h5py is installed, else None."""
    try:
        with open(src, "rb") as fh:
            if fh.read(4) != b"\x89HDF":
                return None
        from .direct import DirectChunks

        return DirectChunks(src)
    except (ImportError, OSError):
        return None


def total_bytes(src: str) -> int:
    """Uncompressed bytes a conversion of ``src`` will visit (for a progress bar)."""
    import math

    nc = nc4.open_nc(src)
    try:
        total = 0
        stack = [nc]
        while stack:
            g = stack.pop()
            stack.extend(g.groups.values())
            for var in g.variables.values():
                itemsize = 1 if var.dtype is str else np.dtype(var.dtype).itemsize
                total += math.prod(var.shape or (1,)) * itemsize
        return total
    finally:
        nc.close()
