"""nc2nczarr --append and --zarr-format 3 --concat onto Zarr v3 stores on S3 (a real moto server over HTTP).

The reference for storage is the same command on a directory store, which tests/zarr3/test_append_v3.py
holds equal, object for object, to one conversion of the concatenated file and to xarray's and
zarr-python's own appends. Values come from netCDF4-python reading the concatenated file and are read
back through zarr-python's FsspecStore (s3fs), not through our reader. Kills and refusals are judged
by the objects on the server, compared byte for byte.
"""
from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nczarr_conformance import safety
from nczarr_conformance.cli.convert import main as nc2nczarr_main
from tests.conftest import require_module, settled
from tests.in_process import run_main
from tests.test_append import make
from tests.zarr3.test_append_v3 import CONVERT, cli, make_long, nc_values, objects

zarr = pytest.importorskip("zarr")
if int(zarr.__version__.split(".")[0]) < 3:
    pytest.skip("zarr-python 3 reads Zarr v3", allow_module_level=True)

pytestmark = pytest.mark.s3


@pytest.fixture
def nc2nczarr(capfd: pytest.CaptureFixture[str]) -> Any:
    """``nc2nczarr -q ARGS``: its main() in this process (tests/in_process.py). A real process (:func:`cli`) for
    the kill, one --concat into S3 (exit 0) and the refused appends (exit 2, one line)."""
    return lambda *args: run_main(nc2nczarr_main, ["-q", *args], capfd)


def to_v3_here(nc2nczarr: Any, src: Path, out: Path, *extra: str) -> Path:
    """test_append_v3.to_v3 (the directory store of the same command), in this process."""
    done = nc2nczarr("--zarr-format", "3", *extra, str(src), str(out))
    assert done.returncode == 0, done.stderr
    return out


@functools.cache
def _client(endpoint: str | None) -> Any:
    import boto3

    return boto3.client("s3")


def s3_client() -> Any:
    """One boto3 client per endpoint (the session's moto server), not one per look: making a client costs
    tens of milliseconds of CPU, and the kill test looks at the bucket dozens of times."""
    return _client(os.environ.get("AWS_ENDPOINT_URL"))


def s3_objects(bucket: str, prefix: str) -> dict[str, bytes]:
    """Every object under ``prefix/`` by its key below the prefix, as boto3 reads it from the server."""
    client = s3_client()
    out: dict[str, bytes] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/"):
        for obj in page.get("Contents", []):
            out["/" + obj["Key"][len(prefix) + 1:]] = client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    return out


def zarr_on_s3(url: str, endpoint: str) -> object:
    """The root group as zarr-python opens it over S3 (fsspec/s3fs), consolidated metadata used when there."""
    require_module("s3fs")
    store = zarr.storage.FsspecStore.from_url(url, storage_options={"endpoint_url": endpoint, "anon": False},
                                              read_only=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.open_group(store, mode="r", zarr_format=3)


def assert_reads(url: str, endpoint: str, whole: Path) -> None:
    group = zarr_on_s3(url, endpoint)
    for name, values in nc_values(whole).items():
        assert np.array_equal(group[name][...], values), name  # type: ignore[index]


# ---- the result --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("extra", [(), ("--shard", "2"), ("--no-consolidate",)],
                         ids=["chunks", "shard2", "unconsolidated"])
