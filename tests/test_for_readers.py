"""``nc2nczarr --for READERS [--prefer] --verify`` and ``write(..., for_readers=...)`` (issue 34).

Each claim is held to the readers themselves: the layout a plan chooses is opened by every named reader the plan
says loses nothing, equal to netCDF4-python reading the source (the matrix's peers do the reading); where the
plan says a reader loses something, that reader really does not read it equal. The conflict is said before the
store is written, and README's own example is what --verify shows.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import netCDF4
import numpy as np
import pytest

import nczarr_conformance as ncz
from nczarr_conformance import reader_needs
from nczarr_conformance.conformance.cases import CASES
from nczarr_conformance.conformance.verify import verify
from nczarr_conformance.peers import netcdf4 as nc4_writer
from nczarr_conformance.sources import netcdf4 as nc4
from tests.conftest import CORPUS, REPO, require_tool

pytestmark = pytest.mark.peer


def nc2nczarr(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=cwd)


def _cf(path: Path, *, char: bool = True) -> Path:
    """A CF-like file: a noleap time axis, a scalar grid mapping, a packed shuffled float, a station_name char."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.Conventions = "CF-1.8"
        nc.createDimension("time", None)
        nc.createDimension("station", 3)
        t = nc.createVariable("time", "f8", ("time",))
        t.units, t.calendar = "days since 2000-01-01", "noleap"
        t[:] = [0, 1]
        if char:
            nc.createDimension("name_strlen", 8)
            s = nc.createVariable("station_name", "S1", ("station", "name_strlen"))
            s.cf_role = "timeseries_id"
            s[:] = netCDF4.stringtochar(np.array(["abc", "defgh", "x"], "S8"))
        crs = nc.createVariable("crs", "i4")
        crs.grid_mapping_name = "latitude_longitude"
        crs.assignValue(0)
        v = nc.createVariable("temp", "f4", ("time", "station"), zlib=True, shuffle=True, fill_value=-999.0)
        v.scale_factor, v.grid_mapping = 0.5, "crs"
        v[:] = [[1, 2, 3], [4, 5, 6]]
    return path


def _lines(stderr: str, prefix: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(prefix)]


def test_readme_example_says_its_readers_and_verify_agrees(tmp_path):
    """README's first command converts corpus/rich.nc; the line naming its readers is what --verify finds."""
    out = tmp_path / "out"
    done = nc2nczarr("--overwrite", "--verify", str(CORPUS / "rich.nc"), str(out))
    assert done.returncode == 0, done.stderr
    [said] = _lines(done.stderr, "nc2nczarr: readable by: ")
    readable = said.removeprefix("nc2nczarr: readable by: ").split(";")[0].split(", ")
    assert sorted(readable) == ["netcdf-c-4.10", "ours"]
    verdicts = {line.split(": ")[2]: line for line in _lines(done.stderr, "nc2nczarr: verify: ")}
    for reader in readable:
        assert verdicts[reader].endswith(f"{reader}: opened equal"), verdicts[reader]
    for reader in set(reader_needs.READERS) - set(readable) - {"netcdf-c-4.9"}:  # 4.9.0: the checkout's toml only
        assert "opened equal" not in verdicts[reader], verdicts[reader]
    # GDAL reads the store (its bindings hand back bytes for the non-UTF-8 char data): it drops the shuffled array
    assert "gdal: read differently: /arrays//be_float: only in first" in verdicts["gdal"], verdicts["gdal"]


def test_a_conflict_is_said_before_writing_and_prefer_decides(tmp_path):
    src = _cf(tmp_path / "cf.nc")
    out = tmp_path / "out.zarr"
    done = nc2nczarr("--for", "xarray,zarr-python,netcdf-c-4.10", "--verify", str(src), str(out))
    lines = done.stderr.splitlines()
    losses = [i for i, line in enumerate(lines) if "netcdf-c-4.10 loses: reads char variables as strings" in line]
    summary = [i for i, line in enumerate(lines) if " objects (" in line]
    assert losses and summary and losses[0] < summary[0], done.stderr
    assert "verify: xarray: opened equal" in done.stderr and "verify: zarr-python: opened equal" in done.stderr
    assert "verify: netcdf-c-4.10: read differently" in done.stderr  # the loss, as predicted
    assert done.returncode == 1  # a named reader does not read it equal
    assert (out / "station_name" / ".zarray").read_text().count('"|S1"') == 1
    preferred = nc2nczarr("--overwrite", "--for", "xarray,netcdf-c-4.10", "--prefer", "netcdf-c-4.10", "--verify",
                          str(src), str(out))
    assert "xarray loses: xarray cannot open the store: zarr-python 3 has no >S1 dtype" in preferred.stderr
    assert "verify: netcdf-c-4.10: opened equal" in preferred.stderr, preferred.stderr
    assert (out / "station_name" / ".zarray").read_text().count('">S1"') == 1
    assert preferred.returncode == 1


