"""zarr-python reads every numeric array we write equal, from a directory and from a zip."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.conversion.from_netcdf import convert
from nczarr_conformance.model import Dataset, Dimension, Group, Variable
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.stores import DirectoryStore
from nczarr_conformance.stores.zip import dataset_folder
from nczarr_conformance.testing.source import read_source
from tests.conftest import require_module
from tests.peers.known import PeerStillWrong, still_wrong

zarr = require_module("zarr")
pytestmark = pytest.mark.peer

NUMERIC = {"byte", "ubyte", "short", "ushort", "int", "uint", "int64", "uint64", "float", "double"}


def _open_group(path, kind):
    if kind == "zip":
        store = zarr.storage.ZipStore(str(path), mode="r")
        return zarr.open_group(store, path=dataset_folder(path), mode="r", zarr_format=2)
    return zarr.open_group(str(path), mode="r", zarr_format=2)


def _numeric_variables(model: Dataset):
    for gkey, group in model.root.walk():
        for name, var in group.variables.items():
            if var.type in NUMERIC:
                yield f"{gkey.strip('/')}/{name}".strip("/"), var


@pytest.mark.parametrize("kind", ["file", "zip"])
@pytest.mark.parametrize("flavor", ["nczarr", "zarr"])
def test_zarr_python_reads_our_numeric_arrays(rich_nc, tmp_path, kind, flavor):
    out = tmp_path / ("rich.zip" if kind == "zip" else "rich.file")
    convert(str(rich_nc), str(out), flavor=flavor)
    model = read_source(str(rich_nc))  # the expectation comes from the source file, not from our reader
    group = _open_group(out, kind)
    checked = 0
    for path, var in _numeric_variables(model):
        arr = group[path][...]
        expected = np.asarray(var.data)
        assert arr.dtype == expected.dtype, path
        assert np.array_equal(arr.reshape(expected.shape), expected, equal_nan=var.type in ("float", "double")), path
        checked += 1
    assert checked >= 14


def test_zarr_python_reads_our_strings_as_bytes(tmp_path):
    root = Group({"x": Dimension(3)})
    root.variables["s"] = Variable("string", ["/x"], (3,), {}, np.array(["", "é", "abc"], dtype=object))
    with DirectoryStore(tmp_path / "s.file", "w") as store:
        write_dataset(Dataset(root), store)
    arr = zarr.open_group(str(tmp_path / "s.file"), mode="r", zarr_format=2)["s"][...]
    assert [b.decode("utf-8") for b in arr.tolist()] == ["", "é", "abc"]


def _zarr_python_reads(path, name):
    """zarr-python's values of one array, or its error as (exception type, message)."""
    try:
        return zarr.open_group(str(path), mode="r", zarr_format=2)[name][...].tolist()
    except Exception as exc:  # the exact error is compared by the caller
        return type(exc).__name__, str(exc)


@pytest.mark.xfail(strict=True, raises=PeerStillWrong,
                   reason="zarr-python 3.1 rejects the dtype >S1 that nczarr.md Appendix E prescribes for char "
                          "('No Zarr data type found'); netcdf-c reads |S1 as string, so no char dtype serves both")
def test_known_deviation_zarr_python_char(tmp_path):
    root = Group({"x": Dimension(2)})
    root.variables["c"] = Variable("char", ["/x"], (2,), {}, np.array([b"a", b"b"], dtype="S1"))
    with DirectoryStore(tmp_path / "c.file", "w") as store:
        write_dataset(Dataset(root), store)
    assert json.loads((tmp_path / "c.file" / "c" / ".zarray").read_text())["dtype"] == ">S1"
    still_wrong(_zarr_python_reads(tmp_path / "c.file", "c"), right=[b"a", b"b"],
                wrong=("ValueError", "No Zarr data type found that matches {'name': '>S1', 'object_codec_id': None}"))


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="zarr-python 3.1 rejects the dtype <i1 that netcdf-c "
                                                               "writes for byte; we write |i1, which both read")
def test_known_deviation_zarr_python_rejects_netcdf_c_byte_dtype(tmp_path):
    from nczarr_conformance.peers import netcdf4
    from nczarr_conformance.urls import to_file_url

    root = Group({"x": Dimension(2)})
    root.variables["b"] = Variable("byte", ["/x"], (2,), {}, np.array([-1, 1], dtype="i1"))
    netcdf4.write(Dataset(root), to_file_url(str(tmp_path / "b.file"), "file"))
    assert json.loads((tmp_path / "b.file" / "b" / ".zarray").read_text())["dtype"] == "<i1"
    still_wrong(_zarr_python_reads(tmp_path / "b.file", "b"), right=[-1, 1],
                wrong=("ValueError", "No Zarr data type found that matches {'name': '<i1', 'object_codec_id': None}"))


