"""The netCDF-4 data model's twelve atomic types, their numpy dtypes and default fills.

On the ground floor because the canonical model (model.py), every reader of netCDF input
and the Zarr format code all name types this way; how a type is laid out in a Zarr chunk
(``<i4``, ``>S1``, ``|S12``) is the format's business and lives in nczarr/dtypes.py.
"""
from __future__ import annotations

import numpy as np

from nczarr_conformance.errors import UnsupportedError

NUMERIC = {
    "byte": "i1", "ubyte": "u1", "short": "i2", "ushort": "u2", "int": "i4", "uint": "u4",
    "int64": "i8", "uint64": "u8", "float": "f4", "double": "f8",
}
NC_TYPES = (*NUMERIC, "char", "string")
BY_CODE = {code: name for name, code in NUMERIC.items()}

#: netCDF default fill values (netcdf.h NC_FILL_*), used when no _FillValue is defined.
DEFAULT_FILL: dict[str, object] = {
    "byte": -127, "ubyte": 255, "short": -32767, "ushort": 65535, "int": -2147483647,
    "uint": 4294967295, "int64": -9223372036854775806, "uint64": 18446744073709551614,
    "float": float(np.float32(9.9692099683868690e36)), "double": 9.9692099683868690e36,
    "char": "\x00", "string": "",
}


def numpy_dtype(nctype: str, endianness: str | None = None) -> np.dtype:
    """In-memory numpy dtype of a netCDF type (strings as objects, char as S1)."""
    if nctype == "char":
        return np.dtype("S1")
    if nctype == "string":
        return np.dtype(object)
    code = NUMERIC[nctype]
    order = ">" if endianness == "big" else "<"
    return np.dtype(order + code if code[1] != "1" else code)


def nctype_of_numpy(dtype: np.dtype) -> str:
    """netCDF type of a numpy dtype (as netCDF4-python hands them over)."""
    if dtype.kind == "S" and dtype.itemsize == 1:
        return "char"
    if dtype.kind in ("O", "U", "S"):
        return "string"
    code = f"{dtype.kind}{dtype.itemsize}"
    if code not in BY_CODE:
        raise UnsupportedError(f"numpy dtype {dtype} has no netCDF type")
    return BY_CODE[code]
