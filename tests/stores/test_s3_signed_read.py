"""Signed S3 reads through obstore (stores/s3_signed_read.py, stores/remote.py) against a moto server over HTTP:
which reads go there, what they read, and that the reader keeps the botocore reader's guarantees."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import boto3
import numpy as np
import pytest

import nczarr_conformance as ncz
from nczarr_conformance.errors import StoreError
from nczarr_conformance.stores import open_store, reopen
from nczarr_conformance.stores.remote import RemoteStore
from nczarr_conformance.stores.s3 import S3Store
from nczarr_conformance.stores.s3_signed_read import obstore_credentials
from nczarr_conformance.urls import parse
from tests.test_reader_generation import N_TIME, expected, make_nc

pytestmark = pytest.mark.s3

# In a fresh interpreter: open the URL, read every variable whole; what was read, by what, and whether botocore
# was imported (its import and service model were most of a signed read's open: reports/read.md)
READ = r'''
import json, sys
import numpy as np
import nczarr_conformance as ncz
with ncz.open(sys.argv[1]) as ds:
    values = {name: np.asarray(ds[name][...]).tolist() for name in ds.variables}
    store = type(ds.store).__name__
print(json.dumps({"store": store, "botocore": "botocore" in sys.modules, "values": values}))
'''


def test_a_signed_read_goes_through_obstore_without_botocore(s3_bucket, tmp_path):
    source = make_nc(tmp_path / "src.nc", 0.0)
    url = f"s3://{s3_bucket}/signed#mode=nczarr,s3"
    ncz.convert(str(source), url)
    done = subprocess.run([sys.executable, "-c", READ, url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["store"] == "RemoteStore" and got["botocore"] is False
    import netCDF4

    with netCDF4.Dataset(source) as nc:
        assert np.array_equal(np.asarray(got["values"]["v"], dtype="f4"), nc["v"][:].data)


def test_the_signed_obstore_reader_sends_credentials_and_records_its_requests(s3_bucket, tmp_path):
    ncz.convert(str(make_nc(tmp_path / "src.nc", 0.0)), f"s3://{s3_bucket}/rec#mode=nczarr,s3")
    store = open_store(f"s3://{s3_bucket}/rec#mode=nczarr,s3")
    assert isinstance(store, RemoteStore) and store.signed
    assert store.get("/.zmetadata") is not None
    assert store.requests == [("GetObject", "rec/.zmetadata")]
    assert store.list_prefix("/v")  # a listing is signed too (moto lists a private bucket only so)
    assert store.requests[-1] == ("ListObjectsV2", "rec/v")


def test_the_signed_obstore_reader_refuses_a_dataset_overwritten_while_read(s3_bucket, tmp_path):
    """The generation pin (stores/s3_generation.py) holds on the obstore path: a reader opened before an
    overwrite raises the one clear error instead of reading the new dataset's chunks."""
    old, new = make_nc(tmp_path / "old.nc", 0.0), make_nc(tmp_path / "new.nc", 1000.0)
    url = f"s3://{s3_bucket}/over#mode=nczarr,s3"
    ncz.convert(str(old), url)
    time.sleep(1.1)  # S3's Last-Modified has one-second resolution: the open is after the old write
    with ncz.open(url) as ds:
        assert isinstance(ds.store, RemoteStore) and ds.store.signed
        np.testing.assert_array_equal(np.asarray(ds["v"][0:4]), expected(0.0)[0:4])
        ncz.convert(str(new), url, overwrite=True)
        with pytest.raises(StoreError, match="replaced by another writer while being read") as caught:
            np.asarray(ds["v"][4:N_TIME])
        assert "\n" not in str(caught.value)


def test_a_worker_reopening_by_the_obstore_readers_pin_is_held_to_its_dataset(s3_bucket, tmp_path):
    """``stores.reopen`` with the pin of an obstore reader: the same dataset reads; once replaced, refused."""
    old, new = make_nc(tmp_path / "old.nc", 0.0), make_nc(tmp_path / "new.nc", 1000.0)
    url = f"s3://{s3_bucket}/pinned#mode=nczarr,s3"
    ncz.convert(str(old), url)
    time.sleep(1.1)
    with ncz.open(url) as ds:
        pin = ds.store.pin()
        assert pin is not None and pin[0] == "s3"
        worker = reopen(url, pin)
        assert isinstance(worker, RemoteStore)
        assert worker.get("/v/0.0", limit=1 << 20) is not None
        ncz.convert(str(new), url, overwrite=True)
        late = reopen(url, pin)
        with pytest.raises(StoreError, match="replaced by another writer while being read"):
            late.get("/v/1.0", limit=1 << 20)


