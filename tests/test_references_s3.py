"""``nc2nczarr s3://B/K.nc OUT.json --reference``: references into a netCDF-4 file on S3, made without downloading it.

The file is written by netCDF4-python, uploaded to a real moto server (spoken to over HTTP), and referenced
from its s3:// URL. Expected values come from netCDF4-python reading the local copy, the storage from
h5py's chunk index of that copy and the size and ETag from boto3's HEAD, never from the code under test.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.errors import StoreError
from nczarr_conformance.model import diff
from nczarr_conformance.sources import netcdf4 as nc4
from tests.cf_sources import chunks_match_hdf5, write_cf
from tests.conftest import CORPUS, require_module

h5py = pytest.importorskip("h5py")
fsspec = pytest.importorskip("fsspec")

#: Zarr has no contiguous layout: a contiguous dataset is one reference of its whole extent
CONTIGUOUS = {"contiguous": "a contiguous dataset is one Zarr chunk of its whole shape (one reference)"}
BUCKET = f"s3refs-{os.getpid() % 10000}"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=300)


def _cf_file(path: Path) -> Path:
    """A CF-like netCDF-4 file: packed data with _FillValue, a noleap time axis, a compressed chunked variable
    (shuffle + deflate), a contiguous one and a sub-group."""
    return write_cf(path, obs_group=True)


@pytest.fixture(scope="module")
def on_s3(moto_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """corpus/rich.nc and a CF-like file uploaded to moto, each converted once from its s3:// URL."""
    boto3 = require_module("boto3")
    here = tmp_path_factory.mktemp("s3refs")
    client = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    made: dict[str, Any] = {"client": client, "endpoint": moto_server}
    for name, local in (("rich", CORPUS / "rich.nc"), ("cf", _cf_file(here / "cf.nc"))):
        client.upload_file(str(local), BUCKET, f"archive/{name}.nc")
        url, out = f"s3://{BUCKET}/archive/{name}.nc", here / f"{name}.json"
        done = _run("nczarr_conformance.cli.convert", url, str(out), "--reference")
        assert done.returncode == 0, done.stderr
        made[name] = (Path(local), url, out)
    return made


def _xr_refs(out: Path, endpoint: str) -> Any:
    import xarray as xr

    options = {"fo": str(out), "remote_protocol": "s3",
               "remote_options": {"endpoint_url": endpoint, "asynchronous": True}}
    return xr.open_dataset("reference://", engine="zarr",
                           backend_kwargs={"storage_options": options, "consolidated": False})


def test_our_reader_reads_s3_references_as_netcdf4_reads_the_local_copy(on_s3: dict[str, Any]):
    local, _, out = on_s3["rich"]
    assert diff(nc4.read(str(local)), open_dataset(str(out)), ignore=CONTIGUOUS) == []
    import nczarr_conformance

    local, _, out = on_s3["cf"]
    import netCDF4

    with netCDF4.Dataset(local) as ds:
        ds.set_auto_maskandscale(False)
        expected = ds["tas"][:]
        pr = ds["obs/pr"][:]
    opened = nczarr_conformance.open(str(out))
    assert np.array_equal(opened["tas"][:], expected) and opened["tas"][:].dtype == expected.dtype
    assert np.array_equal(opened["obs/pr"][:], pr)


def test_xarray_zarr_engine_reads_s3_references_as_netcdf4_reads_the_local_copy(on_s3: dict[str, Any]):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("s3fs")
    local, _, out = on_s3["cf"]
    with xr.open_dataset(local, engine="netcdf4") as source, _xr_refs(out, on_s3["endpoint"]) as refs:
        assert refs.identical(source), (refs, source)
        assert refs["tas"].encoding["dtype"] == source["tas"].encoding["dtype"] == np.dtype("i2")
    # (its sub-group: zarr-python lists no member of a sub-group of references, the strict xfail
    # test_zarr_python_lists_the_members_of_a_sub_group_of_references; our reader reads it above)


def test_every_chunk_is_the_s3_url_and_the_range_h5py_indexes_and_the_etag_is_recorded(on_s3: dict[str, Any]):
    for name in ("rich", "cf"):
        local, url, out = on_s3[name]
        doc = json.loads(out.read_text())
        head = on_s3["client"].head_object(Bucket=BUCKET, Key=f"archive/{name}.nc")
        assert doc["nczarr:targets"] == {url: {"size": head["ContentLength"], "etag": head["ETag"]}}
        seen = chunks_match_hdf5(doc["refs"], local, url)
        # cf: time 1 chunk, lat contiguous 1, tas 3 x 2 x 1, obs/pr 2 x 2 (h5py get_num_chunks of each)
        assert seen == {"rich": 29, "cf": 12}[name], (name, seen)


