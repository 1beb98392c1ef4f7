"""Recognise what a URL names when it is not a store, so a failure can say what to do instead.

A netCDF file handed to nczarr-check would otherwise fail as "not a directory" or "no
dataset here"; these checks name the thing and the fix in one line. (Zarr v3 stores are
read: ``zarr3.reader.open_reader`` picks the v3 reader when a root ``zarr.json`` is there.)
"""
from __future__ import annotations

import os

from nczarr_conformance.errors import FormatError, NczarrError, UsageError
from nczarr_conformance.stores.base import Store
from nczarr_conformance.urls import StoreSpec

NETCDF_MAGIC = (b"\x89HDF", b"CDF\x01", b"CDF\x02", b"CDF\x05")


def is_netcdf_file(path: str) -> bool:
    """netCDF-4 (HDF5) or netCDF classic/64-bit/CDF5 magic at the start of a regular file."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    return head in NETCDF_MAGIC


def netcdf_file_error(spec: StoreSpec, url: str) -> NczarrError | None:
    """The error for a netCDF file where a store is expected, else None (reads 4 bytes, never opens a store)."""
    if spec.kind in ("file", "zip") and os.path.isfile(spec.path) and is_netcdf_file(spec.path):
        return UsageError(f"{url}: is a netCDF file, not a store: convert it with nc2nczarr")
    return None


def explain_open_failure(store: Store, url: str, exc: FormatError) -> NczarrError:
    """The error to show when no dataset could be read from ``store``: ``exc`` with the URL.

    (A Zarr v3 store is no longer refused here: ``zarr3.reader.open_reader`` reads it.)"""
    del store
    return type(exc)(f"{url}: {exc}")
