"""nc2nczarr --append onto Zarr v3 stores (ours, sharded or not, and xarray's), dir and zip.

Expected values come from the netCDF files read with netCDF4-python, from zarr-python 3 and
xarray reading the store, and, for storage, from a peer writing the same thing: xarray's own
``to_zarr(mode="a", append_dim=…)`` on an xarray-written store, and one conversion of the
concatenated file (whose objects tests/zarr3/test_write.py holds equal to xarray's and
zarr-python's). Refusals and kills leave the store byte for byte as it was (or as the
finished append made it).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance import safety
from nczarr_conformance.conversion.append import append
from nczarr_conformance.conversion.append_v3 import concat_v3
from nczarr_conformance.conversion.from_netcdf import convert
from nczarr_conformance.stores import open_store
from tests.test_append import make, snapshot

zarr = pytest.importorskip("zarr")
if int(zarr.__version__.split(".")[0]) < 3:
    pytest.skip("zarr-python 3 reads Zarr v3", allow_module_level=True)

CONVERT = [sys.executable, "-m", "nczarr_conformance.cli.convert", "-q"]
KILL_TRIES = 4  # per store kind: each kill must leave the old dataset or the new one, readable


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CONVERT, *args], capture_output=True, text=True, timeout=timeout, check=False)


def to_v3(src: Path, out: Path, *, shard: int | None = None, flavor: str | None = None) -> Path:
    """``src`` converted to Zarr v3 at ``out`` by the function ``nc2nczarr --zarr-format 3`` calls, in this
    process: a store to append to or compare with, not what is tested (the appends are; no launch each)."""
    convert(str(src), str(out), zarr_format=3, shard=shard, flavor=flavor)
    return out


def append_here(src: Path, store: Path) -> None:
    """``src`` appended along time by the function ``nc2nczarr --append time`` calls, in this process: the
    sequential appends a tested command is compared with, or a store prepared for one."""
    append(str(src), str(store), "time")


def objects(path: Path) -> dict[str, bytes]:
    """Every object of a store by key (dir or zip), as stored."""
    store = open_store(str(path))
    try:
        return {k: store.get(k, limit=sys.maxsize) or b"" for k in store.list_prefix("/")}
    finally:
        store.close()


def zarr_group(path: Path) -> object:
    store = zarr.storage.ZipStore(str(path), mode="r") if path.suffix == ".zip" else str(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.open_group(store, mode="r", zarr_format=3)


def nc_values(path: Path) -> dict[str, np.ndarray]:
    import netCDF4

    out = {}
    with netCDF4.Dataset(str(path)) as nc:
        nc.set_auto_maskandscale(False)
        for name in ("time", "x", "v"):
            out[name] = nc[name][...]
        out["g/w"] = nc["g"]["w"][...]
    return out


@pytest.fixture
def series(tmp_path: Path) -> tuple[Path, Path, Path]:
    return make(tmp_path / "a1.nc", 0, 5), make(tmp_path / "a2.nc", 5, 6), make(tmp_path / "all.nc", 0, 11)


# ---- the result -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".zarr", ".zip"])
@pytest.mark.parametrize("shard", [None, "2"], ids=["chunks", "shard2"])
def test_append_equals_one_conversion_of_the_whole(series, tmp_path, suffix, shard):
    """Every object equals converting the concatenated file at once; zarr-python reads netCDF4's values."""
    first, second, whole = series
    extra = {"shard": int(shard)} if shard else {}
    store, ref = to_v3(first, tmp_path / f"s{suffix}", **extra), to_v3(whole, tmp_path / f"ref{suffix}", **extra)
    done = cli("--append", "time", str(second), str(store))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert objects(store) == objects(ref)  # chunk keys, codecs, fill, zarr.json shapes, consolidated metadata
    group = zarr_group(store)
    for name, values in nc_values(whole).items():
        assert np.array_equal(group[name][...], values), name  # type: ignore[index]
    if suffix == ".zarr":  # xarray reads the root group as it reads the concatenated netCDF file
        xr = pytest.importorskip("xarray")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            xr.testing.assert_equal(xr.open_zarr(store, zarr_format=3).load(), xr.open_dataset(whole).load())


