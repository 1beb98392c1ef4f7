"""nc2nczarr --concat on a real dask LocalCluster (2 worker processes, shared by the module).

The expected store is the sequential ``convert`` of the first file and ``append`` of the
others, one by one (the code path users had before), compared in the canonical model with
storage; refusals name the file and the cause and write nothing.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance import safety
from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.conversion.append import append
from nczarr_conformance.conversion.concat import concat
from nczarr_conformance.conversion.from_netcdf import convert
from nczarr_conformance.errors import StoreError, UsageError
from nczarr_conformance.model import diff
from tests.conftest import require_module
from tests.test_append import make

require_module("distributed")


#: dask's self-monitoring, which the shared cluster does all module long, idle through most tests: a sample of
#: each worker's stack every 10 ms, an event-loop check every 20 ms, host metrics every 0.5 s (about 0.1 CPU
#: second a second in all, ~15 s a run). Nothing here reads them; the nannies hand this config to the workers.
QUIET_DASK = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
              "distributed.admin.system-monitor.interval": "5s"}


@pytest.fixture(scope="module")
def client(moto_server):
    """One LocalCluster of 2 worker processes for the module, started after moto so workers inherit its env."""
    import dask

    from nczarr_conformance.conversion.cluster import open_client

    with dask.config.set(QUIET_DASK), open_client(workers=2) as c:
        yield c


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """Three files whose name order is not their time order; lengths 5, 6, 3 with 4-row chunks: the
    second and third start mid-chunk, so some chunks straddle two files and some are misaligned."""
    d = tmp_path_factory.mktemp("archive")
    files = [make(d / "c_first.nc", 0, 5), make(d / "a_second.nc", 5, 6), make(d / "b_third.nc", 11, 3)]
    ref = d.parent / "ref.file"
    convert(str(files[0]), str(ref))
    for f in files[1:]:
        append(str(f), str(ref), "time")
    return d, files, ref


@pytest.mark.parametrize("kind", ["file", "zip", "s3"])
def test_concat_equals_the_sequential_append(client, archive, tmp_path, kind, request):
    d, _files, ref = archive
    if kind == "s3":
        import boto3

        bucket = "concat-" + str(os.getpid())
        boto3.client("s3").create_bucket(Bucket=bucket)
        out = f"s3://{bucket}/ds#mode=nczarr,s3"
    else:
        out = str(tmp_path / f"out.{kind}")
    stats = concat([str(d / "*.nc")], out, "time", client=client)
    assert stats.files == 3 and stats.records == 14
    assert stats.copied > 0  # the first file's aligned chunks went across compressed, as convert copies them
    assert diff(open_dataset(str(ref)), open_dataset(out)) == []
    if kind == "file":  # the same metadata objects: .zmetadata too (the model has no place for it)
        def metadata(root: Path) -> dict[str, object]:
            return {str(p.relative_to(root)): json.loads(p.read_bytes()) for p in root.rglob(".z*")}

        ours, expected = metadata(Path(out)), metadata(ref)
        assert ours == expected and ".zmetadata" in expected
        for key, doc in expected.items():  # attribute order is netCDF's creation order
            if key.endswith(".zattrs"):
                assert list(ours[key]) == list(doc), key  # type: ignore[call-overload]
    if kind != "s3":
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"out.{kind}"]  # nothing left aside
    else:
        import boto3

        left = [o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket=bucket).get("Contents", [])]
        assert "ds/.nczarr-partial" not in left and "ds/.zgroup" in left


def test_aligned_daily_files_are_copied_compressed(client, tmp_path):
    """One record per file, chunk 1 along time: every chunk is the file's own, copied as stored."""
    import netCDF4

    files = []
    for day in range(6):
        path = tmp_path / f"day{5 - day}.nc"  # names in reverse time order
        with netCDF4.Dataset(str(path), "w") as nc:
            nc.createDimension("time", None)
            nc.createDimension("y", 4)
            t = nc.createVariable("time", "f8", ("time",))
            t.units = "days since 2000-01-01"
            v = nc.createVariable("v", "f4", ("time", "y"), chunksizes=(1, 4), zlib=True, complevel=1)
            t[:] = [day]
            v[:] = np.arange(4, dtype="f4")[None, :] + day
        files.append(path)
    files.sort()  # by name: day0.nc (holding day 5) first
    ref = tmp_path / "ref.file"
    convert(str(tmp_path / "day5.nc"), str(ref))  # day5.nc holds day 0
    for day in range(1, 6):
        append(str(tmp_path / f"day{5 - day}.nc"), str(ref), "time")
    stats = concat([str(p) for p in files], str(tmp_path / "out.file"), "time", client=client)
    # v: one chunk per file, each copied as stored; time (netCDF's default chunk of 1024 records, no
    # codec) is one chunk straddling every file, assembled once
    assert stats.copied == 6 and stats.chunks == 7
    assert diff(open_dataset(str(ref)), open_dataset(str(tmp_path / "out.file"))) == []
    values = np.asarray(open_dataset(str(tmp_path / "out.file")).root.variables["v"].data)
    assert values[:, 0].tolist() == list(range(6))  # time order, not name order


