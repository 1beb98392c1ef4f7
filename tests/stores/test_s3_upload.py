"""S3 uploads at the upload limit (stores/s3_upload.py), against the real moto server over HTTP.

Concurrency, the byte budget and multipart are observed on the wire by a proxy in front of
moto (faulty_s3.py), which also injects throttling (503 SlowDown) and 5xx errors: moto 5
has no fault injection of its own. Expected contents come from the directory output of
the same conversion and from the source file, never from the S3 code under test.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import boto3
import numpy as np
import pytest

from nczarr_conformance.conversion.from_netcdf import convert
from nczarr_conformance.stores.s3 import S3Store
from tests.stores.faulty_s3 import Fault

pytestmark = pytest.mark.s3
MiB = 1024**2


@pytest.fixture
def moto(moto_server):
    """A client straight to moto, past the proxy: what the bucket really holds."""
    return boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")


def listing(moto, bucket: str) -> dict[str, str]:
    pages = moto.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {o["Key"]: o["ETag"].strip('"') for page in pages for o in page.get("Contents", [])}


def open_uploads(moto, bucket: str) -> list[str]:
    return [u["Key"] for u in moto.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


def assert_same_as_directory(src: Path, tmp_path: Path, moto, bucket: str, prefix: str) -> dict[str, bytes]:
    """The S3 objects under ``prefix`` are, byte for byte, the files of a conversion to a directory."""
    out = tmp_path / f"{prefix}.file"
    convert(str(src), str(out))
    files = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert sorted(listing(moto, bucket)) == sorted(f"{prefix}/{k}" for k in files)
    for key, data in files.items():
        assert moto.get_object(Bucket=bucket, Key=f"{prefix}/{key}")["Body"].read() == data, key
    return files


def make_nc(path: Path, *, big: int = 0, small_chunks: int = 8) -> Path:
    """``v``: ``small_chunks`` chunks of 4 KiB, zlib; with ``big``, ``b``: one uncompressed chunk of ``big`` bytes."""
    import netCDF4

    rng = np.random.default_rng(7)
    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("x", 1024 * small_chunks)
        nc.createVariable("v", "f4", ("x",), chunksizes=(1024,), zlib=True, complevel=1)[:] = \
            rng.random(1024 * small_chunks, dtype="f4")
        if big:
            nc.createDimension("y", big // 8)
            nc.createVariable("b", "f8", ("y",), chunksizes=(big // 8,))[:] = rng.random(big // 8)
    return path


# ---- concurrency and memory ------------------------------------------------------------------
def test_puts_run_concurrently_up_to_the_pool_size(faulty, s3_bucket, moto):
    faulty.delay = 0.2  # each PUT takes at least this long: overlapping ones are seen overlapping
    store = S3Store(s3_bucket, "conc", mode="w", concurrency=6)
    for i in range(36):
        store.put(f"/v/{i}", bytes([i]) * 1024)
    store.commit()
    puts = faulty.requests("PUT")
    assert len(puts) == 36 + 1  # the chunks and the in-progress marker
    assert faulty.max_in_flight == 6  # concurrent, and never more than the pool
    assert set(listing(moto, s3_bucket)) == {f"conc/v/{i}" for i in range(36)}


def test_the_byte_budget_bounds_the_bytes_in_flight(faulty, s3_bucket):
    faulty.delay = 0.2
    store = S3Store(s3_bucket, "budget", mode="w", concurrency=16, in_flight_bytes=256 * 1024)
    for i in range(24):
        store.put(f"/v/{i}", bytes([i]) * (64 * 1024))
    store.commit()
    assert faulty.max_bytes_in_flight <= 256 * 1024  # four 64 KiB objects, although 16 threads wait
    assert 2 <= faulty.max_in_flight <= 4


# ---- multipart ---------------------------------------------------------------------------------
def test_big_chunks_go_up_multipart_byte_for_byte(faulty, s3_bucket, moto, tmp_path):
    src = make_nc(tmp_path / "big.nc", big=20 * MiB)
    convert(str(src), f"s3://{s3_bucket}/mp#mode=nczarr,s3")
    files = assert_same_as_directory(src, tmp_path, moto, s3_bucket, "mp")
    objects = listing(moto, s3_bucket)
    assert len(files["b/0"]) == 20 * MiB
    # the server's own record: a multipart ETag is "<md5 of the parts' md5s>-<parts>"
    assert objects["mp/b/0"].endswith("-3")  # 8 + 8 + 4 MiB
    assert all("-" not in etag for key, etag in objects.items() if key != "mp/b/0")
    parts = [r for r in faulty.requests("PUT") if r[1].endswith("mp/b/0") and "partNumber=" in r[2]]
    assert len(parts) == 3 and len(faulty.requests("POST")) >= 2  # create and complete (and deletes)
    assert open_uploads(moto, s3_bucket) == []


# ---- retries -----------------------------------------------------------------------------------
def test_throttling_and_5xx_are_retried(faulty, s3_bucket, moto, tmp_path):
    src = make_nc(tmp_path / "t.nc", big=20 * MiB, small_chunks=4)
    faulty.faults = [Fault("PUT", r"/v/\d+$", 503, "SlowDown", times=2),  # every small chunk, twice
                     Fault("PUT", r"/b/0$", 500, "InternalError", query=r"partNumber=2\b"),
                     Fault("POST", r"/b/0$", 503, "SlowDown", query=r"^uploads"),
                     Fault("POST", r"/b/0$", 503, "ServiceUnavailable", query=r"^uploadId=")]
    convert(str(src), f"s3://{s3_bucket}/t#mode=nczarr,s3")
    assert len(faulty.requests(status=503)) == 4 * 2 + 2 and len(faulty.requests(status=500)) == 1
    assert_same_as_directory(src, tmp_path, moto, s3_bucket, "t")
    assert open_uploads(moto, s3_bucket) == []


@pytest.mark.parametrize("where", ["put", "part"])
def test_exhausted_retries_fail_in_one_line_and_leave_nothing(faulty, s3_bucket, moto, tmp_path, where):
    src = make_nc(tmp_path / "x.nc", big=20 * MiB, small_chunks=16)
    faulty.faults = [Fault("PUT", r"/v/3$", 503, "SlowDown", times=99) if where == "put" else
                     Fault("PUT", r"/b/0$", 500, "InternalError", times=99, query=r"partNumber=2\b")]
    result = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "-q", str(src),
                             f"s3://{s3_bucket}/x#mode=nczarr,s3"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "AWS_MAX_ATTEMPTS": "3"})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    line, = result.stderr.strip().splitlines()
    code, key = ("SlowDown", "/v/3") if where == "put" else ("InternalError", "/b/0")
    assert re.search(rf"s3://{s3_bucket}/x: {code} while trying to put {key} \(gave up after 3 attempts\)", line), line
    assert listing(moto, s3_bucket) == {} and open_uploads(moto, s3_bucket) == []


# ---- abort -------------------------------------------------------------------------------------
def test_abort_drops_queued_uploads_and_leaves_nothing(faulty, s3_bucket, moto):
    faulty.delay = 0.3
    store = S3Store(s3_bucket, "ab", mode="w", concurrency=2)
    store.put("/b/0", os.urandom(17 * MiB))  # multipart: parts queued behind the others
    for i in range(20):
        store.put(f"/v/{i}", b"x" * 1024)
    store.abort()
    assert listing(moto, s3_bucket) == {} and open_uploads(moto, s3_bucket) == []
    assert len([r for r in faulty.requests("PUT") if "/v/" in r[1]]) < 20  # the queued ones never went


def test_a_killed_writers_open_multipart_uploads_are_aborted_by_the_next_run(moto_server, s3_bucket, moto, tmp_path):
    """What SIGKILL leaves (marker of a dead PID, chunks, an unfinished multipart upload) is cleaned."""
    import json
    import socket

    gone = subprocess.Popen(["true"])
    gone.wait()  # a PID that is no longer running
    marker = json.dumps({"host": socket.gethostname(), "pid": gone.pid}).encode()
    moto.put_object(Bucket=s3_bucket, Key="dead/.nczarr-partial", Body=marker)
    moto.put_object(Bucket=s3_bucket, Key="dead/v/0", Body=b"old")
    upload = moto.create_multipart_upload(Bucket=s3_bucket, Key="dead/b/0")
    moto.upload_part(Bucket=s3_bucket, Key="dead/b/0", UploadId=upload["UploadId"], PartNumber=1, Body=b"x" * MiB)
    moto.create_multipart_upload(Bucket=s3_bucket, Key="deadline/b/0")  # another prefix: not ours to abort
    convert(str(make_nc(tmp_path / "s.nc")), f"s3://{s3_bucket}/dead#mode=nczarr,s3")
    assert open_uploads(moto, s3_bucket) == ["deadline/b/0"]
    assert "dead/.nczarr-partial" not in listing(moto, s3_bucket)