def test_partial_last_shard_is_rewritten_with_its_index(series, tmp_path):
    """v: chunks (4, 2), shards of 2 chunks (8 rows); 5 rows stored: shard 0 holds one full inner
    chunk and one with a single row. After 6 more rows the shard is read, merged and written
    again: both inner chunks, the first one's bytes as they were, the index (+ crc32c) pointing at each."""
    import numcodecs

    first, second, whole = series
    store = to_v3(first, tmp_path / "s.zarr", shard=2)
    before = (store / "v" / "c" / "0" / "0").read_bytes()
    assert cli("--append", "time", str(second), str(store)).returncode == 0
    shard = (store / "v" / "c" / "0" / "0").read_bytes()
    per = 2  # inner chunks in a shard: (2, 1)
    index_bytes = shard[-(16 * per + 4):]
    table = np.frombuffer(numcodecs.CRC32C(location="end").decode(index_bytes), dtype="<u8").reshape(per, 2)
    data_end = len(shard) - len(index_bytes)
    assert table[0, 0] == 0 and table[1, 0] == table[0, 1] and table[1, 0] + table[1, 1] == data_end
    old_first = before[int(table[0, 0]):int(table[0, 0] + table[0, 1])]
    assert shard[: int(table[0, 1])] == old_first  # the untouched inner chunk re-encoded to the same bytes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = zarr.open_array(str(store / "v"), mode="r")
        assert v.shards == (8, 2) and v.chunks == (4, 2)
        assert np.array_equal(v[...], nc_values(whole)["v"])


def test_xarray_written_store_grows_as_xarrays_own_append(tmp_path):
    """The target written by xarray's to_zarr(zarr_format=3); the result equals, object for object,
    xarray's own ``to_zarr(mode="a", append_dim="time")`` of the same file, and reads as
    ``xr.concat`` of the two files."""
    xr = pytest.importorskip("xarray")

    def make_xr(path: Path, t0: int, n: int) -> Path:
        ds = xr.Dataset({"v": (("time", "x"), np.arange(t0 * 3, (t0 + n) * 3, dtype="f4").reshape(n, 3),
                               {"long_name": "v"})},
                        coords={"time": ("time", np.arange(t0, t0 + n, dtype="f8"), {"units": "days"}),
                                "x": np.arange(3, dtype="i4") * 10},
                        attrs={"title": "series"})
        ds.to_netcdf(path, unlimited_dims=["time"],
                     encoding={"v": {"chunksizes": (4, 2), "zlib": True}, "time": {"chunksizes": (4,)}})
        return path

    first, second = make_xr(tmp_path / "a1.nc", 0, 5), make_xr(tmp_path / "a2.nc", 5, 6)
    ours, theirs = tmp_path / "ours.zarr", tmp_path / "theirs.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with xr.open_dataset(first) as ds:
            ds.to_zarr(ours, zarr_format=3, consolidated=True,
                       encoding={"time": {"chunks": (4,)}, "v": {"chunks": (4, 2)}})
        shutil.copytree(ours, theirs)
        with xr.open_dataset(second) as ds:
            ds.to_zarr(theirs, mode="a", append_dim="time", zarr_format=3, consolidated=True)
    done = cli("--append", "time", str(second), str(ours))
    assert done.returncode == 0, done.stderr
    assert objects(ours) == objects(theirs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = xr.concat([xr.open_dataset(first), xr.open_dataset(second)], dim="time").load()
        xr.testing.assert_identical(xr.open_zarr(ours, zarr_format=3).load(), expected)


# ---- refusals --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("change,match", [
    ({"units": "hours"}, "/time: attributes differ"),
    ({"dtype": "f8"}, "/v: type float in the store, double"),
    ({"nx": 4}, "/x: size 3 in the store, 4"),
])
@pytest.mark.parametrize("suffix", [".zarr", ".zip"])
def test_mismatching_file_is_refused_and_the_store_untouched(series, tmp_path, change, match, suffix):
    first, _, _ = series
    store = to_v3(first, tmp_path / f"s{suffix}")
    before = snapshot(store)
    other = make(tmp_path / "other.nc", 5, 3, **change)
    done = cli("--append", "time", str(other), str(store))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and match in done.stderr, done.stderr
    assert snapshot(store) == before


