"""``zarr.json`` (Zarr v3 core spec, as zarr-python 3.1 writes it) → what the reader needs.

Only what decides how values read is parsed here; every field is checked for its JSON type
so that hostile metadata is one ``FormatError`` line naming the key, never a traceback.
"""
from __future__ import annotations

import base64
import math
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.errors import FormatError, UnsupportedError
from nczarr_conformance.nczarr.dtypes import StorageType

#: the flavor name every command shows for pure Zarr v3 (``nczarr-dump -k`` prints "zarr v3")
FLAVOR = "zarr-v3"
ZARR_JSON = "zarr.json"

#: v3 numeric data types → netCDF types (bool, float16, complex and datetimes have none)
NUMERIC_TYPES = {"int8": "byte", "uint8": "ubyte", "int16": "short", "uint16": "ushort", "int32": "int",
                 "uint32": "uint", "int64": "int64", "uint64": "uint64", "float32": "float", "float64": "double"}
_NUMPY = {"byte": "i1", "ubyte": "u1", "short": "i2", "ushort": "u2", "int": "i4", "uint": "u4", "int64": "i8",
          "uint64": "u8", "float": "f4", "double": "f8"}
#: variable-length types: their array→bytes codec and how the model holds them (netCDF string)
VLEN_TYPES = {"string": "vlen-utf8", "variable_length_utf8": "vlen-utf8", "bytes": "vlen-bytes",
              "variable_length_bytes": "vlen-bytes"}


@dataclass(frozen=True)
class DataType:
    """A v3 data type: its netCDF storage type (the chunk dtype in native order) and kind."""

    name: str
    storage: StorageType
    vlen: bool = False  # decoded by a vlen-* codec into an object array

    def numpy_for(self, endian: str | None) -> np.dtype:
        """The dtype of the bytes codec's output for ``endian`` ("little"/"big"/None)."""
        if self.vlen or self.storage.numpy.itemsize == 1 or self.storage.numpy.kind == "S":
            return self.storage.numpy
        return self.storage.numpy.newbyteorder(">" if endian == "big" else "<")


