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


# ---- a ?query is never silently dropped (issue 20 item 17) -------------------------------------------------------
# netcdf-c's S3 URL table (corpus/netcdf-c/unit_test/test_ncuri.c, S3TESTS) has no query, and nczarr.md puts
# every S3 parameter in the fragment; the only query in test_ncuri.c is DAP4's constraint (dap4.ce). So a query
# on a store URL is refused in one line, and a '?' that belongs to a key is written %3F.

@pytest.mark.parametrize("url", [
    "s3://bucket/key/ds?versionId=3#mode=nczarr,s3",
    "s3://bucket/key/ds?#mode=nczarr,s3",  # an empty query: still not what was meant
    "gs3://bucket/ds?x=1#mode=nczarr,s3",
    "https://s3.us-west-1.amazonaws.com/bucket/key?x=1#mode=nczarr,s3",
    "https://bucket.s3.eu-central-1.amazonaws.com/a/b?acl#mode=nczarr",
    "file:///p/x.zip?x=1#mode=nczarr,zip",
])
def test_a_query_is_refused_in_one_line(url):
    with pytest.raises(UsageError, match=r"query .* has no meaning .*%3F") as err:
        parse(url)
    assert "\n" not in str(err.value) and str(err.value).startswith(url)


def test_a_percent_encoded_question_mark_is_part_of_the_key():
    assert parse("s3://bucket/a%3Fb/ds#mode=nczarr,s3").path == "bucket/a?b/ds"
    assert parse("https://s3.example.com/bucket/k%3F#mode=s3").path == "bucket/k?"


def test_a_query_on_the_command_line_is_one_line_exit_2():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", "s3://bucket/ds?versionId=3#mode=s3"],
                          capture_output=True, text=True, check=False, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "?versionId=3" in lines[0] and "has no meaning" in lines[0]