def test_an_overwritten_object_is_named_by_check_and_refused_by_our_reader(on_s3: dict[str, Any], tmp_path: Path):
    client = on_s3["client"]
    local = _cf_file(tmp_path / "cf.nc")
    client.upload_file(str(local), BUCKET, "archive/changing.nc")
    url, out = f"s3://{BUCKET}/archive/changing.nc", tmp_path / "changing.json"
    assert _run("nczarr_conformance.cli.convert", url, str(out), "--reference").returncode == 0
    assert _run("nczarr_conformance.cli.check", str(out), "--select", "NCZ-REF").returncode == 0
    data = bytearray(local.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes: only the ETag tells
    client.put_object(Bucket=BUCKET, Key="archive/changing.nc", Body=bytes(data))
    checked = _run("nczarr_conformance.cli.check", str(out), "--select", "NCZ-REF")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    line = f"NCZ-REF-TARGET -: target {url} changed since the references were made (ETag "
    assert line in checked.stdout and checked.stdout.count("NCZ-REF-TARGET") == 1, checked.stdout
    dumped = _run("nczarr_conformance.cli.dump", str(out))
    assert dumped.returncode == 2 and dumped.stdout == ""
    assert dumped.stderr.count("\n") == 1 and f"target {url} changed" in dumped.stderr, dumped.stderr
    with pytest.raises(StoreError, match="changed since the references were made"):
        open_dataset(str(out))
    client.delete_object(Bucket=BUCKET, Key="archive/changing.nc")
    checked = _run("nczarr_conformance.cli.check", str(out), "--select", "NCZ-REF")
    assert checked.returncode == 1 and f"target {url} is not reachable (no such object)" in checked.stdout


def test_a_missing_object_or_one_not_hdf5_is_refused_in_one_line(on_s3: dict[str, Any], tmp_path: Path):
    on_s3["client"].put_object(Bucket=BUCKET, Key="archive/notes.nc", Body=b"CDF\x01 classic, not HDF5")
    for key, why in (("nothing.nc", "no such object"), ("notes.nc", "not a netCDF-4 (HDF5) file")):
        out = tmp_path / "x.json"
        done = _run("nczarr_conformance.cli.convert", f"s3://{BUCKET}/archive/{key}", str(out), "--reference")
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert f"s3://{BUCKET}/archive/{key}: {why}" in done.stderr
        assert not out.exists()


def test_ranges_and_codecs_are_checked_against_the_s3_object_itself(on_s3: dict[str, Any], tmp_path: Path):
    """NCZ-REF-RANGE holds each range to the object's size (one HEAD), NCZ-REF-CODECS each array's codecs and
    ranges to the HDF5 dataset in the object (h5py over ranged GETs): both were left unchecked for S3 targets."""
    local, url, out = on_s3["cf"]
    clean = _run("nczarr_conformance.cli.check", str(out), "--select", "NCZ-REF")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    size = on_s3["client"].head_object(Bucket=BUCKET, Key="archive/cf.nc")["ContentLength"]
    with h5py.File(local, "r") as f:  # the precondition: tas is shuffled and deflated in the file
        assert f["tas"].shuffle and f["tas"].compression == "gzip"
    doc = json.loads(out.read_text())
    refs = doc["refs"]
    first = sorted(k for k in refs if k.startswith("tas/") and isinstance(refs[k], list))[0]
    refs[first] = [url, size - 4, 16]  # past the object's end
    zarray = json.loads(refs["tas/.zarray"])
    zarray["filters"] = None  # the shuffle the HDF5 dataset has, dropped
    refs["tas/.zarray"] = json.dumps(zarray)
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(doc))
    checked = _run("nczarr_conformance.cli.check", str(tampered), "--select", "NCZ-REF")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert f"NCZ-REF-RANGE /{first}: reads bytes {size - 4}-{size + 12} of {url} ({size} bytes)" in checked.stdout
    assert f"NCZ-REF-CODECS /tas: declares codecs ['zlib'] but {url}/tas is stored with ['shuffle', 'zlib']" \
        in checked.stdout, checked.stdout
    assert f"NCZ-REF-CODECS /{first}: bytes {size - 4}-{size + 12} of {url} are no chunk" in checked.stdout