def test_we_read_zarr_python_output_including_scalars(tmp_path):
    """Pure Zarr v2 from zarr-python: dims from nowhere, a shape-[] scalar, F order, '/' separator."""
    g = zarr.open_group(str(tmp_path / "zp.zarr"), mode="w", zarr_format=2)
    a = g.create_array("a", shape=(5, 4), chunks=(2, 3), dtype="<f8", fill_value=np.nan, order="F")
    a[...] = np.arange(20, dtype="f8").reshape(5, 4)
    a.attrs["units"] = "m"
    s = g.create_array("scalar", shape=(), dtype="<i4", fill_value=0)
    s[...] = 42
    b = g.create_array("slash", shape=(6,), chunks=(4,), dtype=">u2",
                       chunk_key_encoding={"name": "v2", "separator": "/"})
    b[...] = np.arange(6, dtype=">u2")
    model = open_dataset(str(tmp_path / "zp.zarr"))
    assert model.root.variables["a"].data.tolist() == np.arange(20, dtype="f8").reshape(5, 4).tolist()
    assert model.root.variables["a"].dimensions == ["/_Anonymous_Dim_5", "/_Anonymous_Dim_4"]
    assert model.root.variables["a"].attributes["units"].value == "m"
    assert model.root.variables["scalar"].shape == () and int(model.root.variables["scalar"].data) == 42
    assert model.root.variables["slash"].data.tolist() == list(range(6))


def test_we_read_xarray_consolidated_output(tmp_path):
    xr = require_module("xarray")
    ds = xr.Dataset({"t": (("time", "lat"), np.arange(6, dtype="i4").reshape(2, 3))},
                    coords={"lat": [1.0, 2.0, 3.0]}, attrs={"title": "xr"})
    ds.to_zarr(str(tmp_path / "xr.zarr"), zarr_format=2, consolidated=True)
    model = open_dataset(str(tmp_path / "xr.zarr"))
    assert set(model.root.dimensions) == {"time", "lat"}
    assert model.root.variables["t"].dimensions == ["/time", "/lat"]
    assert model.root.variables["t"].data.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert model.root.attributes["title"].value == "xr"


def test_zarr_python_and_we_agree_on_pure_zarr_round_trip(small, tmp_path):
    del small.root.variables["c"]
    with DirectoryStore(tmp_path / "z.zarr", "w") as store:
        write_dataset(small, store, flavor="zarr")
    g = zarr.open_group(str(tmp_path / "z.zarr"), mode="r", zarr_format=2)
    assert g["v"][...].tolist() == small.root.variables["v"].data.tolist()
    assert float(g["sc"][...]) == 2.5
    back = open_dataset(str(tmp_path / "z.zarr"))
    assert back.root.variables["v"].data.tolist() == small.root.variables["v"].data.tolist()


def test_zarr_python_scalars_read_as_netcdf_scalars_from_zip(tmp_path):
    """netcdf-c issue #3108: zarr-python's shape-[] arrays are scalars, from a zip too."""
    store = zarr.storage.ZipStore(str(tmp_path / "s.zip"), mode="w")
    g = zarr.open_group(store, mode="w", zarr_format=2)
    g.create_array("s", shape=(), dtype="<i8", fill_value=0)[...] = -5
    store.close()
    var = open_dataset(str(tmp_path / "s.zip")).root.variables["s"]
    assert var.shape == () and var.dimensions == [] and int(var.data) == -5


@pytest.mark.xfail(strict=True, raises=PeerStillWrong,
                   reason="netcdf-c 4.10.1 does not show a Zarr array of shape [] (zarr-python's scalars, netcdf-c "
                          "issue #3108): the variable is missing")
def test_known_deviation_netcdf_c_ignores_zarr_scalars(tmp_path):
    import netCDF4

    from nczarr_conformance.urls import to_file_url

    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w", zarr_format=2)
    g.create_array("s", shape=(), dtype="<f8", fill_value=0.0)[...] = 1.25
    g.create_array("a", shape=(2,), dtype="<f8", fill_value=0.0)[...] = 1.0
    assert float(zarr.open_group(str(tmp_path / "s.zarr"), mode="r", zarr_format=2)["s"][...]) == 1.25
    with netCDF4.Dataset(to_file_url(str(tmp_path / "s.zarr"), "file", "zarr")) as nc:
        assert nc.variables["a"][...].tolist() == [1.0, 1.0]  # precondition: netcdf-c reads the store
        seen = sorted(nc.variables)
    still_wrong(seen, wrong=["a"], right=["a", "s"])
