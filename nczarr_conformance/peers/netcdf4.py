"""netCDF4-python as a graded peer: it writes the canonical model and reads stores, both through netcdf-c.

Reading is the sources wing's adapter (sources/netcdf4.py: what netCDF4-python hands back, typed
exactly through the libnetcdf it loaded), so a store is graded by what netcdf-c itself reads;
writing lives here because only the peer matrix and the tests write through netcdf-c: the
converter never does.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nczarr_conformance.model import Attribute, Dataset, Group, Variable
from nczarr_conformance.nczarr.dtypes import numpy_dtype
from nczarr_conformance.sources.netcdf4 import ID, LOCK, available, read, version

__all__ = ["ID", "LOCK", "Region", "available", "read", "version", "write"]

def _set_attribute(obj: Any, name: str, attr: Attribute) -> None:
    if attr.type == "char":
        obj.setncattr(name, attr.value.encode("utf-8"))  # bytes: NC_CHAR even when not ASCII
    elif attr.type == "string":
        obj.setncattr_string(name, [str(v) for v in attr.value.tolist()])
    else:
        obj.setncattr(name, np.asarray(attr.value, dtype=numpy_dtype(attr.type).newbyteorder("=")))


#: the part of a variable a writer writes (``None``: all of it; ``()``: nothing)
Region = Callable[[str, Variable], "tuple[slice, ...] | None"]


def _write_group(nc: Any, group: Group, dims_by_path: dict[str, Any], path: str, region: Region | None) -> None:
    for name, dim in group.dimensions.items():
        dims_by_path[f"{path.rstrip('/')}/{name}"] = nc.createDimension(name, None if dim.unlimited else dim.size)
    for name, attr in group.attributes.items():
        _set_attribute(nc, name, attr)
    for name, var in group.variables.items():
        datatype: Any = str if var.type == "string" else numpy_dtype(var.type, var.endianness)
        kwargs: dict[str, Any] = {}
        fill = var.attributes.get("_FillValue")
        if fill is not None:
            kwargs["fill_value"] = fill.value if fill.type == "char" else fill.value[0]
        if var.shape:
            if var.chunks:
                # HDF5 refuses chunks larger than a fixed dimension; Zarr allows them
                kwargs["chunksizes"] = tuple(
                    c if dims_by_path[d].isunlimited() else max(1, min(c, size))
                    for c, d, size in zip(var.chunks, var.dimensions, var.shape, strict=False))
            else:
                kwargs["contiguous"] = not any(dims_by_path[d].isunlimited() for d in var.dimensions)
        kwargs["shuffle"] = False  # netCDF4-python shuffles by default whenever zlib is on
        for cfg in var.filters or []:
            if cfg.get("id") == "zlib":
                kwargs.update(zlib=True, complevel=int(cfg.get("level", 4)))
            elif cfg.get("id") == "shuffle":
                kwargs["shuffle"] = True
            elif cfg.get("id") == "fletcher32":
                kwargs["fletcher32"] = True
        if var.no_fill and fill is None:
            kwargs["fill_value"] = False  # netCDF4-python's spelling of NOFILL
        if var.endianness in ("big", "little"):
            kwargs["endian"] = var.endianness
        ncvar = nc.createVariable(name, datatype, tuple(dims_by_path[d] for d in var.dimensions), **kwargs)
        for aname, attr in var.attributes.items():
            if aname != "_FillValue":
                _set_attribute(ncvar, aname, attr)
        if var.data is not None:
            ncvar.set_auto_maskandscale(False)
            ncvar.set_auto_chartostring(False)
            values = np.asarray(var.data)
            if var.type == "string":
                if values.ndim == 0:
                    ncvar[0] = str(values[()])
                else:
                    ncvar[...] = values
            elif values.ndim == 0:
                ncvar.assignValue(values[()])
            elif values.size:
                part = region(f"{path.rstrip('/')}/{name}", var) if region else None
                if part is None:
                    ncvar[...] = values
                elif part:
                    ncvar[part] = values[part]
    for name, sub in group.groups.items():
        _write_group(nc.createGroup(name), sub, dims_by_path, f"{path.rstrip('/')}/{name}", region)


def write(dataset: Dataset, path: str, *, region: Region | None = None) -> None:
    """Write the model with netCDF4-python (a .nc path or a netcdf-c NCZarr URL).

    ``region(path, variable)``: write only that hyperslab of a non-scalar variable, as a program
    writing part of a variable does (the rest is never written: netcdf-c reads it as fill).
    """
    import netCDF4

    with LOCK:
        nc = netCDF4.Dataset(path, "w", format="NETCDF4")
        try:
            _write_group(nc, dataset.root, {}, "/", region)
        finally:
            nc.close()
