"""One writer at a time, on every store and for every command that writes (issue #20, items 4 and 5).

Directory and zip stores: an OS lock on ``.NAME.lock`` beside the store, taken before the
writer's first byte (an append: before its checks read the store), refused at once in one line
naming the holder's PID and command, exit 2, the store untouched. S3: the ``.nczarr-partial``
marker, claimed with a conditional PUT; a dead writer's marker over a complete dataset means
"interrupted, the dataset is intact" and is never taken as leftovers to delete.

Races are made deterministic by holding the lock from this process (the same mechanism the
commands use) or by stopping the first writer (SIGSTOP) once it is provably inside its write;
free-running pairs are tried a bounded number of times, each of which must hold. Expected
values come from the source files, read with netCDF4-python.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.conversion.from_netcdf import convert
from tests.conftest import settled
from tests.test_append import make

FREE_TRIES = 5
CONVERT = [sys.executable, "-m", "nczarr_conformance.cli.convert", "-q"]
FIX = [sys.executable, "-m", "nczarr_conformance.cli.fix"]


# ---- helpers ---------------------------------------------------------------------------------------------
def run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)


def start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def source_values(*files: Path) -> dict[str, np.ndarray]:
    """Every variable along time, concatenated over ``files``, as netCDF4-python reads them."""
    import netCDF4

    out: dict[str, list[np.ndarray]] = {"/time": [], "/v": [], "/g/w": []}
    for path in files:
        with netCDF4.Dataset(str(path)) as nc:
            nc.set_auto_mask(False)
            for key, values in out.items():
                values.append(np.asarray(nc[key[1:]][...]))
    return {k: np.concatenate(v) for k, v in out.items()}


def stored_values(url: str) -> dict[str, np.ndarray]:
    from nczarr_conformance.nczarr.reader import DatasetReader
    from nczarr_conformance.stores import open_store

    store = open_store(url)
    try:
        reader = DatasetReader(store)
        return {k: np.asarray(reader.read_variable(k)) for k in ("/time", "/v", "/g/w")}
    finally:
        store.close()


def assert_holds(url: str, *files: Path) -> None:
    got, want = stored_values(url), source_values(*files)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root`` (the store and everything beside it), files with their bytes."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        out[path.relative_to(root).as_posix()] = path.read_bytes() if path.is_file() else None
    return out


def refusal(result_err: str, holder_pid: int, target: str) -> str:
    """The one stderr line of a writer refused because another holds the store."""
    lines = result_err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result_err, result_err
    line = lines[0]
    assert f"{target}: another writer holds it (PID {holder_pid}: " in line and line.endswith("); not written"), line
    return line


def wait_for(cond: Callable[[], bool], proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"finished before the point: {proc.returncode} {proc.stderr.read()}"
        assert time.monotonic() < deadline, "never reached the point"
        time.sleep(0.002)


def inside(parent: Path, pid: int) -> Callable[[], bool]:
    """The writer ``pid`` has made its private temporary beside the target: it is inside its write."""
    return lambda: any(f".partial-{pid}-" in p.name for p in parent.iterdir())


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A store's first file (time 0..7), two that follow it (a: 8..11, b: 12..15), a rival of a
    (a2: the same times, other values) and a big one (8..207). Only ever read: made once for the module."""
    import netCDF4

    root = tmp_path_factory.mktemp("series")
    rival = make(root / "a2.nc", 8, 4)
    with netCDF4.Dataset(str(rival), "a") as nc:
        nc["v"][:] = nc["v"][:] + 1000
        nc["g"]["w"][:] = nc["g"]["w"][:] + 1000
    return {"base": make(root / "base.nc", 0, 8), "a": make(root / "a.nc", 8, 4),
            "b": make(root / "b.nc", 12, 4), "a2": rival, "big": make(root / "big.nc", 8, 200)}


STORE_NAMES = {"dir": "out.file", "zip": "out.zip"}


