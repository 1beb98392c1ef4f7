"""nc2nczarr --append onto a Zarr v2 store xarray wrote with its defaults (the daily-archive case).

xarray's ``to_zarr(zarr_format=2)`` picks its own chunks, keeps a variable's fill in ``.zarray`` alone (no
``_FillValue`` in ``.zattrs``) and adds ``calendar: proleptic_gregorian`` to CF times; its attributes carry
no netCDF types. The expected store is xarray's own ``to_zarr(mode="a", append_dim="time")`` of the same
file onto a copy: chunks byte for byte, metadata as JSON (xarray indents it, we do not), and xarray reading
both alike. Refusals (a fill the store would misread, a calendar that names other days, another value)
are one line, exit 2, the store byte-identical.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
CONVERT = [sys.executable, "-m", "nczarr_conformance.cli.convert", "-q"]
METADATA = (".zarray", ".zattrs", ".zgroup", ".zmetadata")


def daily(path: Path, t0: int, n: int, *, units: str = "days since 2000-01-01", fill: float | None = -999.0,
          long_name: str = "precipitation", calendar: str | None = None) -> Path:
    """A daily file as archives hold them: CF time, netCDF-4's default chunks (512 for time, a row for v)."""
    import netCDF4

    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 4)
        nc.createDimension("lon", 3)
        t = nc.createVariable("time", "f8", ("time",))
        t.units = units
        if calendar:
            t.calendar = calendar
        t[:] = np.arange(t0, t0 + n, dtype="f8")
        v = nc.createVariable("v", "f4", ("time", "lat", "lon"), zlib=True, fill_value=fill)
        v.long_name = long_name
        v[:] = np.arange(t0 * 12, (t0 + n) * 12, dtype="f4").reshape(n, 4, 3)
    return path


def xarray_store(first: Path, store: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with xr.open_dataset(first) as ds:
            ds.to_zarr(store, zarr_format=2, mode="w", consolidated=True)
    return store


def xarray_append(second: Path, store: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with xr.open_dataset(second) as ds:
            ds.to_zarr(store, mode="a", append_dim="time")


def objects(store: Path) -> dict[str, bytes]:
    return {p.relative_to(store).as_posix(): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def append(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CONVERT, "--append", "time", *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_a_v2_store_xarray_wrote_with_its_defaults_grows_as_xarrays_own_append(tmp_path):
    first, second = daily(tmp_path / "d1.nc", 0, 5), daily(tmp_path / "d2.nc", 5, 6)
    theirs = xarray_store(first, tmp_path / "theirs.zarr")
    zarray = json.loads((theirs / "v" / ".zarray").read_text())
    # what the refusal came from before: other chunks, the fill in .zarray only, a calendar added
    assert zarray["chunks"] == [5, 4, 3] and zarray["fill_value"] == -999.0
    assert "_FillValue" not in json.loads((theirs / "v" / ".zattrs").read_text())
    assert json.loads((theirs / "time" / ".zattrs").read_text())["calendar"] == "proleptic_gregorian"
    ours = Path(shutil.copytree(theirs, tmp_path / "ours.zarr"))
    xarray_append(second, theirs)

    done = append(str(second), str(ours))
    assert done.returncode == 0, done.stderr
    mine, expected = objects(ours), objects(theirs)
    assert sorted(mine) == sorted(expected)
    for key in expected:
        if key.rsplit("/", 1)[-1] in METADATA:
            assert json.loads(mine[key]) == json.loads(expected[key]), key
        else:
            assert mine[key] == expected[key], key  # chunks: the store's blosc, byte for byte
    with xr.open_zarr(ours) as a, xr.open_zarr(theirs) as b:
        assert a.identical(b)
        assert a.sizes["time"] == 11


@pytest.mark.parametrize("second_kwargs,problem", [
    ({"fill": -1.0}, "/v: attributes differ"),                        # the store would read -1 as data
    ({"long_name": "rain"}, "/v: attributes differ"),
    ({"units": "hours since 2000-01-01"}, "/time: attributes differ"),
])
def test_what_an_xarray_v2_store_would_misread_is_refused_and_untouched(tmp_path, second_kwargs, problem):
    first, second = daily(tmp_path / "d1.nc", 0, 5), daily(tmp_path / "d2.nc", 5, 6, **second_kwargs)
    store = xarray_store(first, tmp_path / "x.zarr")
    before = objects(store)
    done = append(str(second), str(store))
    assert done.returncode == 2 and problem in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert objects(store) == before


def test_a_calendar_naming_other_days_is_refused(tmp_path):
    """Before 1582-10-15 ``proleptic_gregorian`` (xarray's) and ``standard`` (CF's default, the new file
    declares none) name different days: the calendar xarray added is then a difference."""
    units = "days since 1500-01-01"
    first = daily(tmp_path / "d1.nc", 0, 5, units=units, calendar="proleptic_gregorian")
    store = xarray_store(first, tmp_path / "x.zarr")
    before = objects(store)
    done = append(str(daily(tmp_path / "d2.nc", 5, 6, units=units)), str(store))
    assert done.returncode == 2 and "/time: attributes differ" in done.stderr, done.stderr
    assert objects(store) == before


def test_several_files_onto_other_chunks_are_refused_with_the_way_out(tmp_path):
    """The multi-file path places file chunks as they are: the store's other chunks are refused in one line
    that says to append the files one at a time (which then works)."""
    first = daily(tmp_path / "d1.nc", 0, 5)
    files = [daily(tmp_path / "d2.nc", 5, 3), daily(tmp_path / "d3.nc", 8, 3)]
    store = xarray_store(first, tmp_path / "x.zarr")
    before = objects(store)
    done = append(*map(str, files), str(store))
    assert done.returncode == 2 and "append them one at a time" in done.stderr, done.stderr
    assert objects(store) == before
    for path in files:
        assert append(str(path), str(store)).returncode == 0
    with xr.open_zarr(store) as ds:
        assert ds.sizes["time"] == 11
        np.testing.assert_array_equal(ds["v"].values.ravel(), np.arange(11 * 12, dtype="f4"))