def parse_data_type(value: Any, where: str) -> DataType:
    """The netCDF reading of a v3 ``data_type`` (a name, or ``{"name", "configuration"}``)."""
    name, config = (value, {}) if isinstance(value, str) else (
        (value.get("name"), value.get("configuration") or {}) if isinstance(value, dict) else (None, {}))
    if not isinstance(name, str) or not isinstance(config, dict):
        raise FormatError(f"{where}: data_type {value!r} is neither a name nor {{name, configuration}}")
    if name in NUMERIC_TYPES:
        nctype = NUMERIC_TYPES[name]
        return DataType(name, StorageType(nctype, np.dtype(_NUMPY[nctype])))
    if name in VLEN_TYPES:
        return DataType(name, StorageType("string", np.dtype(object)), vlen=True)
    if name in ("fixed_length_utf32", "null_terminated_bytes"):
        size = config.get("length_bytes")
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise FormatError(f"{where}: data_type {name} needs a positive integer length_bytes, not {size!r}")
        if name == "null_terminated_bytes":
            if size == 1:  # numpy's S1: char, as the v2 pure-Zarr path reads |S1
                return DataType(name, StorageType("char", np.dtype("S1")))
            return DataType(name, StorageType("string", _string_dtype(f"S{size}", name, size, where), size))
        if size % 4:
            raise FormatError(f"{where}: fixed_length_utf32 length_bytes {size} is not a multiple of 4")
        return DataType(name, StorageType("string", _string_dtype(f"<U{size // 4}", name, size, where), size // 4))
    raise UnsupportedError(f"{where}: data_type {name!r} has no netCDF type")


def _string_dtype(spec: str, name: str, size: int, where: str) -> np.dtype[Any]:
    """numpy's fixed-length string type, or one line: past 2**31 bytes numpy raised TypeError ("data type
    'S1099511627776' not understood"), a traceback-class line in nczarr-dump and NCZ-CHECK-CRASH."""
    try:
        return np.dtype(spec)
    except (TypeError, ValueError, OverflowError):
        raise UnsupportedError(f"{where}: data_type {name} length_bytes {size}: longer than numpy's "
                               "fixed-length strings hold") from None


def parse_fill(value: Any, dt: DataType, where: str) -> Any:
    """The ``fill_value`` as a value of the chunk dtype (v3 core spec: numbers, "NaN", "Infinity",
    "-Infinity", "0x…" hex bit patterns for floats; strings; base64 for byte strings)."""
    nctype = dt.storage.nctype
    if dt.vlen:
        if dt.name in ("bytes", "variable_length_bytes"):
            return _bytes_fill(value, where)
        if not isinstance(value, str):
            raise FormatError(f"{where}: fill_value {value!r} of a {dt.name} array is not a string")
        return value
    if dt.name == "fixed_length_utf32":
        if not isinstance(value, str):
            raise FormatError(f"{where}: fill_value {value!r} of a fixed_length_utf32 array is not a string")
        return value
    if dt.name == "null_terminated_bytes":
        return _bytes_fill(value, where)
    if nctype in ("float", "double"):
        return _float_fill(value, dt, where)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(f"{where}: fill_value {value!r} is not an integer ({dt.name})")
    info = np.iinfo(dt.storage.numpy)
    if not info.min <= value <= info.max:
        raise FormatError(f"{where}: fill_value {value} is out of range for {dt.name}")
    return value


def _bytes_fill(value: Any, where: str) -> bytes:
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            raise FormatError(f"{where}: fill_value {value!r} is not base64") from None
    if isinstance(value, list) and all(isinstance(v, int) and 0 <= v < 256 for v in value):
        return bytes(value)
    raise FormatError(f"{where}: fill_value {value!r} is not base64 text or a list of bytes")


def _float_fill(value: Any, dt: DataType, where: str) -> float:
    special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
    if isinstance(value, str) and value in special:
        return special[value]
    if isinstance(value, str) and value.startswith("0x"):
        width = dt.storage.numpy.itemsize
        try:
            raw = int(value, 16).to_bytes(width, "big")
        except (ValueError, OverflowError):
            raise FormatError(f"{where}: fill_value {value!r} is not a {width}-byte hex float") from None
        return float(struct.unpack(">f" if width == 4 else ">d", raw)[0])
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise FormatError(f"{where}: fill_value {value!r} is not a {dt.name}")


def int_tuple(value: Any, what: str, where: str, minimum: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum
                                              for v in value):
        raise FormatError(f"{where}: {what} must be a list of integers >= {minimum}, not {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class KeyEncoding:
    """``chunk_key_encoding``: ``default`` (``c/0/0``, ``c.0.0``; ``c`` for a 0-d array) or ``v2``."""

    name: str
    separator: str

    def key(self, akey: str, index: tuple[int, ...]) -> str:
        parts = [str(i) for i in index]
        if self.name == "default":
            return keys.join(akey, self.separator.join(["c", *parts]))
        return keys.join(akey, self.separator.join(parts) if parts else "0")


def parse_key_encoding(value: Any, where: str) -> KeyEncoding:
    if not isinstance(value, dict) or value.get("name") not in ("default", "v2"):
        raise UnsupportedError(f"{where}: chunk_key_encoding {value!r}: only 'default' and 'v2' are known")
    name = str(value["name"])
    config = value.get("configuration") or {}
    if not isinstance(config, dict):
        raise FormatError(f"{where}: chunk_key_encoding configuration must be an object")
    sep = config.get("separator", "/" if name == "default" else ".")
    if sep not in ("/", "."):
        raise FormatError(f"{where}: chunk key separator must be '/' or '.', not {sep!r}")
    return KeyEncoding(name, str(sep))


def regular_chunk_shape(grid: Any, ndim: int, where: str) -> tuple[int, ...]:
    if not isinstance(grid, dict) or grid.get("name") != "regular":
        raise UnsupportedError(f"{where}: chunk_grid {grid!r}: only 'regular' is known")
    config = grid.get("configuration")
    shape = int_tuple(config.get("chunk_shape") if isinstance(config, dict) else None, "chunk_shape", where, 1)
    if len(shape) != ndim:
        raise FormatError(f"{where}: chunk_shape {list(shape)} has not the array's {ndim} dimensions")
    return shape


def node_type(doc: Any, where: str) -> str:
    """``group`` or ``array``, after checking ``zarr_format`` is 3."""
    if not isinstance(doc, dict):
        raise FormatError(f"{where}: JSON object expected")
    if doc.get("zarr_format") != 3:
        raise FormatError(f"{where}: zarr_format {doc.get('zarr_format')!r}, 3 expected")
    kind = doc.get("node_type")
    if kind not in ("group", "array"):
        raise FormatError(f"{where}: node_type {kind!r}, 'group' or 'array' expected")
    return str(kind)
