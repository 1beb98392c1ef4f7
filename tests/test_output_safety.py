"""Never lose a byte on write: what nc2nczarr may replace, temporary names, leftovers, refusals, messages.

Every test snapshots the whole temporary tree (bytes, symlink targets, mtimes) before and
after, so "nothing outside the target was touched" is checked, not assumed.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance import safety
from nczarr_conformance.conversion.from_netcdf import convert
from nczarr_conformance.errors import StoreError, UsageError
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.stores import DirectoryStore, ZipStore


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: kind, content (or link target), mtime — symlinks never followed."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = ("dir",)
            else:
                out[rel] = ("file", path.read_bytes(), st.st_mtime_ns)
    return out


def cli(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "-q", *args],
                          capture_output=True, text=True, timeout=120, **kw)


def one_line(result: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code, result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def make_nc(path: Path, t0: int = 0, n: int = 5, strings: list[str] | None = None) -> Path:
    import netCDF4

    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        t = nc.createVariable("time", "f8", ("time",), chunksizes=(4,))
        t[:] = np.arange(t0, t0 + n, dtype="f8")
        v = nc.createVariable("v", "f4", ("time", "x"), chunksizes=(4, 2), zlib=True)
        v[:] = np.arange(t0 * 3, (t0 + n) * 3, dtype="f4").reshape(n, 3)
        if strings is not None:
            s = nc.createVariable("label", str, ("time",), chunksizes=(4,))
            for i, text in enumerate(strings):
                s[i] = text
    return path


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# ---- outputs that hold, equal or sit inside the input ----------------------------------------
@pytest.mark.parametrize("how", ["plain", "symlink", "zip-url"])
def test_overwrite_of_a_directory_holding_the_input_is_refused(tmp_path, how):
    d = tmp_path / "d"
    d.mkdir()
    src = make_nc(d / "in.nc")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    out = {"plain": str(d), "symlink": str(tmp_path / "link"), "zip-url": f"file://{d}#mode=nczarr,zip"}[how]
    if how == "symlink":
        (tmp_path / "link").symlink_to(d)
    before = snapshot(tmp_path)
    one_line(cli("--overwrite", str(src), out), 2, "holds the input")
    assert snapshot(tmp_path) == before


def test_output_equal_to_the_input_through_a_symlink_is_refused(tmp_path):
    src = make_nc(tmp_path / "in.nc")
    (tmp_path / "alias.zip").symlink_to(src)
    before = snapshot(tmp_path)
    one_line(cli("--overwrite", str(src), f"file://{tmp_path / 'alias.zip'}#mode=nczarr,zip"), 2, "is the input")
    assert snapshot(tmp_path) == before


def test_overwrite_replaces_only_a_dataset(tmp_path):
    src = make_nc(tmp_path / "in.nc")
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("years of work")
    before = snapshot(tmp_path)
    one_line(cli("--overwrite", str(src), str(home)), 2, "thesis.tex", "not part of a Zarr dataset")
    zipped = tmp_path / "notes.zip"
    zipped.write_text("not a zip")
    before = snapshot(tmp_path)
    one_line(cli("--overwrite", str(src), str(zipped)), 2, "not a zip file")
    assert snapshot(tmp_path) == before
    # a dataset is replaced
    out = tmp_path / "out.file"
    assert cli(str(src), str(out)).returncode == 0
    assert cli("--overwrite", str(src), str(out)).returncode == 0
    assert (out / ".zgroup").is_file()


# ---- temporary names ---------------------------------------------------------------------------
def test_zip_writer_never_follows_a_planted_symlink(tmp_path, small):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    target = tmp_path / "out.zip"
    planted = [tmp_path / f".out.zip.partial-{os.getpid()}", tmp_path / f".out.zip.partial-{os.getpid()}-x"]
    for p in planted:
        p.symlink_to(victim)
    with ZipStore(target, "w") as store:
        write_dataset(small, store)
    assert victim.read_text() == "keep"
    assert target.is_file() and not target.is_symlink()
    assert all(p.is_symlink() for p in planted)  # a live writer's names (ours) are not removed


def test_directory_writer_never_follows_a_planted_symlink(tmp_path, small):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "f").write_text("keep")
    (tmp_path / f".out.file.partial-{os.getpid()}").symlink_to(victim)
    before = snapshot(victim)
    with DirectoryStore(tmp_path / "out.file", "w") as store:
        write_dataset(small, store)
    assert snapshot(victim) == before
    assert (tmp_path / "out.file" / ".zgroup").is_file() and not (tmp_path / "out.file").is_symlink()


def test_append_never_writes_through_a_planted_partial_file(tmp_path):
    store = tmp_path / "s.file"
    convert(str(make_nc(tmp_path / "a.nc")), str(store))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    for name in ("1.0", "1.1", "0.0"):
        (store / "v" / f"{name}.partial").symlink_to(victim)
    done = cli("--append", "time", str(make_nc(tmp_path / "b.nc", 5, 6)), str(store))
    # issue 39: a symbolic link inside the store is refused before anything is written (the aside tree it
    # would be copied into is then free of links), naming the first one
    assert (done.returncode, done.stderr) == (2, f"nc2nczarr: {store}/v/0.0.partial: 0.0.partial is a symbolic "
                                                 "link; objects must be regular files inside the store\n")
    assert victim.read_text() == "keep"


def test_temporary_names_are_random_and_private(tmp_path):
    a = safety.make_temp_dir(tmp_path / "out")
    b = safety.make_temp_dir(tmp_path / "out")
    assert a != b and a.name.startswith(f".out.partial-{os.getpid()}-")
    assert a.stat().st_mode & 0o077 == 0


# ---- leftovers of dead runs ----------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".file", ".zip"])
def test_dead_runs_leftovers_are_found_and_removed_by_the_next_run(tmp_path, suffix):
    src = make_nc(tmp_path / "in.nc")
    out = tmp_path / f"out{suffix}"
    dead = dead_pid()
    old_style = tmp_path / f".out{suffix}.partial-{dead}"
    old_style.mkdir()
    (old_style / "x").write_text("chunk")
    new_style = tmp_path / f".out{suffix}.partial-{dead}-k3j2"
    new_style.write_bytes(b"PK half a zip")
    live = tmp_path / f".out{suffix}.partial-{os.getpid()}-abcd"  # this test process is alive
    live.mkdir()
    other = tmp_path / f".other.partial-{dead}-zz"
    other.mkdir()
    assert sorted(safety.find_leftovers(out)) == sorted([old_style, new_style])
    assert cli(str(src), str(out)).returncode == 0
    assert not old_style.exists() and not new_style.exists()
    assert live.exists() and other.exists()
    assert safety.find_leftovers(out) == []


# ---- append: everything checked before the first byte, .zmetadata kept up to date --------------
def test_refused_append_of_too_long_strings_leaves_the_store_byte_identical(tmp_path):
    store = tmp_path / "s.file"
    convert(str(make_nc(tmp_path / "a.nc", strings=["a", "b", "c", "d", "e"])), str(store))
    maxstrlen = int(json.loads((store / "label" / ".zarray").read_text())["dtype"][2:])  # "|Sn": n bytes
    long = make_nc(tmp_path / "b.nc", 5, 6, strings=["f", "g", "h", "i", "j", "x" * (maxstrlen + 1)])
    before = snapshot(tmp_path)
    one_line(cli("--append", "time", str(long), str(store)), 2, "/label", f"longer than {maxstrlen} bytes")
    assert snapshot(tmp_path) == before


@pytest.mark.s3
def test_refused_append_on_s3_leaves_every_object_untouched(tmp_path, s3_bucket):
    import boto3

    url = f"s3://{s3_bucket}/s#mode=nczarr,s3"
    convert(str(make_nc(tmp_path / "a.nc", strings=["a", "b", "c", "d", "e"])), url)
    client = boto3.client("s3")

    def objects() -> dict[str, tuple]:
        listing = client.list_objects_v2(Bucket=s3_bucket).get("Contents", [])
        return {o["Key"]: (o["ETag"], o["LastModified"]) for o in listing}

    before = objects()
    long = make_nc(tmp_path / "b.nc", 5, 6, strings=["f", "g", "h", "i", "j", "x" * 200])
    one_line(cli("--append", "time", str(long), url), 2, "longer than")
    assert objects() == before


def test_append_updates_zmetadata(tmp_path):
    import xarray as xr
    import zarr

    from nczarr_conformance.checker import check

    store = tmp_path / "s.file"
    convert(str(make_nc(tmp_path / "a.nc")), str(store))
    assert (store / ".zmetadata").is_file()  # our default output is consolidated
    assert cli("--append", "time", str(make_nc(tmp_path / "b.nc", 5, 6)), str(store)).returncode == 0
    meta = json.loads((store / ".zmetadata").read_text())["metadata"]
    assert meta["v/.zarray"]["shape"] == [11, 3]
    assert [f for f in check(str(store)).findings if f.rule == "NCZ-CONSOLIDATED-MATCH"] == []
    # and one zarr-python consolidated (it rewrites what it parsed) is kept exact too
    other = tmp_path / "z.file"
    convert(str(make_nc(tmp_path / "a.nc")), str(other), consolidate=False)
    zarr.consolidate_metadata(str(other), zarr_format=2)
    assert cli("--append", "time", str(make_nc(tmp_path / "b.nc", 5, 6)), str(other)).returncode == 0
    assert json.loads((other / ".zmetadata").read_text())["metadata"]["v/.zarray"]["shape"] == [11, 3]
    assert [f for f in check(str(other)).findings if f.rule == "NCZ-CONSOLIDATED-MATCH"] == []
    dumped = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", "--json", str(store)],
                            capture_output=True, text=True, timeout=120)
    assert dumped.returncode == 0, dumped.stderr
    assert json.loads(dumped.stdout)["root"]["dimensions"]["time"]["size"] == 11
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with xr.open_zarr(str(store), consolidated=True) as ds:
            assert ds.sizes["time"] == 11
            assert ds["time"].values.tolist() == list(range(11))


def test_append_is_invisible_until_commit(tmp_path):
    store = tmp_path / "s.file"
    convert(str(make_nc(tmp_path / "a.nc")), str(store))
    before = snapshot(store)
    writer = DirectoryStore(store, "a")
    writer.put("/v/0.0", b"new bytes")
    assert snapshot(store) == before  # the old tree is never written: the new one is built aside
    writer.abort()
    assert snapshot(store) == before and safety.find_leftovers(store) == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# ---- S3: what --overwrite may delete, and refusals without it -------------------------------------
@pytest.mark.s3
def test_s3_overwrite_of_a_bucket_root_without_a_dataset_deletes_nothing(tmp_path, s3_bucket):
    import boto3

    client = boto3.client("s3")
    for key in ("photos/cat.jpg", "report.pdf", "other/ds/.zgroup"):
        client.put_object(Bucket=s3_bucket, Key=key, Body=b"precious")
    src = make_nc(tmp_path / "in.nc")
    one_line(cli("--overwrite", str(src), f"s3://{s3_bucket}#mode=nczarr,s3"), 2, "not part of a Zarr dataset")
    one_line(cli(str(src), f"s3://{s3_bucket}#mode=nczarr,s3"), 2, "--overwrite")
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket)["Contents"])
    assert keys == ["other/ds/.zgroup", "photos/cat.jpg", "report.pdf"]


@pytest.mark.s3
def test_s3_prefix_holding_any_object_is_refused_without_overwrite(tmp_path, s3_bucket):
    import boto3

    client = boto3.client("s3")
    client.put_object(Bucket=s3_bucket, Key="p/readme.txt", Body=b"mine")
    one_line(cli(str(make_nc(tmp_path / "in.nc")), f"s3://{s3_bucket}/p#mode=nczarr,s3"), 2, "s3://", "readme.txt")
    assert client.get_object(Bucket=s3_bucket, Key="p/readme.txt")["Body"].read() == b"mine"
    assert client.list_objects_v2(Bucket=s3_bucket)["KeyCount"] == 1


@pytest.mark.s3
def test_s3_overwrite_replaces_only_the_datasets_objects(tmp_path, s3_bucket):
    import boto3

    client = boto3.client("s3")
    url = f"s3://{s3_bucket}/p#mode=nczarr,s3"
    convert(str(make_nc(tmp_path / "a.nc", n=9)), url)
    client.put_object(Bucket=s3_bucket, Key="p2/keep", Body=b"neighbour")  # shares the prefix's first letter
    client.put_object(Bucket=s3_bucket, Key="p/v/extra.txt", Body=b"mine")
    one_line(cli("--overwrite", str(make_nc(tmp_path / "b.nc", n=3)), url), 2, "v/extra.txt")
    client.delete_object(Bucket=s3_bucket, Key="p/v/extra.txt")
    assert cli("--overwrite", str(make_nc(tmp_path / "b.nc", n=3)), url).returncode == 0
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket)["Contents"])
    assert "p2/keep" in keys and "p/v/2.0" not in keys  # the old dataset's third time chunk went
    assert "p/.nczarr-partial" not in keys
    from nczarr_conformance.access.dataset import open_dataset

    assert open_dataset(url).root.dimensions["time"].size == 3


@pytest.mark.s3
def test_s3_failed_put_is_the_message_not_the_cleanup(tmp_path, s3_bucket, moto_server, monkeypatch):
    """A chunk PUT is refused, and so is the cleanup's DeleteObjects: the PUT's failure is reported."""
    from tests.stores.faulty_s3 import Fault, FaultyS3

    proxy = FaultyS3(moto_server)  # a real HTTP server in front of moto, answering 403 to these
    proxy.faults = [Fault("PUT", r"/p/v/1\.0$", 403, "AccessDenied", times=99),
                    Fault("POST", rf"^{s3_bucket}$", 403, "AccessDenied", times=99, query="^delete")]
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    try:
        with pytest.raises(StoreError, match=r"access denied \(AccessDenied\) while trying to put /v/1\.0"):
            convert(str(make_nc(tmp_path / "a.nc", n=20)), f"s3://{s3_bucket}/p#mode=nczarr,s3", threads=1)
        assert proxy.requests("POST", 403)  # the cleanup was tried, and failed
    finally:
        proxy.close()


# ---- messages ------------------------------------------------------------------------------------
def test_disk_full_is_one_line_naming_the_output(tmp_path):
    import netCDF4

    src = tmp_path / "big.nc"
    with netCDF4.Dataset(str(src), "w") as nc:
        nc.createDimension("x", 1_000_000)
        nc.createVariable("v", "f8", ("x",), chunksizes=(250_000,))[:] = np.random.default_rng(0).random(1_000_000)
    out = tmp_path / "out.file"

    def limit() -> None:  # writes past 1 MiB fail with EFBIG, as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024**2, 1024**2))

    before = snapshot(tmp_path)
    line = one_line(cli(str(src), str(out), preexec_fn=limit), 2, str(out), "File too large")
    assert "cannot write v/" in line
    assert snapshot(tmp_path) == before


def test_overwrite_refusal_in_the_library_too(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    src = make_nc(d / "in.nc")
    with pytest.raises(UsageError):
        convert(str(src), str(d), overwrite=True)
    assert src.is_file()


def _check_json(url: str) -> tuple[int, list[tuple[str, str, str | None]]]:
    import json

    result = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.check", "--format", "json", url],
                            capture_output=True, text=True, timeout=120)
    findings = [(f["rule"], f["severity"], f["key"]) for f in json.loads(result.stdout)["findings"]]
    return result.returncode, findings


@pytest.mark.parametrize("suffix", [".file", ".zip"])
def test_check_flags_a_dead_runs_leftovers_beside_the_store(tmp_path, suffix):
    src = make_nc(tmp_path / "in.nc")
    out = tmp_path / f"out{suffix}"
    assert cli(str(src), str(out)).returncode == 0
    assert ("NCZ-STORE-LEFTOVER", "warning", None) not in _check_json(str(out))[1]
    (tmp_path / f".out{suffix}.partial-{dead_pid()}-q1w2").mkdir()
    (tmp_path / f".out{suffix}.partial-{os.getpid()}-live").mkdir()  # a live writer's: not a leftover
    rc, findings = _check_json(str(out))
    assert rc == 0 and [f for f in findings if f[0] == "NCZ-STORE-LEFTOVER"] == [
        ("NCZ-STORE-LEFTOVER", "warning", None)]


@pytest.mark.s3
def test_check_flags_the_marker_of_an_interrupted_s3_write(tmp_path, s3_bucket):
    import json

    import boto3

    src = make_nc(tmp_path / "in.nc")
    url = f"s3://{s3_bucket}/ds#mode=nczarr,s3"
    assert cli(str(src), url).returncode == 0
    boto3.client("s3").put_object(Bucket=s3_bucket, Key="ds/.nczarr-partial",
                                  Body=json.dumps({"host": "gone", "pid": dead_pid()}).encode())
    _rc, findings = _check_json(url)
    assert ("NCZ-STORE-LEFTOVER", "warning", "/.nczarr-partial") in findings


def test_remove_path_removes_a_symlink_never_what_it_points_to(tmp_path):
    """safety.remove_path (leftovers cleanup): a symlink planted where a leftover was is unlinked; the
    directory or file it points to stays whole."""
    target_dir, target_file = tmp_path / "keep", tmp_path / "keep.txt"
    target_dir.mkdir()
    (target_dir / "data").write_text("x")
    target_file.write_text("y")
    for link, target in ((tmp_path / ".out.partial-1-a", target_dir), (tmp_path / ".out.partial-1-b", target_file)):
        link.symlink_to(target)
        safety.remove_path(link)
        assert not os.path.lexists(link)
    assert (target_dir / "data").read_text() == "x" and target_file.read_text() == "y"