def _refused(client, tmp_path, files, match, **kw):
    out = tmp_path / "out.file"
    with pytest.raises(UsageError, match=match):
        concat([str(f) for f in files], str(out), "time", client=client, **kw)
    assert not out.exists() and [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_overlap_is_refused_naming_the_file(client, tmp_path):
    _refused(client, tmp_path, [make(tmp_path / "a.nc", 0, 5), make(tmp_path / "b.nc", 4, 3)],
             r"b\.nc: coordinate /time values from 4\.0 overlap .*a\.nc")


def test_gap_is_refused_unless_allowed(client, tmp_path):
    files = [make(tmp_path / "a.nc", 0, 3), make(tmp_path / "b.nc", 3, 3), make(tmp_path / "c.nc", 9, 3)]
    _refused(client, tmp_path, files, r"c\.nc: gap in coordinate /time before it")
    stats = concat([str(f) for f in files], str(tmp_path / "ok.file"), "time", client=client, allow_gaps=True)
    assert stats.records == 9


@pytest.mark.parametrize("change,match", [
    (dict(dtype="f8"), r"b\.nc: differs from .*a\.nc: /v: type double in the first file, float in the new file"
                       r"|b\.nc: differs from .*a\.nc: /v: type float in the first file, double in the new file"),
    (dict(units="hours"), r"b\.nc: differs from .*a\.nc: /time: attributes differ"),
    (dict(nx=4), r"b\.nc: differs from .*a\.nc: /x: size 3 in the first file, 4 in the new file"),
])
def test_mismatched_files_are_refused(client, tmp_path, change, match):
    _refused(client, tmp_path, [make(tmp_path / "a.nc", 0, 5), make(tmp_path / "b.nc", 5, 3, **change)], match)



def test_three_differences_are_named_as_the_first_and_two_more(client, tmp_path):
    """A file that differs from the first in three ways (/x's size, /v's type and so its _FillValue attribute's) is
    refused with the first difference and the count of the others, as a single-file append words it: "(and 2 more)"."""
    files = [make(tmp_path / "a.nc", 0, 5), make(tmp_path / "b.nc", 5, 3, dtype="f8", nx=4)]
    _refused(client, tmp_path, files,
             r"b\.nc: differs from .*a\.nc: /x: size 3 in the first file, 4 in the new file \(and 2 more\)$")

def test_values_of_a_variable_without_the_dimension_must_agree(client, tmp_path):
    import netCDF4

    b = make(tmp_path / "b.nc", 5, 3)
    with netCDF4.Dataset(str(b), "a") as nc:
        nc["x"][0] = 99
    _refused(client, tmp_path, [make(tmp_path / "a.nc", 0, 5), b],
             r"b\.nc: /x does not use /time but its values differ from .*a\.nc")


def test_chunking_mismatch_is_refused(client, tmp_path):
    import netCDF4

    b = tmp_path / "b.nc"
    with netCDF4.Dataset(str(b), "w") as nc:  # as make() but v chunked (2, 3)
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        nc.title = "series"
        t = nc.createVariable("time", "f8", ("time",), chunksizes=(4,))
        t.units = "days"
        x = nc.createVariable("x", "i4", ("x",))
        x[:] = np.arange(3) * 10
        v = nc.createVariable("v", "f4", ("time", "x"), chunksizes=(2, 3), zlib=True, shuffle=True, fill_value=-1)
        t[:] = [5.0]
        v[:] = np.zeros((1, 3), "f4")
        g = nc.createGroup("g")
        w = g.createVariable("w", "i2", ("time",), chunksizes=(3,))
        w[:] = [5]
    _refused(client, tmp_path, [make(tmp_path / "a.nc", 0, 5), b], r"b\.nc: differs from .*a\.nc: /v: chunks")


@pytest.mark.parametrize("kw,dtype,zmetadata", [({}, ">S1", False), ({"char_as": "S1"}, "|S1", True),
                                                 ({"char_as": "S1", "consolidate": False}, "|S1", False)])
def test_concat_takes_the_writers_layout_options(client, tmp_path, kw, dtype, zmetadata):
    """--char-as and --(no-)consolidate mean for --concat what they mean for one file: the store equals the
    conversion, with those options, of one file holding both days."""
    import netCDF4

    def day_file(path: Path, days: list[int]) -> Path:
        with netCDF4.Dataset(str(path), "w") as nc:
            nc.createDimension("time", None)
            nc.createDimension("n", 2)
            nc.createVariable("time", "f8", ("time",))[:] = days
            nc.createVariable("c", "S1", ("time", "n"), chunksizes=(1, 2))[:] = np.array([[b"a", b"b"]] * len(days))
        return path

    files = [day_file(tmp_path / f"d{day}.nc", [day]) for day in range(2)]
    ref = tmp_path / "ref.file"
    convert(str(day_file(tmp_path / "both.nc.src", [0, 1])), str(ref), **kw)
    out = tmp_path / "out.file"
    concat([str(p) for p in files], str(out), "time", client=client, **kw)
    assert json.loads((out / "c" / ".zarray").read_text())["dtype"] == dtype
    assert (out / ".zmetadata").exists() is zmetadata is (ref / ".zmetadata").exists()
    assert diff(open_dataset(str(ref)), open_dataset(str(out))) == []


def test_a_string_coordinate_is_refused_in_one_line(tmp_path):
    """Files ordered by a string coordinate have no numeric order to keep: refused before any write
    (was an "unexpected error" line asking for a bug report)."""
    import netCDF4

    for name, label in (("a.nc", "jan"), ("b.nc", "feb")):
        with netCDF4.Dataset(str(tmp_path / name), "w") as nc:
            nc.createDimension("time", None)
            nc.createVariable("time", str, ("time",))[0] = label
            nc.createVariable("v", "f4", ("time",))[0] = 1.0
    proc = cli("--concat", "time", "--workers", "1", str(tmp_path / "*.nc"), str(tmp_path / "out.file"))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    assert err.strip().splitlines() == [f"nc2nczarr: {tmp_path / 'a.nc'}: coordinate /time holds text, not numbers; "
                                        "--concat and --append order records by numeric coordinate values"]
    assert not (tmp_path / "out.file").exists()


def cli(*args: str, **kw) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "nczarr_conformance.cli.convert", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)


