"""SIGINT, SIGTERM and SIGKILL at several points of a real conversion, on dir, zip and moto S3.

Invariants checked after every signal: SIGINT/SIGTERM exit 130/143 with one stderr line and
no traceback (never 0: a signal is never swallowed); the target holds the old dataset
byte for byte (or nothing, for a fresh write); nothing is left next to it; a victim file
is untouched. After SIGKILL the leftovers are reported by ``safety.find_leftovers`` and
removed by the next run. On S3 an interrupted overwrite never reads as a dataset.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance import safety
from nczarr_conformance.convert import convert
from tests.test_output_safety import snapshot

SHAPE, CHUNKS = (256, 65536), (4, 16384)  # 64 MiB of float32 in 256 chunks


@pytest.fixture(scope="session")
def big_nc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import netCDF4

    path = tmp_path_factory.mktemp("big") / "big.nc"
    rng = np.random.default_rng(1)
    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("y", SHAPE[0])
        nc.createDimension("x", SHAPE[1])
        var = nc.createVariable("big", "f4", ("y", "x"), chunksizes=CHUNKS, zlib=True, complevel=1)
        for i in range(0, SHAPE[0], 32):
            var[i:i + 32] = rng.integers(0, 1000, size=(32, SHAPE[1])).astype("f4")
    return path


@pytest.fixture(scope="session")
def small_nc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Same names as big_nc, a tiny shape: the 'old dataset' an overwrite replaces."""
    import netCDF4

    path = tmp_path_factory.mktemp("small") / "small.nc"
    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("y", 8)
        nc.createDimension("x", 16384 * 2)
        var = nc.createVariable("big", "f4", ("y", "x"), chunksizes=CHUNKS)
        var[:] = -np.ones((8, 16384 * 2), dtype="f4")
    return path


def start(src: Path, out: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "nczarr_conformance.cli.convert", "-q", "--no-direct-copy",
                             "--threads", "2", *extra, str(src), out],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(cond: Callable[[], bool], proc: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"finished before the signal: {proc.returncode} {proc.stderr.read()}"
        assert time.monotonic() < deadline, "the conversion never reached the point"
        time.sleep(0.005)


def hidden(parent: Path) -> list[Path]:
    return sorted(p for p in parent.iterdir() if p.name.startswith("."))


def files_in(paths: list[Path]) -> int:
    return sum(len(files) for p in paths if p.is_dir() for _, _, files in os.walk(p))


def stopped(proc: subprocess.Popen[str], sig: int) -> None:
    """The process's own report of a signal: exit 128+N (or killed), one line, no traceback."""
    _, err = proc.communicate(timeout=60)
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        return
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert ("interrupted" if sig == signal.SIGINT else "SIGTERM") in lines[0]


# point → a condition over the hidden temporaries next to the target
POINTS: dict[str, Callable[[Path], bool]] = {
    "temp-appears": lambda parent: bool(hidden(parent)),
    "5-chunks": lambda parent: files_in(hidden(parent)) >= 5,
    "40-chunks": lambda parent: files_in(hidden(parent)) >= 40,
    "zip-1MB": lambda parent: any(p.is_file() and p.stat().st_size > 2**20 for p in hidden(parent)),
}


@pytest.mark.parametrize("kind,point,sig", [
    ("dir", "temp-appears", signal.SIGINT),
    ("dir", "5-chunks", signal.SIGTERM),
    ("dir", "40-chunks", signal.SIGINT),
    ("zip", "temp-appears", signal.SIGTERM),
    ("zip", "zip-1MB", signal.SIGINT),
])
@pytest.mark.parametrize("overwrite", [False, True], ids=["fresh", "overwrite"])
def test_signal_aborts_and_leaves_the_old_output(big_nc, small_nc, tmp_path, kind, point, sig, overwrite):
    work = tmp_path / "work"
    work.mkdir()
    out = work / ("out.file" if kind == "dir" else "out.zip")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    if overwrite:
        convert(str(small_nc), str(out))
    before = snapshot(tmp_path)
    proc = start(big_nc, str(out), *(["--overwrite"] if overwrite else []))
    wait_for(lambda: POINTS[point](work), proc)
    proc.send_signal(sig)
    stopped(proc, sig)
    assert snapshot(tmp_path) == before  # old dataset byte-identical (or still absent), no temporaries


@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_sigkill_leftovers_are_found_then_removed_by_the_next_run(big_nc, small_nc, tmp_path, kind):
    out = tmp_path / ("out.file" if kind == "dir" else "out.zip")
    convert(str(small_nc), str(out))
    before = snapshot(out) if kind == "dir" else out.read_bytes()
    proc = start(big_nc, str(out), "--overwrite")
    wait_for(lambda: files_in(hidden(tmp_path)) >= 10 if kind == "dir" else POINTS["zip-1MB"](tmp_path), proc)
    proc.send_signal(signal.SIGKILL)
    stopped(proc, signal.SIGKILL)
    assert (snapshot(out) if kind == "dir" else out.read_bytes()) == before  # the old output, whole
    leftovers = safety.find_leftovers(out)
    assert leftovers and all(str(proc.pid) in p.name for p in leftovers)
    again = start(small_nc, str(out), "--overwrite")
    assert again.wait(timeout=60) == 0, again.stderr.read()
    assert hidden(tmp_path) == [] and safety.find_leftovers(out) == []


@pytest.mark.s3
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_s3_interrupted_overwrite_never_reads_as_a_dataset(big_nc, small_nc, s3_bucket, sig):
    import boto3

    client = boto3.client("s3")
    url = f"s3://{s3_bucket}/ds#mode=nczarr,s3"
    client.put_object(Bucket=s3_bucket, Key="neighbour.txt", Body=b"keep")
    convert(str(small_nc), url)

    def keys() -> list[str]:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=s3_bucket, Prefix="ds/")
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    old = set(keys())
    proc = start(big_nc, url, "--overwrite")
    wait_for(lambda: len(set(keys()) - old) >= 8, proc, timeout=60)
    proc.send_signal(sig)
    stopped(proc, sig)
    assert client.get_object(Bucket=s3_bucket, Key="neighbour.txt")["Body"].read() == b"keep"
    left = keys()
    assert "ds/.zgroup" not in left and "ds/.zmetadata" not in left  # no dataset to read
    dump = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", "--header", url],
                          capture_output=True, text=True, timeout=60)
    assert dump.returncode == 2 and "Traceback" not in dump.stderr, dump.stderr
    check = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.check", "--deep", url],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode in (1, 2) and "0 errors" not in check.stdout, check.stdout  # never "fine"
    if sig == signal.SIGINT:
        assert left == []  # the abort removed the new objects and what was left of the old dataset
    else:
        assert "ds/.nczarr-partial" in left  # the dead writer's marker
        again = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "-q", str(small_nc), url],
                               capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr  # the dead writer's leftovers are cleaned, no --overwrite
        assert set(keys()) == old