@pytest.fixture(scope="module")
def stores(series: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The store of series' base file, dir and zip, written once by nc2nczarr for the module: every test
    that writes to one works on a copy (new_store), so a store costs a copy, not a conversion."""
    root = tmp_path_factory.mktemp("stores")
    made = {}
    for kind, name in STORE_NAMES.items():
        made[kind] = root / name
        result = run([*CONVERT, "--no-consolidate", str(series["base"]), str(made[kind])])
        assert result.returncode == 0, result.stderr
    return made


def new_store(tmp_path: Path, stores: dict[str, Path], kind: str, name: str = "out") -> Path:
    """A copy of the module's ``kind`` store in a directory of its own, ``work-NAME`` (the store keeps the
    template's name: a zip's top folder is its stem)."""
    work = tmp_path / f"work-{name}"
    work.mkdir()
    out = work / STORE_NAMES[kind]
    if kind == "dir":
        shutil.copytree(stores[kind], out)
    else:
        shutil.copyfile(stores[kind], out)
    return out


# ---- directory and zip: the lock beside the store ----------------------------------------------------------
COMMANDS: dict[str, Callable[[dict[str, Path], Path], list[str]]] = {
    "append": lambda s, out: [*CONVERT, "--append", "time", str(s["a"]), str(out)],
    "append-many": lambda s, out: [*CONVERT, "--append", "time", "--workers", "1", str(s["a"]), str(s["b"]),
                                   str(out)],
    "convert-overwrite": lambda s, out: [*CONVERT, "--overwrite", str(s["a"]), str(out)],
    "fix": lambda s, out: [*FIX, "--no-backup", str(out)],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_every_writer_is_refused_while_the_lock_is_held(tmp_path, series, stores, kind, command):
    """The lock held from this process: each writing command exits 2 in one line naming this PID
    and command, before its first byte (the store and its directory unchanged); once released,
    the lock file is gone and the command runs."""
    from nczarr_conformance.stores import lock_for_writing

    out = new_store(tmp_path, stores, kind)
    with lock_for_writing(str(out)):
        assert (out.parent / f".{out.name}.lock").is_file()  # beside the store, never inside it
        before = tree(out.parent)
        result = run(COMMANDS[command](series, out))
        assert result.returncode == 2, result.stderr
        refusal(result.stderr, os.getpid(), str(out))
        assert tree(out.parent) == before
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]  # the lock file went with the lock
    if command in ("append", "fix"):
        again = run(COMMANDS[command](series, out))
        assert again.returncode == 0, again.stderr
        assert sorted(p.name for p in out.parent.iterdir()) == [out.name]


@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_a_new_store_is_refused_while_another_writer_makes_it(tmp_path, series, kind):
    from nczarr_conformance.stores import lock_for_writing

    out = tmp_path / ("new.file" if kind == "dir" else "new.zip")
    before = sorted(os.listdir(tmp_path))
    with lock_for_writing(str(out)):
        result = run([*CONVERT, str(series["a"]), str(out)])
        assert result.returncode == 2, result.stderr
        refusal(result.stderr, os.getpid(), str(out))
        assert not out.exists()
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("command", ["append", "fix", "convert-overwrite"])
@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_a_second_writer_while_an_append_is_stopped_inside_its_write(tmp_path, series, stores, kind, command):
    """Append A is stopped (SIGSTOP) once its private temporary exists; writer B (another append,
    an in-place fix, an overwrite) runs the whole time A is stopped: B is refused naming A, A then
    finishes, and the store holds base + A exactly. (Before the lock B exited 0 and its records or
    edits were lost under A's swap, or A's under B's.)"""
    out = new_store(tmp_path, stores, kind)
    first = start([*CONVERT, "--append", "time", str(series["big"]), str(out)])
    try:
        wait_for(inside(out.parent, first.pid), first)
        first.send_signal(signal.SIGSTOP)
        second = run(COMMANDS[command](series, out))
    finally:
        first.send_signal(signal.SIGCONT)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert second.returncode == 2, second.stderr
    line = refusal(second.stderr, first.pid, str(out))
    assert f"nc2nczarr -q --append time {series['big']} {out}" in line
    assert_holds(str(out), series["base"], series["big"])
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]


