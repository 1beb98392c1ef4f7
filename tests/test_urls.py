from __future__ import annotations

import pytest

from nczarr_conformance.errors import UsageError
from nczarr_conformance.urls import parse


@pytest.mark.parametrize("url,kind,path,modes", [
    ("file:///p/x.zip#mode=nczarr,zip", "zip", "/p/x.zip", ("nczarr", "zip")),
    ("file:///p/x.file#mode=zarr,file", "file", "/p/x.file", ("zarr", "file")),
    ("file:///p/x.file#mode=nczarr,file,noxarray", "file", "/p/x.file", ("nczarr", "file", "noxarray")),
    ("/p/out.zip", "zip", "/p/out.zip", ()),
    ("/p/out.file", "file", "/p/out.file", ()),
    ("s3://bucket/key/ds#mode=nczarr,s3", "s3", "bucket/key/ds", ("nczarr", "s3")),
])
def test_parse(url, kind, path, modes):
    spec = parse(url)
    assert (spec.kind, spec.path, spec.modes) == (kind, path, modes)


def test_zip_magic_means_zip(tmp_path):
    target = tmp_path / "noext"
    import zipfile

    with zipfile.ZipFile(target, "w") as zf:
        zf.writestr(".zgroup", "{}")
    assert parse(str(target)).kind == "zip"


@pytest.mark.parametrize("mode,pure_zarr,xarray", [
    ("nczarr", False, True),
    ("zarr", True, True),
    ("nczarr,zarr", True, True),  # nczarr.md: mode=zarr is an alias of mode=nczarr,zarr
    ("xarray", True, True),  # netcdf-c infers zarr from xarray (dinfermodel.c)
    ("noxarray", False, False),  # nczarr.md: noxarray only drops _ARRAY_DIMENSIONS (netcdf-c #2647 differs)
    ("nczarr,noxarray", False, False),
    ("zarr,noxarray", True, False),
    ("xarray,noxarray", True, False),  # noxarray beats xarray, as netcdf-c's modenegations
    ("", False, True),
])
def test_flags(mode, pure_zarr, xarray):
    """The flags; tests/test_url_modes.py compares each with what netCDF4-python does."""
    spec = parse(f"file:///a#mode={mode},file")
    assert (spec.pure_zarr, spec.xarray) == (pure_zarr, xarray)


def test_path_and_virtual_host_s3_urls():
    spec = parse("https://s3.us-west-1.amazonaws.com/bucket/key#mode=nczarr,s3")
    assert (spec.kind, spec.path, spec.params.get("aws.region")) == ("s3", "bucket/key", "us-west-1")
    spec = parse("https://bucket.s3.eu-central-1.amazonaws.com/a/b#mode=nczarr")
    assert (spec.kind, spec.path, spec.params.get("aws.region")) == ("s3", "bucket/a/b", "eu-central-1")


def test_bad_scheme():
    with pytest.raises(UsageError):
        parse("ftp://x/y")