def test_cli_refusal_is_one_line_exit_2(tmp_path):
    make(tmp_path / "a.nc", 0, 5)
    make(tmp_path / "b.nc", 2, 5)
    proc = cli("--concat", "time", "--workers", "1", str(tmp_path / "*.nc"), str(tmp_path / "out.zip"))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "b.nc: coordinate /time values from 2.0 overlap" in err
    assert not (tmp_path / "out.zip").exists()


# ---- interrupts: the client killed mid-run leaves no readable store -----------------------------------
@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """60 files of 4 records, 100 chunks each (6000 in all: a run signalled at its 20th chunk is far from done,
    on 2 workers or here, with --no-direct-copy)."""
    d = tmp_path_factory.mktemp("many")
    for i in range(60):
        make(d / f"f{i:03d}.nc", 4 * i, 4, nx=200)
    return d


def aside(parent: Path) -> list[Path]:
    return sorted(p for p in parent.iterdir() if p.name.startswith("."))


def chunk_files(parent: Path) -> int:
    return sum(len(files) for p in aside(parent) if p.is_dir() for _, _, files in os.walk(p))


def wait_for(cond, proc, timeout: float = 120, every: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"finished before the signal: {proc.returncode} {proc.stderr.read()}"
        assert time.monotonic() < deadline, "never reached the point"
        time.sleep(every)


def readable(url: str) -> bool:
    try:
        open_dataset(url)
    except Exception:
        return False
    return True


@pytest.mark.parametrize("workers", ["2", "1"], ids=["cluster", "in-process"])
@pytest.mark.parametrize("kind", ["file", "zip"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_interrupted_concat_leaves_no_readable_store(many, tmp_path, kind, sig, workers):
    out = tmp_path / f"out.{kind}"
    proc = cli("-q", "--no-direct-copy", "--concat", "time", "--workers", workers, str(many / "*.nc"), str(out))
    try:
        wait_for(lambda: chunk_files(tmp_path) >= 20, proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        assert not out.exists() and not readable(str(out))
        if sig == signal.SIGINT:
            assert proc.returncode == 130, err
            assert len(err.strip().splitlines()) == 1 and "interrupted" in err and "Traceback" not in err, err
            assert aside(tmp_path) == []  # the tree built aside is removed (after the workers stopped)
        else:
            assert proc.returncode == -signal.SIGKILL
            left = safety.find_leftovers(out)
            assert left and all(str(proc.pid) in p.name for p in left)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # orphaned workers of a killed client
    if sig == signal.SIGKILL:
        time.sleep(0.5)
        again = cli("-q", "--concat", "time", "--workers", "1", str(many / "f00[0-2].nc"), str(out))
        _, err = again.communicate(timeout=120)
        assert again.returncode == 0, err
        assert safety.find_leftovers(out) == [] and readable(str(out))


# ---- --append of several files: the same machinery against an existing store ---------------------------
@pytest.mark.parametrize("kind", ["file", "zip", "s3"])
def test_append_of_several_files_equals_the_sequential_append(client, archive, tmp_path, kind):
    import boto3

    _d, files, ref = archive
    if kind == "s3":
        bucket = f"append-many-{os.getpid()}"
        boto3.client("s3").create_bucket(Bucket=bucket)
        out = f"s3://{bucket}/ds#mode=nczarr,s3"
    else:
        out = str(tmp_path / f"out.{kind}")
    convert(str(files[0]), out)
    stats = concat([str(files[2]), str(files[1])], out, "time", client=client, append=True)  # given out of order
    assert stats.records == 9
    assert diff(open_dataset(str(ref)), open_dataset(out)) == []
    if kind != "s3":
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"out.{kind}"]


def test_append_of_several_files_refuses_records_already_there(client, archive, tmp_path):
    from tests.test_append import snapshot

    _d, files, _ref = archive
    out = tmp_path / "out.file"
    convert(str(files[0]), str(out))
    append(str(files[1]), str(out), "time")
    before = snapshot(out)
    with pytest.raises(UsageError, match=r"a_second\.nc: coordinate /time values \[5\.0, 6\.0, 7\.0\]… are already"):
        concat([str(files[1]), str(files[2])], str(out), "time", client=client, append=True)
    assert snapshot(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out.file"]



def test_append_of_several_files_names_three_differences_from_the_store_as_the_first_and_two_more(client, tmp_path):
    """New files that agree with each other but differ from the store in three ways (/x's size, /v's type and its
    _FillValue's): refused naming the first difference and "(and 2 more)", nothing written."""
    from tests.test_append import snapshot

    store = tmp_path / "s.file"
    convert(str(make(tmp_path / "a.nc", 0, 5)), str(store))
    before = snapshot(store)
    new = [make(tmp_path / f"{n}.nc", t0, 3, dtype="f8", nx=4) for n, t0 in (("b", 5), ("c", 8))]
    with pytest.raises(UsageError) as refused:
        concat([str(f) for f in new], str(store), "time", client=client, append=True)
    assert str(refused.value) == f"cannot append {new[0]}: /x: size 3 in the store, 4 in the new file (and 2 more)"
    assert snapshot(store) == before


def test_append_of_several_files_takes_their_strings_within_the_stores_width(client, tmp_path):
    """A string variable along the dimension: the new files' strings go in when they fit the store's width (its
    |S128), as a single-file append takes them; the values read back are the files' own."""
    import netCDF4

    def days(path: Path, t0: int, words: list[str]) -> Path:
        with netCDF4.Dataset(str(path), "w") as nc:
            nc.createDimension("time", None)
            nc.createVariable("time", "f8", ("time",))[:] = np.arange(t0, t0 + len(words), dtype="f8")
            s = nc.createVariable("s", str, ("time",))
            for i, word in enumerate(words):
                s[i] = word
        return path

    store = tmp_path / "s.file"
    convert(str(days(tmp_path / "a.nc", 0, ["alpha", "beta"])), str(store))
    assert json.loads((store / "s" / ".zarray").read_text())["dtype"] == "|S128"
    new = [days(tmp_path / "b.nc", 2, ["gamma"]), days(tmp_path / "c.nc", 3, ["delta", "épsilon"])]
    stats = concat([str(f) for f in new], str(store), "time", client=client, append=True)
    assert stats.records == 3
    values = open_dataset(str(store)).root.variables["s"].data
    assert [str(v) for v in np.asarray(values).tolist()] == ["alpha", "beta", "gamma", "delta", "épsilon"]

def test_cli_append_of_several_files(archive, tmp_path):
    _d, files, ref = archive
    out = tmp_path / "out.zip"
    convert(str(files[0]), str(out))
    proc = cli("--append", "time", "--workers", "1", str(files[1]), str(files[2]), str(out))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "2 files, 9 records appended along time" in err, err
    assert diff(open_dataset(str(ref)), open_dataset(str(out))) == []


@pytest.mark.s3
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_interrupted_concat_to_s3_never_reads_as_a_dataset(tmp_path, moto_server, sig):
    import boto3

    s3 = boto3.client("s3")
    bucket = f"concat-int-{sig}-{os.getpid()}"
    s3.create_bucket(Bucket=bucket)
    url = f"s3://{bucket}/ds#mode=nczarr,s3"

    def names() -> list[str]:
        return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]

    for i in range(30):  # 100 chunks a file: a few thousand PUTs in all, slow enough to interrupt
        make(tmp_path / f"f{i:03d}.nc", 4 * i, 4, nx=200)
    proc = cli("-q", "--no-direct-copy", "--concat", "time", "--workers", "2", str(tmp_path / "*.nc"), url)
    try:
        wait_for(lambda: len(names()) >= 20, proc, every=0.05)  # a listing costs this process and moto ~5 ms
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    left = names()
    assert "ds/.zgroup" not in left and "ds/.zattrs" not in left and not readable(url)
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "Traceback" not in err, err
        assert left == []  # every chunk a worker put, and the marker, removed
    else:
        assert "ds/.nczarr-partial" in left
        again = cli("-q", "--concat", "time", "--workers", "1", str(tmp_path / "f000.nc"), url)
        _, err = again.communicate(timeout=120)
        assert again.returncode == 0, err  # the dead writer's leftovers are removed, no --overwrite needed
        assert readable(url) and "ds/.nczarr-partial" not in names()


def test_existing_output_is_refused_before_a_cluster_starts(archive, tmp_path):
    from nczarr_conformance.errors import StoreError

    _d, files, _ref = archive
    out = tmp_path / "out.file"
    out.mkdir()
    with pytest.raises(StoreError, match="exists"):
        concat([str(f) for f in files], str(out), "time", scheduler="tcp://127.0.0.1:1")  # never reached


# ---- one coordinate rule set: a multi-file --append refuses what a single-file one does -------------------
@pytest.mark.parametrize("times,cause", [
    ([10, float("nan"), 12], "coordinate /time holds NaN (at index 1)"),
    ([10, 12, 11], "coordinate /time is not increasing (index 2: 11.0 after 12.0)"),
    ([0, 1, 2, 3, 4], "coordinate /time values from 0.0 are not after the store's last value 9.0"),
    ([20, 21, 22], "gap in coordinate /time before it (9.0 in the store, then 20.0"),
], ids=["nan", "decreasing", "earlier-records", "gap"])
def test_multi_file_append_refuses_what_a_single_file_append_does(client, tmp_path, times, cause):
    """The same cases as tests/test_append.py's single-file ones, through --append of several files: the same
    shared rule (append.check_coordinates), the same line."""
    from tests.test_append import snapshot, with_times

    store = tmp_path / "s.file"
    convert(str(make(tmp_path / "a.nc", 5, 5)), str(store))
    before = snapshot(store)
    new = with_times(tmp_path / "new.nc", times)
    later = make(tmp_path / "later.nc", 40, 2)
    with pytest.raises(UsageError) as refused:
        concat([str(new), str(later)], str(store), "time", client=client, append=True)
    assert str(refused.value).startswith(f"{new}: {cause}"), refused.value
    assert snapshot(store) == before


# ---- inputs that change between the checks and the writes (issue 20, item 2) -------------------------------
def _aligned(d: Path) -> list[Path]:
    """Three files of 4 records on 4-record chunks: each file's task copies whole chunk rows of its own."""
    return [make(d / "a.nc", 0, 4), make(d / "b.nc", 4, 4), make(d / "c.nc", 8, 4)]


def _after_planning(monkeypatch, action) -> None:
    """Run ``action`` once the client has planned the tasks, before any worker reads a file for them."""
    import nczarr_conformance.conversion.concat as concatenating

    real = concatenating.plan_tasks

    def planned_then_changed(*args, **kw):
        tasks = real(*args, **kw)
        action()
        return tasks

    monkeypatch.setattr(concatenating, "plan_tasks", planned_then_changed)


def _outcome(out: str, run) -> str:
    """'refused: …' or what the store holds after an exit 0 (time order of v's first column, chunk keys)."""
    from nczarr_conformance.errors import StoreError

    try:
        run()
    except StoreError as exc:
        return f"refused: {exc}"
    values = np.asarray(open_dataset(out).root.variables["v"].data)[:, 0].tolist()
    return f"exit 0: v[:, 0] = {values}, v chunks {sorted(p.name for p in (Path(out) / 'v').iterdir())}"


@pytest.mark.parametrize("mode", ["concat", "append"])
def test_a_file_replaced_after_the_checks_is_refused(client, tmp_path, monkeypatch, mode):
    """b.nc replaced (by rename) with a longer file once the plan is made: b's task wrote b's new records over
    c.nc's rows (exit 0, rows 8-11 held the wrong file's values). Now refused naming b.nc, nothing committed."""
    import os

    from tests.test_append import snapshot

    a, b, c = _aligned(tmp_path)
    impostor = make(tmp_path / "b-new.nc.src", 4, 8)
    import netCDF4

    with netCDF4.Dataset(str(impostor), "a") as nc:
        nc["v"][:] = -7
    out = tmp_path / "out.file"
    if mode == "append":
        convert(str(a), str(out))
    before = snapshot(out) if mode == "append" else None
    _after_planning(monkeypatch, lambda: os.replace(impostor, b))
    files = [str(b), str(c)] if mode == "append" else [str(a), str(b), str(c)]
    outcome = _outcome(str(out), lambda: concat(files, str(out), "time", client=client, append=mode == "append"))
    assert outcome.startswith(f"refused: {b}: changed since it was checked ("), outcome
    assert (snapshot(out) == before) if mode == "append" else not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("mode", ["concat", "append"])
def test_a_file_growing_during_the_run_is_refused(client, tmp_path, monkeypatch, mode):
    """c.nc, the last file, gains 4 records (netCDF4-python, mode 'a') once the plan is made: its task wrote a
    chunk row past the planned shape (v/3.*, outside the plan) and exit 0. Now refused naming c.nc."""
    import netCDF4

    from tests.test_append import snapshot

    a, b, c = _aligned(tmp_path)

    def grow() -> None:
        with netCDF4.Dataset(str(c), "a") as nc:
            nc["time"][4:8] = np.arange(12, 16)
            nc["v"][4:8] = -5

    out = tmp_path / "out.file"
    if mode == "append":
        convert(str(a), str(out))
    before = snapshot(out) if mode == "append" else None
    _after_planning(monkeypatch, grow)
    files = [str(b), str(c)] if mode == "append" else [str(a), str(b), str(c)]
    outcome = _outcome(str(out), lambda: concat(files, str(out), "time", client=client, append=mode == "append"))
    assert outcome.startswith(f"refused: {c}: changed since it was checked ("), outcome
    assert (snapshot(out) == before) if mode == "append" else not out.exists()


def test_a_task_never_writes_outside_its_plan(tmp_path):
    """The guard itself, whatever the inputs say: a put of a chunk row another task owns, or past the planned
    shape, is refused by the task (the stamps catch a changed file first; this holds if they cannot)."""
    from nczarr_conformance.conversion.concat import (
        _pieces,
        _plan_target,
        describe,
        order_and_check,
        plan_tasks,
    )
    from nczarr_conformance.stores.part import PartSpec

    ordered = order_and_check([describe(str(p), "time") for p in _aligned(tmp_path)])
    plans = _plan_target(ordered[0], 12, "nczarr-4.10", True).plans
    along = {k: p.var.dimensions.index("/time") for k, p in plans.items() if "/time" in p.var.dimensions}
    tasks = plan_tasks(_pieces(ordered, 0), "/time", 12, plans, along, PartSpec("file", str(tmp_path)),
                       flavor="nczarr-4.10", xarray=True, direct=False)
    b_task = next(t for t in tasks if t.path == str(tmp_path / "b.nc"))
    rows = b_task.rows()
    assert rows["/v"] == {1} and b_task.may_write("/v/1.0", rows) and b_task.may_write("/v/1.1", rows)
    assert not b_task.may_write("/v/2.0", rows)  # c.nc's row
    assert not b_task.may_write("/v/3.0", rows)  # past the planned 12 records
    assert not b_task.may_write("/x/0", rows)  # a variable without the dimension: the first file's task writes it
    assert not b_task.may_write("/v/1.5", rows) and not b_task.may_write("/v/.zarray", rows)


def test_chunks_copied_file_to_file_go_through_the_tasks_guard(tmp_path):
    """Issue #26: a copied HDF5 chunk reaches the tree by Store.put_extent (copy_file_range), not put; the
    task's guard and its list of written keys (what an abort removes) must see it all the same."""
    from nczarr_conformance.conversion.concat import (
        _pieces,
        _plan_target,
        describe,
        order_and_check,
        plan_tasks,
        run_task,
    )
    from nczarr_conformance.stores.part import PartSpec

    ordered = order_and_check([describe(str(p), "time") for p in _aligned(tmp_path)])
    plans = _plan_target(ordered[0], 12, "nczarr-4.10", True).plans
    along = {k: p.var.dimensions.index("/time") for k, p in plans.items() if "/time" in p.var.dimensions}
    (tmp_path / "tree").mkdir()
    tasks = plan_tasks(_pieces(ordered, 0), "/time", 12, plans, along, PartSpec("file", str(tmp_path / "tree")),
                       flavor="nczarr-4.10", xarray=True, direct=True)
    b_task = next(t for t in tasks if t.path == str(tmp_path / "b.nc"))
    _, copied, put = run_task(b_task)
    on_disk = {"/" + p.relative_to(tmp_path / "tree").as_posix() for p in (tmp_path / "tree").rglob("*") if p.is_file()}
    assert copied > 0 and "/v/1.0" in on_disk
    assert sorted(put) == sorted(on_disk)  # every file the task wrote, copied ones included, is on its list
    b_task.may_write = lambda key, rows: not key.startswith("/v/")  # type: ignore[method-assign]
    (tmp_path / "tree2").mkdir()
    b_task.part = PartSpec("file", str(tmp_path / "tree2"))
    with pytest.raises(StoreError, match=r"b\.nc: would write v/1\.0, outside the chunks planned for it"):
        run_task(b_task)


def test_a_worker_compares_an_inputs_stamp_without_its_device_number(tmp_path):
    """append.Stamp: workers on other hosts may see another device number for the same shared file, so a task
    compares size, mtime and inode only. A task whose stamps carry another device runs; another inode (a file
    replaced) is refused before a chunk is put."""
    import dataclasses

    from nczarr_conformance.conversion.append import InputChanged
    from nczarr_conformance.conversion.concat import (
        _pieces,
        _plan_target,
        describe,
        order_and_check,
        plan_tasks,
        run_task,
    )
    from nczarr_conformance.stores.part import PartSpec

    ordered = order_and_check([describe(str(p), "time") for p in _aligned(tmp_path)])

    def first_task(name: str, **seen_elsewhere: int):
        infos = [dataclasses.replace(i, stamp=dataclasses.replace(
            i.stamp, **{k: getattr(i.stamp, k) + v for k, v in seen_elsewhere.items()})) for i in ordered]
        plans = _plan_target(infos[0], 12, "nczarr-4.10", True).plans
        along = {k: p.var.dimensions.index("/time") for k, p in plans.items() if "/time" in p.var.dimensions}
        (tmp_path / name).mkdir()
        tasks = plan_tasks(_pieces(infos, 0), "/time", 12, plans, along, PartSpec("file", str(tmp_path / name)),
                           flavor="nczarr-4.10", xarray=True, direct=False)
        return next(t for t in tasks if t.path == str(tmp_path / "a.nc"))

    chunks, _, put = run_task(first_task("other-device", device=1))
    assert chunks > 0 and "/v/0.0" in put
    with pytest.raises(InputChanged, match=r"a.nc: changed since it was checked \(replaced by another file\)"):
        run_task(first_task("other-inode", inode=1))
    assert [p for p in (tmp_path / "other-inode").rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("kind", ["file", "zip"])
def test_cli_refuses_a_file_that_grows_during_a_real_run(tmp_path, kind):
    """No hook: a real run on one slow worker, and the last file (in time order) gains records with
    netCDF4-python ('a' mode) once chunks are being written. One try per store kind, each must hold: exit 2,
    one line naming the file, the target absent, nothing left beside it. (The writer retries while a worker
    holds the file open: HDF5's file lock lets no writer in while a reader has it.)"""
    import netCDF4

    for i in range(5):
        make(tmp_path / f"f{i}.nc", 4 * i, 4, nx=800)  # 400 chunks a file: 1950 still to write at the 50th
    last = tmp_path / "f4.nc"
    work = tmp_path / "work"
    work.mkdir()
    out = work / f"out.{kind}"
    proc = cli("--no-direct-copy", "--concat", "time", "--workers", "1", str(tmp_path / "f*.nc"), str(out))
    try:
        wait_for(lambda: chunk_files(work) >= 50, proc)
        for _ in range(200):
            try:
                with netCDF4.Dataset(str(last), "a") as nc:
                    nc["time"][4:6] = [20.0, 21.0]
                    nc["v"][4:6] = -5
                break
            except OSError:  # a worker has it open for reading
                time.sleep(0.01)
        else:
            pytest.fail("the file never got free to append to")
        assert proc.poll() is None, "the run ended before the file grew: the try proves nothing"
        _, err = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nc2nczarr: {last}: changed since it was checked ("), err
    assert list(work.iterdir()) == []


# ---- batches of files per task, and the in-process path (issue 26, "Many files") ---------------------------
@pytest.fixture(scope="module")
def uneven(tmp_path_factory):
    """Seven files of 5, 6, 3, 4, 2, 7 and 1 records on 4-record chunks (most start mid-chunk: chunk rows span two
    or three files), and the store the sequential convert + --append loop makes of them."""
    d = tmp_path_factory.mktemp("uneven")
    files, t0 = [], 0
    for i, n in enumerate([5, 6, 3, 4, 2, 7, 1]):
        files.append(make(d / f"u{i}.nc", t0, n, nx=5))
        t0 += n
    ref = d.parent / "uneven-ref.file"
    convert(str(files[0]), str(ref))
    for f in files[1:]:
        append(str(f), str(ref), "time")
    return files, ref


def _cuts(monkeypatch) -> list[list[int]]:
    """Batches of about two files each on the cluster, recorded as their sizes (one list per runner.each call)."""
    import nczarr_conformance.conversion.concat as concatenating

    seen: list[list[int]] = []
    real = concatenating.batches

    def recorded(items, sizes, *, target, least):
        out = real(items, sizes, target=target, least=least)
        seen.append([len(b) for b in out])
        return out

    monkeypatch.setattr(concatenating, "batches", recorded)
    monkeypatch.setattr(concatenating, "TASKS_PER_WORKER", 0)  # batches by bytes alone
    return seen


def test_batch_boundaries_inside_the_file_list_give_the_sequential_append(client, uneven, tmp_path, monkeypatch):
    """Files described and written several to a task, the cuts falling between files whose chunk rows straddle:
    the store is the one the sequential append makes (canonical model with storage)."""
    files, ref = uneven
    import nczarr_conformance.conversion.concat as concatenating

    monkeypatch.setattr(concatenating, "BATCH_BYTES", 2 * files[0].stat().st_size)
    seen = _cuts(monkeypatch)
    out = tmp_path / "out.file"
    stats = concat([str(f) for f in reversed(files)], str(out), "time", client=client)
    assert stats.files == 7 and stats.records == 28
    described, written = seen
    assert sum(described) == 7 and len(described) >= 3 and max(described) >= 2  # several files per task
    assert len(written) >= 3 and max(written) >= 2
    assert diff(open_dataset(str(ref)), open_dataset(str(out))) == []


def test_the_in_process_path_writes_the_same_objects_as_the_cluster(client, uneven, tmp_path, monkeypatch):
    """--workers 1 runs the same task functions in this process, no cluster started: every object it writes is
    byte for byte the cluster's (batched) run's, and both are the sequential append's store."""
    from nczarr_conformance.conversion import cluster
    from tests.test_append import snapshot

    files, ref = uneven
    inputs = [str(f) for f in files]
    on_cluster = tmp_path / "cluster.file"
    concat(inputs, str(on_cluster), "time", client=client)

    def no_cluster(*args, **kw):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(cluster, "open_client", no_cluster)
    here = tmp_path / "here.file"
    stats = concat(inputs, str(here), "time", workers=1)
    assert stats.files == 7 and stats.records == 28
    ours, theirs = snapshot(here), snapshot(on_cluster)
    assert sorted(ours) == sorted(theirs) and len([k for k in ours if "/" in k and ".z" not in k]) > 7
    assert [k for k in ours if ours[k] != theirs[k]] == []
    assert diff(open_dataset(str(ref)), open_dataset(str(here))) == []


@pytest.mark.parametrize(("workers", "scheduler", "cluster_started"),
                         [(None, None, False), (1, None, False), (2, None, True), (None, "tcp://x:1", True)])
def test_small_work_runs_in_process_and_an_explicit_cluster_is_obeyed(uneven, tmp_path, monkeypatch, workers,
                                                                       scheduler, cluster_started):
    """Less input than IN_PROCESS_BYTES and no --workers/--scheduler, or --workers 1: no cluster; --workers 2 or
    --scheduler: the cluster asked for."""
    from nczarr_conformance.conversion import cluster

    class Started(Exception):
        pass

    def open_client(*args, **kw):
        raise Started

    monkeypatch.setattr(cluster, "open_client", open_client)
    files, _ = uneven
    run = lambda: concat([str(f) for f in files], str(tmp_path / "out.file"), "time",  # noqa: E731
                         workers=workers, scheduler=scheduler)
    if cluster_started:
        with pytest.raises(Started):
            run()
    else:
        assert run().records == 28


@pytest.mark.parametrize("dask_installed", [True, False])
def test_many_small_files_run_on_a_cluster_unless_dask_is_missing(uneven, tmp_path, monkeypatch, dask_installed):
    """IN_PROCESS_FILES files or more start a cluster by default, however small (one process pays ~30 ms a file
    that workers share: docs/speed.md); fewer stay here. Without dask.distributed (an optional extra) the
    default runs in this process whatever the work: only --workers N and --scheduler ask for the extra."""
    import importlib.util

    from nczarr_conformance.conversion import cluster
    from nczarr_conformance.conversion import concat as concat_module

    class Started(Exception):
        pass

    def open_client(*args, **kw):
        raise Started

    monkeypatch.setattr(cluster, "open_client", open_client)
    if not dask_installed:
        found = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *a: None if name == "distributed" else found(name, *a))
    files, _ = uneven
    out = tmp_path / "out.file"
    run = lambda: concat([str(f) for f in files], str(out), "time", overwrite=True)  # noqa: E731
    monkeypatch.setattr(concat_module, "IN_PROCESS_FILES", len(files) + 1)
    assert run().records == 28  # one file fewer than the limit
    monkeypatch.setattr(concat_module, "IN_PROCESS_FILES", len(files))
    if dask_installed:
        with pytest.raises(Started):
            run()
    else:
        assert run().records == 28
        with pytest.raises(Started):  # asked for by name: the cluster (whose start says the extra is missing)
            concat([str(f) for f in files], str(out), "time", overwrite=True, workers=2)


@pytest.mark.parametrize("runner", ["cluster", "in-process"])
@pytest.mark.parametrize("change", ["replace-b", "grow-c"])
def test_a_file_changed_after_the_checks_is_refused_inside_a_batch(client, tmp_path, monkeypatch, runner, change):
    """All three files in one task (the cluster's batch) or one after the other in this process, b.nc replaced or
    c.nc grown once the plan is made: refused naming that file, nothing committed, nothing left aside."""
    import netCDF4

    a, b, c = _aligned(tmp_path)
    seen = _cuts(monkeypatch)
    impostor = make(tmp_path / "b-new.nc.src", 4, 8)

    def act() -> None:
        if change == "replace-b":
            os.replace(impostor, b)
        else:
            with netCDF4.Dataset(str(c), "a") as nc:
                nc["time"][4:8] = np.arange(12, 16)
                nc["v"][4:8] = -5

    _after_planning(monkeypatch, act)
    out = tmp_path / "out.file"
    kw = {"client": client} if runner == "cluster" else {"workers": 1}
    outcome = _outcome(str(out), lambda: concat([str(a), str(b), str(c)], str(out), "time", **kw))
    named = b if change == "replace-b" else c
    assert outcome.startswith(f"refused: {named}: changed since it was checked ("), outcome
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    if runner == "cluster":
        assert seen[0] == [3] and len(seen[1]) == 1  # one batch: described together, written together (3 files,
        # and the chunk rows of /g/w that span two of them)


def test_batches_cut_by_bytes_keep_every_item_once_in_order():
    """batches(): consecutive, every item once, the count ceil(total / target) but at least ``least`` (at most one
    per item), no batch over the target by more than one item."""
    from nczarr_conformance.conversion.concat import batches

    sizes = [10, 30, 5, 5, 40, 10, 10, 20, 1, 9]
    items = list(range(len(sizes)))
    for target, least, count in [(40, 1, 4), (1000, 1, 1), (1000, 3, 3), (1, 1, 10), (1000, 50, 10)]:
        out = batches(items, sizes, target=target, least=least)
        assert [i for b in out for i in b] == items and all(out), (target, least, out)
        assert len(out) == count, (target, least, out)
        for b in out:
            assert len(b) == 1 or sum(sizes[i] for i in b[:-1]) < max(target, sum(sizes) / count), (target, out)
    assert batches([], [], target=10, least=2) == []


@pytest.mark.parametrize("flag", ["--progress", None])
def test_cli_progress_counts_files_and_bytes_only_when_asked_off_a_terminal(uneven, tmp_path, flag):
    """--progress: a bar for the checks then one for the writes, each ending at every file and every byte (the
    sizes from os.stat); stderr not a terminal and no --progress: the summary line alone."""
    from tqdm import tqdm

    files, _ = uneven
    total = sum(f.stat().st_size for f in files)
    proc = cli(*([flag] if flag else []), "--concat", "time", *map(str, files), str(tmp_path / "out.file"))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    lines = [part for line in err.splitlines() for part in line.split("\r") if part.strip()]
    summary = "nc2nczarr: 7 files, 28 records along time"
    if flag is None:
        assert len(lines) == 1 and lines[0].startswith(summary), err
        return
    assert lines[-1].startswith(summary)
    for phase in ("checked", "written"):
        last = [line for line in lines if line.startswith(f"nc2nczarr: {phase}:")][-1]
        assert "100%" in last and "7/7 files" in last, last
        shown = tqdm.format_sizeof(total, divisor=1024)  # how tqdm writes the byte total
        assert f"| {shown}/{shown} [" in last, (total, last)


def _daily(d: Path, n: int = 6) -> list[Path]:
    """n files of one record, v chunked 1×4 with zlib: each file's v chunk is copied as stored."""
    import netCDF4

    files = []
    for day in range(n):
        path = d / f"day{day}.nc"
        with netCDF4.Dataset(str(path), "w") as nc:
            nc.createDimension("time", None)
            nc.createDimension("y", 4)
            nc.createVariable("time", "f8", ("time",))[:] = [day]
            v = nc.createVariable("v", "f4", ("time", "y"), chunksizes=(1, 4), zlib=True, complevel=1)
            v[:] = np.arange(4, dtype="f4")[None, :] + day
        files.append(path)
    return files


@pytest.mark.parametrize("sample", ["matches", "never-matches"])
def test_a_codec_chain_is_proven_once_in_process_and_a_failed_proof_proves_nothing(tmp_path, monkeypatch, sample):
    """In one in-process run, v's chain (deflate, f4, chunks 1×4) is decoded and compared with netCDF4 in the first
    file only; when that comparison fails, nothing is taken as proven: every file's v is re-encoded (none copied),
    each file tried again, and the store is still the sequential append's."""
    from nczarr_conformance.nczarr.writer import DatasetWriter

    files = _daily(tmp_path)
    ref = tmp_path / "ref.file"
    convert(str(files[0]), str(ref))
    for f in files[1:]:
        append(str(f), str(ref), "time")
    calls: list[str] = []
    real = DatasetWriter._sample_matches

    def counted(self, plan, *args, **kw):
        calls.append(plan.key)
        return real(self, plan, *args, **kw) if sample == "matches" else False

    monkeypatch.setattr(DatasetWriter, "_sample_matches", counted)
    out = tmp_path / "out.file"
    stats = concat([str(f) for f in files], str(out), "time", workers=1)
    assert calls.count("/v") == (1 if sample == "matches" else 6), calls
    assert stats.copied == (6 if sample == "matches" else 0)
    assert diff(open_dataset(str(ref)), open_dataset(str(out))) == []
