"""What ``nczarr-dump`` reads from: a dataset's metadata now, each variable's values on demand.

Why not ``open_dataset``: that loads every variable. A dump reads only the chunks
of the variables it prints, one slab (the chunks sharing a first-dimension
index) at a time, so ``-v x`` on a big store GETs only x's chunks and memory
stays at one slab. A netCDF file is read the same way through netCDF4-python.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from nczarr_conformance.errors import FormatError
from nczarr_conformance.model import Dataset, Variable
from nczarr_conformance.nczarr.reader import DatasetReader
from nczarr_conformance.stores import open_store
from nczarr_conformance.stores.base import Store
from nczarr_conformance.stores.sniff import (
    explain_open_failure,
    foreign_file_error,
    is_hdf5,
    is_netcdf_file,
)
from nczarr_conformance.urls import parse
from nczarr_conformance.zarr3.reader import open_reader

#: netCDF4-python data models → what ``ncdump -k`` prints (ncdump.c ``kind_string``).
NC_KINDS = {"NETCDF4": "netCDF-4", "NETCDF4_CLASSIC": "netCDF-4 classic model", "NETCDF3_CLASSIC": "classic",
            "NETCDF3_64BIT_OFFSET": "64-bit offset", "NETCDF3_64BIT_DATA": "cdf5"}



@dataclass
class StorageFacts:
    """What ``-s`` prints that the model does not hold."""

    nczarr: bool = False  # every NCZarr variable is chunked and has a _Codecs attribute
    kind: str = "netCDF-4"
    hidden: list[tuple[str, str]] = field(default_factory=list)  # global (name, CDL value)
    no_fill: set[str] = field(default_factory=set)  # variable paths


class DumpSource:
    """A dataset's model (no data), its ``-k`` kind and ``-K`` layout, its ``-s`` facts, and its values by slab."""

    dataset: Dataset
    kind: str  # ncdump -k's word
    layout: str  # nczarr-dump -K: the store's mode and flavor; a file's data model
    facts: StorageFacts

    def slabs(self, path: str, var: Variable) -> Iterator[np.ndarray]:
        raise NotImplementedError


class StoreSource(DumpSource):
    """An NCZarr or Zarr store read with our reader."""

    def __init__(self, store: Store, *, pure_zarr: bool, xarray: bool) -> None:
        self.store = store
        self.reader = open_reader(store, pure_zarr=pure_zarr, xarray=xarray)
        self.dataset = self.reader.dataset
        mode = "nczarr" if self.reader.nczarr else "zarr"
        self.layout = f"{mode} {self.reader.flavor}"
        # netcdf-c's nc_inq_format answers NC_FORMAT_NETCDF4 for NCZarr and pure Zarr alike: ncdump 4.9.0 -k
        # prints this word for a store, and netCDF4-python on netcdf-c 4.10.1 says data_model NETCDF4
        self.kind = "netCDF-4"
        self.facts = StorageFacts(nczarr=True, hidden=self._hidden(),
                                  no_fill={k for k, info in self.reader.arrays.items()
                                           if info.zarray.get("fill_value") is None})

    def _hidden(self) -> list[tuple[str, str]]:
        """netcdf-c 4.10 (libnczarr zattr.c/zprov.c): provenance only when _NCProperties is stored."""
        root = self.reader.meta.get("/.zattrs") or {}
        props = root.get("_NCProperties")
        if not isinstance(props, str):
            return [("_SuperblockVersion", "0"), ("_IsNetcdf4", "1")]
        version = str((self.reader.superblock or {}).get("version", "0"))
        major = version.split(".")[0]
        return [("_NCProperties", f'"{props}"'), ("_SuperblockVersion", major if major.isdigit() else "0"),
                ("_IsNetcdf4", "1")]

    def slabs(self, path: str, var: Variable) -> Iterator[np.ndarray]:
        """The variable by runs of chunks along its first dimension (one run held at a time)."""
        reader = self.reader
        info = reader.arrays[path]
        if info.scalar or not info.zshape:
            yield reader.read_variable(path)
            return
        first, rest = info.zshape[0], info.zshape[1:]
        step = info.chunks[0]
        reader._budget(path, min(step, first) * math.prod(rest), info, "one run of chunks")
        for i0 in range(info.grid[0]):
            lo, hi = i0 * step, min((i0 + 1) * step, first)
            out = np.empty((hi - lo, *rest), dtype=info.storage.numpy)
            out[...] = info.fill
            for tail in itertools.product(*(range(n) for n in info.grid[1:])):
                block = reader.read_chunk(info, (i0, *tail))
                if block is None:
                    continue
                sel = tuple(slice(i * c, min((i + 1) * c, s))
                            for i, c, s in zip(tail, info.chunks[1:], rest, strict=True))
                src = (slice(0, hi - lo), *(slice(0, s.stop - s.start) for s in sel))
                out[(slice(None), *sel)] = block[src]
            yield DatasetReader._to_model_values(out, info)