def test_same_append_twice_is_refused(series, tmp_path):
    first, second, _ = series
    store = to_v3(first, tmp_path / "s.zarr", shard=2)
    append_here(second, store)
    before = snapshot(store)
    done = cli("--append", "time", str(second), str(store))
    assert done.returncode == 2 and "already in the store" in done.stderr, done.stderr
    assert snapshot(store) == before


def test_a_second_writer_is_refused_while_the_lock_is_held(series, tmp_path):
    from nczarr_conformance.stores import lock_for_writing

    first, second, _ = series
    store = to_v3(first, tmp_path / "s.zarr")
    before = snapshot(store)
    with lock_for_writing(str(store)):
        done = cli("--append", "time", str(second), str(store), timeout=30)
    assert done.returncode == 2 and "another writer holds it" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert snapshot(store) == before


# ---- SIGKILL ---------------------------------------------------------------------------------------------
def make_long(path: Path, t0: int, n: int, nx: int = 2048) -> Path:
    """Many small chunks (1 × 256): an append long enough to be killed in the middle."""
    import netCDF4

    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", nx)
        t = nc.createVariable("time", "f8", ("time",), chunksizes=(1,))
        t[:] = np.arange(t0, t0 + n, dtype="f8")
        v = nc.createVariable("v", "f4", ("time", "x"), chunksizes=(1, 256))
        v[:] = np.arange(t0 * nx, (t0 + n) * nx, dtype="f4").reshape(n, nx)
    return path


@pytest.mark.parametrize("suffix,shard", [(".zarr", None), (".zip", None), (".zarr", "4")],
                         ids=["dir", "zip", "dir-shard4"])