def test_for_an_unknown_reader_is_a_usage_error(tmp_path):
    done = nc2nczarr("--for", "xarray,netcdf-c-5", str(CORPUS / "rich.nc"), str(tmp_path / "o"))
    assert done.returncode == 2 and "unknown reader 'netcdf-c-5'" in done.stderr and "known: " in done.stderr
    assert not (tmp_path / "o").exists()
    done = nc2nczarr("--prefer", "xarray", str(CORPUS / "rich.nc"), str(tmp_path / "o"))
    assert done.returncode == 2 and "--prefer" in done.stderr


def test_zarr_readers_open_the_zip_written_for_them(tmp_path):
    """--for xarray writes the zip's entries at the top, where zarr-python's ZipStore opens it; our reader too."""
    zarr = pytest.importorskip("zarr")
    src = _cf(tmp_path / "cf.nc")
    out = tmp_path / "out.zip"
    done = nc2nczarr("--for", "xarray,zarr-python", "--verify", str(src), str(out))
    assert done.returncode == 0, done.stderr
    group = zarr.open_group(zarr.storage.ZipStore(out, mode="r"), mode="r")
    assert group["temp"].filters is None or "shuffle" not in str(group["temp"].filters)  # kept: zarr reads it
    assert sorted(group.array_keys()) == ["crs", "station_name", "temp", "time"]
    with ncz.open(str(out)) as ds:
        assert ds["temp"][...].tolist() == [[2.0, 4.0, 6.0], [8.0, 10.0, 12.0]]