@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_free_running_appends_never_lose_a_successful_one(tmp_path, series, stores, kind):
    """Two appends of the same records (other values) started together, FREE_TRIES times: exactly
    one exits 0 and the store holds its records; the other exits 2 in one line (the lock's
    refusal naming the winner, or, when it ran after it, the coordinate check's). Before the
    lock both could exit 0, the store holding one of them."""
    refused_by_lock = 0
    for i in range(FREE_TRIES):
        out = new_store(tmp_path, stores, kind, name=f"try{i}")
        procs = {name: start([*CONVERT, "--append", "time", str(series[name]), str(out)]) for name in ("a", "a2")}
        results = {name: (p.wait(timeout=120), p.stderr.read()) for name, p in procs.items()}
        for p in procs.values():
            p.stdout.close()
            p.stderr.close()
        done = [name for name in procs if results[name][0] == 0]
        assert len(done) == 1, results
        (loser,) = set(procs) - set(done)
        code, err = results[loser]
        assert code == 2 and len(err.strip().splitlines()) == 1, results
        if "another writer holds it" in err:
            refused_by_lock += 1
            refusal(err, procs[done[0]].pid, str(out))
        else:
            assert "coordinate /time" in err, err
        assert_holds(str(out), series["base"], series[done[0]])
        assert sorted(p.name for p in out.parent.iterdir()) == [out.name]
    print(f"{kind}: {refused_by_lock} of {FREE_TRIES} tries refused by the lock")


@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_a_killed_holder_never_blocks_the_next_writer(tmp_path, series, stores, kind):
    """SIGKILL while holding the lock: the kernel lets it go; the next append runs and cleans up."""
    out = new_store(tmp_path, stores, kind)
    first = start([*CONVERT, "--append", "time", str(series["big"]), str(out)])
    wait_for(inside(out.parent, first.pid), first)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    again = run([*CONVERT, "--append", "time", str(series["a"]), str(out)])
    assert again.returncode == 0, again.stderr
    assert_holds(str(out), series["base"], series["a"])
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]  # the dead run's temporary and lock file


def test_a_symlink_planted_as_the_lock_file_is_never_followed(tmp_path, series):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    out = tmp_path / "out.file"
    (tmp_path / ".out.file.lock").symlink_to(victim)
    result = run([*CONVERT, str(series["a"]), str(out)])
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "is a symbolic link; not written" in result.stderr
    assert victim.read_text() == "keep" and not out.exists()


def test_holds_are_counted_in_one_process(tmp_path, stores):
    """A command that locks a store before reading it and then opens it for writing holds one lock."""
    from nczarr_conformance.stores import DirectoryStore, lock_for_writing

    out = new_store(tmp_path, stores, "dir")
    lock = out.parent / ".out.file.lock"
    with lock_for_writing(str(out)):
        store = DirectoryStore(out, "a")
        store.abort()
        assert lock.exists()  # still held by the outer hold
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not lock.exists()


def test_another_thread_of_the_same_process_is_another_writer(tmp_path, stores):
    import threading

    from nczarr_conformance.errors import StoreError
    from nczarr_conformance.stores import DirectoryStore, lock_for_writing

    out = new_store(tmp_path, stores, "dir")
    errors: list[str] = []

    def second() -> None:
        try:
            DirectoryStore(out, "a").abort()
        except StoreError as exc:
            errors.append(str(exc))

    with lock_for_writing(str(out)):
        worker = threading.Thread(target=second)
        worker.start()
        worker.join()
    assert len(errors) == 1 and f"another writer holds it (PID {os.getpid()}" in errors[0], errors


# ---- S3: the marker ---------------------------------------------------------------------------------------
@functools.cache
def _s3_client(endpoint: str):
    """One boto3 client per endpoint: the killed-append test lists the bucket every few milliseconds while
    the append runs, and a new client each time cost as much CPU as the listing itself."""
    import boto3

    return boto3.client("s3", endpoint_url=endpoint)


def s3_client():
    return _s3_client(os.environ["AWS_ENDPOINT_URL"])  # set by conftest's moto_server


def s3_keys(bucket: str, prefix: str = "ds/") -> dict[str, str]:
    client = s3_client()
    out: dict[str, str] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out.update({o["Key"]: o["ETag"] for o in page.get("Contents", [])})
    return out


def dead_pid() -> int:
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