def test_sigkill_during_an_append_leaves_the_old_or_the_new_dataset(tmp_path, suffix, shard):
    """Killed at several moments (the process started, its temporary there, chunks being written):
    zarr-python reads the old dataset (3 rows) or the new one (3 + 150), never a mix; the next
    append removes the dead one's leftovers and succeeds. Sharded: the partial last shard (3 of
    4 rows) is rewritten inside the same transaction."""
    first, second = make_long(tmp_path / "a1.nc", 0, 3), make_long(tmp_path / "a2.nc", 3, 150)
    work = tmp_path / "work"
    work.mkdir()
    original = to_v3(first, tmp_path / f"orig{suffix}", shard=int(shard) if shard else None)
    full = np.arange(0, 153 * 2048, dtype="f4").reshape(153, 2048)
    outcomes = []
    for attempt in range(KILL_TRIES):
        store = work / f"s{suffix}"
        if store.is_dir():
            shutil.rmtree(store)
        elif store.exists():
            store.unlink()
        (shutil.copytree if suffix == ".zarr" else shutil.copyfile)(original, store)
        proc = subprocess.Popen([*CONVERT, "--append", "time", str(second), str(store)], stderr=subprocess.PIPE)
        _wait_for_moment(attempt, work, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        v = zarr_group(store)["v"]  # type: ignore[index]
        rows = v.shape[0]
        assert rows in (3, 153), rows
        assert np.array_equal(v[...], full[:rows])
        outcomes.append((rows, len(safety.find_leftovers(store))))
        if rows == 3:
            append_here(second, store)  # raises if the dead one's leftovers stood in the way
            assert safety.find_leftovers(store) == [] and zarr_group(store)["v"].shape == (153, 2048)  # type: ignore[index]
    assert any(rows == 3 and left for rows, left in outcomes), outcomes  # a kill landed inside the write


def _wait_for_moment(attempt: int, work: Path, proc: subprocess.Popen[bytes]) -> None:
    """Attempt 0: at once; 1: the temporary appeared; 2, 3: the temporary holds written chunks."""
    if attempt == 0:
        time.sleep(0.3)
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        temps = [p for p in work.iterdir() if p.name.startswith(".") and not p.name.endswith(".lock")]
        if temps and (attempt == 1 or _written(temps) >= 100 * (attempt - 1)):
            return
        time.sleep(0.002)


def _written(temps: list[Path]) -> int:
    """Files in a temporary directory newer than the store's (the append's own puts), or a zip's size in KiB."""
    total = 0
    for p in temps:
        with contextlib.suppress(OSError):  # the temporary is renamed or removed as the append ends
            if p.is_dir():
                for root, _, files in os.walk(p):
                    total += sum(1 for f in files if _new_file(os.path.join(root, f)))
            elif p.is_file():
                total += p.stat().st_size // 1024
    return total


def _new_file(path: str) -> bool:
    try:
        return os.stat(path).st_nlink == 1  # the old objects are hard links into the store
    except OSError:
        return False


# ---- several files -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".zarr", ".zip"])
def test_append_of_several_files_equals_the_sequential_appends(tmp_path, suffix):
    """Three files given out of order: one transaction, coordinate order, every object equal to
    appending them one by one, and to converting the concatenated file once (sharded)."""
    parts = [make(tmp_path / f"p{i}.nc", t0, n) for i, (t0, n) in enumerate([(5, 3), (8, 6), (14, 2)])]
    first, whole = make(tmp_path / "p.nc", 0, 5), make(tmp_path / "all.nc", 0, 16)
    together = to_v3(first, tmp_path / f"t{suffix}", shard=2)
    one_by_one = to_v3(first, tmp_path / f"o{suffix}", shard=2)
    ref = to_v3(whole, tmp_path / f"ref{suffix}", shard=2)
    done = cli("--append", "time", str(parts[2]), str(parts[0]), str(parts[1]), str(together))
    assert done.returncode == 0, done.stderr
    for part in parts:
        append_here(part, one_by_one)
    assert objects(together) == objects(one_by_one) == objects(ref)
    group = zarr_group(together)
    for name, values in nc_values(whole).items():
        assert np.array_equal(group[name][...], values), name  # type: ignore[index]


def test_several_files_with_a_gap_are_refused_before_any_write(tmp_path):
    first = make(tmp_path / "p.nc", 0, 5)
    store = to_v3(first, tmp_path / "s.zarr")
    before = snapshot(store)
    a, b = make(tmp_path / "a.nc", 5, 3), make(tmp_path / "b.nc", 20, 3)
    done = cli("--append", "time", str(a), str(b), str(store))
    assert done.returncode == 2 and "gap in coordinate time" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert snapshot(store) == before


@pytest.mark.parametrize("suffix", [".zarr", ".zip"])
def test_concat_into_v3_equals_the_sequential_appends(tmp_path, suffix):
    """``--zarr-format 3 --shard 2 --concat``: files given out of order; every object equals converting
    the first and appending the others one by one, and one conversion of the concatenated file."""
    parts = [make(tmp_path / f"p{i}.nc", t0, n) for i, (t0, n) in enumerate([(5, 3), (0, 5), (14, 2), (8, 6)])]
    whole = make(tmp_path / "all.nc", 0, 16)
    out, loop = tmp_path / f"c{suffix}", to_v3(parts[1], tmp_path / f"l{suffix}", shard=2)
    for part in (parts[0], parts[3], parts[2]):
        append_here(part, loop)
    ref = to_v3(whole, tmp_path / f"ref{suffix}", shard=2)
    done = cli("--zarr-format", "3", "--shard", "2", "--concat", "time", *map(str, parts), str(out))
    assert done.returncode == 0, done.stderr
    assert objects(out) == objects(loop) == objects(ref)
    group = zarr_group(out)
    for name, values in nc_values(whole).items():
        assert np.array_equal(group[name][...], values), name  # type: ignore[index]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("suffix", [".zarr", ".zip"])
def test_concat_into_v3_refusals_write_nothing(tmp_path, suffix):
    """A gap, a mismatching file (refused after the first file was staged) and an existing target
    without --overwrite: one line, exit 2, no target, no temporary left beside it."""
    a, b, gap = make(tmp_path / "a.nc", 0, 5), make(tmp_path / "b.nc", 5, 3), make(tmp_path / "g.nc", 20, 3)
    other = make(tmp_path / "o.nc", 5, 3, units="hours")
    out = tmp_path / f"c{suffix}"
    for files, match in (((a, b, gap), "gap in coordinate time"), ((a, other), "/time: attributes differ")):
        done = cli("--zarr-format", "3", "--concat", "time", *map(str, files), str(out))
        assert done.returncode == 2 and match in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert not out.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    concat_v3([str(a), str(b)], str(out), "time")  # what the command below would overwrite (in this process)
    before = snapshot(out)
    done = cli("--zarr-format", "3", "--concat", "time", str(a), str(b), str(out))
    assert done.returncode == 2 and "exists (use --overwrite to replace it)" in done.stderr, done.stderr
    assert snapshot(out) == before


# ---- what is compared, what is left out --------------------------------------------------------------------
def test_new_chunks_all_fill_are_left_out_as_one_conversion_leaves_them(tmp_path):
    """v's new rows all -1 (its fill): the chunks holding only them are not written, exactly as one
    conversion of the concatenated file (and zarr-python) leaves them out; the edge chunk is."""
    import netCDF4

    first, second, whole = make(tmp_path / "a1.nc", 0, 5), make(tmp_path / "a2.nc", 5, 6), make(tmp_path / "all.nc", 0,
                                                                                                  11)
    for path, rows in ((second, slice(None)), (whole, slice(5, None))):
        with netCDF4.Dataset(str(path), "r+") as nc:
            nc["v"][rows] = -1
    store, ref = to_v3(first, tmp_path / "s.zarr"), to_v3(whole, tmp_path / "ref.zarr")
    assert cli("--append", "time", str(second), str(store)).returncode == 0
    assert not (ref / "v" / "c" / "2").exists()  # the peer's layout: rows 8-10 all fill, not written
    assert objects(store) == objects(ref)


def test_a_variable_without_the_dimension_must_hold_the_same_values(tmp_path):
    import netCDF4

    first, other = make(tmp_path / "a1.nc", 0, 5), make(tmp_path / "a2.nc", 5, 6)
    with netCDF4.Dataset(str(other), "r+") as nc:
        nc["x"][:] = [1, 2, 3]
    store = to_v3(first, tmp_path / "s.zarr")
    before = snapshot(store)
    done = cli("--append", "time", str(other), str(store))
    assert done.returncode == 2 and "/x: does not use the appended dimension but its values differ" in done.stderr
    assert snapshot(store) == before


def cf_daily(path: Path, t0: int, n: int, *, units: str = "days since 2000-01-01", calendar: str | None = None) -> Path:
    """A daily file as archives hold them: CF time units, netCDF-4's default chunking (time 512 / 1 row),
    a float variable without ``_FillValue``; no group (xarray's to_zarr writes the root only)."""
    import netCDF4

    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        t = nc.createVariable("time", "f8", ("time",))
        t.units = units
        if calendar:
            t.calendar = calendar
        t[:] = np.arange(t0, t0 + n, dtype="f8")
        v = nc.createVariable("v", "f4", ("time", "x"), zlib=True)
        v.long_name = "v"
        v[:] = np.arange(t0 * 3, (t0 + n) * 3, dtype="f4").reshape(n, 3)
    return path


@pytest.mark.parametrize("target", ["dir", "s3"])
def test_a_store_xarray_wrote_with_its_defaults_grows_as_xarrays_own_append(tmp_path, target, request):
    """The common case: xarray's ``to_zarr`` of the first daily file with no encoding given: it picks its
    own chunks (5 rows, not the file's 512 / 1) and adds ``calendar: proleptic_gregorian`` to the time
    and a NaN ``_FillValue`` to the floats. Our append of the next file (refused before: "chunks [5] in
    the store, [512] in the new file", "attributes differ") equals xarray's own
    ``to_zarr(mode="a", append_dim="time")`` object for object, on a directory and on S3."""
    xr = pytest.importorskip("xarray")
    first, second = cf_daily(tmp_path / "d1.nc", 0, 5), cf_daily(tmp_path / "d2.nc", 5, 6)
    theirs = tmp_path / "theirs.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with xr.open_dataset(first) as ds:
            ds.to_zarr(theirs, zarr_format=3, mode="w")
        before = objects(theirs)
        assert json.loads(before["/time/zarr.json"])["attributes"]["calendar"] == "proleptic_gregorian"
        assert json.loads(before["/v/zarr.json"])["chunk_grid"]["configuration"]["chunk_shape"] == [5, 3]
        if target == "s3":
            import boto3

            bucket = request.getfixturevalue("s3_bucket")
            ours = f"s3://{bucket}/ours"
            client = boto3.client("s3")
            for key, data in before.items():
                client.put_object(Bucket=bucket, Key="ours" + key, Body=data)
        else:
            ours = str(shutil.copytree(theirs, tmp_path / "ours.zarr"))
        with xr.open_dataset(second) as ds:
            ds.to_zarr(theirs, mode="a", append_dim="time", zarr_format=3)
    done = cli("--append", "time", str(second), ours)
    assert done.returncode == 0, done.stderr
    mine = objects(Path(ours)) if target == "dir" else _s3_objects(ours)
    assert mine == objects(theirs)


def _s3_objects(url: str) -> dict[str, bytes]:
    store = open_store(url)
    try:
        return {k: store.get(k, limit=sys.maxsize) or b"" for k in store.list_prefix("/")}
    finally:
        store.close()


def test_a_file_without_calendar_is_refused_where_proleptic_gregorian_differs_from_standard(tmp_path):
    """The store's time says ``calendar: proleptic_gregorian`` (the source declared it); the new file has
    no calendar (CF: ``standard``) and its dates fall before 1582-10-15, where the two calendars name
    different days: refused in one line, store untouched. (From 1582-10-15 on they agree: see above.)"""
    xr = pytest.importorskip("xarray")
    first = cf_daily(tmp_path / "d1.nc", 0, 5, units="days since 1500-01-01", calendar="proleptic_gregorian")
    second = cf_daily(tmp_path / "d2.nc", 5, 6, units="days since 1500-01-01")
    store = tmp_path / "x.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with xr.open_dataset(first) as ds:
            ds.to_zarr(store, zarr_format=3, mode="w")
    assert json.loads((store / "time" / "zarr.json").read_text())["attributes"]["calendar"] == "proleptic_gregorian"
    before = snapshot(store)
    done = cli("--append", "time", str(second), str(store))
    assert done.returncode == 2 and "/time: attributes differ" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert snapshot(store) == before


def test_a_file_whose_fill_xarray_replaced_is_refused_by_an_xarray_store(tmp_path):
    """xarray writes a masked float's fill as NaN (``_FillValue`` base64 NaN): a netCDF file saying
    ``_FillValue = -1`` is refused (its -1 would read as data there), in one line, store untouched."""
    import netCDF4

    xr = pytest.importorskip("xarray")

    def flat(path: Path, t0: int, n: int) -> Path:
        with netCDF4.Dataset(str(path), "w") as nc:
            nc.createDimension("time", None)
            nc.createVariable("time", "i4", ("time",), chunksizes=(4,))[:] = np.arange(t0, t0 + n)
            nc.createVariable("v", "f4", ("time",), chunksizes=(4,), fill_value=-1)[:] = np.arange(t0, t0 + n)
        return path

    first, second = flat(tmp_path / "a1.nc", 0, 5), flat(tmp_path / "a2.nc", 5, 6)
    store = tmp_path / "x.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with xr.open_dataset(first) as ds:
            ds.to_zarr(store, zarr_format=3, consolidated=True,
                       encoding={"time": {"chunks": (4,)}, "v": {"chunks": (4,)}})
    before = snapshot(store)
    done = cli("--append", "time", str(second), str(store))
    assert done.returncode == 2 and "/v: attributes differ" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert snapshot(store) == before


def test_zarr_python_store_with_other_codecs_grows_as_zarr_pythons_own_append(tmp_path):
    """A store zarr-python wrote with codecs our writer never uses: transpose + zstd + crc32c, big-endian
    bytes + gzip, blosc under v2 chunk keys with ".", shards with their index at the start. Each array
    grown by us equals, object for object, zarr-python's own ``Array.append`` of the same rows."""
    import netCDF4
    from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, ShardingCodec, TransposeCodec, ZstdCodec

    def rows(t0: int, n: int, dtype: str) -> np.ndarray:
        return (np.arange(t0 * 4, (t0 + n) * 4) % 97).reshape(n, 4).astype(dtype)

    specs = {  # name: (dtype, create_array keywords)
        "tr": ("f8", {"filters": [TransposeCodec(order=(1, 0))], "compressors": [ZstdCodec(level=3), Crc32cCodec()]}),
        "big": ("i4", {"serializer": BytesCodec(endian="big"), "compressors": [GzipCodec(level=5)]}),
        "bl": ("u2", {"compressors": [BloscCodec(cname="zstd")], "chunk_key_encoding": {"name": "v2",
                                                                                        "separator": "."}}),
        "sh": ("f4", {"chunks": (6, 2), "compressors": None, "serializer": ShardingCodec(
            chunk_shape=(3, 2), codecs=[BytesCodec(), Crc32cCodec()], index_location="start")}),
    }
    ours, theirs = tmp_path / "ours.zarr", tmp_path / "theirs.zarr"
    group = zarr.open_group(str(ours), mode="w", zarr_format=3)
    for name, (dtype, kw) in specs.items():
        kw = {"chunks": (3, 2), **kw}
        group.create_array(name, shape=(5, 4), dtype=dtype, dimension_names=["time", "x"], **kw)[...] = rows(0, 5,
                                                                                                           dtype)
    shutil.copytree(ours, theirs)
    new = tmp_path / "new.nc"
    with netCDF4.Dataset(str(new), "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 4)
        for name, (dtype, _) in specs.items():
            nc.createVariable(name, dtype, ("time", "x"), chunksizes=(3, 2))[:] = rows(5, 7, dtype)
    done = cli("--append", "time", str(new), str(ours))
    assert done.returncode == 0, done.stderr
    peer = zarr.open_group(str(theirs), mode="r+", zarr_format=3)
    for name, (dtype, _) in specs.items():
        peer[name].append(rows(5, 7, dtype), axis=0)  # type: ignore[union-attr]
        assert np.array_equal(zarr.open_array(str(ours / name), mode="r")[...], rows(0, 12, dtype)), name
    mine, peers = objects(ours), objects(theirs)
    assert sorted(mine) == sorted(peers)
    # numcodecs' GZip (zarr-python's gzip codec) stamps the current second into the gzip header's MTIME
    # (RFC 1952, bytes 4-7): two encodings of the same chunk a second apart differ there and only there
    assert [k for k in mine if _without_gzip_mtime(mine[k]) != _without_gzip_mtime(peers[k])] == []


def test_a_second_append_while_the_first_is_stopped_inside_its_write_is_refused(tmp_path):
    """The first append stopped (SIGSTOP) once its temporary holds written chunks: a second one is
    refused at once in one line; the first, let go, commits; the store holds its records."""
    first, big, more = make_long(tmp_path / "a1.nc", 0, 3), make_long(tmp_path / "a2.nc", 3, 150), \
        make_long(tmp_path / "a3.nc", 153, 2)
    work = tmp_path / "work"
    work.mkdir()
    store = to_v3(first, work / "s.zarr")
    proc = subprocess.Popen([*CONVERT, "--append", "time", str(big), str(store)], stderr=subprocess.PIPE)
    try:
        _wait_for_moment(2, work, proc)
        proc.send_signal(signal.SIGSTOP)
        started = time.monotonic()
        second = cli("--append", "time", str(more), str(store), timeout=30)
        assert time.monotonic() - started < 20
        assert second.returncode == 2 and "another writer holds it" in second.stderr, second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
    finally:
        proc.send_signal(signal.SIGCONT)
    assert proc.wait(timeout=60) == 0
    assert zarr_group(store)["v"].shape == (153, 2048)  # type: ignore[index]


def test_netcdf_c_draft_v3_layout_is_refused(series, tmp_path):
    """netcdf-c's draft NCZarr v3 keeps dimensions in ``_nczarr_*`` attributes, which a shape change
    alone would leave stale: refused in one line, store untouched."""
    import json

    first, second, _ = series
    store = to_v3(first, tmp_path / "s.zarr")
    root = json.loads((store / "zarr.json").read_text())
    root["attributes"]["_nczarr_superblock"] = {"version": "3.0.0", "format": 3}
    (store / "zarr.json").write_text(json.dumps(root, indent=2))
    before = snapshot(store)
    done = cli("--append", "time", str(second), str(store))
    assert done.returncode == 2 and "draft NCZarr v3 layout" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert snapshot(store) == before


def test_an_nz_store_is_refused_in_one_line_naming_the_layout(series, tmp_path):
    """An NZ-1.0 store (our --flavor nz, whose output NZ's own validator accepts: tests/zarr3/test_nz.py)
    keeps typed attributes and _FillValue in NZ's forms: refused by name, not as "attributes differ"."""
    first, second, _ = series
    store = to_v3(first, tmp_path / "s.zarr", flavor="nz")
    before = snapshot(store)
    done = cli("--append", "time", str(second), str(store))
    assert done.returncode == 2 and "/zarr.json: the NZ-1.0 layout" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert snapshot(store) == before


@pytest.mark.parametrize("shard", [None, "2"], ids=["chunks", "shard2"])
def test_strings_chars_and_big_endian_append_as_one_conversion(tmp_path, shard):
    """netCDF string (vlen-utf8, a last chunk holding only ""), char (null_terminated_bytes) and a
    big-endian uint64 with a fill: every object equals one conversion of the concatenated file, and
    zarr-python reads netCDF4's values."""
    import netCDF4

    def strings(path: Path, t0: int, n: int) -> Path:
        with netCDF4.Dataset(str(path), "w") as nc:
            nc.createDimension("time", None)
            nc.createDimension("n", 3)
            nc.createVariable("time", "i8", ("time",), chunksizes=(2,))[:] = np.arange(t0, t0 + n)
            s = nc.createVariable("s", str, ("time",), chunksizes=(2,))
            for i in range(n):
                s[i] = "é" * ((t0 + i) % 3)
            c = nc.createVariable("c", "S1", ("time", "n"), chunksizes=(2, 3))
            c[:] = netCDF4.stringtochar(np.array([f"a{(t0 + i) % 10}" for i in range(n)], dtype="S3"))
            u = nc.createVariable("u", "u8", ("time",), endian="big", chunksizes=(2,), fill_value=7)
            u[:] = np.arange(t0, t0 + n)
        return path

    extra = {"shard": int(shard)} if shard else {}
    first, second, whole = strings(tmp_path / "a1.nc", 0, 3), strings(tmp_path / "a2.nc", 3, 4), \
        strings(tmp_path / "all.nc", 0, 7)
    store, ref = to_v3(first, tmp_path / "s.zarr", **extra), to_v3(whole, tmp_path / "ref.zarr", **extra)
    done = cli("--append", "time", str(second), str(store))
    assert done.returncode == 0, done.stderr
    assert objects(store) == objects(ref)
    group = zarr_group(store)
    with netCDF4.Dataset(str(whole)) as nc:
        assert list(group["s"][...]) == list(nc["s"][...])  # type: ignore[index]
        assert np.array_equal(group["u"][...], nc["u"][...])  # type: ignore[index]
        assert np.array_equal(group["c"][...], nc["c"][...].data)  # type: ignore[index]


def _without_gzip_mtime(data: bytes) -> bytes:
    """A gzip member with its MTIME field zeroed; any other object as it is."""
    return data[:4] + b"\0\0\0\0" + data[8:] if data[:3] == b"\x1f\x8b\x08" else data
