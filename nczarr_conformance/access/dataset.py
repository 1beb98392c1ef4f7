"""Open any dataset by URL: an NCZarr/Zarr store with our reader, a netCDF file with netCDF4-python."""
from __future__ import annotations

import os
from pathlib import PurePosixPath

from nczarr_conformance.errors import FormatError
from nczarr_conformance.model import Dataset
from nczarr_conformance.stores import open_store
from nczarr_conformance.stores.sniff import (
    NETCDF_MAGIC,
    explain_open_failure,
    foreign_file_error,
    is_netcdf_file,
)
from nczarr_conformance.urls import parse
from nczarr_conformance.zarr3.reader import read_any

__all__ = ["NETCDF_MAGIC", "dataset_name", "is_netcdf_file", "open_dataset"]


def open_dataset(url: str, *, data: bool = True) -> Dataset:
    """The canonical model of whatever ``url`` names."""
    spec = parse(url)
    foreign = foreign_file_error(spec.path, url) if spec.kind in ("file", "zip") else None
    if foreign is not None:  # GRIB, HDF4, text: named, not "not a directory"
        raise foreign
    if spec.kind == "file" and os.path.isfile(spec.path) and is_netcdf_file(spec.path):
        from nczarr_conformance.sources import netcdf4

        return netcdf4.read(spec.path, data=data)
    with open_store(spec) as store:
        try:
            return read_any(store, data=data, pure_zarr=spec.pure_zarr, xarray=spec.xarray)
        except FormatError as exc:
            raise explain_open_failure(store, url, exc) from exc


def dataset_name(url: str) -> str:
    """The name ncdump would print: the last path segment without its extension."""
    spec = parse(url)
    name = PurePosixPath(spec.path.rstrip("/")).name or "dataset"
    for ext in (".zip", ".file", ".zarr", ".nc", ".nc4"):
        name = name.removesuffix(ext)
    return name or "dataset"
