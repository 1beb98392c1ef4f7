"""The source truth of a netCDF-4 (HDF5) file, read without any code the converter uses.

Tests compare what we write against the file we converted. Were that truth read by the
converter's own adapter (``sources/netcdf4.py``), an adapter mistake would appear on both
sides and cancel out. This reader asks netCDF4-python's public API only (``dtype``,
``ncattrs``/``getncattr``, ``chunking()``, ``filters()``, ``endian()``), and h5py for the
two facts netCDF4-python does not expose: whether a text attribute is NC_CHAR (a
fixed-length HDF5 string) or NC_STRING (a variable-length one), and NOFILL (the HDF5
fill time ``never``).

Example::

    read_source("corpus/rich.nc")  # doctest: +SKIP
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable

__all__ = ["read_source"]

#: numpy kind+size → netCDF type name (netCDF Users Guide, "Data Types")
NUMPY_TO_NC = {"i1": "byte", "u1": "ubyte", "i2": "short", "u2": "ushort", "i4": "int", "u4": "uint",
               "i8": "int64", "u8": "uint64", "f4": "float", "f8": "double"}


def _nc_type(dtype: Any) -> str:
    if dtype is str:
        return "string"
    dt = np.dtype(dtype)
    if dt.kind == "S":
        return "char"
    return NUMPY_TO_NC[f"{dt.kind}{dt.itemsize}"]


def _text_is_char(h5obj: Any, name: str) -> bool:
    """NC_CHAR is a fixed-length HDF5 string, NC_STRING a variable-length one."""
    import h5py

    kind = h5obj.attrs.get_id(name).get_type()
    return isinstance(kind, h5py.h5t.TypeStringID) and not kind.is_variable_str()


def _attributes(ncobj: Any, h5obj: Any) -> dict[str, Attribute]:
    out: dict[str, Attribute] = {}
    for name in ncobj.ncattrs():
        value = ncobj.getncattr(name)
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        if isinstance(value, str):
            out[name] = Attribute("char", value) if _text_is_char(h5obj, name) else \
                Attribute("string", np.array([value], dtype=object))
        elif isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.dtype.kind in "OU"):
            out[name] = Attribute("string", np.array([str(v) for v in np.ravel(value)], dtype=object))
        else:
            arr = np.atleast_1d(np.asarray(value))
            out[name] = Attribute(_nc_type(arr.dtype), arr.astype(arr.dtype.newbyteorder("=")))
    return out


def _filters(ncvar: Any, itemsize: int) -> list[dict[str, Any]]:
    f = ncvar.filters() or {}
    chain: list[dict[str, Any]] = []
    if f.get("shuffle"):
        chain.append({"id": "shuffle", "elementsize": itemsize})
    if f.get("zlib"):
        chain.append({"id": "zlib", "level": int(f["complevel"])})
    if f.get("fletcher32"):
        chain.append({"id": "fletcher32"})
    unknown = [k for k in ("szip", "zstd", "bzip2", "blosc") if f.get(k)]
    if unknown:
        raise NotImplementedError(f"{ncvar.name}: source truth for {unknown} is not read here")
    return chain


def _dimension_path(ncgroup: Any, name: str) -> str:
    g = ncgroup
    while name not in g.dimensions:
        g = g.parent
    return f"{g.path.rstrip('/')}/{name}"


def _values(ncvar: Any) -> np.ndarray:
    ncvar.set_auto_maskandscale(False)
    ncvar.set_auto_chartostring(False)
    raw = np.ma.getdata(ncvar[...])
    if ncvar.dtype is str:
        out = np.empty(np.shape(raw), dtype=object)
        out[...] = raw
        return out
    return np.asarray(raw)


def _variable(ncvar: Any, h5var: Any) -> Variable:
    import h5py

    nctype = _nc_type(ncvar.dtype)
    one_byte = nctype in ("char", "string", "byte", "ubyte")
    chunking = ncvar.chunking()
    endian = ncvar.endian()
    if endian == "native":
        endian = sys.byteorder
    itemsize = 1 if nctype in ("char", "string") else np.dtype(ncvar.dtype).itemsize
    return Variable(
        nctype, [_dimension_path(ncvar.group(), d) for d in ncvar.dimensions], tuple(int(n) for n in ncvar.shape),
        _attributes(ncvar, h5var), _values(ncvar),
        chunks=None if chunking == "contiguous" or not ncvar.shape else [int(c) for c in chunking],
        endianness=None if one_byte else endian,
        filters=_filters(ncvar, itemsize),
        no_fill=h5var.id.get_create_plist().get_fill_time() == h5py.h5d.FILL_TIME_NEVER)


def _group(ncgroup: Any, h5group: Any) -> Group:
    group = Group()
    for name, dim in ncgroup.dimensions.items():
        group.dimensions[name] = Dimension(len(dim), dim.isunlimited())
    group.attributes = _attributes(ncgroup, h5group)
    for name, ncvar in ncgroup.variables.items():
        group.variables[name] = _variable(ncvar, h5group[name])
    for name, sub in ncgroup.groups.items():
        group.groups[name] = _group(sub, h5group[name])
    return group


def read_source(path: str) -> Dataset:
    """The canonical model of a netCDF-4 file, as netCDF4-python and h5py see it."""
    import h5py
    import netCDF4

    from nczarr_conformance.sources.netcdf4 import LOCK

    with LOCK, netCDF4.Dataset(path, "r") as nc, h5py.File(path, "r") as h5:  # netcdf-c is not thread-safe
        return Dataset(_group(nc, h5))
