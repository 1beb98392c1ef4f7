"""URL ``mode=`` semantics, table-tested against what netCDF4-python (netcdf-c 4.10.1) does with each combination.

For every mode list, netCDF4-python writes a small dataset and we convert the same dataset to the same URL;
the layouts must agree on what the mode decides: NCZarr or pure Zarr, and ``_ARRAY_DIMENSIONS`` on or off
(checked on the root variable, where nczarr.md puts it; which groups get it is the writer's choice, not the
mode's). Then both read a netcdf-c NCZarr store and a netcdf-c pure-Zarr store through each mode and must
show the same dimensions.

Where nczarr.md and netcdf-c disagree, nczarr.md is the intent: ``noxarray`` only turns ``_ARRAY_DIMENSIONS``
off (nczarr.md, "mode=nczarr|zarr|noxarray"), while netcdf-c also infers ``zarr`` from it (dinfermodel.c
``modeinferences``; netcdf-c issue #2647 calls it a bug). Those rows are strict xfails on netcdf-c.
``mode=xarray`` is not in nczarr.md; netcdf-c infers ``zarr`` from it, and so do we.

netCDF4-python's wheels are built without zip and S3 (asserted below); for those storages the table checks
that our layout is the one we write to a directory for the same mode, so the format flags mean the same
on every storage.
"""
from __future__ import annotations

import json

import pytest

from nczarr_conformance.convert import convert
from nczarr_conformance.dataset import open_dataset
from nczarr_conformance.stores import open_store
from nczarr_conformance.urls import parse
from tests.conftest import require_module

from .peers.known import PeerStillWrong, still_wrong

netCDF4 = require_module("netCDF4")
pytestmark = pytest.mark.peer

# every combination a user can write; xarray beside noxarray loses (netcdf-c's modenegations)
AGREED = ["nczarr", "zarr", "nczarr,zarr", "xarray", "nczarr,xarray", "zarr,xarray", "zarr,noxarray",
          "nczarr,zarr,noxarray", "xarray,noxarray", "nczarr,consolidated", "zarr,consolidated",
          "xarray,consolidated"]
# nczarr.md: noxarray keeps NCZarr; netcdf-c writes and reads pure Zarr for these (issue #2647)
NOXARRAY_ONLY = ["noxarray", "nczarr,noxarray", "noxarray,consolidated"]


def _build(nc):
    nc.createDimension("x", 2)
    v = nc.createVariable("v", "f4", ("x",))
    v[:] = [1, 2]
    v.units = "m"
    g = nc.createGroup("g")
    g.createDimension("y", 3)
    w = g.createVariable("w", "i4", ("y",))
    w[:] = [1, 2, 3]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("src") / "src.nc"
    with netCDF4.Dataset(path, "w") as nc:
        _build(nc)
    return path


def _layout(url):
    """(format, root variable has _ARRAY_DIMENSIONS) of the store at ``url``, from its objects."""
    store = open_store(url)
    try:
        text = b" ".join(store.get(k) or b"" for k in store.list_prefix("/") if keys_base(k).startswith(".z"))
        zattrs = json.loads(store.get("/v/.zattrs") or b"{}")
    finally:
        store.close()
    return ("nczarr" if b"_nczarr" in text else "zarr", "_ARRAY_DIMENSIONS" in zattrs)


def keys_base(key):
    return key.rsplit("/", 1)[-1]


def _peer_writes(url):
    with netCDF4.Dataset(url, "w", format="NETCDF4") as nc:
        _build(nc)
    return _layout(url)


def _ours_writes(source, url):
    convert(str(source), url)
    return _layout(url)


def _url(path, mode, kind="file"):
    return f"file://{path}#mode={mode},{kind}"


@pytest.mark.parametrize("mode", AGREED)
def test_write_mode_as_netcdf_c(tmp_path, source, mode):
    peer = _peer_writes(_url(tmp_path / "peer.file", mode))
    ours = _ours_writes(source, _url(tmp_path / "ours.file", mode))
    assert ours == peer


@pytest.mark.xfail(strict=True, raises=PeerStillWrong,
                   reason="netcdf-c infers zarr from noxarray and writes pure Zarr (issue #2647); nczarr.md: "
                          "noxarray only disables _ARRAY_DIMENSIONS")
