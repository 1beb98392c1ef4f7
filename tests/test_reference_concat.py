"""``nc2nczarr --concat DIM --reference``: one kerchunk reference store over many daily files.

Expected values come from the files through netCDF4-python (``netCDF4.MFDataset``) and xarray's netCDF4
backend (``open_mfdataset``), the expected byte ranges from h5py's chunk index of each file: never from
the writer under test.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.conversion.reference_concat import concat_references
from nczarr_conformance.errors import UnsupportedError, UsageError

netCDF4 = pytest.importorskip("netCDF4")
h5py = pytest.importorskip("h5py")
pytest.importorskip("fsspec")

DAYS = 4


def _day(path: Path, day: int, *, records: int = 1, time_chunk: int = 1, complevel: int = 4,
         lat: tuple[float, ...] = (-10.0, 0.0, 10.0), start: int | None = None, default_time: bool = False,
         wide: int = 0, big: int = 0, count: bool = False, packed: bool = False) -> Path:
    """A daily file: time unlimited (chunk ``time_chunk``), a lat coordinate, packed attributes, a char variable.

    ``default_time``: ``time`` and ``time_bnds`` chunked as netCDF4-python chunks them by default (no chunksizes
    given). ``wide``: a variable (time, x) of that many doubles a record, chunk ``(records + 1, wide)``.
    ``big``: a float variable (time, y, x) of ``big`` x ``big`` values a record, chunk ``(records + 1, big, big)``,
    never written (HDF5 stores no chunk of it; netCDF-4 reads it as fill).
    ``count``: an int variable (time, lat) without _FillValue (HDF5's fill netCDF's default); ``packed``: with a
    float32 ``scale_factor`` too.
    """
    with netCDF4.Dataset(path, "w") as ds:
        ds.title = "daily means"
        ds.createDimension("time", None)
        ds.createDimension("lat", len(lat))
        ds.createDimension("lon", 4)
        ds.createDimension("nchar", 4)
        if default_time:
            t = ds.createVariable("time", "f8", ("time",))
            ds.createDimension("nv", 2)
            bounds = ds.createVariable("time_bnds", "f8", ("time", "nv"))
        else:
            t = ds.createVariable("time", "f8", ("time",), chunksizes=(time_chunk,))
        t.units, t.calendar = "days since 2000-01-01", "noleap"
        if wide:
            ds.createDimension("x", wide)
            w = ds.createVariable("wide", "f8", ("time", "x"), chunksizes=(records + 1, wide))
        if big:
            ds.createDimension("y", big)
            ds.createDimension("x2", big)
            ds.createVariable("big", "f4", ("time", "y", "x2"), chunksizes=(records + 1, big, big))
        if count:
            n = ds.createVariable("count", "i4", ("time", "lat"), chunksizes=(time_chunk, len(lat)))
            n.long_name = "observations"
            if packed:
                n.scale_factor = np.float32(0.5)
        la = ds.createVariable("lat", "f4", ("lat",))
        la.units = "degrees_north"
        la[:] = np.asarray(lat, dtype="f4")
        tas = ds.createVariable("tas", "f4", ("time", "lat", "lon"), zlib=True, shuffle=True, complevel=complevel,
                                chunksizes=(time_chunk, len(lat), 4), fill_value=-999.0)
        tas.units, tas.long_name = "K", "air temperature"
        label = ds.createVariable("label", "S1", ("time", "nchar"), chunksizes=(time_chunk, 4))
        for r in range(records):
            step = (day * records if start is None else start) + r
            t[r] = float(step)
            values = (np.arange(len(lat) * 4, dtype="f4").reshape(len(lat), 4) + 100 * step)
            values[0, 0] = -999.0 if step % 3 == 1 else values[0, 0]  # a missing value now and then
            tas[r] = values
            label[r] = netCDF4.stringtochar(np.array([f"d{step}"], dtype="S4"))[0]
            if count:
                n[r] = np.arange(len(lat), dtype="i4") + 10 * step
            if default_time:
                bounds[r] = [step, step + 1]
            if wide:
                w[r] = np.arange(wide, dtype="f8") * 0.5 + step
    return path


@pytest.fixture
def days(tmp_path: Path) -> list[Path]:
    return [_day(tmp_path / f"day{d}.nc", d) for d in range(DAYS)]


def _xr_refs(out: Path) -> Any:
    import xarray as xr

    return xr.open_dataset("reference://", engine="zarr",
                           backend_kwargs={"storage_options": {"fo": str(out)}, "consolidated": False})


def _netcdf4(files: list[Path], name: str) -> np.ndarray:
    """``name`` as netCDF4-python reads it from ``files`` (in time order), concatenated along time (what
    ``netCDF4.MFDataset`` does, which takes only classic-model files); ``lat``: the first file's."""
    parts = []
    for path in files:
        with netCDF4.Dataset(path) as ds:
            ds.set_auto_maskandscale(False)
            parts.append(np.asarray(ds[name][:]))
    return parts[0] if name == "lat" else np.concatenate(parts)


