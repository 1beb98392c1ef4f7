"""The case's model JSON (docs/contracts/model.md) as a netCDF-4 (HDF5) file, written by netCDF4-python exactly
as given: types, dimensions, attributes, fills, chunks, shuffle/zlib, byte order and data.

The first step of every adapter whose tool starts from a netCDF-4 file rather than from the model (the
reference writers: adapters/virtualizarr, adapters/kerchunk): what they are graded on is what they make of
that file, so the file is netCDF4-python's, not ours; adapters/netcdf-c-4.9/ncgen_write.py's first step too.

Standalone on purpose (the standard library, numpy and netCDF4-python; nothing of nczarr_conformance). An
adapter imports it with its own directory's parent on ``sys.path``.

Usage as a script: ``model_netcdf4.py MODEL_JSON OUT.nc``.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np

NUMERIC = {"byte": "i1", "ubyte": "u1", "short": "i2", "ushort": "u2", "int": "i4", "uint": "u4", "int64": "i8",
           "uint64": "u8", "float": "f4", "double": "f8"}
SPELLED = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def dtype(nctype: str, endianness: str | None = None) -> Any:
    """The numpy type a netCDF type is written from (``str`` for string: netCDF4-python's vlen string)."""
    if nctype == "string":
        return str
    if nctype == "char":
        return np.dtype("S1")
    code = NUMERIC[nctype]
    return np.dtype(code if code[1] == "1" else (">" if endianness == "big" else "<") + code)


def floats(value: Any) -> Any:
    """The model's "NaN"/"Infinity"/"-Infinity" back to floats, in nested lists."""
    if isinstance(value, list):
        return [floats(v) for v in value]
    return SPELLED.get(value, value) if isinstance(value, str) else value


def values(doc: Any, nctype: str, shape: list[int] | None = None) -> np.ndarray:
    """A model value list (or a scalar's bare value) as a numpy array of the type."""
    if nctype == "char":
        def encode(v: Any) -> Any:
            return [encode(x) for x in v] if isinstance(v, list) else v.encode("latin-1")
        arr = np.array(encode(doc), dtype="S1")
    elif nctype == "string":
        arr = np.empty(shape if shape is not None else np.shape(doc), dtype=object)
        if arr.ndim == 0:
            arr[()] = doc
        elif arr.size:
            arr[...] = np.array(doc, dtype=object).reshape(arr.shape)
        return arr
    else:
        arr = np.array(floats(doc), dtype=dtype(nctype))
    return arr.reshape(shape) if shape is not None else arr


def set_attribute(obj: Any, name: str, attr: dict[str, Any]) -> None:
    if attr["type"] == "char":
        obj.setncattr(name, attr["value"].encode("utf-8"))  # bytes: NC_CHAR even when not ASCII
    elif attr["type"] == "string":
        obj.setncattr_string(name, [str(v) for v in attr["value"]])
    else:
        obj.setncattr(name, np.asarray(floats(attr["value"]), dtype=np.dtype(NUMERIC[attr["type"]])))


def variable_options(var: dict[str, Any], dims: list[Any]) -> dict[str, Any]:
    """createVariable's keywords for the model's fill, chunks, codecs and byte order."""
    kwargs: dict[str, Any] = {}
    fill = var["attributes"].get("_FillValue")
    if fill is not None:
        kwargs["fill_value"] = fill["value"] if fill["type"] == "char" else values(fill["value"], fill["type"])[0]
    if var["shape"]:
        if var.get("chunks"):
            # HDF5 refuses chunks larger than a fixed dimension; Zarr allows them
            kwargs["chunksizes"] = tuple(c if dim.isunlimited() else max(1, min(c, size))
                                         for c, dim, size in zip(var["chunks"], dims, var["shape"], strict=True))
        else:
            kwargs["contiguous"] = not any(dim.isunlimited() for dim in dims)
    kwargs["shuffle"] = False  # netCDF4-python shuffles by default whenever zlib is on
    for codec in var.get("filters") or []:
        if codec.get("id") == "zlib":
            kwargs.update(zlib=True, complevel=int(codec.get("level", 4)))
        elif codec.get("id") == "shuffle":
            kwargs["shuffle"] = True
        elif codec.get("id") == "fletcher32":
            kwargs["fletcher32"] = True
    if var.get("no_fill") and fill is None:
        kwargs["fill_value"] = False  # netCDF4-python's spelling of NOFILL
    if var.get("endianness") in ("big", "little"):
        kwargs["endian"] = var["endianness"]
    return kwargs


def write_data(ncvar: Any, var: dict[str, Any]) -> None:
    ncvar.set_auto_maskandscale(False)
    ncvar.set_auto_chartostring(False)
    data = values(var["data"], var["type"], var["shape"])
    if var["type"] == "string":
        if data.ndim == 0:
            ncvar[0] = str(data[()])
        else:
            ncvar[...] = data
    elif data.ndim == 0:
        ncvar.assignValue(data[()])
    elif data.size:
        ncvar[...] = data


def write_group(nc: Any, group: dict[str, Any], dims: dict[str, Any], path: str) -> None:
    """One group, then its children: dimensions, attributes, variables (``dims``: every dimension so far by
    full name, the model's way of naming them)."""
    for name, dim in group["dimensions"].items():
        dims[f"{path.rstrip('/')}/{name}"] = nc.createDimension(name, None if dim["unlimited"] else dim["size"])
    for name, attr in group["attributes"].items():
        set_attribute(nc, name, attr)
    for name, var in group["variables"].items():
        own = [dims[d] for d in var["dimensions"]]
        ncvar = nc.createVariable(name, dtype(var["type"], var.get("endianness")), tuple(own),
                                  **variable_options(var, own))
        for aname, attr in var["attributes"].items():
            if aname != "_FillValue":
                set_attribute(ncvar, aname, attr)
        if "data" in var:
            write_data(ncvar, var)
    for name, child in group["groups"].items():
        write_group(nc.createGroup(name), child, dims, f"{path.rstrip('/')}/{name}")


def write_file(model: dict[str, Any], path: str) -> None:
    """``model`` (the canonical JSON, parsed) as the netCDF-4 file ``path``."""
    nc = netCDF4.Dataset(path, "w", format="NETCDF4")
    try:
        write_group(nc, model["root"], {}, "/")
    finally:
        nc.close()


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: model_netcdf4.py MODEL_JSON OUT.nc", file=sys.stderr)
        return 2
    try:
        write_file(json.loads(Path(argv[1]).read_text(encoding="utf-8")), argv[2])
    except Exception as exc:  # netCDF4-python refusing the case: one line, not a traceback
        print(f"netCDF4-python: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
