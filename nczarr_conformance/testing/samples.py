"""Sample datasets the tests, the README example and the benchmarks share."""
from __future__ import annotations

import numpy as np

from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable

JSON_LOOKING = {"j_int": "42", "j_list": "[1, 2]", "j_obj": '{"a": 1}', "j_true": "true", "j_null": "null",
                "j_nested": '{"key1": [1,2,3], "key2": {"key3": "abc"}}', "j_matrix": "[[1.0,0.0],[0.0,1.0]]",
                "j_broken": "[ [ 1.0, 0.0", "j_empty": ""}


def write_rich_nc(path: str) -> None:
    """A netCDF-4 file with every feature the converter must keep.

    All 12 types, nested groups with dimensions at several levels, an unlimited
    dimension, a chunked variable written only in part (fill shows through), a
    zlib+shuffle big-endian float, scalars, JSON-looking char attributes and
    non-ASCII strings.
    """
    import netCDF4

    from nczarr_conformance.sources.netcdf4 import LOCK

    with LOCK:  # netcdf-c is not thread-safe: the whole life of the dataset holds the lock
        nc = netCDF4.Dataset(path, "w", format="NETCDF4")
        try:
            nc.createDimension("time", None)
            nc.createDimension("x", 5)
            nc.createDimension("nchar", 4)
            nc.title = "rich sample: héllo wörld"
            for name, text in JSON_LOOKING.items():
                nc.setncattr(name, text)
            nc.setncattr_string("s_attr", ["alpha", "βeta", ""])
            nc.setncattr_string("s_one", "only")
            nc.setncattr("pi", np.float64(3.141592653589793))
            nc.setncattr("f32", np.array([0.1, -0.0, np.inf], dtype="f4"))
            nc.setncattr("u64", np.array([0, 2**64 - 1], dtype="u8"))
            nc.setncattr("i64", np.array([-(2**63), 2**63 - 1], dtype="i8"))
            nc.setncattr("bytes", np.array([-128, 127], dtype="i1"))
            nc.setncattr("nan", np.array([np.nan], dtype="f8"))
            t = nc.createVariable("time", "f8", ("time",))
            t.units = "days since 2000-01-01"
            t[:] = np.arange(6, dtype="f8")
            types = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"]
            for code in types:
                v = nc.createVariable(f"v_{code}", code, ("x",), fill_value=False if code == "u1" else None)
                info = np.iinfo(code) if code[0] in "iu" else np.finfo(code)
                v[:] = np.array([info.min, info.max, 0, 1, 2], dtype=code)
            c = nc.createVariable("chars", "S1", ("x", "nchar"))
            c[:] = np.array([b"ab", b"cdef", b"", b"x\0y", "é".encode("latin-1")], dtype="S4").view("S1").reshape(5, 4)
            s = nc.createVariable("strings", str, ("x",))
            for i, text in enumerate(["", "ascii", "ünïcødé", "日本語", "a" * 200]):
                s[i] = text
            part = nc.createVariable("partial", "i4", ("time", "x"), chunksizes=(4, 2), fill_value=-99)
            part[0:2, 0:3] = np.arange(6).reshape(2, 3)
            be = nc.createVariable("be_float", ">f4", ("time", "x"), zlib=True, complevel=5, shuffle=True,
                                   endian="big", chunksizes=(3, 5))
            be[:, :] = np.linspace(-1, 1, 30, dtype="f4").reshape(6, 5)
            be.long_name = "compressed big-endian float"
            sc = nc.createVariable("scalar_d", "f8", ())
            sc.assignValue(-0.0)
            sc2 = nc.createVariable("scalar_s", str, ())
            sc2[0] = "lonely string"
            g1 = nc.createGroup("g1")
            g1.createDimension("y", 3)
            g1.group_attr = np.int16(7)
            w = g1.createVariable("w", "u2", ("x", "y"), chunksizes=(2, 2))
            w[:] = np.arange(15, dtype="u2").reshape(5, 3)
            g2 = g1.createGroup("g2")
            g2.createDimension("z", 2)
            deep = g2.createVariable("deep", "i8", ("time", "y", "z"))
            deep[:] = np.arange(36, dtype="i8").reshape(6, 3, 2)
            g2.createGroup("empty")
        finally:
            nc.close()


def small_model() -> Dataset:
    """A compact model covering groups, scalars, char, string and unlimited dims."""
    root = Group()
    root.dimensions = {"x": Dimension(3), "t": Dimension(2, True)}
    root.attributes = {"title": Attribute("char", "small"), "nums": Attribute("short", np.array([1, 2, 3]))}
    root.variables = {
        "v": Variable("int", ["/t", "/x"], (2, 3), {"_FillValue": Attribute("int", np.array([-1]))},
                      np.arange(6, dtype="i4").reshape(2, 3), chunks=[1, 2]),
        "c": Variable("char", ["/x"], (3,), {}, np.array([b"a", b"\x00", b"z"], dtype="S1")),
        "s": Variable("string", ["/x"], (3,), {}, np.array(["", "é", "long"], dtype=object)),
        "sc": Variable("double", [], (), {}, np.array(2.5)),
    }
    sub = Group()
    sub.dimensions = {"y": Dimension(2)}
    sub.variables = {"w": Variable("ubyte", ["/x", "/g/y"], (3, 2), {}, np.arange(6, dtype="u1").reshape(3, 2))}
    root.groups = {"g": sub}
    return Dataset(root)