class NetcdfFileSource(DumpSource):
    """A netCDF file (or netcdf-c URL) read through netCDF4-python, as ncdump reads it."""

    ROW_BUDGET = 16 * 1024 * 1024  # bytes per slab of a contiguous variable

    def __init__(self, path: str) -> None:
        from nczarr_conformance.sources import netcdf4

        self.nc = netcdf4.open_nc(path)  # given back in close(): netcdf4.close_nc, under its lock
        try:
            self.dataset = netcdf4.read(path, data=False)
            with netcdf4.LOCK:  # netcdf-c is not thread-safe: every call into it holds the lock
                self.kind = NC_KINDS.get(self.nc.data_model, self.nc.data_model)
                self.layout = str(self.nc.data_model)
                hidden = []
                for name, quoted in (("_NCProperties", True), ("_SuperblockVersion", False), ("_IsNetcdf4", False)):
                    try:
                        value = self.nc.getncattr(name)
                    except (AttributeError, KeyError, RuntimeError):
                        continue
                    hidden.append((name, f'"{value}"' if quoted else str(int(value))))
                no_fill = self._no_fill()
        except BaseException:
            netcdf4.close_nc(self.nc)
            raise
        self.facts = StorageFacts(nczarr=False, kind=self.kind, hidden=hidden, no_fill=no_fill)

    def _no_fill(self) -> set[str]:
        import ctypes  # a netCDF file's dump only, not a store's

        from nczarr_conformance.sources.netcdf4 import _libnetcdf

        lib = _libnetcdf()
        found: set[str] = set()
        if lib is None:
            return found
        for gpath, group in self.dataset.root.walk():
            ncgroup = self.nc if gpath == "/" else self.nc[gpath]
            for name in group.variables:
                var = ncgroup.variables[name]
                flag = ctypes.c_int()
                if lib.nc_inq_var_fill(ncgroup._grpid, var._varid, ctypes.byref(flag), None) == 0 and flag.value:
                    found.add(gpath.rstrip("/") + "/" + name)
        return found

    def slabs(self, path: str, var: Variable) -> Iterator[np.ndarray]:
        from nczarr_conformance.sources import netcdf4

        with netcdf4.LOCK:
            ncvar = self.nc[path]
        if not var.shape:
            yield netcdf4.read_values(ncvar)
            return
        itemsize = np.dtype(ncvar.dtype).itemsize if ncvar.dtype is not str else 64
        row_bytes = max(1, math.prod(var.shape[1:]) * itemsize)
        step = var.chunks[0] if var.chunks else max(1, self.ROW_BUDGET // row_bytes)
        for lo in range(0, var.shape[0], step):
            yield netcdf4.read_values(ncvar, (slice(lo, min(lo + step, var.shape[0])),))

    def close(self) -> None:
        from nczarr_conformance.sources import netcdf4

        netcdf4.close_nc(self.nc)


@contextmanager
def open_source(url: str) -> Iterator[DumpSource]:
    """The dump source ``url`` names (store or netCDF file), closed afterwards."""
    spec = parse(url)
    foreign = foreign_file_error(spec.path, url) if spec.kind in ("file", "zip") else None
    if foreign is not None:  # GRIB, HDF4, text: named, not "not a directory"
        raise foreign
    if spec.kind == "file" and (is_netcdf_file(spec.path) or is_hdf5(spec.path)):
        source = NetcdfFileSource(spec.path)
        try:
            yield source
        finally:
            source.close()
        return
    with open_store(spec) as store:
        try:
            store_source = StoreSource(store, pure_zarr=spec.pure_zarr, xarray=spec.xarray)
        except FormatError as exc:
            raise explain_open_failure(store, url, exc) from exc
        yield store_source


__all__ = ["DumpSource", "NetcdfFileSource", "StoreSource", "open_source"]
