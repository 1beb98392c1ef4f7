"""nc2nczarr --append: the result equals one conversion of the concatenated input; refusals touch nothing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.conversion.append import append
from nczarr_conformance.conversion.from_netcdf import convert
from nczarr_conformance.errors import StoreError, UsageError
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


# ---- one coordinate rule set for every append (issue 20, item 6) -----------------------------------------
def with_times(path: Path, times: list[float]) -> Path:
    """make()'s file with these time values (NaN, repeats, any order): what a hand-made file may hold."""
    import netCDF4

    make(path, 0, len(times))
    with netCDF4.Dataset(str(path), "a") as nc:
        nc["time"][:] = np.asarray(times, dtype="f8")
    return path


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "-q", *args],
                          check=False, capture_output=True, text=True, timeout=120)


NAN = float("nan")


@pytest.mark.parametrize("times,cause", [
    ([10, NAN, 12], "coordinate /time holds NaN (at index 1)"),
    ([10, 12, 11], "coordinate /time is not increasing (index 2: 11.0 after 12.0)"),
    ([10, 11, 11], "coordinate /time is not increasing (index 2: 11.0 after 11.0)"),
    ([9, 10, 11], "coordinate /time values [9.0, 10.0, 11.0]… are already in the store"),
    ([0, 1, 2, 3, 4], "coordinate /time values from 0.0 are not after the store's last value 9.0"),
    ([20, 21, 22], "gap in coordinate /time before it (9.0 in the store, then 20.0; the usual step is 1)"),
], ids=["nan", "decreasing", "repeated", "already-stored", "earlier-records", "gap"])
def test_single_file_append_holds_the_concat_coordinate_rules(tmp_path, times, cause):
    """Single-file --append accepted NaN, non-increasing and gapped coordinates that --concat refuses, and a
    file of earlier records ([0..4] after a store of [5..9]) is refused only by the "not after the store's
    last value" condition (no value is shared: drop that condition and this case appends with exit 0)."""
    store = tmp_path / "s.file"
    convert(str(make(tmp_path / "a.nc", 5, 5)), str(store))
    before = snapshot(store)
    new = with_times(tmp_path / "new.nc", times)
    result = run_cli("--append", "time", str(new), str(store))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [f"nc2nczarr: {new}: {cause}" + (
        ": this append was done already" if "already" in cause else
        "; --allow-gaps accepts it" if "gap" in cause else
        ": records cannot be ordered by it" if "NaN" in cause else "")]
    assert snapshot(store) == before


def test_allow_gaps_reaches_a_single_file_append(tmp_path):
    store = tmp_path / "s.file"
    convert(str(make(tmp_path / "a.nc", 5, 5)), str(store))
    new = with_times(tmp_path / "new.nc", [20, 21, 22])
    result = run_cli("--append", "time", "--allow-gaps", str(new), str(store))
    assert result.returncode == 0, result.stderr
    assert open_dataset(str(store)).root.variables["time"].data.tolist() == [5, 6, 7, 8, 9, 20, 21, 22]


@pytest.mark.parametrize("later", [False, True], ids=["earlier-records", "later-records"])
def test_a_store_holding_nan_in_its_coordinate_is_refused_naming_it(tmp_path, later):
    """Once a NaN was stored, "after the store's last value" compared with NaN (always false) and a back-dated
    file appended with exit 0. A store whose coordinate holds NaN is now refused, naming it: where new
    records go cannot be told (the last finite value would let records dated before the NaN's in)."""
    store = tmp_path / "s.file"
    convert(str(with_times(tmp_path / "a.nc", [5, 6, NAN, 8, 9])), str(store))
    before = snapshot(store)
    new = make(tmp_path / "new.nc", 10 if later else 0, 3)
    result = run_cli("--append", "time", str(new), str(store))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"nc2nczarr: {store}: coordinate /time holds NaN (at index 2): records cannot be ordered by it"]
    assert snapshot(store) == before


# ---- an input that changes between the checks and the commit (issue 20, item 2) ----------------------------
def _grow(path: Path, records: int) -> None:
    """Append records to ``path`` from another process, as a writer still producing the file does (HDF5 file
    locking off, as on the shared file systems where archives are written; with it on, the writer would wait)."""
    import os

    code = ("import sys, netCDF4, numpy as np\n"
            "with netCDF4.Dataset(sys.argv[1], 'a') as nc:\n"
            "    n = len(nc.dimensions['time'])\n"
            "    nc['time'][n:n + int(sys.argv[2])] = np.arange(n, n + int(sys.argv[2])) + 100\n"
            "    nc['v'][n:n + int(sys.argv[2])] = -5\n")
    subprocess.run([sys.executable, "-c", code, str(path), str(records)], check=True, timeout=60,
                   env=dict(os.environ, HDF5_USE_FILE_LOCKING="FALSE"))


@pytest.mark.parametrize("change", ["replaced", "grown"])
@pytest.mark.parametrize("suffix", [".file", ".zip"])
def test_single_file_append_refuses_an_input_that_changed_before_the_commit(series, tmp_path, monkeypatch,
                                                                           change, suffix):
    """The file is changed after every check passed and before any chunk is written (the hook: append's own
    opening of the writable store). Refused in one line naming it, exit 2 semantics, the store byte-identical."""
    import os

    import nczarr_conformance.conversion.append as appending

    first, second, _ = series
    store = tmp_path / f"s{suffix}"
    convert(str(first), str(store))
    before = snapshot(store)
    other = make(tmp_path / "other.nc", 5, 6, nx=3)
    real = appending._open_for_append

    def changed_first(*args, **kw):
        if change == "replaced":
            os.replace(other, second)
        else:
            _grow(second, 4)
        return real(*args, **kw)

    monkeypatch.setattr(appending, "_open_for_append", changed_first)
    try:
        stats = append(str(second), str(store), "time")
    except StoreError as exc:
        outcome, code = str(exc), exc.exit_code
    else:
        outcome, code = f"exit 0: {stats.records} records appended", 0
    assert outcome.startswith(f"{second}: changed since it was checked (") and code == 2, outcome
    assert "\n" not in outcome
    assert snapshot(store) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
