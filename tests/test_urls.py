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


# ---- which store an http(s) URL names, anonymous access, gs:// and az:// (issue 23) -------------------------------
# netcdf-c's rule (libdispatch/ds3util.c NC_iss3): S3 when the mode says s3 or gs3, or the host is AWS's or
# Google's; anything else is not S3 (netcdf-c would try DAP2), and we read it as a plain HTTP store.

@pytest.mark.parametrize("url", [
    "https://s3.us-west-1.amazonaws.com/bucket/key",  # an AWS host needs no mode (NC_iss3's last chance)
    "https://bucket.s3.amazonaws.com/key#mode=nczarr",
    "https://storage.googleapis.com/bucket/key#mode=zarr",
    "https://server.example.com/bucket/key#mode=nczarr,s3",  # netcdf-c's form (8)
    "http://127.0.0.1:9000/bucket/key#mode=gs3,nczarr",
])
def test_netcdf_c_s3_forms_keep_their_meaning(url):
    spec = parse(url)
    assert (spec.kind, spec.path) == ("s3", "bucket/key")


@pytest.mark.parametrize(("url", "base"), [
    ("https://data.example.org/stores/x.zarr#mode=nczarr", "https://data.example.org/stores/x.zarr"),
    ("http://127.0.0.1:8000/a/b.file/", "http://127.0.0.1:8000/a/b.file"),
    ("https://s3.example.com/bucket/key", "https://s3.example.com/bucket/key"),  # an S3-looking host, no s3 mode
])
def test_any_other_http_url_is_a_plain_http_store(url, base):
    spec = parse(url)
    assert (spec.kind, spec.path) == ("http", base)


def test_local_storage_modes_over_http_are_refused_in_one_line():
    with pytest.raises(UsageError, match="names local storage") as err:
        parse("https://data.example.org/x.zip#mode=nczarr,zip")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("url", "kind", "path"), [
    ("gs://bucket/a/b#mode=nczarr", "gs", "bucket/a/b"),
    ("gcs://bucket/a", "gs", "bucket/a"),
    ("az://container/a/b", "az", "container/a/b"),
    ("abfs://container@account.dfs.core.windows.net/a", "az", "container/a"),
])
def test_gs_and_az_urls(url, kind, path):
    spec = parse(url)
    assert (spec.kind, spec.path) == (kind, path)


@pytest.mark.parametrize(("url", "anonymous"), [
    ("s3://b/k#mode=nczarr,s3&aws.profile=no", True),  # netcdf-c's reserved "no credentials" profile
    ("s3://b/k#mode=nczarr,s3&aws.profile=none", True),  # nc_test/test_byterange.sh's spelling
    ("s3://b/k#mode=nczarr,s3&aws.profile=default", False),
    ("s3://b/k#mode=nczarr,s3", False),
    ("gs://b/k#anon", True),
    ("az://c/k#anon=false", False),
])
def test_anonymous_spellings(url, anonymous):
    assert parse(url).anonymous is anonymous


def test_storage_options_anon_is_anonymous():
    assert parse("s3://b/k", {"anon": True}).anonymous
    assert not parse("s3://b/k", {"anon": False}).anonymous


@pytest.mark.parametrize(("url", "spelled"), [
    ("s3://b/k", "s3://b/k#aws.profile=no"),
    ("s3://b/k#mode=nczarr,s3", "s3://b/k#mode=nczarr,s3&aws.profile=no"),
    ("s3://b/k#mode=nczarr,s3&aws.profile=no", "s3://b/k#mode=nczarr,s3&aws.profile=no"),
    ("gs://b/k", "gs://b/k#anon"),
    ("https://data.example.org/x", "https://data.example.org/x"),  # unsigned already
])
def test_anon_flag_is_spelled_in_the_fragment(url, spelled):
    from nczarr_conformance.urls import anonymous_url

    assert anonymous_url(url) == spelled
    assert parse(spelled).anonymous or parse(spelled).kind == "http"


@pytest.mark.parametrize("url", ["s3://b/k#mode=s3&aws.profile=work", "/tmp/x.file", "x.zip"])
def test_anon_flag_refuses_a_local_store_or_a_named_profile(url):
    from nczarr_conformance.urls import anonymous_url

    with pytest.raises(UsageError):
        anonymous_url(url)