def _refs(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


# ---- values: xarray and our reader against netCDF4-python ---------------------------------------------------
@pytest.mark.parametrize("suffix", [".json", ".parq"])
def test_xarray_reads_the_references_as_open_mfdataset_reads_the_files(days: list[Path], tmp_path: Path,
                                                                       suffix: str):
    xr = pytest.importorskip("xarray")
    out = tmp_path / f"all{suffix}"
    concat_references([str(p) for p in reversed(days)], str(out), "time", workers=1)  # ordered by time, not args
    with xr.open_mfdataset(days, engine="netcdf4", combine="nested", concat_dim="time") as files, \
            _xr_refs(out) as refs:
        files = files.load()
        assert refs.identical(files), (refs, files)
        assert refs["time"].dt.calendar == "noleap"
        assert int(refs["tas"].isnull().sum()) == int(files["tas"].isnull().sum()) > 0
        assert refs["tas"].encoding["chunks"] == (1, 3, 4)


def test_our_reader_reads_the_references_as_netcdf4_reads_the_files(days: list[Path], tmp_path: Path):
    out = tmp_path / "all.json"
    concat_references([str(p) for p in days[::-1]], str(out), "time", char_as=">S1", workers=1)
    read = open_dataset(str(out))
    for name in ("time", "lat", "tas", "label"):
        expected = _netcdf4(days, name)
        got = read.root.variables[name].data
        assert got is not None and got.shape == expected.shape, name
        assert np.array_equal(got, expected), name
        assert got.dtype == expected.dtype, name
    assert read.root.dimensions["time"].size == DAYS and read.root.dimensions["time"].unlimited
    assert read.root.attributes["title"].value == "daily means"
    assert read.root.variables["tas"].attributes["long_name"].value == "air temperature"


def test_chunks_of_several_records_are_offset_in_chunks_and_the_last_file_may_be_short(tmp_path: Path):
    """Two records per chunk: file n's chunk k is the store's chunk k + 2n/2; the last file's one record is an
    edge chunk HDF5 stores whole, as Zarr does."""
    files = [_day(tmp_path / f"two{d}.nc", d, records=2, time_chunk=2) for d in range(3)]
    files.append(_day(tmp_path / "last.nc", 3, records=1, time_chunk=2, start=6))
    out = tmp_path / "all.json"
    concat_references([str(p) for p in files], str(out), "time", char_as=">S1", workers=1)
    read = open_dataset(str(out))
    assert np.array_equal(read.root.variables["tas"].data, _netcdf4(files, "tas"))
    assert np.array_equal(read.root.variables["label"].data, _netcdf4(files, "label"))
    assert read.root.variables["time"].data.tolist() == [0, 1, 2, 3, 4, 5, 6]


# ---- storage: h5py's chunk index of each file ------------------------------------------------------------------
def test_every_chunk_is_its_files_hdf5_chunk_and_every_target_is_recorded(days: list[Path], tmp_path: Path):
    out = tmp_path / "all.json"
    concat_references([str(p) for p in days], str(out), "time", workers=1)
    doc = _refs(out)
    refs = doc["refs"]
    for k, path in enumerate(days):
        with h5py.File(path, "r") as f:
            for name in ("tas", "time", "label"):
                info = f[name].id.get_chunk_info(0)
                assert refs[f"{name}/{k}" + ".0" * (f[name].ndim - 1)] == [str(path), info.byte_offset, info.size]
        st = path.stat()
        assert doc["nczarr:targets"][str(path)] == {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    with h5py.File(days[0], "r") as f:  # without DIM: the first file's
        assert refs["lat/0"] == [str(days[0]), f["lat"].id.get_offset(), 12]
    zarray = json.loads(refs["tas/.zarray"])
    assert zarray["shape"] == [DAYS, 3, 4] and zarray["chunks"] == [1, 3, 4]
    assert [c["id"] for c in zarray["filters"]] + [zarray["compressor"]["id"]] == ["shuffle", "zlib"]
    assert zarray["compressor"]["level"] == 4
    assert sorted(k for k in refs if k.startswith("tas/") and not k.endswith(".zarray") and "/." not in k) == [
        f"tas/{k}.0.0" for k in range(DAYS)]
    from nczarr_conformance.access.api import check

    report = check(str(out), deep=True, select=["NCZ-REF"])  # ranges, targets, codecs, every chunk decoded
    assert report.exit_code == 0 and not report.findings, report.findings


# ---- variables whose chunks straddle files: written inline ------------------------------------------------------
WIDE = 3000  # doubles a record: more than describe() keeps of a file, so the first file's task reads them


@pytest.fixture
def default_days(tmp_path: Path) -> list[Path]:
    """Daily files of one record, ``time`` and ``time_bnds`` chunked by netCDF4-python's default (``time``: 512 or
    1024 records, each file's chunk straddles the next file's; ``time_bnds``: 1 record), ``tas`` chunked by record,
    ``wide`` by 2 records (straddling)."""
    files = [_day(tmp_path / f"day{d}.nc", d, default_time=True, wide=WIDE) for d in range(DAYS)]
    with netCDF4.Dataset(files[0]) as ds:  # the precondition: the real default, not a chunk size we chose
        assert ds["time"].chunking() != "contiguous" and ds["time"].chunking()[0] > 1
        assert ds["time_bnds"].chunking()[0] == 1 and ds["wide"].chunking()[0] == 2
    return files


def _chunk_refs(refs: dict[str, Any], name: str) -> dict[str, Any]:
    return {key: ref for key, ref in refs.items() if key.startswith(f"{name}/") and "/." not in key}


def test_straddling_variables_are_inline_and_the_others_references(default_days: list[Path], tmp_path: Path):
    xr = pytest.importorskip("xarray")
    out = tmp_path / "all.json"
    from nczarr_conformance.conversion.concat import describe

    kept = describe(str(default_days[0]), "time").small  # time from describe()'s values; wide read again, per file
    assert "/time" in kept and "/wide" not in kept, sorted(kept)
    stats = concat_references([str(p) for p in reversed(default_days)], str(out), "time", workers=1)
    refs = _refs(out)["refs"]
    for k, path in enumerate(default_days):  # aligned: each file's own HDF5 chunk, as h5py indexes it
        with h5py.File(path, "r") as f:
            for name in ("tas", "time_bnds"):
                info = f[name].id.get_chunk_info(0)
                assert refs[f"{name}/{k}.0" + ".0" * (name == "tas")] == [str(path), info.byte_offset, info.size]
    assert len(_chunk_refs(refs, "tas")) == len(_chunk_refs(refs, "time_bnds")) == DAYS
    with netCDF4.Dataset(default_days[0]) as ds:
        chunk = ds["time"].chunking()[0]
        assert ds["time"].filters()["zlib"] is False and ds["wide"].filters()["zlib"] is False
    for name, shape in (("time", [DAYS]), ("wide", [DAYS, WIDE])):
        got = _chunk_refs(refs, name)
        assert list(got) == [f"{name}/{'.'.join('0' * len(shape))}"], got  # one chunk: the whole array
        assert all(isinstance(ref, str) and ref.startswith("base64:") for ref in got.values()), name
        zarray = json.loads(refs[f"{name}/.zarray"])
        assert zarray["shape"] == shape and zarray["chunks"] == shape, zarray
        assert zarray["dtype"] == "<f8" and zarray["compressor"] is None and zarray["filters"] is None, zarray
    assert json.loads(refs["time/.zattrs"])["calendar"] == "noleap"
    warned = [w for w in stats.warnings if "written inline" in w]
    assert len(warned) == 2, stats.warnings
    assert any(w.startswith(f"{default_days[0]}: /time: written inline") and
               f"its chunk size {chunk} along /time straddles files of 1 records" in w for w in warned), warned
    assert stats.referenced == DAYS * 3 + 1  # tas, time_bnds, label; and lat (contiguous), the first file's
    # values: netCDF4-python reading each file, concatenated; through xarray's zarr engine and our reader
    read = open_dataset(str(out))
    with xr.open_dataset("reference://", engine="zarr", decode_times=False, mask_and_scale=False,
                         backend_kwargs={"storage_options": {"fo": str(out)}, "consolidated": False}) as ds:
        for name in ("time", "time_bnds", "wide", "tas", "label"):
            expected = _netcdf4(default_days, name)
            # xarray joins a char variable's last dimension into strings (its char decoding): ours only for label
            for got in (read.root.variables[name].data, *([ds[name].values] if name != "label" else [])):
                assert got is not None and got.dtype == expected.dtype, (name, got)
                assert got.shape == expected.shape and np.array_equal(got, expected), name
    from nczarr_conformance.access.api import check

    report = check(str(out), deep=True, select=["NCZ-REF"])  # ranges, targets, codecs, every chunk decoded
    assert report.exit_code == 0 and not report.findings, report.findings


# ---- refusals: nothing written -------------------------------------------------------------------------------
def _nothing_written(tmp_path: Path, files: list[Path]) -> None:
    assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in files)


#: --reference's inline bound, as docs/references.md states it: "at most 16 MiB per variable"
INLINE_BOUND = 16 * 1024**2


def test_a_straddling_variable_past_the_inline_bound_is_refused_naming_it_and_the_bound(tmp_path: Path):
    """``big`` (3 records of 1500 x 1500 floats a file, chunk 4 along time) straddles files and its values of both
    files are more than the bound: refused in one line naming the file, the variable and the bound."""
    files = [_day(tmp_path / f"{n}.nc", d, records=3, time_chunk=2, big=1500) for n, d in (("a", 0), ("b", 1))]
    with netCDF4.Dataset(files[0]) as ds:  # the precondition, as netCDF4-python sees the file
        assert ds["big"].chunking()[0] == 4 and ds["big"].shape == (3, 1500, 1500)
        assert 2 * ds["big"].size * ds["big"].dtype.itemsize > INLINE_BOUND
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    done = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "--concat", "time", "--reference",
                           *map(str, files), str(tmp_path / "all.json")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert (f"{files[0]}: /big: 3 records along /time are not a multiple of its chunk size 4" in done.stderr
            and f"exceed the inline bound of {INLINE_BOUND} bytes per variable" in done.stderr
            and "convert without --reference" in done.stderr), done.stderr
    _nothing_written(tmp_path, files)


def test_the_last_file_may_have_any_length_but_no_other_past_the_bound(tmp_path: Path):
    files = [_day(tmp_path / "a.nc", 0, records=2, time_chunk=2),
             _day(tmp_path / "b.nc", 1, records=3, time_chunk=2, start=2)]
    concat_references([str(p) for p in files], str(tmp_path / "ok.json"), "time", workers=1, inline_limit=64)
    assert all(isinstance(ref, list) for name, ref in _refs(tmp_path / "ok.json")["refs"].items()
               if name.startswith("tas/") and "/." not in name)  # b is last: every chunk a reference
    files.append(_day(tmp_path / "c.nc", 2, records=2, time_chunk=2, start=5))
    # b's 3 records straddle chunks of 2: time's 7 doubles (56 bytes) fit a bound of 64 bytes, tas's 336 do not
    with pytest.raises(UnsupportedError, match=f"{files[1]}: /tas: 3 records along /time are not a multiple.* its "
                                               "336 bytes .all files. exceed the inline bound of 64 bytes"):
        concat_references([str(p) for p in files], str(tmp_path / "all.json"), "time", workers=1, inline_limit=64)
    assert not (tmp_path / "all.json").exists()
    # within the bound: b's two chunks and c's one are replaced by one inline chunk of all 5 records, per variable
    both = tmp_path / "both.json"
    concat_references([str(p) for p in files[1:]], str(both), "time", workers=1)
    refs = _refs(both)["refs"]
    assert [list(_chunk_refs(refs, name)) for name in ("time", "tas", "label")] == [["time/0"], ["tas/0.0.0"],
                                                                                    ["label/0.0"]]
    assert np.array_equal(open_dataset(str(both)).root.variables["tas"].data, _netcdf4(files[1:], "tas"))


def test_other_codecs_in_one_file_are_refused_naming_the_file_and_the_variable(tmp_path: Path):
    files = [_day(tmp_path / "a.nc", 0), _day(tmp_path / "b.nc", 1, complevel=6)]
    with pytest.raises(UnsupportedError, match=f"{files[1]}: /tas: compressor .*\"level\": 6.*\"level\": 4"):
        concat_references([str(p) for p in files], str(tmp_path / "all.json"), "time", workers=1)
    _nothing_written(tmp_path, files)


def test_other_chunk_shapes_in_one_file_are_refused_naming_them(tmp_path: Path):
    files = [_day(tmp_path / "a.nc", 0, records=2, time_chunk=2), _day(tmp_path / "b.nc", 1, records=2, time_chunk=1)]
    with pytest.raises(UsageError, match=f"{files[1]}: differs from {files[0]}: .*chunks \\[2"):
        concat_references([str(p) for p in files], str(tmp_path / "all.json"), "time", workers=1)
    _nothing_written(tmp_path, files)


def test_coordinates_and_variables_without_dim_follow_concats_rules(tmp_path: Path):
    files = [_day(tmp_path / "a.nc", 0), _day(tmp_path / "b.nc", 1, lat=(-10.0, 0.0, 11.0))]
    with pytest.raises(UsageError, match=f"{files[1]}: /lat does not use /time but its values differ"):
        concat_references([str(p) for p in files], str(tmp_path / "all.json"), "time", workers=1)
    overlap = [_day(tmp_path / "c.nc", 0), _day(tmp_path / "d.nc", 0)]
    with pytest.raises(UsageError, match=r"overlap|not increasing|same"):
        concat_references([str(p) for p in overlap], str(tmp_path / "all.json"), "time", workers=1)
    assert not (tmp_path / "all.json").exists()


def test_an_existing_output_is_refused_before_any_file_is_read(days: list[Path], tmp_path: Path):
    out = tmp_path / "all.json"
    out.write_text("{}")
    with pytest.raises(Exception, match="already exists"):
        concat_references([str(p) for p in days], str(out), "time", workers=1)
    assert out.read_text() == "{}"


# ---- --for READERS: one plan, the first file's, for every file ------------------------------------------------
def _nc2nczarr(*args: Any) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def cf_days(tmp_path: Path) -> list[Path]:
    """Daily files whose ``time`` and int ``count`` have no _FillValue (HDF5's fill netCDF's default)."""
    files = [_day(tmp_path / f"day{d}.nc", d, count=True) for d in range(DAYS)]
    with netCDF4.Dataset(files[0]) as ds:  # the precondition, as netCDF4-python sees the file
        assert "_FillValue" not in ds["time"].ncattrs() and "_FillValue" not in ds["count"].ncattrs()
        assert ds["count"].dtype == np.int32
    return files


def test_for_xarray_writes_null_default_fills_for_every_file_and_xarray_reads_them_as_the_files(
        cf_days: list[Path], tmp_path: Path):
    """``--concat time --reference --for xarray``: time's and count's fill_value null (xarray masks a written default
    fill: the default references make it read the int count as float64), every chunk still its file's reference,
    the rest of the storage the default's, and xarray's zarr engine reads what open_mfdataset reads from the files."""
    xr = pytest.importorskip("xarray")
    default = tmp_path / "default.json"
    concat_references([str(p) for p in cf_days], str(default), "time", workers=1)
    with _xr_refs(default) as ds:  # the precondition: the problem --for xarray cures exists
        assert ds["count"].dtype == np.float64
    out = tmp_path / "for.json"
    done = _nc2nczarr("--concat", "time", "--reference", *reversed(cf_days), out, "--for", "xarray", "-q")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    refs, plain = _refs(out)["refs"], _refs(default)["refs"]
    for name in ("time", "count"):
        zarray, before = json.loads(refs[f"{name}/.zarray"]), json.loads(plain[f"{name}/.zarray"])
        assert zarray["fill_value"] is None and before["fill_value"] is not None, (zarray, before)
        assert {**zarray, "fill_value": None} == {**before, "fill_value": None}  # dtype, chunks, codecs unchanged
    for name in ("time", "count", "tas", "label"):
        got = _chunk_refs(refs, name)
        assert len(got) == DAYS and got == _chunk_refs(plain, name), name  # each file's own HDF5 chunk, by reference
        assert all(isinstance(ref, list) for ref in got.values()), name
    assert json.loads(refs["count/.zarray"])["dtype"] == "<i4"
    with xr.open_mfdataset(cf_days, engine="netcdf4", combine="nested", concat_dim="time") as want, \
            _xr_refs(out) as got_ds:
        want = want.load()
        for name in want.variables:
            xr.testing.assert_identical(got_ds[name].load(), want[name])
        assert got_ds["count"].dtype == want["count"].dtype == np.int32


def test_for_xarray_refuses_a_float32_scale_factor_naming_it_unless_accept_losses(tmp_path: Path):
    """xarray's zarr engine reads a float32 ``scale_factor`` as float64: refused in one line (exit 2) naming the
    attribute, nothing written; ``--accept-losses`` writes the references and says the loss, even with -q."""
    files = [_day(tmp_path / f"p{d}.nc", d, count=True, packed=True) for d in range(2)]
    with netCDF4.Dataset(files[0]) as ds:  # the precondition: float32, as netCDF4-python reads it
        assert ds["count"].getncattr("scale_factor").dtype == np.float32
    out = tmp_path / "p.json"
    refused = _nc2nczarr("--concat", "time", "--reference", *files, out, "--for", "xarray")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith(f"nc2nczarr: {files[0]}: --for xarray: references would still be read "
                                     "otherwise than the file"), refused.stderr
    assert "/count attribute scale_factor" in refused.stderr and "--accept-losses" in refused.stderr
    _nothing_written(tmp_path, files)
    written = _nc2nczarr("--concat", "time", "--reference", *files, out, "--for", "xarray", "--accept-losses", "-q")
    assert written.returncode == 0, written.stderr
    assert written.stderr.startswith("nc2nczarr: xarray loses: reads 32-bit float attributes as 64-bit"), written.stderr
    assert written.stderr.endswith(": in /count attribute scale_factor\n") and written.stderr.count("\n") == 1
    one = _nc2nczarr(files[0], tmp_path / "one.json", "--reference", "--for", "xarray", "--accept-losses", "-q")
    assert written.stderr == one.stderr  # said as for one file
    assert json.loads(_refs(out)["refs"]["time/.zarray"])["fill_value"] is None  # written with the plan


def test_for_a_reader_needing_other_codecs_or_an_icechunk_output_is_refused(cf_days: list[Path], tmp_path: Path):
    """netcdf-c 4.9.0 reads no compressed chunk: references keep the codecs, so refused in one line (exit 2),
    naming the first file along time (the plan's), nothing written; an Icechunk repository (Zarr v3) takes no --for;
    --verify stays one file's."""
    out = tmp_path / "c.json"
    refused = _nc2nczarr("--concat", "time", "--reference", *reversed(cf_days), out, "--for", "netcdf-c-4.9")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"{cf_days[0]}: --for netcdf-c-4.9: those readers need compression none of " in refused.stderr
    assert "/tas" in refused.stderr and "references keep the file's chunks and codecs as stored" in refused.stderr
    _nothing_written(tmp_path, cf_days)
    icechunk = _nc2nczarr("--concat", "time", "--reference", *cf_days, f"icechunk://{tmp_path / 'r'}", "--for",
                          "xarray")
    assert icechunk.returncode == 2 and icechunk.stderr.count("\n") == 1, icechunk.stderr
    assert "writes Zarr v3: it takes no --for (--for plans a Zarr v2 layout" in icechunk.stderr
    verify = _nc2nczarr("--concat", "time", "--reference", *cf_days, out, "--for", "xarray", "--verify")
    assert verify.returncode == 2 and "--verify goes with a conversion of one file" in verify.stderr
    _nothing_written(tmp_path, cf_days)


def in_process_and_on_a_cluster(distributed: Any, files: list[Path], here: str, there: str, **options: Any) -> None:
    """``concat_references`` of ``files`` along time into ``here`` in this process, and into ``there`` on a
    two-worker process cluster (worker processes, as ``--workers`` runs them); ``options`` of concat_references
    for both."""
    concat_references([str(p) for p in files], here, "time", workers=1, **options)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        concat_references([str(p) for p in files], there, "time", client=client, **options)


def test_on_a_dask_cluster_the_references_are_the_in_process_ones(days: list[Path], tmp_path: Path):
    """The tasks run on a distributed.Client (worker processes, as --workers runs them) give exactly the
    references made in process."""
    distributed = pytest.importorskip("distributed")
    here, there = tmp_path / "here.json", tmp_path / "there.json"
    in_process_and_on_a_cluster(distributed, days, str(here), str(there))
    assert _refs(there) == _refs(here)
    assert len(_refs(there)["nczarr:targets"]) == DAYS


def test_on_a_dask_cluster_straddling_variables_are_inline_as_in_process(default_days: list[Path], tmp_path: Path):
    """describe()'s values come back from the workers and the first file's task writes the inline chunks there:
    the references are the ones made in process, byte for byte."""
    distributed = pytest.importorskip("distributed")
    here, there = tmp_path / "here.json", tmp_path / "there.json"
    in_process_and_on_a_cluster(distributed, default_days, str(here), str(there))
    refs = _refs(there)
    assert refs == _refs(here)
    assert list(_chunk_refs(refs["refs"], "time")) == ["time/0"] and refs["refs"]["time/0"].startswith("base64:")
    assert list(_chunk_refs(refs["refs"], "wide")) == ["wide/0.0"]
    assert np.array_equal(open_dataset(str(there)).root.variables["time"].data, _netcdf4(default_days, "time"))


def test_on_a_dask_cluster_for_xarray_the_references_are_the_in_process_ones(cf_days: list[Path], tmp_path: Path):
    """The plan is made once on the client and carried in each task: worker processes write the fills it chose."""
    distributed = pytest.importorskip("distributed")
    here, there = tmp_path / "here.json", tmp_path / "there.json"
    in_process_and_on_a_cluster(distributed, cf_days, str(here), str(there), for_readers=["xarray"])
    assert _refs(there) == _refs(here)
    assert json.loads(_refs(there)["refs"]["count/.zarray"])["fill_value"] is None