def test_netcdf_c_490_and_gdal(tmp_path):
    """--for netcdf-c-4.9,gdal: no codecs (4.9.0 has none), no shuffle (GDAL), chunks capped at the arrays' lengths
    (4.9.0 cannot open a longer chunk); what no layout cures (4.9.0 reads the 4.9.1+ keys and unlimited dimensions
    as pure Zarr, GDAL takes units and scale_factor as its own) is said first, and --verify finds exactly that
    (4.9.0 through nczarr-conformance.toml's adapter, so from the checkout)."""
    require_tool("ncdump")
    require_tool("gdalmdiminfo")
    src = _cf(tmp_path / "cf.nc", char=False)
    out = tmp_path / "out.zarr"
    done = nc2nczarr("--for", "netcdf-c-4.9,gdal", "--verify", str(src), str(out), cwd=REPO)
    said = done.stderr
    assert "netcdf-c-4.9 loses: reads unlimited dimensions as fixed" in said
    assert "gdal loses: shows units, scale_factor and add_offset as properties of its own" in said
    assert "verify: netcdf-c-4.9: read differently" in said and "verify: gdal: read differently" in said
    assert "/attributes//temp/scale_factor: only in first; /attributes//time/units: only in first" in said
    assert done.returncode == 1
    for name in ("temp", "time"):
        zarray = json.loads((out / name / ".zarray").read_text())
        assert (zarray["compressor"], zarray["filters"]) == (None, None)
        assert all(c <= s for c, s in zip(zarray["chunks"], zarray["shape"], strict=True)), zarray
    plain = tmp_path / "plain.nc"
    with netCDF4.Dataset(plain, "w") as nc:
        nc.createDimension("x", 3)
        v = nc.createVariable("v", "i2", ("x",), zlib=True, shuffle=True)
        v[:] = [1, 2, 3]
        v.long_name = "plain"
    done = nc2nczarr("--for", "netcdf-c-4.9,gdal", "--verify", str(plain), str(tmp_path / "plain.zarr"), cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "verify: netcdf-c-4.9: opened equal" in done.stderr and "verify: gdal: opened equal" in done.stderr


def test_zarr_v3_for_xarray_zarr_python_and_tensorstore(tmp_path):
    src = _cf(tmp_path / "cf.nc", char=False)
    out = tmp_path / "out.zarr"
    done = nc2nczarr("--zarr-format", "3", "--for", "xarray,zarr-python,tensorstore", "--verify", str(src), str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "zarr.json").is_file()
    for reader in ("xarray", "zarr-python", "tensorstore"):
        assert f"verify: {reader}: opened equal" in done.stderr, done.stderr


def test_write_for_readers_warns_what_a_reader_loses(tmp_path):
    xr = pytest.importorskip("xarray")
    ds = xr.Dataset({"name": (("s", "n"), np.array([[b"a", b"b"], [b"c", b""]], "S1")), "t": ("s", np.arange(2.0))})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ncz.write(ds, tmp_path / "w.zarr", for_readers=["xarray", "netcdf-c-4.10"])
    said = [str(w.message) for w in caught if "loses" in str(w.message)]
    assert said == ["netcdf-c-4.10 loses: reads char variables as strings (|S1 is a string of length 1 to netcdf-c)"]
    opened = xr.open_zarr(tmp_path / "w.zarr")
    assert opened["t"].values.tolist() == [0.0, 1.0]


READER_SETS = (("xarray", "zarr-python", "netcdf-c-4.10"), ("tensorstore", "gdal", "ours"))


@pytest.mark.parametrize("readers", READER_SETS, ids=lambda r: ",".join(r))
def test_every_matrix_case_reads_equal_where_the_plan_promises(readers, tmp_path):
    """Over the matrix's cases: a named reader the plan says loses nothing opens the store equal to the source; one
    it says loses something does not (no prediction fires where the reader reads equal)."""
    wrong: list[str] = []
    for case in CASES:
        if case.id.startswith(("corpus-", "nczarr-v1")) or case.options:
            continue  # the corpus's own stores and writer options are no netCDF file to convert
        src = tmp_path / f"{case.id}.nc"
        nc4_writer.write(case.model(), str(src))
        out = tmp_path / f"{case.id}.zarr"
        stats = ncz.convert(str(src), str(out), for_readers=list(readers))
        assert stats.audience is not None and stats.audience.plan is not None
        losers = stats.audience.plan.losers()
        # the first reader named wins every conflict: it loses nothing that some layout cures
        curable = [loss.need.id for loss in losers.get(readers[0], []) if loss.need.cure is not None]
        if curable:
            wrong.append(f"{case.id}: {readers[0]} named first still loses {curable}")
        for verdict in verify(str(out), nc4.read(str(src)), list(readers), source=str(src)):
            promised = verdict.reader not in losers
            if promised != (verdict.status == "equal"):
                wrong.append(f"{case.id}: {verdict.line()} (predicted: "
                             f"{[loss.need.id for loss in losers.get(verdict.reader, [])]})")
    assert wrong == []


def test_for_xarray_writes_fill_value_null_where_the_source_has_no_fillvalue_and_check_predicts_it(tmp_path):
    """Issue 39: on 160 real files, a variable without _FillValue got netCDF's default fill as .zarray fill_value,
    which xarray masks (int32 -> float64, a value at the default fill -> NaN); nczarr-check said nothing. Now the
    default layout is predicted (NCZ-INTEROP-XARRAY-FILL, reader table: xarray-default-fill) and ``--for xarray``
    writes fill_value null for such variables, every chunk stored (a missing one would read as zarr-python's
    0), a declared _FillValue kept: xarray.open_zarr then reads what its netCDF4 engine reads from the source,
    and netCDF4-python still reads the source's values."""
    xr = pytest.importorskip("xarray")
    src = tmp_path / "src.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("x", 4)
        level = nc.createVariable("level", "i4", ("x",), chunksizes=(2,))
        level[:2] = [1, netCDF4.default_fillvals["i4"]]  # its second chunk is never written: the default fill
        nc.createVariable("d", "f8", ("x",))[:] = [0.5, 1.5, 2.5, netCDF4.default_fillvals["f8"]]
        nc.createVariable("t", "i2", ("x",), fill_value=-9)[:] = [1, -9, 3, 4]
    default, for_xarray = tmp_path / "default.zarr", tmp_path / "xarray.zarr"
    assert nc2nczarr("--quiet", str(src), str(default)).returncode == 0
    done = nc2nczarr(str(src), str(for_xarray), "--for", "xarray")
    assert done.returncode == 0 and "nc2nczarr: readable by: xarray" in done.stderr.splitlines(), done.stderr

    def zarray(store: Path, name: str) -> tuple[str, object]:
        doc = json.loads((store / name / ".zarray").read_text())
        return doc["dtype"], doc["fill_value"]

    assert [zarray(default, n) for n in ("level", "d", "t")] == [
        ("<i4", int(netCDF4.default_fillvals["i4"])), ("<f8", float(netCDF4.default_fillvals["f8"])), ("<i2", -9)]
    assert [zarray(for_xarray, n) for n in ("level", "d", "t")] == [("<i4", None), ("<f8", None), ("<i2", -9)]
    assert sorted(p.name for p in (for_xarray / "level").iterdir() if not p.name.startswith(".")) == ["0", "1"]

    engine = xr.open_dataset(src, engine="netcdf4")
    masked, kept = xr.open_zarr(default), xr.open_zarr(for_xarray)
    assert masked["level"].dtype == np.float64 and int(np.isnan(masked["level"].values).sum()) == 3  # the need
    for name in ("level", "d", "t"):
        assert kept[name].dtype == engine[name].dtype, name
        np.testing.assert_array_equal(kept[name].values, engine[name].values, err_msg=name)
    with netCDF4.Dataset(src) as want, netCDF4.Dataset(f"file://{for_xarray}#mode=nczarr,file") as got:
        for name in ("level", "d", "t"):
            want[name].set_auto_mask(False)
            got[name].set_auto_mask(False)
            assert got[name].dtype == want[name].dtype, name
            np.testing.assert_array_equal(got[name][:], want[name][:], err_msg=name)

    def xarray_fill(store: Path, *args: str) -> list[str]:
        report = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.check", *args, str(store)],
                                capture_output=True, text=True, timeout=300, check=False)
        return [line.split()[2].rstrip(":") for line in report.stdout.splitlines() if "NCZ-INTEROP-XARRAY-FILL" in line]

    assert xarray_fill(default) == xarray_fill(default, "--for", "xarray") == ["/d/.zarray", "/level/.zarray"]
    assert xarray_fill(default, "--for", "netcdf-c-4.10") == []  # a prediction about xarray alone
    assert xarray_fill(for_xarray) == []