def test_a_swallowed_interrupt_still_aborts_the_write(small_nc, tmp_path, monkeypatch):
    """A KeyboardInterrupt caught somewhere (a finalizer, a C callback) must not let the write commit."""
    from nczarr_conformance.errors import StoreError

    monkeypatch.setattr(safety, "_received", None)  # restored to None afterwards
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    safety.install_signal_handlers()
    try:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
        except KeyboardInterrupt:
            pass  # swallowed
        with pytest.raises((safety.Interrupted, StoreError)):
            convert(str(small_nc), str(tmp_path / "out.file"))
        assert list(tmp_path.iterdir()) == []
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])


def test_abort_waits_for_puts_in_flight(tmp_path, monkeypatch):
    import threading

    from nczarr_conformance.stores import DirectoryStore

    store = DirectoryStore(tmp_path / "out.file", "w")
    real = DirectoryStore._put
    started = threading.Event()

    def slow(self, key, data):
        started.set()
        time.sleep(0.3)
        real(self, key, data)

    monkeypatch.setattr(DirectoryStore, "_put", slow)
    worker = threading.Thread(target=store.put, args=("/a/0", b"x"))
    worker.start()
    started.wait()
    store.abort()
    worker.join()
    assert list(tmp_path.iterdir()) == []


def test_a_signal_inside_a_finaliser_prints_nothing_and_is_remembered(tmp_path):
    """Seen in CI: SIGINT landed while the garbage collector ran a weakref callback, where Python
    cannot propagate the handler's exception, so it printed "Exception ignored in ..." and a
    traceback before our one line. The signal must be remembered, silently, and re-raised later."""
    script = tmp_path / "finaliser.py"
    script.write_text(
        "import os, signal\n"
        "from nczarr_conformance import safety\n"
        "safety.install_signal_handlers()\n"
        "class Finalised:\n"
        "    def __del__(self):\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        for _ in range(200_000):\n"
        "            pass\n"  # the handler runs here, inside __del__
        "obj = Finalised()\n"
        "del obj\n"
        "print('remembered', safety.received())\n"
        "safety.raise_if_interrupted()\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.stdout == f"remembered {int(signal.SIGINT)}\n"
    assert "Exception ignored" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "nczarr_conformance.safety.Interrupted: interrupted"


def test_an_interrupt_while_a_store_opens_aborts_it_and_leaves_no_temporary(tmp_path, monkeypatch):
    """stores.open_store: SIGINT arriving while a writable store makes its private temporary is held until the
    store exists, which is then aborted: Interrupted is raised and nothing is left beside the target."""
    from nczarr_conformance.stores import DirectoryStore, ZipStore, open_store

    for cls in (DirectoryStore, ZipStore):
        made = cls.__init__

        def init_then_signal(self, *args, _made=made, **kwargs):
            _made(self, *args, **kwargs)  # the temporary exists now
            os.kill(os.getpid(), signal.SIGINT)  # delivered inside the critical section: recorded, not raised

        monkeypatch.setattr(cls, "__init__", init_then_signal)
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    saved_hook = sys.unraisablehook
    try:
        for name in ("out.file", "out.zip"):
            safety.install_signal_handlers()
            with pytest.raises(safety.Interrupted):
                open_store(str(tmp_path / name), "w")
            assert sorted(p.name for p in tmp_path.iterdir()) == [], name
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        sys.unraisablehook = saved_hook
        safety._received = None  # the recorded signal must not leak into later tests
