"""netCDF atomic types and their Zarr dtype strings (nczarr.md Appendix E).

Write mapping: byte ``|i1``, ubyte ``|u1`` (zarr-python 3.1 rejects the ``<i1`` netcdf-c
writes; every reader takes ``|``), other numbers ``<``/``>`` by endianness, char ``>S1``
(``|S1`` in pure Zarr, see nczarr/writer.py),
string ``|Sn`` with n the maximum string length. Reading accepts every spelling
seen in the wild, including netcdf-c 4.9.0's ``<U1`` for char (one byte per element), and
numpy's object dtype ``|O`` whose first filter is ``vlen-utf8`` or ``vlen-bytes`` (zarr-python's
variable-length strings, what kerchunk and VirtualiZarr write for a netCDF-4 string variable) as
string (:func:`array_storage`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nczarr_conformance.errors import UnsupportedError

# the netCDF data model's types (nctypes.py, the ground floor), named here too: this module is where the
# format code has always looked them up
from nczarr_conformance.nctypes import BY_CODE as BY_CODE
from nczarr_conformance.nctypes import DEFAULT_FILL as DEFAULT_FILL
from nczarr_conformance.nctypes import NC_TYPES as NC_TYPES
from nczarr_conformance.nctypes import NUMERIC as NUMERIC
from nczarr_conformance.nctypes import nctype_of_numpy as nctype_of_numpy
from nczarr_conformance.nctypes import numpy_dtype as numpy_dtype

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


#: the object dtype of Zarr v2: only with a variable-length codec as its first filter (:func:`array_storage`)
OBJECT_DTYPE = "|O"


def vlen_codec(zarray: dict[str, object]) -> str | None:
    """The variable-length codec (``vlen-utf8``/``vlen-bytes``) that decodes an ``|O`` array's chunks last:
    its first filter (Zarr v2 encodes through the filters in order, so ``filters[0]`` decodes last), or None."""
    filters = zarray.get("filters")
    first = filters[0] if isinstance(filters, list) and filters else None
    codec_id = first.get("id") if isinstance(first, dict) else None
    return codec_id if codec_id in ("vlen-utf8", "vlen-bytes") else None


def array_storage(zarray: dict[str, object], *, u1_is_char: bool = False, s1_is_char: bool = False) -> StorageType:
    """A ``.zarray``'s netCDF storage type: :func:`parse_dtype` of its dtype, and ``|O`` read as netCDF string
    when its first filter is ``vlen-utf8`` or ``vlen-bytes`` (numcodecs' VLenUTF8/VLenBytes: a legal Zarr v2
    object array, and netCDF-4's variable-length string as kerchunk, VirtualiZarr and zarr-python write it).
    An ``|O`` array with any other object codec (``json2``, ``pickle``, ``msgpack2``) has no netCDF type."""
    text = zarray.get("dtype")
    if text != OBJECT_DTYPE:
        return parse_dtype(text, u1_is_char=u1_is_char, s1_is_char=s1_is_char)
    if vlen_codec(zarray) is None:
        raise UnsupportedError(f"dtype {OBJECT_DTYPE!r} (object) is netCDF string only with a vlen-utf8 or vlen-bytes "
                               f"first filter; filters are {zarray.get('filters')!r}")
    return StorageType("string", np.dtype(object))


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
