"""``nczarr-fix --for xarray`` on a CF station file converted as nc2nczarr writes it by default (char as ``>S1``,
which zarr-python and so xarray refuse): the char arrays become ``|S1`` (the chunk bytes stay), ``.zmetadata``
follows, xarray and zarr-python read what netCDF4-python reads from the source .nc, and what netcdf-c loses
(char read as string) is printed, never silent; a reader check that saw that loss undeclared refuses it; with
netcdf-c-4.9 named too, nczarr-fix refuses (exit 2) naming why and the conversion flag."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import require_module
from tests.fix.helpers import snapshot, url, zarray

pytestmark = pytest.mark.peer

NAMES = ["alpha", "beta", "gamma"]


def _source(path: Path) -> Path:
    """``char station_name(station, name_strlen)`` and a float beside it, written by netCDF4-python."""
    netCDF4 = require_module("netCDF4")
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("station", 3)
        nc.createDimension("name_strlen", 8)
        v = nc.createVariable("station_name", "S1", ("station", "name_strlen"))
        v.cf_role = "timeseries_id"
        v[:] = netCDF4.stringtochar(np.array(NAMES, dtype="S8"))
        nc.createVariable("temp", "f4", ("station",))[:] = [1.5, 2.5, 3.5]
    return path


def _convert(tmp_path: Path) -> tuple[Path, Path]:
    src = _source(tmp_path / "stations.nc")
    store = tmp_path / "stations.zarr"
    subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "-q", str(src), str(store)],
                   check=True, capture_output=True, timeout=120)
    return src, store


def _fix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.fix", *args], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))


def _source_chars(src: Path) -> np.ndarray:
    import netCDF4

    with netCDF4.Dataset(src) as nc:
        nc.set_auto_mask(False)
        return np.asarray(nc["station_name"][:])


def test_fix_for_xarray_stores_char_as_s1(tmp_path):
    xr = require_module("xarray")
    zarr = require_module("zarr")
    src, store = _convert(tmp_path)
    assert zarray(store, "station_name")["dtype"] == ">S1"
    with pytest.raises(ValueError, match="No Zarr data type"):  # what the user met (issue 34)
        xr.open_zarr(str(store), consolidated=False)
    chunk_before = (store / "station_name" / "0.0").read_bytes()

    dry = _fix("--for", "xarray", "--dry-run", str(store))
    assert dry.returncode == 1, dry.stderr
    assert '-  "dtype": ">S1",' in dry.stdout and '+  "dtype": "|S1",' in dry.stdout
    assert "loss: /station_name: netcdf-c" in dry.stdout and "as string" in dry.stdout
    assert zarray(store, "station_name")["dtype"] == ">S1"  # a dry run writes nothing

    done = _fix("--for", "xarray", str(store))
    assert done.returncode == 0, done.stderr
    assert "NCZ-FIX-CHAR-S1 /station_name/.zarray: dtype >S1 → |S1" in done.stdout
    assert "loss: /station_name: netcdf-c" in done.stdout  # the trade is stated, not silently made
    backups = [p for p in tmp_path.iterdir() if p.name.startswith("stations.zarr.nczarr-fix-backup-")]
    assert len(backups) == 1
    assert json.loads((backups[0] / "station_name" / ".zarray").read_text())["dtype"] == ">S1"

    # storage: |S1, the chunk the same bytes, which are the source's characters
    z = zarray(store, "station_name")
    assert (z["dtype"], z["chunks"], z["compressor"], z["filters"]) == ("|S1", [3, 8], None, None)
    chars = _source_chars(src)
    assert (store / "station_name" / "0.0").read_bytes() == chunk_before == chars.tobytes()
    # .zmetadata holds every metadata object as stored
    meta = json.loads((store / ".zmetadata").read_text())["metadata"]
    on_disk = {str(p.relative_to(store)): json.loads(p.read_text())
               for p in store.rglob(".z*") if p.name in (".zgroup", ".zarray", ".zattrs")}
    assert meta == on_disk

    # the Zarr readers now read what netCDF4-python reads from the source
    arr = zarr.open_group(str(store), mode="r", zarr_format=2)["station_name"]
    assert arr.dtype == np.dtype("S1") and np.array_equal(arr[...], chars)
    ds = xr.open_zarr(str(store))
    import netCDF4

    assert [b.decode() for b in ds["station_name"].values.tolist()] == netCDF4.chartostring(chars).tolist() == NAMES
    assert ds["temp"].values.tolist() == [1.5, 2.5, 3.5]
    # and netcdf-c reads the loss the output stated: string, one per character, the same text
    with netCDF4.Dataset(url(store)) as nc:
        v = nc["station_name"]
        assert v.dtype is str
        assert ["".join(row) for row in v[:].tolist()] == NAMES


def test_default_fix_notes_why_char_stays(tmp_path):
    _, store = _convert(tmp_path)
    done = _fix(str(store))
    assert done.returncode == 0, done.stderr
    assert "note: NCZ-FIX-CHAR-S1 /station_name: not applied: netcdf-c 4.9" in done.stdout
    assert "nczarr-fix --for xarray,zarr-python" in done.stdout
    assert zarray(store, "station_name")["dtype"] == ">S1"


def test_named_readers_no_char_dtype_serves_are_refused(tmp_path):
    _, store = _convert(tmp_path)
    before = snapshot(tmp_path)
    for extra in ((), ("--dry-run",)):
        done = _fix("--for", "xarray,netcdf-c-4.9", *extra, str(store))
        assert done.returncode == 2, done.stdout
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and str(store) in lines[0], done.stderr
        assert "xarray cannot read /station_name (>S1)" in lines[0] and "nc2nczarr --char-as S1" in lines[0]
        assert "nothing to fix" not in done.stdout
    assert snapshot(tmp_path) == before


def test_reader_check_refuses_an_undeclared_char_to_string(tmp_path, monkeypatch):
    """The check compares the type a reader reads, not only the text: without the fix's stated loss, netcdf-c
    (and our reader) reading string where they read char is a worse reading, refused."""
    import nczarr_conformance.fix as fix_package
    from nczarr_conformance.errors import UsageError

    _, store = _convert(tmp_path)
    made = fix_package.make_plan

    def silent(*args, **kwargs):
        plan = made(*args, **kwargs)
        plan.losses.clear()
        return plan

    monkeypatch.setattr(fix_package, "make_plan", silent)
    with pytest.raises(UsageError, match=r"refused: after the edits netcdf-c reads /station_name as string, "
                                         r"not char as before"):
        fix_package.fix_store(str(store), targets="xarray", backup=False)
    assert zarray(store, "station_name")["dtype"] == ">S1"