def test_a_record_names_a_writer_that_may_still_run():
    """safety.record_is_live, which decides whether a marker (or a lock file's record) is a live writer's: one
    on another host always may still run (its PID means nothing here); one of this host's while its PID lives
    (this very process excepted: its own holds are counted, see safety.hold); a record naming no PID, never."""
    from nczarr_conformance import safety

    here = socket.gethostname()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        gone = dead_pid()
        assert safety.record_is_live({"host": "elsewhere.invalid", "pid": gone})
        assert safety.record_is_live({"host": here, "pid": sleeper.pid})
        assert not safety.record_is_live({"host": here, "pid": gone})
        assert not safety.record_is_live({"host": here, "pid": os.getpid()})
        assert not safety.record_is_live({"host": here}) and not safety.record_is_live(None)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_orphans_are_chunks_outside_their_arrays_grid_and_an_unparsable_key_never_is():
    """safety.orphan_chunks (what a dead append's marker lets the next writer delete): a chunk whose index
    is past ceil(shape / chunks) on some axis; a key that does not parse against its .zarray (index count,
    separator, a .zarray without numbers) is never one. Expected: the arithmetic done by hand here."""
    from nczarr_conformance import safety

    zarrays = {"/v": {"shape": [8, 3], "chunks": [4, 2]},  # grid 2 x 2
               "/n": {"shape": [6], "chunks": [4], "dimension_separator": "/"},  # grid 2
               "/bad": {"shape": "eight", "chunks": [4]}, "/z": {"shape": [4], "chunks": [0]}}
    outside = ["/v/2.0", "/v/0.2", "/n/2"]
    inside = ["/v/0.0", "/v/1.1", "/n/1"]
    unparsable = ["/v/5", "/v/9.0.0", "/v/0/5", "/n/7.0", "/bad/9", "/z/7"]
    meta = ["/.zgroup", *(f"{a}/.zarray" for a in zarrays)]
    assert sorted(safety.orphan_chunks(meta + outside + inside + unparsable, zarrays)) == sorted(outside)


@pytest.mark.s3
def test_s3_every_writer_is_refused_while_the_prefix_is_held(tmp_path, series, s3_bucket):
    from nczarr_conformance.stores import lock_for_writing

    url = f"s3://{s3_bucket}/ds#mode=nczarr,s3"
    convert(str(series["base"]), url, consolidate=False)  # the store to guard (nc2nczarr --no-consolidate)
    with lock_for_writing(url):
        before = s3_keys(s3_bucket)
        for args in ([*CONVERT, "--append", "time", str(series["a"]), url],
                     [*CONVERT, "--overwrite", str(series["a"]), url],
                     [*FIX, "--no-backup", url]):
            result = run(args)
            assert result.returncode == 2, (args, result.stderr)
            refusal(result.stderr, os.getpid(), f"s3://{s3_bucket}/ds")
        assert s3_keys(s3_bucket) == before
    assert "ds/.nczarr-partial" not in s3_keys(s3_bucket)
    assert run([*CONVERT, "--append", "time", str(series["a"]), url]).returncode == 0
    assert_holds(url, series["base"], series["a"])


