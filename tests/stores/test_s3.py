"""The S3 store against a real moto server over HTTP: contract, URLs, errors, request budgets."""
from __future__ import annotations

import subprocess
import sys

import boto3
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.errors import StoreError
from nczarr_conformance.model import diff
from nczarr_conformance.nczarr.reader import read_dataset
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.stores import open_store
from nczarr_conformance.stores.s3 import S3Store
from nczarr_conformance.testing.ignores import CONTIGUOUS
from nczarr_conformance.testing.source import read_source
from tests.conftest import require_module
from tests.stores.test_stores import StoreContract

pytestmark = pytest.mark.s3


class TestS3Store(StoreContract):
    @pytest.fixture(autouse=True)
    def _bucket(self, s3_bucket):
        self.bucket = s3_bucket

    def writable(self, tmp_path):
        return S3Store(self.bucket, "ds/root", mode="w")

    def reopen(self, store):
        store.commit()
        return S3Store(self.bucket, "ds/root")

    def test_abort_deletes_what_was_put(self):
        store = self.writable(None)
        store.put("/a/0", b"x")
        store.put("/.zgroup", b"{}")
        store.abort()
        assert boto3.client("s3").list_objects_v2(Bucket=self.bucket).get("KeyCount", 0) == 0


@pytest.mark.smoke  # the smoke run's case for this store kind (docs/testing.md)
def test_rich_dataset_to_s3_and_back(rich_nc, s3_bucket, tmp_path):
    url = f"s3://{s3_bucket}/data/rich#mode=nczarr,s3"
    result = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", str(rich_nc), url],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    dumped = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", "--json", "--storage", url],
                            capture_output=True, text=True, timeout=120)
    assert dumped.returncode == 0, dumped.stderr
    import json

    from nczarr_conformance.model import Dataset

    assert diff(read_source(str(rich_nc)), Dataset.from_json(json.loads(dumped.stdout)), ignore=CONTIGUOUS) == []


def test_s3_holds_the_same_objects_as_a_directory(small, s3_bucket, tmp_path):
    from nczarr_conformance.stores import DirectoryStore

    with DirectoryStore(tmp_path / "d.file", "w") as d:
        write_dataset(small, d)
    with S3Store(s3_bucket, "same", mode="w") as s:
        write_dataset(small, s)
    d, s = DirectoryStore(tmp_path / "d.file"), S3Store(s3_bucket, "same")
    assert d.list_prefix("/") == s.list_prefix("/")
    assert all(d.get(k) == s.get(k) for k in d.list_prefix("/"))


def test_opening_nczarr_sends_no_list_and_only_needed_gets(rich_nc, s3_bucket):
    from nczarr_conformance.conversion.from_netcdf import convert

    convert(str(rich_nc), f"s3://{s3_bucket}/budget#mode=nczarr,s3", consolidate=False)
    store = S3Store(s3_bucket, "budget")
    model = read_dataset(store, data=False)
    ops = [op for op, _ in store.requests]
    assert "ListObjectsV2" not in ops
    groups = list(model.root.walk())
    arrays = sum(len(g.variables) for _, g in groups)
    # /.zmetadata probe, then .zgroup + .zattrs per group and .zarray + .zattrs per array
    assert ops.count("GetObject") == 1 + 2 * len(groups) + 2 * arrays
    # and one HEAD of the root at the end: those objects all came from one dataset (stores/s3_generation.py)
    assert ops[-1] == "HeadObject" and len(ops) == ops.count("GetObject") + 1


def test_our_default_output_opens_in_one_get(rich_nc, small, s3_bucket):
    """Our default output carries .zmetadata, written last: one GET serves all metadata, and it describes
    the dataset the objects do (the same model as a store written without it)."""
    from nczarr_conformance.conversion.from_netcdf import convert

    del small.root.variables["c"]  # a >S1 char array leaves .zmetadata out by default (nczarr/writer.py)
    for prefix, consolidate in (("one", None), ("plain", False)):
        with S3Store(s3_bucket, prefix, mode="w") as s:
            write_dataset(small, s, consolidate=consolidate)
    one, plain = S3Store(s3_bucket, "one"), S3Store(s3_bucket, "plain")
    model = read_dataset(one, data=False)
    assert one.requests == [("GetObject", "one/.zmetadata")]
    assert diff(model, read_dataset(plain, data=False), data=False) == [] and len(plain.requests) > 1
    # rich.nc (char as |S1, what Zarr readers take) through nc2nczarr's default path
    convert(str(rich_nc), f"s3://{s3_bucket}/rich#mode=nczarr,s3", char_as="S1")
    rich = S3Store(s3_bucket, "rich")
    read_dataset(rich, data=False)
    assert rich.requests == [("GetObject", "rich/.zmetadata")]


