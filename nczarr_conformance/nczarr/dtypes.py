"""netCDF atomic types and their Zarr dtype strings (nczarr.md Appendix E).

Write mapping: byte ``|i1``, ubyte ``|u1`` (zarr-python 3.1 rejects the ``<i1`` netcdf-c
writes; every reader takes ``|``), other numbers ``<``/``>`` by endianness, char ``>S1``
(``|S1`` in pure Zarr, see nczarr/writer.py),
string ``|Sn`` with n the maximum string length. Reading accepts every spelling
seen in the wild, including netcdf-c 4.9.0's ``<U1`` for char (one byte per element).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

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

DEFAULT_MAXSTRLEN = 128
_DTYPE_RE = re.compile(r"^([<>|=]?)([a-zA-Z])(\d+)$")


@dataclass(frozen=True, slots=True)
class StorageType:
    """How one netCDF type is laid out in a Zarr chunk."""

    nctype: str
    numpy: np.dtype  # the dtype of decoded chunk bytes
    maxstrlen: int = 0

    @property
    def endianness(self) -> str | None:
        if self.numpy.byteorder in ("|",) or self.numpy.itemsize == 1 or self.nctype in ("char", "string"):
            return None
        if self.numpy.byteorder == ">":
            return "big"
        return "little"


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


def parse_dtype(text: object, *, u1_is_char: bool = False, s1_is_char: bool = False) -> StorageType:
    """Map a Zarr v2 dtype string to the netCDF type and the chunk dtype.

    ``u1_is_char`` reads ``<U1`` as netcdf-c 4.9.0 wrote it for char: one byte
    per element, not UTF-32. ``s1_is_char`` reads ``|S1`` as char (one byte, numpy's
    ``S1``, what zarr-python and xarray store and our pure-Zarr writer writes for char)
    instead of Appendix E's string of length 1 (how netcdf-c reads it).
    """
    if not isinstance(text, str):
        raise UnsupportedError(f"dtype {text!r} is not a simple dtype string (structured dtypes are not netCDF)")
    m = _DTYPE_RE.match(text)
    if not m:
        raise UnsupportedError(f"dtype {text!r} is not a Zarr v2 dtype")
    order, kind, size_text = m.groups()
    size = int(size_text)
    if kind in "iuf":
        code = f"{kind}{size}"
        if code not in BY_CODE:
            raise UnsupportedError(f"dtype {text!r} has no netCDF type")
        np_order = ">" if order == ">" else "<"
        return StorageType(BY_CODE[code], np.dtype(np_order + code if size > 1 else code))
    if kind == "S":
        if size < 1:
            raise UnsupportedError(f"dtype {text!r}: zero-length strings")
        if size == 1 and (order == ">" or s1_is_char):
            return StorageType("char", np.dtype("S1"))
        return StorageType("string", np.dtype(f"S{size}"), size)
    if kind == "U":
        if size < 1:
            raise UnsupportedError(f"dtype {text!r}: zero-length strings")
        if size == 1 and u1_is_char:
            return StorageType("char", np.dtype("S1"))
        np_order = ">" if order == ">" else "<"
        return StorageType("string", np.dtype(f"{np_order}U{size}"), size)
    if kind == "b":
        raise UnsupportedError(f"dtype {text!r} (boolean) has no netCDF type")
    raise UnsupportedError(f"dtype {text!r} has no netCDF type (complex, datetime and object are not netCDF)")


def dtype_string(nctype: str, endianness: str | None = None, maxstrlen: int = DEFAULT_MAXSTRLEN) -> str:
    """The Zarr dtype we write for a variable of this type."""
    if nctype == "char":
        return ">S1"
    if nctype == "string":
        return f"|S{maxstrlen}"
    code = NUMERIC[nctype]
    if code.endswith("1"):
        return "|" + code
    return (">" if endianness == "big" else "<") + code


def attr_type_string(nctype: str, maxstrlen: int = DEFAULT_MAXSTRLEN) -> str:
    """The dtype netcdf-c records for an attribute in ``_nczarr_attr.types``."""
    if nctype == "char":
        return ">S1"
    if nctype == "string":
        return f"|S{maxstrlen}"
    return "<" + NUMERIC[nctype]


def parse_attr_type(text: object) -> str | None:
    """netCDF type named by an ``_nczarr_attr`` dtype; None for ``|J0`` (JSON, internal)."""
    if text == "|J0":
        return None
    if text in (">S1", "<U1", "|U1", ">U1"):
        return "char"
    return parse_dtype(text).nctype
