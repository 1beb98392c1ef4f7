"""The package's top-level calls (nczarr_conformance/access/api.py) and docs/api.md, whose examples run here."""
from __future__ import annotations

import doctest
import subprocess
import sys

import numpy as np
import pytest

import nczarr_conformance as ncz
from nczarr_conformance.errors import StoreError, UsageError
from nczarr_conformance.model import diff
from nczarr_conformance.peers import netcdf4
from nczarr_conformance.testing.ignores import CONTIGUOUS
from tests.conftest import CORPUS, REPO, require_module


@pytest.fixture
def nczarr_engine_registered(monkeypatch):
    """engine="nczarr" resolvable by name. An installed package registers it (entry point, proven by
    tests/test_xarray_backend.py); a checkout installed before the entry point existed does not, so
    the name is added here only when missing."""
    xr = require_module("xarray")
    from xarray.backends import plugins

    from nczarr_conformance.access.xarray_backend import NCZarrBackendEntrypoint

    engines = plugins.list_engines()
    if "nczarr" not in engines:
        monkeypatch.setattr(plugins, "list_engines", lambda: {**engines, "nczarr": NCZarrBackendEntrypoint()})
    return xr


def test_docs_api_examples_run(nczarr_engine_registered, monkeypatch):
    monkeypatch.chdir(REPO)  # the examples name corpus/rich.nc from the repository root
    result = doctest.testfile(str(REPO / "docs" / "api.md"), module_relative=False, report=True)
    assert result.attempted >= 20
    assert result.failed == 0, "docs/api.md examples failed (see the doctest report above)"


@pytest.mark.parametrize("target", ["out.file", "out.zip", "file://{}/url.file#mode=nczarr,file"])
def test_write_model_to_paths_and_urls(small, tmp_path, target):
    url = target.format(tmp_path) if "{}" in target else tmp_path / target  # a Path object, or a URL string
    ncz.write(small, url)
    assert diff(small, ncz.open_dataset(str(url)), ignore=CONTIGUOUS) == []


def test_write_model_to_s3(small, s3_bucket):
    url = f"s3://{s3_bucket}/api#mode=nczarr,s3"
    ncz.write(small, url)
    assert diff(small, ncz.open_dataset(url), ignore=CONTIGUOUS) == []


def test_write_refuses_existing_output_and_leaves_it(small, tmp_path):
    out = tmp_path / "out.zip"
    ncz.write(small, out)
    before = out.read_bytes()
    with pytest.raises(StoreError, match="exists"):
        ncz.write(small, out)
    assert out.read_bytes() == before
    ncz.write(small, out, overwrite=True, flavor="zarr")
    with ncz.open(out) as ds:
        assert ds.flavor == "zarr"


def test_write_refuses_what_it_cannot_write(tmp_path):
    with pytest.raises(UsageError, match="not dict"):
        ncz.write({"v": [1]}, tmp_path / "x.file")
    assert not (tmp_path / "x.file").exists()
    with pytest.raises(UsageError, match="unknown flavor"):
        ncz.write(ncz.open_dataset(str(CORPUS / "rich.nc")), tmp_path / "y.file", flavor="nczarr-3")


def test_write_xarray_dataset_reads_back_as_to_netcdf_wrote_it(tmp_path):
    """The store equals, in netCDF4-python's model, the file xarray's to_netcdf writes from the same Dataset."""
    xr = require_module("xarray")
    import pandas as pd

    ds = xr.Dataset(
        {"temp": (("time", "x"), np.array([[1.5, np.nan, 3.0], [4.0, 5.0, 6.0]], dtype="f4"), {"units": "K"}),
         "name": (("x",), np.array(["a", "bé", "c"], dtype=object))},
        coords={"time": pd.date_range("2000-01-01", periods=2), "x": [10, 20, 30]},
        attrs={"title": "from xarray"})
    ds["temp"].encoding.update(zlib=True, complevel=4, chunksizes=(1, 3))
    out = tmp_path / "x.zip"
    ncz.write(ds, out)
    nc = tmp_path / "x.nc"
    ds.to_netcdf(nc, engine="netcdf4")
    assert diff(netcdf4.read(str(nc)), ncz.open_dataset(str(out)), ignore=CONTIGUOUS) == []
    from nczarr_conformance.access.xarray_backend import NCZarrBackendEntrypoint

    back = xr.open_dataset(out, engine=NCZarrBackendEntrypoint).load()
    xr.testing.assert_identical(back, ds)
    assert back["temp"].encoding["chunksizes"] == (1, 3) and back["temp"].encoding["complevel"] == 4


def test_convert_and_check_take_paths(tmp_path):
    out = tmp_path / "rich.file"
    stats = ncz.convert(CORPUS / "rich.nc", out)
    assert stats.chunks > 0 and (out / ".zgroup").exists()
    report = ncz.check(out, deep=True)
    assert (report.flavor, report.exit_code, report.count("error")) == ("nczarr-4.10", 0, 0)
    assert ncz.check(out, fail_on="info").exit_code == (1 if report.findings else 0)


def test_public_names_survive_their_submodules():
    """convert and check are also submodule names; importing those never rebinds the functions."""
    code = ("import sys, nczarr_conformance as n; assert 'numpy' not in sys.modules; "
            "import nczarr_conformance.conversion.from_netcdf, nczarr_conformance.checker.rules; "
            "from nczarr_conformance.conversion.from_netcdf import ConvertStats; "
            "from nczarr_conformance.checker import Report; "
            "from nczarr_conformance import convert, check, open, write; "
            "import types; assert all(isinstance(f, types.FunctionType) for f in (convert, check, open, write)); "
            "assert n.convert is convert and n.check is check; "
            "assert n.convert.__module__ == 'nczarr_conformance.access.api'; "
            "print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_package_write_dataset_takes_a_store_or_a_path(small, tmp_path):
    from nczarr_conformance.stores import MemoryStore

    store = MemoryStore()
    assert ncz.write_dataset(small, store) == 0 and store.get("/.zgroup") is not None
    ncz.write_dataset(small, str(tmp_path / "p.zip"))  # was AttributeError: 'str' object has no attribute 'put'
    assert diff(small, ncz.open_dataset(str(tmp_path / "p.zip")), ignore=CONTIGUOUS) == []