def test_consolidated_metadata_is_one_get(s3_bucket, tmp_path):
    xr = require_module("xarray")
    import numpy as np

    ds = xr.Dataset({"v": (("x",), np.arange(4))}, attrs={"a": 1})
    ds.to_zarr(str(tmp_path / "c.zarr"), zarr_format=2, consolidated=True)
    client = boto3.client("s3")
    for path in (tmp_path / "c.zarr").rglob("*"):
        if path.is_file():
            client.upload_file(str(path), s3_bucket, "cons/" + path.relative_to(tmp_path / "c.zarr").as_posix())
    store = S3Store(s3_bucket, "cons")
    read_dataset(store, data=False)
    assert store.requests == [("GetObject", "cons/.zmetadata")]


def test_pure_zarr_may_list(s3_bucket, small):
    with S3Store(s3_bucket, "pz", mode="w") as s:
        write_dataset(small, s, flavor="zarr", consolidate=False)  # with .zmetadata it needs no listing
    store = S3Store(s3_bucket, "pz")
    read_dataset(store, data=False)
    assert any(op == "ListObjectsV2" for op, _ in store.requests)


@pytest.mark.parametrize("form", ["path", "virtual", "profile", "awsprofile"])
def test_url_forms(small, s3_bucket, moto_server, tmp_path, monkeypatch, form):
    with S3Store(s3_bucket, "forms/ds", mode="w") as s:
        write_dataset(small, s)
    host = moto_server.split("://")[1]
    if form == "path":
        url = f"http://{host}/{s3_bucket}/forms/ds#mode=nczarr,s3"
    elif form == "virtual":
        url = f"https://{s3_bucket}.s3.us-east-1.amazonaws.com/forms/ds#mode=nczarr,s3"
    else:
        (tmp_path / "credentials").write_text("[moto]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
        (tmp_path / "config").write_text(f"[profile moto]\nregion = us-east-1\nendpoint_url = {moto_server}\n")
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
        monkeypatch.delenv("AWS_ENDPOINT_URL")
        key = "aws.profile" if form == "profile" else "awsprofile"
        url = f"s3://{s3_bucket}/forms/ds#mode=nczarr,s3&{key}=moto"
    assert diff(small, open_dataset(url), ignore=CONTIGUOUS) == []


def _dump(url: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", url], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("case", ["no_bucket", "no_key", "denied", "endpoint_down", "bad_profile"])
def test_errors_are_one_line_exit_2(moto_server, s3_bucket, case):
    env = {}
    url = f"s3://{s3_bucket}/nothing-here#mode=nczarr,s3"
    if case == "no_bucket":
        url = "s3://no-such-bucket-xyz/ds#mode=nczarr,s3"
    elif case == "denied":
        client = boto3.client("s3")
        client.put_bucket_policy(Bucket=s3_bucket, Policy='{"Version": "2012-10-17", "Statement": [{"Effect": "Deny", '
                                 f'"Principal": "*", "Action": "s3:*", "Resource": "arn:aws:s3:::{s3_bucket}/*"}}]}}')
        env = {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE"}
    elif case == "endpoint_down":
        from tests.conftest import _free_port

        env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{_free_port()}"}
    elif case == "bad_profile":
        url += "&aws.profile=does-not-exist"
    result = _dump(url, env)
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_failed_conversion_to_s3_leaves_nothing(rich_nc, s3_bucket):
    result = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "--flavor", "nczarr-2-upper",
                             str(rich_nc), f"s3://{s3_bucket}/fail#mode=nczarr,s3"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert boto3.client("s3").list_objects_v2(Bucket=s3_bucket).get("KeyCount", 0) == 0


def test_existing_s3_dataset_needs_overwrite(small, s3_bucket):
    with S3Store(s3_bucket, "exists", mode="w") as s:
        write_dataset(small, s)
    with pytest.raises(StoreError, match="overwrite"):
        open_store(f"s3://{s3_bucket}/exists#mode=nczarr,s3", "w")


def test_zarr_scalars_read_as_netcdf_scalars_from_s3(s3_bucket, moto_server):
    """zarr-python's shape-[] arrays (netcdf-c issue #3108) are netCDF scalars, here on S3."""
    zarr = require_module("zarr")
    require_module("s3fs")
    store = zarr.storage.FsspecStore.from_url(
        f"s3://{s3_bucket}/zs", storage_options={"key": "testing", "secret": "testing",
                                                 "client_kwargs": {"endpoint_url": moto_server}})
    g = zarr.open_group(store, mode="w", zarr_format=2)
    a = g.create_array("s", shape=(), dtype="<f8", fill_value=0.0)
    a[...] = 1.25
    model = open_dataset(f"s3://{s3_bucket}/zs#mode=zarr,s3")
    var = model.root.variables["s"]
    assert var.shape == () and var.dimensions == [] and float(var.data) == 1.25


def test_nczarr_check_on_s3(rich_nc, s3_bucket):
    from nczarr_conformance.conversion.from_netcdf import convert

    url = f"s3://{s3_bucket}/checked#mode=nczarr,s3"
    convert(str(rich_nc), url)
    ok = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.check", "--deep", "--format", "json", url],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    import json

    assert json.loads(ok.stdout)["flavor"] == "nczarr-4.10"
    missing = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.check", "s3://no-such-bucket-zz/x"],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
