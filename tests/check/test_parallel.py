"""nczarr-check --deep on a real dask LocalCluster gives the serial run's report (dir, zip, moto S3).

Stores with planted bad chunks (one that does not decode, one that inflates past its size,
one over its encoded bound, one symlinked out of the store) prove the comparison is not
vacuous: both runs must find exactly the same findings, in the same order, with the same
objects-read count; only the timing field differs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.checker import check
from nczarr_conformance.conversion.from_netcdf import convert
from tests.conftest import require_module

require_module("distributed")


@pytest.fixture(scope="module")
def client(moto_server):
    """One LocalCluster of 2 worker processes for the module, started after moto so workers inherit its env."""
    from nczarr_conformance.conversion.cluster import open_client

    with open_client(workers=2) as c:
        yield c


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """Three variables, 150 chunks in all."""
    import netCDF4

    path = tmp_path_factory.mktemp("src") / "src.nc"
    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("t", 50)
        nc.createDimension("x", 64)
        for i, dtype in enumerate(("f4", "i2", "f8")):
            v = nc.createVariable(f"v{i}", dtype, ("t", "x"), chunksizes=(1, 64), zlib=True, shuffle=i == 0)
            v[:] = (np.arange(50 * 64).reshape(50, 64) % 1000).astype(dtype)
    return path


def bad_chunks() -> dict[str, bytes]:
    """Chunk key → planted bytes (all in a 64-element array of float32 with zlib+shuffle)."""
    return {
        "/v0/3.0": b"not zlib at all",  # NCZ-CHUNK-DECODE
        "/v0/5.0": zlib.compress(b"\0" * 100),  # NCZ-CHUNK-SIZE: too short (next to 7.0, in one batch: order shows)
        "/v0/7.0": zlib.compress(b"\0" * (64 * 4 * 2)),  # NCZ-CHUNK-SIZE: inflates past 256 bytes
        "/v1/9.0": zlib.compress(b"\1" * 10),  # NCZ-CHUNK-SIZE: too short
    }


def same(serial, parallel) -> None:
    a, b = serial.to_json(), parallel.to_json()
    a["summary"].pop("seconds")
    b["summary"].pop("seconds")
    assert a == b


def plant_dir(root: Path, outside: Path) -> None:
    for key, data in bad_chunks().items():
        (root / key.lstrip("/")).write_bytes(data)
    outside.write_bytes(b"secret")
    (root / "v2" / "4.0").unlink()
    (root / "v2" / "4.0").symlink_to(outside)  # an unreadable object: a read error, not a crash


def test_parallel_deep_check_equals_serial_on_dir_good_and_bad(client, source, tmp_path):
    out = tmp_path / "ok.file"
    convert(str(source), str(out))
    serial = check(str(out), deep=True)
    parallel = check(str(out), deep=True, client=client)
    assert serial.objects_read > 150 and serial.exit_code == 0
    same(serial, parallel)
    plant_dir(out, tmp_path / "outside")
    serial = check(str(out), deep=True)
    parallel = check(str(out), deep=True, client=client)
    found = {(f.rule, f.key) for f in serial.findings}
    assert {("NCZ-CHUNK-DECODE", "/v0/3.0"), ("NCZ-CHUNK-SIZE", "/v0/5.0"), ("NCZ-CHUNK-SIZE", "/v0/7.0"),
            ("NCZ-CHUNK-SIZE", "/v1/9.0")} <= found
    assert any(f.key == "/v2/4.0" for f in serial.findings)
    same(serial, parallel)


def test_parallel_deep_check_equals_serial_on_zip(client, source, tmp_path):
    import zipfile

    out = tmp_path / "ok.zip"
    convert(str(source), str(out))
    same(check(str(out), deep=True), check(str(out), deep=True, client=client))
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(out) as zin, zipfile.ZipFile(bad, "w") as zout:
        planted = {f"ok{k}": v for k, v in bad_chunks().items()}
        for info in zin.infolist():
            zout.writestr(info, planted.get(info.filename, zin.read(info)))
    serial = check(str(bad), deep=True)
    assert serial.exit_code == 1 and len(serial.findings) >= 3
    same(serial, check(str(bad), deep=True, client=client))


@pytest.mark.s3
def test_parallel_deep_check_equals_serial_on_s3(client, source, s3_bucket):
    import boto3

    url = f"s3://{s3_bucket}/ds#mode=nczarr,s3"
    convert(str(source), url)
    s3 = boto3.client("s3")
    for key, data in bad_chunks().items():
        s3.put_object(Bucket=s3_bucket, Key="ds" + key, Body=data)
    serial = check(url, deep=True)
    assert serial.exit_code == 1 and len(serial.findings) >= 3
    same(serial, check(url, deep=True, client=client))


def test_cli_workers_prints_the_serial_report(source, tmp_path):
    out = tmp_path / "bad.file"
    convert(str(source), str(out))
    plant_dir(out, tmp_path / "outside")

    def run(*extra: str) -> tuple[int, dict]:
        proc = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.check", "--deep", "--format", "json",
                               *extra, str(out)], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
        doc = json.loads(proc.stdout)
        doc["summary"].pop("seconds")
        return proc.returncode, doc

    assert run() == run("--workers", "2")
    assert run()[0] == 1
