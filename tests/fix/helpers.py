"""Stores as netcdf-c 4.10.1 (netCDF4-python) writes them, and how the tests look at them."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from nczarr_conformance.model import Dataset, Dimension, Group, Variable, diff
from nczarr_conformance.peers import netcdf4
from nczarr_conformance.urls import to_file_url


def url(path: Path, mode: str = "nczarr") -> str:
    return to_file_url(str(path), "file", mode)


def c410(path: Path, *, byte: bool = False, shuffle: bool = False, char: bool = False, string: bool = False,
         partial_double: bool = False, answer: bool = False, group: bool = False) -> Path:
    """A netCDF4-python (netcdf-c 4.10.1) store holding the variables asked for."""
    import netCDF4

    with netCDF4.Dataset(url(path), "w") as nc:
        nc.createDimension("x", 4)
        if byte:
            nc.createVariable("b", "i1", ("x",))[:] = np.array([1, -1, 127, -128], "i1")
            nc.createVariable("ub", "u1", ("x",))[:] = np.array([0, 1, 200, 255], "u1")
        if shuffle:
            v = nc.createVariable("i", "i4", ("x",), zlib=True, complevel=1, shuffle=True, chunksizes=(2,))
            v[:] = np.array([0, 1000, -2000, 3000], "i4")
        if char:
            nc.createDimension("n", 3)
            v = nc.createVariable("c", "S1", ("x", "n"), chunksizes=(2, 3))
            v[0:2, :] = np.array([[b"a", b"b", b""], [b"c", b"", b"d"]], "S1")  # rows 2-3: never written
        if string:
            nc.createVariable("s", str, ("x",))[0:2] = np.array(["a", "ü"], dtype=object)
        if partial_double:
            nc.createVariable("d", "f8", ("x",), chunksizes=(1,))[0] = 1.5  # d[1:]: never written
        if answer:
            nc.setncattr("answer", "42")
        if group:
            g = nc.createGroup("g")
            g.createDimension("y", 2)
            g.createVariable("w", "f4", ("y", "x"))[:] = np.arange(8, dtype="f4").reshape(2, 4)
    return path


def ours_without_dims(path: Path) -> Path:
    """Our writer with ``noxarray``: NCZarr metadata, no _ARRAY_DIMENSIONS anywhere (as older writers left it)."""
    from nczarr_conformance.nczarr.writer import write_dataset
    from nczarr_conformance.stores import DirectoryStore

    root = Group({"x": Dimension(3)})
    root.variables["v"] = Variable("int", ["/x"], (3,), {}, np.array([1, 2, 3], "i4"))
    sub = Group({"y": Dimension(2)})
    sub.variables["w"] = Variable("double", ["/g/y", "/x"], (2, 3), {}, np.arange(6.0).reshape(2, 3))
    root.groups["g"] = sub
    with DirectoryStore(path, "w") as store:
        write_dataset(Dataset(root), store, xarray=False)
    return path


def nc_read(path: Path, mode: str = "nczarr") -> Dataset:
    return netcdf4.read(url(path, mode))


def same_to_netcdf_c(before: Path, after: Path, **ignore: str) -> list[str]:
    """Differences (storage included) between what netcdf-c 4.10.1 reads from two stores."""
    return diff(nc_read(before), nc_read(after), ignore=ignore or None)


def copy(path: Path, name: str) -> Path:
    out = path.parent / name
    shutil.copytree(path, out)
    return out


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` (the store and its siblings): bytes and mtime."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = (p.read_bytes(), p.stat().st_mtime_ns)
    return out


def zarray(path: Path, array: str) -> dict:
    return json.loads((path / array / ".zarray").read_text())
