"""nc2nczarr --append: the result equals one conversion of the concatenated input; refusals touch nothing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.append import append
from nczarr_conformance.convert import convert
from nczarr_conformance.dataset import open_dataset
from nczarr_conformance.errors import UsageError
from nczarr_conformance.model import diff
from nczarr_conformance.stores import open_store
from nczarr_conformance.urls import parse


def make(path: Path, t0: int, n: int, *, units: str = "days", dtype: str = "f4", nx: int = 3) -> Path:
    import netCDF4

    nc = netCDF4.Dataset(str(path), "w")
    nc.createDimension("time", None)
    nc.createDimension("x", nx)
    nc.title = "series"
    t = nc.createVariable("time", "f8", ("time",), chunksizes=(4,))
    t.units = units
    x = nc.createVariable("x", "i4", ("x",))
    x[:] = np.arange(nx) * 10
    v = nc.createVariable("v", dtype, ("time", "x"), chunksizes=(4, 2), zlib=True, shuffle=True, fill_value=-1)
    t[:] = np.arange(t0, t0 + n, dtype="f8")
    v[:] = np.arange(t0 * nx, (t0 + n) * nx).reshape(n, nx).astype(dtype)
    g = nc.createGroup("g")
    w = g.createVariable("w", "i2", ("time",), chunksizes=(3,))
    w[:] = np.arange(t0, t0 + n, dtype="i2")
    nc.close()
    return path


@pytest.fixture
def series(tmp_path):
    return make(tmp_path / "a1.nc", 0, 5), make(tmp_path / "a2.nc", 5, 6), make(tmp_path / "all.nc", 0, 11)


def snapshot(path: Path) -> dict:
    if path.is_file():
        return {"zip": path.read_bytes()}
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


@pytest.mark.parametrize("suffix", [".file", ".zip"])
def test_append_equals_single_conversion(series, tmp_path, suffix):
    first, second, whole = series
    store, ref = tmp_path / f"s{suffix}", tmp_path / f"ref{suffix}"
    convert(str(first), str(store))
    convert(str(whole), str(ref))
    stats = append(str(second), str(store), "time")
    assert stats.records == 6
    assert diff(open_dataset(str(ref)), open_dataset(str(store))) == []
    # the appended store's .zmetadata (written last, rewritten in a zip) describes what a single conversion's does
    zmeta = [json.loads(open_store(parse(str(s))).get("/.zmetadata") or b"null") for s in (ref, store)]
    assert zmeta[0] is not None and zmeta[0] == zmeta[1]
    # only the changed edge chunks and the new ones: v has 4-row chunks, old data ended in row 5
    # v: time chunks 1-2 × 2 x-chunks; g/w: chunks 1-3; time: chunks 1-2 (chunk 0 untouched everywhere)
    assert stats.chunks_written == 2 * 2 + 3 + 2


def test_same_append_twice_is_refused_and_untouched(series, tmp_path):
    first, second, _ = series
    store = tmp_path / "s.file"
    convert(str(first), str(store))
    append(str(second), str(store), "time")
    before = snapshot(store)
    with pytest.raises(UsageError, match="already"):
        append(str(second), str(store), "time")
    assert snapshot(store) == before


@pytest.mark.parametrize("change,match", [
    ({"units": "hours"}, "attributes differ"),
    ({"dtype": "f8"}, "type float in the store, double"),
    ({"nx": 4}, "/x: size 3 in the store, 4"),
])
def test_incompatible_file_is_refused_and_untouched(series, tmp_path, change, match):
    first, _, _ = series
    store = tmp_path / "s.zip"
    convert(str(first), str(store))
    before = snapshot(store)
    other = make(tmp_path / "other.nc", 5, 3, **change)
    result = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "--append", "time", str(other),
                             str(store)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and match in result.stderr, result.stderr
    assert snapshot(store) == before


@pytest.mark.s3
def test_append_on_s3_uploads_only_the_changed_objects(series, s3_bucket):
    from nczarr_conformance.stores.s3 import S3Store

    first, second, whole = series
    url = f"s3://{s3_bucket}/series#mode=nczarr,s3"
    convert(str(first), url)
    recorder = S3Store(s3_bucket, "series")  # shares the client: records every request on this prefix
    stats = append(str(second), url, "time")
    puts = sorted(key for op, key in recorder.requests if op == "PutObject")
    recorder.close()
    # plus the in-progress marker and the root .zgroup, deleted and put back around the metadata (stores/s3.py)
    assert len(puts) == stats.chunks_written + stats.metadata_written + 2
    assert puts.count("series/.nczarr-partial") == 1 and puts.count("series/.zgroup") == 1
    assert "series/v/0.0" not in puts and "series/v/1.0" in puts and "series/v/.zarray" in puts
    assert "series/.zattrs" in puts  # the time dimension's new size
    ref = S3Store(s3_bucket, "ref", mode="w")
    ref.abort()
    convert(str(whole), f"s3://{s3_bucket}/ref#mode=nczarr,s3")
    assert diff(open_dataset(f"s3://{s3_bucket}/ref#mode=nczarr,s3"), open_dataset(url)) == []
