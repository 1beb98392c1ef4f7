"""Zarr v3 stores written by zarr-python 3 (and xarray), and how zarr-python itself reads them.

Expected values always come from zarr-python's own reading of the store (``expected``), never
from our reader: each test compares our model to that.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
if int(zarr.__version__.split(".")[0]) < 3:
    pytest.skip("zarr-python 3 writes Zarr v3", allow_module_level=True)

from zarr.codecs import (  # noqa: E402  (after the version check above)
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    TransposeCodec,
    ZstdCodec,
)

#: the numeric v3 data types and their netCDF types (v3 core spec names → netCDF-4)
NUMERIC = {"int8": "byte", "uint8": "ubyte", "int16": "short", "uint16": "ushort", "int32": "int", "uint32": "uint",
           "int64": "int64", "uint64": "uint64", "float32": "float", "float64": "double"}


def build_rich(path: Path, *, consolidated: bool = False) -> Path:
    """A store using every feature of the first slice, written by zarr-python 3."""
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    g.attrs.update({"title": "v3 rich", "count": 3, "ratio": 0.5, "list": [1, 2, 3], "mixed": [1.5, 2]})
    for i, (name, _) in enumerate(NUMERIC.items()):
        a = g.create_array(f"n_{name}", shape=(7,), chunks=(3,), dtype=name, dimension_names=["t"],
                           fill_value=1)
        a[:5] = np.arange(5).astype(name) + i
        a.attrs["units"] = "m"
    g.create_array("s", shape=(4,), chunks=(3,), dtype=str, dimension_names=["t4"])[:3] = ["a", "bé", ""]
    vb = g.create_array("vb", shape=(3,), chunks=(2,), dtype="bytes", dimension_names=["t3"])
    vb[:] = np.array([b"x", b"\xff\x00", b""], dtype=object)
    g.create_array("u", shape=(3,), chunks=(2,), dtype="<U5", dimension_names=["t3"])[:] = ["ab", "héllo", ""]
    g.create_array("nb", shape=(3,), chunks=(2,), dtype="S4", dimension_names=["t3"])[:] = [b"ab", b"abcd", b""]
    g.create_array("ch", shape=(3,), chunks=(2,), dtype="S1", dimension_names=["t3"])[:] = [b"a", b"b", b"c"]
    nan = g.create_array("f_nan", shape=(5,), chunks=(2,), dtype="float32", fill_value="NaN", dimension_names=["t5"])
    nan[:2] = [1.5, -2.5]
    g.create_array("f_inf", shape=(5,), chunks=(2,), dtype="float64", fill_value=math.inf, dimension_names=["t5"])
    g.create_array("f_ninf", shape=(5,), chunks=(2,), dtype="float64", fill_value=-math.inf, dimension_names=["t5"])
    big = g.create_array("big", shape=(4, 6), chunks=(3, 4), dtype="int32", serializer=BytesCodec(endian="big"),
                         compressors=[GzipCodec(level=5)], dimension_names=["y", "x"])
    big[:] = np.arange(24).reshape(4, 6) - 10
    tr = g.create_array("tr", shape=(4, 6), chunks=(3, 4), dtype="float64", filters=[TransposeCodec(order=(1, 0))],
                        compressors=[ZstdCodec(level=3), Crc32cCodec()], dimension_names=["y", "x"])
    tr[:] = np.arange(24).reshape(4, 6) * 0.25
    bl = g.create_array("bl", shape=(4, 6), chunks=(2, 3), dtype="uint16", compressors=[BloscCodec(cname="zstd")],
                        chunk_key_encoding={"name": "v2", "separator": "."}, dimension_names=["y", "x"])
    bl[:] = np.arange(24).reshape(4, 6)
    dot = g.create_array("dot", shape=(4, 6), chunks=(2, 3), dtype="int64",
                         chunk_key_encoding={"name": "default", "separator": "."}, dimension_names=["y", "x"])
    dot[:] = np.arange(24).reshape(4, 6) * 1000
    v2s = g.create_array("v2slash", shape=(4, 6), chunks=(2, 3), dtype="int8",
                         chunk_key_encoding={"name": "v2", "separator": "/"}, dimension_names=["y", "x"])
    v2s[:] = np.arange(24).reshape(4, 6)
    sh = g.create_array("sh", shape=(10, 9), chunks=(2, 3), shards=(4, 6), dtype="int16", fill_value=-1,
                        dimension_names=["p", "q"])
    sh[:7, :5] = np.arange(35).reshape(7, 5)  # partial shards, absent inner chunks
    start = g.create_array("sh_start", shape=(8,), chunks=(2,), shards=(4,), dtype="float32",
                           dimension_names=["r"])
    start[:] = np.arange(8) / 4
    g.create_array("anon", shape=(2, 3), chunks=(2, 3), dtype="uint8")[:] = [[1, 2, 3], [4, 5, 6]]
    g.create_array("scalar", shape=(), dtype="float64", fill_value=0)[()] = 42.5
    sub = g.create_group("sub")
    sub.attrs["where"] = "sub"
    sub.create_array("x", shape=(3,), chunks=(2,), dtype="int32", dimension_names=["t"])[:] = [7, 8, 9]
    deep = sub.create_group("deep")
    deep.create_array("z", shape=(2,), dtype="uint32", dimension_names=["t"])[:] = [1, 2]
    if consolidated:
        zarr.consolidate_metadata(str(path))
    return path



def expected(path: Path) -> dict[str, Any]:
    """zarr-python's reading of the store: {path: ("group", attrs) | ("array", values, attrs, dimension_names)}."""
    out: dict[str, Any] = {}

    def walk(group: Any, prefix: str) -> None:
        out[prefix or "/"] = ("group", dict(group.attrs))
        for name, arr in group.arrays():
            dims = arr.metadata.dimension_names
            out[f"{prefix}/{name}"] = ("array", arr[...], dict(arr.attrs), dims, arr.metadata.data_type)
        for name, sub in group.groups():
            walk(sub, f"{prefix}/{name}")

    walk(zarr.open_group(str(path), mode="r", zarr_format=3), "")
    return out