def test_ranged_reads_of_the_signed_obstore_reader(s3_bucket):
    body = bytes(range(200)) * 3
    boto3.client("s3").put_object(Bucket=s3_bucket, Key="ranges/obj", Body=body)
    store = open_store(f"s3://{s3_bucket}/ranges#mode=nczarr,s3")
    assert isinstance(store, RemoteStore)
    assert store.get_range("/obj", 10, 7) == (body[10:17], len(body))
    assert store.get_range("/obj", -5, 5) == (body[-5:], len(body))
    assert store.get_range("/obj", 590, 100) == (body[590:], len(body))  # past the end: what is there
    assert store.get_range("/obj", 0, 0) == (b"", len(body))
    assert store.get_range("/missing", 0, 4) is None
    assert [op for op, _ in store.requests].count("GetObject") == 4  # one ranged GET each, never the whole


def test_a_missing_bucket_is_one_line_naming_it(moto_server):
    store = open_store("s3://no-such-bucket-signed/x#mode=nczarr,s3")
    assert isinstance(store, RemoteStore)
    with pytest.raises(StoreError, match=r"^s3://no-such-bucket-signed/x: no such bucket 'no-such-bucket-signed'$"):
        store.get("/.zgroup")


@pytest.mark.parametrize("case", ["profile in the URL", "AWS_PROFILE", "no key in the environment", "AWS_RETRY_MODE",
                                  "CA bundle over https", "unknown storage option"])
def test_signed_reads_obstore_cannot_make_stay_on_botocore(moto_server, monkeypatch, tmp_path, case):
    """Whenever botocore could find what obstore is not handed (a profile, its credential chain, its retry mode,
    a CA bundle), the read is botocore's, as before; without that one reason, obstore's."""
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    url, options, endpoint = "s3://bucket/ds#mode=nczarr,s3", {}, moto_server
    assert obstore_credentials(parse(url), endpoint) is not None
    if case == "profile in the URL":
        url = "s3://bucket/ds#mode=nczarr,s3&aws.profile=other"
    elif case == "AWS_PROFILE":
        monkeypatch.setenv("AWS_PROFILE", "other")
    elif case == "no key in the environment":
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    elif case == "AWS_RETRY_MODE":
        monkeypatch.setenv("AWS_RETRY_MODE", "adaptive")
    elif case == "CA bundle over https":
        monkeypatch.setenv("AWS_CA_BUNDLE", str(tmp_path / "ca.pem"))
        assert obstore_credentials(parse(url), endpoint) is not None  # plain http: no TLS to trust anyone
        endpoint = "https://s3.example.org"
    else:
        options = {"config_kwargs": {}}
    assert obstore_credentials(parse(url, options), endpoint) is None


def test_a_region_botocore_might_find_in_the_config_file_keeps_the_read_on_botocore(moto_server, monkeypatch,
                                                                                    tmp_path):
    config = tmp_path / "config"
    config.write_text("[default]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.delenv("AWS_REGION", raising=False)
    assert obstore_credentials(parse("s3://bucket/ds#mode=nczarr,s3"), moto_server) is None
    assert obstore_credentials(parse("s3://bucket/ds#mode=nczarr,s3&aws.region=us-east-1"), moto_server) is not None


def test_a_botocore_fallback_still_reads(s3_bucket, monkeypatch, tmp_path):
    ncz.convert(str(make_nc(tmp_path / "src.nc", 0.0)), f"s3://{s3_bucket}/fb#mode=nczarr,s3")
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")
    with ncz.open(f"s3://{s3_bucket}/fb#mode=nczarr,s3") as ds:
        assert isinstance(ds.store, S3Store)
        np.testing.assert_array_equal(np.asarray(ds["v"][...]), expected(0.0))
