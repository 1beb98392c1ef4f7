"""Pure-Zarr dimensions from ``_ARRAY_DIMENSIONS`` are local to the array's group, as netcdf-c reads them.

The store is written by zarr-python (the writer of most pure-Zarr data); the expected dimensions are
what netCDF4-python (netcdf-c 4.10.1, after netcdf-c PR #3218) reports for the same store.
"""
from __future__ import annotations

import pytest

from nczarr_conformance.access.dataset import open_dataset
from tests.conftest import require_module

zarr = require_module("zarr")
netCDF4 = require_module("netCDF4")
pytestmark = pytest.mark.peer


def _store(path):
    """Root ``x`` (3) and ``y`` (4); sub-group ``g`` names ``x`` (same size), ``y`` (same size), ``z`` (new)."""
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    for name, size in (("a", 3), ("d", 4)):
        arr = root.create_array(name, shape=(size,), dtype="f4")
        arr[:] = 1
        arr.attrs["_ARRAY_DIMENSIONS"] = ["x" if size == 3 else "y"]
    sub = root.create_group("g")
    for name, dim, size in (("b", "x", 3), ("c", "y", 4), ("e", "z", 5)):
        arr = sub.create_array(name, shape=(size,), dtype="f4")
        arr[:] = 2
        arr.attrs["_ARRAY_DIMENSIONS"] = [dim]
    anon = sub.create_array("n", shape=(6,), dtype="f4")  # no _ARRAY_DIMENSIONS: anonymous, in the root
    anon[:] = 3
    return path


def _netcdf_c_view(url):
    """{group path: dimension names}, {variable path: dimension paths} as netcdf-c sees the store."""
    ds = netCDF4.Dataset(url)
    try:
        dims, refs = {}, {}

        def walk(group, path):
            dims[path] = sorted(group.dimensions)
            for name, var in group.variables.items():
                refs[f"{path.rstrip('/')}/{name}"] = [
                    f"{_path(d.group())}/{d.name}".replace("//", "/") for d in var.get_dims()]
            for name, child in group.groups.items():
                walk(child, f"{path.rstrip('/')}/{name}")

        walk(ds, "/")
        return dims, refs
    finally:
        ds.close()


def _path(group):
    return group.path if group.path != "/" else ""


def _our_view(url):
    model = open_dataset(url)
    dims, refs = {}, {}
    for gkey, group in model.root.walk():
        dims[gkey] = sorted(group.dimensions)
        for name, var in group.variables.items():
            refs[f"{gkey.rstrip('/')}/{name}"] = list(var.dimensions)
    return dims, refs


def test_pure_zarr_dimensions_are_group_local_as_netcdf_c_reads_them(tmp_path):
    url = f"file://{_store(tmp_path / 'p.file')}#mode=zarr,file"
    peer = _netcdf_c_view(url)
    # the peer's own answer, asserted so a change in netcdf-c shows up here rather than as our failure
    assert peer[1]["/g/b"] == ["/g/x"] and peer[1]["/g/n"] == ["/_Anonymous_Dim_6"], peer
    assert _our_view(url) == peer
    assert _our_view(str(tmp_path / "p.file")) == peer  # detected as pure Zarr without the mode