def test_append_on_s3_equals_the_same_append_on_a_directory(tmp_path, s3_bucket, moto_server, extra, nc2nczarr):
    """Object for object what the same append makes of the same store on a directory (the rewritten
    partial last shard included; without consolidated metadata the root zarr.json, deleted for the
    metadata phase, is put back as it was); no marker left; zarr-python over S3 reads netCDF4's values.
    The order on the wire: every chunk, then the root zarr.json deleted, the arrays' zarr.json, the root last."""
    from nczarr_conformance.stores.s3 import S3Store

    first, second, whole = make(tmp_path / "a1.nc", 0, 5), make(tmp_path / "a2.nc", 5, 6), \
        make(tmp_path / "all.nc", 0, 11)
    prefix = f"v3-{len(extra)}{extra[-1].strip('-') if extra else ''}"  # (the bucket's name is cut short)
    url = f"s3://{s3_bucket}/{prefix}"
    assert nc2nczarr("--zarr-format", "3", *extra, str(first), url).returncode == 0
    local = to_v3_here(nc2nczarr, first, tmp_path / "s.zarr", *extra)
    assert s3_objects(s3_bucket, prefix) == objects(local)  # the same start
    recorder = S3Store(s3_bucket, prefix)  # shares the client's endpoint: records every request on the prefix
    try:
        from nczarr_conformance.conversion.append import append

        append(str(second), url, "time")  # in this process, so the recorder sees its requests
        sent = [(op, key[len(prefix) + 1:]) for op, key in recorder.requests if op in ("PutObject", "DeleteObjects")]
    finally:
        recorder.close()
    assert nc2nczarr("--append", "time", str(second), str(local)).returncode == 0
    assert s3_objects(s3_bucket, prefix) == objects(local)  # chunks, shards and their index, every zarr.json
    assert_reads(url, moto_server, whole)
    puts = [(n, key) for n, (op, key) in enumerate(sent) if op == "PutObject"]
    chunks = [n for n, key in puts if "/c/" in key]
    arrays_meta = [n for n, key in puts if key.endswith("/zarr.json")]
    root_gone = sent.index(("DeleteObjects", "zarr.json"))
    assert chunks and arrays_meta and max(chunks) < root_gone < min(arrays_meta), sent
    assert puts[-1][1] == "zarr.json" and puts[-1][0] > max(arrays_meta), sent  # the root last
    assert sent[-1] == ("DeleteObjects", ".nczarr-partial"), sent  # the marker after everything


def test_several_files_onto_s3_in_one_append(tmp_path, s3_bucket, moto_server, nc2nczarr):
    """Three files given out of order: coordinate order, one transaction, equal to the directory's result."""
    parts = [make(tmp_path / f"p{i}.nc", t0, n) for i, (t0, n) in enumerate([(5, 3), (8, 6), (14, 2)])]
    first, whole = make(tmp_path / "p.nc", 0, 5), make(tmp_path / "all.nc", 0, 16)
    url = f"s3://{s3_bucket}/v3"
    assert nc2nczarr("--zarr-format", "3", "--shard", "2", str(first), url).returncode == 0
    local = to_v3_here(nc2nczarr, first, tmp_path / "s.zarr", "--shard", "2")
    order = (parts[2], parts[0], parts[1])
    assert nc2nczarr("--append", "time", *map(str, order), url).returncode == 0
    assert nc2nczarr("--append", "time", *map(str, order), str(local)).returncode == 0
    assert s3_objects(s3_bucket, "v3") == objects(local)
    assert_reads(url, moto_server, whole)


def test_concat_into_v3_on_s3_equals_the_directory_concat(tmp_path, s3_bucket, moto_server, nc2nczarr):
    """``--zarr-format 3 --concat`` into S3: the directory's objects; an existing dataset without
    --overwrite is refused at once, in one line, every object as it was; with it, replaced."""
    parts = [make(tmp_path / f"p{i}.nc", t0, n) for i, (t0, n) in enumerate([(5, 3), (0, 5), (8, 8)])]
    whole = make(tmp_path / "all.nc", 0, 16)
    url = f"s3://{s3_bucket}/cat"
    gap = nc2nczarr("--zarr-format", "3", "--concat", "time", str(parts[1]), str(make(tmp_path / "gap.nc", 20, 2)), url)
    assert gap.returncode == 2 and "gap in coordinate time" in gap.stderr, gap.stderr
    assert s3_objects(s3_bucket, "cat") == {}  # nothing written, the marker taken back
    done = cli("--zarr-format", "3", "--shard", "2", "--concat", "time", *map(str, parts), url)
    assert done.returncode == 0, done.stderr
    local = tmp_path / "cat.zarr"
    here = nc2nczarr("--zarr-format", "3", "--shard", "2", "--concat", "time", *map(str, parts), str(local))
    assert here.returncode == 0, here.stderr
    assert s3_objects(s3_bucket, "cat") == objects(local)
    assert_reads(url, moto_server, whole)

    before = s3_objects(s3_bucket, "cat")
    again = nc2nczarr("--zarr-format", "3", "--concat", "time", *map(str, parts[:2]), url)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1, again.stderr
    assert "use --overwrite to replace" in again.stderr, again.stderr
    assert s3_objects(s3_bucket, "cat") == before
    done = nc2nczarr("--overwrite", "--zarr-format", "3", "--concat", "time", *map(str, parts[:2]), url)
    assert done.returncode == 0, done.stderr
    assert zarr_on_s3(url, moto_server)["v"].shape == (8, 3)  # type: ignore[index]
    assert "/.nczarr-partial" not in s3_objects(s3_bucket, "cat")