@contextlib.contextmanager
def _requests_to_moto() -> Iterator[list[str]]:
    """The requests the moto server answers meanwhile, ``"METHOD /bucket/key"`` each, from its own request log
    (werkzeug's: the server runs in this process), never from our client's bookkeeping."""
    seen: list[str] = []

    class Log(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            line = re.sub(r"\x1b\[[0-9;]*m", "", record.getMessage())  # werkzeug colours a 404
            found = re.search(r'"([A-Z]+) (\S+) HTTP/', line)
            if found:
                seen.append(f"{found[1]} {found[2]}")

    logger, handler = logging.getLogger("werkzeug"), Log()
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_check_heads_each_s3_target_once(on_s3: dict[str, Any]):
    """A check asks S3 for each target once: NCZ-REF-TARGET's HEAD is the one NCZ-REF-RANGE's sizes and
    NCZ-REF-CODECS's HDF5 reads stand on (each rule, and each array's HDF5 read, HEADed it anew before)."""
    _, url, out = on_s3["rich"]
    doc = json.loads(out.read_text())
    arrays = {k.rsplit("/", 1)[0] for k, v in doc["refs"].items() if isinstance(v, list) and v[0] == url}
    assert len(arrays) > 1  # the precondition: several arrays reference the one target
    with _requests_to_moto() as seen:
        checked = _run("nczarr_conformance.cli.check", str(out))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    heads = [r for r in seen if r.startswith("HEAD ")]
    assert heads == [f"HEAD /{BUCKET}/archive/rich.nc"], seen
    assert any(r.startswith(f"GET /{BUCKET}/archive/rich.nc") for r in seen), seen  # the HDF5 reads did reach S3


def test_a_public_bucket_is_referenced_read_and_checked_without_credentials(on_s3: dict[str, Any], tmp_path: Path):
    """``--anon``: an object of a public bucket referenced with no credentials anywhere (botocore signing would
    refuse: no credentials); the references record ``"anon": true``, so our reader, ``nczarr-check`` and
    xarray (told ``anon``) read it unsigned, as netCDF4-python reads the local copy."""
    local, _, _ = on_s3["cf"]
    client = on_s3["client"]
    client.upload_file(str(local), BUCKET, "public/cf.nc", ExtraArgs={"ACL": "public-read"})
    url = f"s3://{BUCKET}/public/cf.nc"
    nowhere = str(tmp_path / "no-such-aws-file")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL=on_s3["endpoint"], AWS_SHARED_CREDENTIALS_FILE=nowhere, AWS_CONFIG_FILE=nowhere,
               AWS_DEFAULT_REGION="us-east-1", PYTHONPATH=str(Path(__file__).resolve().parent.parent))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=300)

    out = tmp_path / "public.json"
    signed = run("-m", "nczarr_conformance.cli.convert", url, str(out), "--reference")
    assert signed.returncode == 2 and signed.stderr.count("\n") == 1, signed.stderr  # the precondition
    assert not out.exists()
    done = run("-m", "nczarr_conformance.cli.convert", url, str(out), "--reference", "--anon", "-q")
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    head = client.head_object(Bucket=BUCKET, Key="public/cf.nc")
    assert doc["nczarr:targets"] == {url: {"size": head["ContentLength"], "etag": head["ETag"], "anon": True}}
    assert chunks_match_hdf5(doc["refs"], local, url) == 12
    read = run("-c", "import sys, json; from nczarr_conformance.access.dataset import open_dataset; "
               "print(json.dumps(open_dataset(sys.argv[1]).to_json()))", str(out))
    assert read.returncode == 0, read.stderr
    checked = run("-m", "nczarr_conformance.cli.check", str(out), "--select", "NCZ-REF")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    from nczarr_conformance.model import Dataset

    assert diff(nc4.read(str(local)), Dataset.from_json(json.loads(read.stdout)), ignore=CONTIGUOUS) == []
    lone = run("-m", "nczarr_conformance.cli.convert", str(local), str(tmp_path / "x.json"), "--reference", "--anon")
    assert lone.returncode == 2 and "--anon goes with --reference of one s3:// input" in lone.stderr
    client.put_object_acl(Bucket=BUCKET, Key="public/cf.nc", ACL="private")  # unsigned reads now refused
    refused = run("-m", "nczarr_conformance.cli.check", str(out), "--select", "NCZ-REF")
    assert refused.returncode == 1 and f"NCZ-REF-TARGET -: target {url} is not reachable" in refused.stdout, \
        refused.stdout + refused.stderr


def test_an_unsigned_s3_store_is_not_opened_for_writing():
    """Unsigned (``aws.profile=no``, ``anon``) reaches the botocore store for reading S3 objects now: a write
    through it is refused before any request, not sent signed with whatever credentials are about."""
    from nczarr_conformance.errors import UsageError
    from nczarr_conformance.stores.s3 import S3Store
    from nczarr_conformance.urls import parse

    for url, options in (("s3://bucket/x#mode=nczarr,s3&aws.profile=no", None), ("s3://bucket/x", {"anon": True})):
        with pytest.raises(UsageError, match=r"unsigned \(anon, aws.profile=no\) is for reading"):
            S3Store.from_spec(parse(url, options), "w")