@pytest.mark.parametrize("mode", NOXARRAY_ONLY)
def test_write_noxarray_keeps_nczarr_netcdf_c_does_not(tmp_path, source, mode):
    ours = _ours_writes(source, _url(tmp_path / "ours.file", mode))
    assert ours == ("nczarr", False)  # our own behaviour, outside the peer's verdict
    still_wrong(_peer_writes(_url(tmp_path / "peer.file", mode)), wrong=("zarr", False), right=ours)


def _dims_view(model):
    """{group: dimension names}, {variable: dimension paths}: what the mode decides on reading."""
    dims, refs = {}, {}
    for gkey, group in model.root.walk():
        dims[gkey] = sorted(group.dimensions)
        for name, var in group.variables.items():
            refs[f"{gkey.rstrip('/')}/{name}"] = list(var.dimensions)
    return dims, refs


@pytest.fixture(scope="module")
def netcdf_c_stores(tmp_path_factory):
    """A store netcdf-c wrote as NCZarr and one it wrote as pure Zarr (both with _ARRAY_DIMENSIONS)."""
    base = tmp_path_factory.mktemp("stores")
    out = {}
    for flavor in ("nczarr", "zarr"):
        path = base / f"{flavor}.file"
        with netCDF4.Dataset(_url(path, flavor), "w", format="NETCDF4") as nc:
            _build(nc)
        out[flavor] = path
    return out


def _peer_reads(url):
    from nczarr_conformance.peers import netcdf4

    return _dims_view(netcdf4.read(url))


@pytest.mark.parametrize("stored", ["nczarr", "zarr"])
@pytest.mark.parametrize("mode", [m for m in AGREED if "consolidated" not in m])
def test_read_mode_as_netcdf_c(netcdf_c_stores, stored, mode):
    url = _url(netcdf_c_stores[stored], mode)
    assert _dims_view(open_dataset(url)) == _peer_reads(url)


@pytest.mark.xfail(strict=True, raises=PeerStillWrong,
                   reason="netcdf-c reads an NCZarr store as pure Zarr under noxarray (issue #2647): its "
                          "dimensions become _Anonymous_Dim_N")
@pytest.mark.parametrize("mode", ["noxarray", "nczarr,noxarray"])
def test_read_noxarray_keeps_nczarr_netcdf_c_does_not(netcdf_c_stores, mode):
    url = _url(netcdf_c_stores["nczarr"], mode)
    ours = _dims_view(open_dataset(url))
    assert ours == _dims_view(open_dataset(_url(netcdf_c_stores["nczarr"], "nczarr")))  # NCZarr dims kept
    anonymous = ({"/": ["_Anonymous_Dim_2", "_Anonymous_Dim_3"], "/g": []},
                 {"/v": ["/_Anonymous_Dim_2"], "/g/w": ["/_Anonymous_Dim_3"]})
    still_wrong(_peer_reads(url), wrong=anonymous, right=ours)


def test_noxarray_reading_pure_zarr_is_anonymous_in_both(netcdf_c_stores):
    """On a pure-Zarr store, noxarray means anonymous dimensions for netcdf-c and for us."""
    url = _url(netcdf_c_stores["zarr"], "noxarray")
    ours = _dims_view(open_dataset(url))
    assert ours == _peer_reads(url)
    assert ours[0]["/"] == ["_Anonymous_Dim_2", "_Anonymous_Dim_3"]


def test_netcdf_c_wheel_has_no_zip_or_s3(tmp_path):
    """Why the zip and S3 rows compare with our directory layout: the peer cannot write them."""
    with pytest.raises(OSError, match="not turned on"):
        netCDF4.Dataset(_url(tmp_path / "x.zip", "nczarr", "zip"), "w", format="NETCDF4")


@pytest.mark.parametrize("mode", AGREED + NOXARRAY_ONLY)
def test_zip_mode_means_what_it_means_for_a_directory(tmp_path, source, mode):
    assert _ours_writes(source, _url(tmp_path / "o.zip", mode, "zip")) == \
        _ours_writes(source, _url(tmp_path / "o.file", mode))


@pytest.mark.parametrize("mode", ["nczarr", "zarr", "xarray", "noxarray", "zarr,noxarray"])
def test_s3_mode_means_what_it_means_for_a_directory(tmp_path, source, s3_bucket, mode):
    s3 = f"s3://{s3_bucket}/{mode.replace(',', '-')}#mode={mode},s3"
    assert parse(s3).kind == "s3"
    assert _ours_writes(source, s3) == _ours_writes(source, _url(tmp_path / "o.file", mode))