@pytest.mark.s3
def test_s3_a_marker_put_between_the_check_and_the_claim_wins(s3_bucket, moto_server):
    """Two writers past the checks at once: the conditional PUT gives the prefix to one only."""
    import boto3

    from nczarr_conformance.errors import StoreError
    from nczarr_conformance.stores.s3 import S3Store

    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        store = S3Store(s3_bucket, "ds", mode="r")
        other = {"host": socket.gethostname(), "pid": sleeper.pid, "command": "nc2nczarr other.nc ds"}
        boto3.client("s3").put_object(Bucket=s3_bucket, Key="ds/.nczarr-partial", Body=json.dumps(other).encode())
        with pytest.raises(StoreError, match=rf"another writer holds it \(PID {sleeper.pid}: nc2nczarr other.nc ds; "
                                             r"its marker .nczarr-partial\); not written"):
            store._claim("w", None)
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.s3
def test_s3_killed_append_leaves_the_dataset_intact(tmp_path, series, s3_bucket):
    """Item 4: SIGKILL during an S3 --append's chunk PUTs. The dead writer's marker lies over a
    complete dataset: a plain nc2nczarr (no --overwrite) is refused and deletes nothing; the next
    --append runs, removes the marker and the dead run's chunks outside the grid, and holds every
    record."""
    url = f"s3://{s3_bucket}/ds#mode=nczarr,s3"
    convert(str(series["base"]), url)  # the dataset to keep (what nc2nczarr writes)
    old = s3_keys(s3_bucket)
    proc = start([*CONVERT, "--append", "time", str(series["big"]), url])
    wait_for(lambda: len(set(s3_keys(s3_bucket)) - set(old)) >= 12, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    left = settled(lambda: s3_keys(s3_bucket))  # the dead client's last PUTs may still be stored
    assert "ds/.nczarr-partial" in left and left["ds/.zgroup"] == old["ds/.zgroup"]  # killed among the chunks
    assert_holds(url, series["base"])  # readers see the old dataset

    plain = run([*CONVERT, str(series["base"]), url])
    assert plain.returncode == 2 and len(plain.stderr.strip().splitlines()) == 1, plain.stderr
    assert "--overwrite" in plain.stderr and f"PID {proc.pid}" in plain.stderr
    assert s3_keys(s3_bucket) == left  # nothing deleted, nothing written

    again = run([*CONVERT, "--append", "time", str(series["big"]), url])
    assert again.returncode == 0, again.stderr
    assert_holds(url, series["base"], series["big"])
    now = s3_keys(s3_bucket)
    assert "ds/.nczarr-partial" not in now
    from nczarr_conformance import safety

    zarrays = {"/" + k[len("ds/"):-len("/.zarray")]: json.loads(_get(s3_bucket, k)) for k in now
               if k.endswith("/.zarray")}
    assert safety.orphan_chunks(["/" + k[len("ds/"):] for k in now], zarrays) == []  # none of the dead run's left


def _get(bucket: str, key: str) -> bytes:
    return s3_client().get_object(Bucket=bucket, Key=key)["Body"].read()


@pytest.mark.s3
def test_s3_append_killed_while_replacing_metadata_is_never_deleted(tmp_path, series, s3_bucket):
    """A dead append's marker over no root .zgroup (killed in its metadata phase): the chunks are
    the old dataset's; nothing but --overwrite replaces them."""
    import boto3

    client = boto3.client("s3")
    url = f"s3://{s3_bucket}/ds#mode=nczarr,s3"
    convert(str(series["base"]), url)  # the dataset to keep (what nc2nczarr writes)
    marker = {"host": socket.gethostname(), "pid": dead_pid(), "command": "nc2nczarr --append time x.nc", "mode": "a"}
    client.put_object(Bucket=s3_bucket, Key="ds/.nczarr-partial", Body=json.dumps(marker).encode())
    client.delete_object(Bucket=s3_bucket, Key="ds/.zgroup")
    client.delete_object(Bucket=s3_bucket, Key="ds/.zmetadata")
    before = s3_keys(s3_bucket)
    for args in ([*CONVERT, str(series["a"]), url], [*CONVERT, "--append", "time", str(series["a"]), url]):
        result = run(args)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert f"PID {marker['pid']}" in result.stderr, result.stderr
        assert s3_keys(s3_bucket) == before
    assert run([*CONVERT, "--overwrite", str(series["a"]), url]).returncode == 0
    assert "ds/.nczarr-partial" not in s3_keys(s3_bucket)


@pytest.mark.s3
def test_s3_an_append_over_a_dead_appends_marker_removes_its_chunks_outside_the_grid(series, s3_bucket):
    """A dead append's marker over a complete dataset, and chunks that append stored past the grid (its records
    beyond what the next append reaches, so that append writes none of them again): the next --append removes
    them with the marker, and the dataset holds the old records and the new (a killed run leaves chunks where the
    next append rewrites them, so test_s3_killed_append_leaves_the_dataset_intact cannot see them go)."""
    client = s3_client()
    url = f"s3://{s3_bucket}/ds#mode=nczarr,s3"
    convert(str(series["base"]), url)
    zarray = json.loads(_get(s3_bucket, "ds/v/.zarray"))
    grid = [-(-s // c) for s, c in zip(zarray["shape"], zarray["chunks"], strict=True)]
    far = [".".join(str(i) for i in (grid[0] + 40 + n, *[0] * (len(grid) - 1))) for n in range(3)]
    for index in far:
        client.put_object(Bucket=s3_bucket, Key=f"ds/v/{index}", Body=b"a dead append's chunk")
    marker = {"host": socket.gethostname(), "pid": dead_pid(), "command": "nc2nczarr --append time big.nc",
              "mode": "a"}
    client.put_object(Bucket=s3_bucket, Key="ds/.nczarr-partial", Body=json.dumps(marker).encode())
    done = run([*CONVERT, "--append", "time", str(series["a"]), url])
    assert done.returncode == 0, done.stderr
    now = s3_keys(s3_bucket)
    assert [f"ds/v/{index}" for index in far if f"ds/v/{index}" in now] == []
    assert "ds/.nczarr-partial" not in now
    assert_holds(url, series["base"], series["a"])