# ---- refusals ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("change,match", [
    ({"units": "hours"}, "/time: attributes differ"),
    ({"nx": 4}, "/x: size 3 in the store, 4"),
])
def test_a_refused_append_leaves_every_object_byte_identical(tmp_path, s3_bucket, change, match, nc2nczarr):
    first = make(tmp_path / "a1.nc", 0, 5)
    prefix = f"v3-{sorted(change)[0]}"
    url = f"s3://{s3_bucket}/{prefix}"
    assert nc2nczarr("--zarr-format", "3", "--shard", "2", str(first), url).returncode == 0
    before = s3_objects(s3_bucket, prefix)
    done = cli("--append", "time", str(make(tmp_path / "other.nc", 5, 3, **change)), url)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and match in done.stderr, done.stderr
    assert s3_objects(s3_bucket, prefix) == before


# ---- kills ------------------------------------------------------------------------------------------------
def test_a_killed_v3_append_on_s3_leaves_the_old_dataset_and_the_next_append_cleans_up(tmp_path, s3_bucket,
                                                                                       moto_server, nc2nczarr):
    """SIGKILL among the chunk PUTs: the root zarr.json is the old one and zarr-python reads the old rows;
    a plain write over it is refused (a dead writer's marker over a complete v3 dataset: nothing deleted);
    the next append (of fewer rows than the dead one's) removes the marker and the dead run's chunks
    outside every grid, which a later append leaving an all-fill chunk out would otherwise show."""
    first, second = make_long(tmp_path / "a1.nc", 0, 3), make_long(tmp_path / "a2.nc", 3, 150)
    url = f"s3://{s3_bucket}/v3"
    assert nc2nczarr("--zarr-format", "3", str(first), url).returncode == 0
    old = s3_objects(s3_bucket, "v3")
    proc = subprocess.Popen([*CONVERT, "--append", "time", str(second), url], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(_keys(s3_bucket)) < len(old) + 40 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    left = settled(lambda: s3_objects(s3_bucket, "v3"))  # the dead client's last PUTs may still be stored
    assert "/.nczarr-partial" in left and left["/zarr.json"] == old["/zarr.json"], sorted(left)[:5]
    assert len(left) > len(old) + 1  # killed among its chunks
    full = np.arange(0, 153 * 2048, dtype="f4").reshape(153, 2048)
    v = zarr_on_s3(url, moto_server)["v"]  # type: ignore[index]
    assert v.shape == (3, 2048) and np.array_equal(v[...], full[:3])

    plain = nc2nczarr("--zarr-format", "3", str(first), url)
    assert plain.returncode == 2 and len(plain.stderr.strip().splitlines()) == 1, plain.stderr
    assert "--overwrite" in plain.stderr and f"PID {proc.pid}" in plain.stderr, plain.stderr
    assert s3_objects(s3_bucket, "v3") == left  # nothing deleted, nothing written

    again = nc2nczarr("--append", "time", str(make_long(tmp_path / "a3.nc", 3, 2)), url)  # shorter than the dead one's
    assert again.returncode == 0, again.stderr
    now = s3_objects(s3_bucket, "v3")
    assert "/.nczarr-partial" not in now
    v = zarr_on_s3(url, moto_server)["v"]  # type: ignore[index]
    assert v.shape == (5, 2048) and np.array_equal(v[...], full[:5])
    arrays = {k[:-len("/zarr.json")] or "/": json.loads(b) for k, b in now.items() if k.endswith("zarr.json")}
    assert safety.orphan_chunks(list(now), arrays) == []


def test_a_v3_append_killed_while_replacing_metadata_is_never_deleted(tmp_path, s3_bucket, nc2nczarr):
    """A dead append's marker over no root zarr.json (killed in its metadata phase): the chunks are the
    old dataset's; a new write and another append are refused in one line naming the dead PID, nothing
    is touched; only --overwrite replaces it."""
    import boto3

    first = make(tmp_path / "a1.nc", 0, 5)
    url = f"s3://{s3_bucket}/v3"
    assert nc2nczarr("--zarr-format", "3", str(first), url).returncode == 0
    gone = subprocess.Popen(["true"])
    gone.wait()
    marker = {"host": socket.gethostname(), "pid": gone.pid, "command": "nc2nczarr --append time x.nc", "mode": "a"}
    client = boto3.client("s3")
    client.put_object(Bucket=s3_bucket, Key="v3/.nczarr-partial", Body=json.dumps(marker).encode())
    client.delete_object(Bucket=s3_bucket, Key="v3/zarr.json")
    before = s3_objects(s3_bucket, "v3")
    for args in (["--zarr-format", "3", str(first), url], ["--append", "time", str(make(tmp_path / "b.nc", 5, 2)),
                                                            url]):
        done = nc2nczarr(*args)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert f"PID {gone.pid}" in done.stderr, done.stderr
        assert s3_objects(s3_bucket, "v3") == before
    assert nc2nczarr("--overwrite", "--zarr-format", "3", str(first), url).returncode == 0
    assert "/.nczarr-partial" not in s3_objects(s3_bucket, "v3")


def _keys(bucket: str) -> list[str]:
    page = s3_client().list_objects_v2(Bucket=bucket, Prefix="v3/")
    return [o["Key"] for o in page.get("Contents", [])]


# ---- what a dead append's chunks are ---------------------------------------------------------------------
def test_v3_orphans_are_chunks_outside_the_outer_grid_in_either_key_encoding():
    """safety.orphan_chunks on v3 arrays: ``default`` keys (``c/i/j``, ``c.i.j``) and ``v2`` keys (``i.j``,
    ``i/j``) past ceil(shape / chunk_shape) on some axis; a sharded array's keys name shards (the
    outer grid); a key that does not parse (wrong head, index count, a group's node) is never one.
    Expected: the arithmetic done by hand here."""
    def array(shape: list[int], chunks: list[int], name: str = "default", sep: str | None = None) -> dict[str, object]:
        encoding: dict[str, object] = {"name": name}
        if sep is not None:
            encoding["configuration"] = {"separator": sep}
        return {"zarr_format": 3, "node_type": "array", "shape": shape, "chunk_key_encoding": encoding,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}}}

    arrays = {"/d": array([8, 3], [4, 2]),                   # grid 2 x 2, c/i/j
              "/dot": array([8, 3], [4, 2], sep="."),         # c.i.j
              "/v2": array([6], [4], "v2"),                   # i
              "/v2s": array([8, 3], [4, 2], "v2", "/"),       # i/j
              "/shard": array([16, 2], [8, 2])}               # shards of 8 rows: grid 2 x 1
    outside = ["/d/c/2/0", "/d/c/0/2", "/dot/c.2.1", "/v2/2", "/v2s/2/0", "/shard/c/2/0"]
    inside = ["/d/c/1/1", "/dot/c.1.1", "/v2/1", "/v2s/1/1", "/shard/c/1/0"]
    unparsable = ["/d/c/9", "/d/9/0", "/d/2/2/0", "/dot/c/2/0", "/v2/c/5", "/d/c/0/0/7"]
    meta = ["/zarr.json", *(f"{a}/zarr.json" for a in arrays)]
    assert sorted(safety.orphan_chunks(meta + outside + inside + unparsable, arrays)) == sorted(outside)

