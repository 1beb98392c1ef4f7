"""Hostile stores (issue 12): reads stay inside the store and bounded by what the metadata declares.

Each case starts from a store written by netCDF4-python (netcdf-c 4.10.1), then plants one
hostile object by hand: a symlink out of the store, /dev/zero, a FIFO, a compression bomb, an
oversized or over-nested metadata object, a giant declared shape. nczarr-dump and nczarr-check
run in a subprocess under an address-space limit (RLIMIT_AS) and a timeout; each case asserts
the exit code, one stderr line naming the object and the cause, no traceback, and the child's
peak RSS (its VmHWM, which it writes itself at exit).

Set NCZARR_HOSTILE_REPORT=FILE to append each run's peak memory as a JSON line (the numbers
in the issue's report were taken that way, before and after the fix).
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import tracemalloc
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import require_module, require_tool

REPO = Path(__file__).resolve().parent.parent
GiB = 1024**3
MiB = 1024**2
#: Address space of each child: a trivial dump peaks at ~36 MB RSS and runs in 256 MiB of address
#: space (measured); 1.5 GiB leaves margin for numpy and boto3 and still stops a 1 GiB inflation.
AS_CAP = int(os.environ.get("NCZARR_HOSTILE_AS_CAP", str(3 * GiB // 2)))
#: What a bounded run may reach: imports (~35 MiB, ~80 with boto3) plus a few chunks (measured).
PEAK_MAX = 160 * MiB


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    peak: int  # bytes: the child's VmHWM (-1: it died before reporting)


#: Runs a CLI module and, at exit, writes its own peak RSS (VmHWM, KiB) where NCZARR_PEAK_FILE says.
#: Measured inside the child because rusage's ru_maxrss of a forked child starts from the parent's
#: (pytest's) high-water mark, which would hide the child's own.
_PEAK_WRAPPER = """
import atexit, os, runpy, sys
def _peak():
    with open('/proc/self/status') as fh:
        hwm = [line for line in fh if line.startswith('VmHWM')][0].split()[1]
    with open(os.environ['NCZARR_PEAK_FILE'], 'w') as out:
        out.write(hwm)
atexit.register(_peak)
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)
"""


def run_bounded(case: str, tool: str, *args: str, timeout: float = 60, env: dict[str, str] | None = None,
                stop_after: int | None = None) -> Run:
    """One CLI run under RLIMIT_AS and a timeout (a hang fails the test); its own peak RSS.

    ``stop_after``: read that many bytes of stdout, then close the pipe (as ``| head -c N``
    does) — for output that streams without end; the tool must then stop quietly.
    """
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (AS_CAP, AS_CAP))

    with tempfile.TemporaryDirectory() as tmp:
        peak_file = Path(tmp) / "peak"
        child_env = {**os.environ, "PYTHONPATH": str(REPO), "NCZARR_PEAK_FILE": str(peak_file), **(env or {})}
        child_env.pop("NCZARR_DEBUG", None)
        proc = subprocess.Popen([sys.executable, "-c", _PEAK_WRAPPER, f"nczarr_conformance.cli.{tool}", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                preexec_fn=limit, env=child_env)
        try:
            if stop_after is not None:
                assert proc.stdout is not None
                head = proc.stdout.read(stop_after)
                proc.stdout.close()
                _, err = proc.communicate(timeout=timeout)
                out = head
            else:
                out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"{case}: {tool} {' '.join(args)} still running after {timeout} s (hang)")
        peak = int(peak_file.read_text()) * 1024 if peak_file.exists() else -1
        result = Run(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), peak)
    report = os.environ.get("NCZARR_HOSTILE_REPORT")
    if report:
        with open(report, "a") as fh:
            fh.write(json.dumps({"case": case, "tool": tool, "args": list(args[:-1]), "rc": result.rc,
                                 "peak_mib": round(result.peak / MiB, 1), "stderr": result.stderr.strip()[:300]})
                     + "\n")
    return result


def assert_refused(run: Run, rc: int, *needles: str) -> None:
    """Exit ``rc``, one stderr line holding every needle, no traceback, bounded memory."""
    assert "Traceback" not in run.stderr, run.stderr
    assert run.rc == rc, (run.rc, run.stderr, run.stdout[-500:])
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert 0 < run.peak < PEAK_MAX, f"peak RSS {run.peak / MiB:.0f} MiB"


def assert_finding(run: Run, rule: str, *needles: str) -> None:
    """nczarr-check found an error naming the object: exit 1, the rule on a line with every needle."""
    assert "Traceback" not in run.stderr, run.stderr
    assert run.rc == 1, (run.rc, run.stderr, run.stdout)
    hits = [line for line in run.stdout.splitlines() if rule in line and all(n in line for n in needles)]
    assert hits, run.stdout
    assert 0 < run.peak < PEAK_MAX, f"peak RSS {run.peak / MiB:.0f} MiB"


# ---- the store every case starts from: written by netCDF4-python (netcdf-c) ---------------------

VALUES = np.arange(1000, dtype="<f4")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """``x = 1000``; ``v`` zlib+shuffle, ``w`` uncompressed, one 4000-byte chunk each, both 0..999."""
    netCDF4 = require_module("netCDF4")
    path = tmp_path / "ds.file"
    with netCDF4.Dataset(f"file://{path}#mode=nczarr,file", "w") as nc:
        nc.createDimension("x", 1000)
        v = nc.createVariable("v", "f4", ("x",), chunksizes=(1000,), zlib=True)
        v[:] = VALUES
        w = nc.createVariable("w", "f4", ("x",), chunksizes=(1000,))
        w[:] = VALUES
    return path


def test_the_untouched_store_dumps_and_checks_in_little_memory(store: Path) -> None:
    dumped = run_bounded("baseline", "dump", str(store))
    assert dumped.rc == 0 and dumped.stderr == "", dumped.stderr
    assert dumped.peak < PEAK_MAX
    checked = run_bounded("baseline", "check", "--deep", str(store))
    assert checked.rc == 0, checked.stdout


def _zlib_bomb(size: int) -> bytes:
    """A zlib stream of ``size`` zero bytes (a multiple of 16 MiB), built without holding them or deflating
    them all: after a full flush deflate starts afresh, so every further block of zeros deflates to the same
    bytes, repeated; then the last (empty) block and the Adler-32 of all ``size`` bytes."""
    block = bytes(16 * MiB)
    comp = zlib.compressobj(9)
    first = comp.compress(block) + comp.flush(zlib.Z_FULL_FLUSH)  # with the two-byte zlib header
    again = comp.compress(block) + comp.flush(zlib.Z_FULL_FLUSH)
    adler = 1
    for _ in range(size // len(block)):
        adler = zlib.adler32(block, adler)
    return first + again * (size // len(block) - 1) + b"\x03\x00" + adler.to_bytes(4, "big")  # final fixed block


def test_the_zlib_bomb_is_a_valid_stream_of_zeros() -> None:
    """What the bomb tests rely on, asked of zlib itself: three blocks' worth (the first, the repeated one twice)
    inflate to exactly that many zeros, checksum included; the GiB bomb is the same with 64 blocks."""
    size = 48 * MiB
    inflate = zlib.decompressobj()
    out = inflate.decompress(_zlib_bomb(size))
    assert (len(out), out.count(0), inflate.eof, inflate.unused_data) == (size, size, True, b"")


@pytest.fixture(scope="module")
def zlib_gib() -> bytes:
    return _zlib_bomb(GiB)  # ~1 MB


# ---- symlinks, devices, FIFOs: every object is a regular file inside the store -----------------

def test_chunk_symlinked_outside_is_not_read(store: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.bin"
    victim.write_bytes(np.full(1000, 1234.5, dtype="<f4").tobytes())  # a chunk-sized file outside
    (store / "w" / "0").unlink()
    (store / "w" / "0").symlink_to(victim)
    dumped = run_bounded("chunk symlink", "dump", str(store))
    assert_refused(dumped, 2, str(store / "w" / "0"), "symbolic link")
    assert "1234.5" not in dumped.stdout
    assert_finding(run_bounded("chunk symlink", "check", "--deep", str(store)), "NCZ-STORE-READ", "/w/0",
                   "symbolic link")


def test_attributes_symlinked_outside_are_not_read(store: Path, tmp_path: Path) -> None:
    victim = tmp_path / "secret.json"
    original = json.loads((store / "w" / ".zattrs").read_text())
    victim.write_text(json.dumps({**original, "secret": "outside the store"}))
    (store / "w" / ".zattrs").unlink()
    (store / "w" / ".zattrs").symlink_to(victim)
    dumped = run_bounded("zattrs symlink", "dump", "--header", str(store))
    assert_refused(dumped, 2, str(store / "w" / ".zattrs"), "symbolic link")
    assert "outside the store" not in dumped.stdout


def test_a_symlinked_directory_is_not_entered(store: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(store / "w", outside / "w")
    (store / "w").symlink_to(outside / "w", target_is_directory=True)
    dumped = run_bounded("dir symlink", "dump", str(store))
    assert_refused(dumped, 2, "w is a symbolic link")


@pytest.mark.parametrize("member", ["w/0", ".zgroup"])
def test_a_symlink_to_dev_zero_is_refused_at_once(store: Path, member: str) -> None:
    (store / member).unlink()
    (store / member).symlink_to("/dev/zero")
    dumped = run_bounded(f"/dev/zero {member}", "dump", str(store), timeout=30)
    assert_refused(dumped, 2, str(store / member), "symbolic link")
    checked = run_bounded(f"/dev/zero {member}", "check", "--deep", str(store), timeout=30)
    assert_finding(checked, "NCZ-STORE-READ", f"/{member}", "symbolic link")


@pytest.mark.parametrize("member", ["w/0", "w/.zattrs"])
def test_a_fifo_neither_hangs_nor_reads(store: Path, member: str) -> None:
    (store / member).unlink()
    os.mkfifo(store / member)
    dumped = run_bounded(f"fifo {member}", "dump", str(store), timeout=30)
    assert_refused(dumped, 2, str(store / member), "FIFO, not a regular file")
    checked = run_bounded(f"fifo {member}", "check", "--deep", str(store), timeout=30)
    assert_finding(checked, "NCZ-STORE-READ", f"/{member}", "FIFO")


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("tool,args", [("dump", ()), ("check", ()), ("fix", ("--dry-run",)), ("convert", ("OUT",)),
                                       ("convert", ("--append", "time", "IN", "STORE"))],
                         ids=["dump", "check", "fix", "convert", "append"])
def test_a_fifo_or_device_named_as_the_input_is_refused_before_it_is_opened(
        store: Path, tmp_path: Path, special: str, tool: str, args: tuple[str, ...]) -> None:
    """The path given is itself a FIFO (or a device): sniffing its magic bytes, or netCDF4 opening it, waited
    for a writer (nczarr-dump, nc2nczarr, --append hung until killed) or read without end. Refused by name,
    one line, exit 2, nothing written."""
    path = tmp_path / "fifo.nc"
    if special == "fifo":
        os.mkfifo(path)
    else:
        path = Path(special)
    before = snapshot_tree(store)
    out = tmp_path / "out.zarr"
    argv = [str(path) if a == "IN" else str(store) if a == "STORE" else str(out) if a == "OUT" else a for a in args]
    if "IN" not in args:
        argv = [*argv[:-1], str(path), argv[-1]] if tool == "convert" else [*argv, str(path)]
    done = run_bounded(f"{special} as the input", tool, *argv, timeout=30)
    kind = "FIFO" if special == "fifo" else "character device"
    assert_refused(done, 2, str(path), f"a {kind}, not a netCDF file")
    assert not out.exists() and snapshot_tree(store) == before


def snapshot_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_signal_as_a_directory_is_closed_is_the_signal_not_ebadf(store: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Found under ``timeout 20 nczarr-dump …``: about one SIGTERM in twenty landed as ``_open_inside`` closed the
    parent directory's descriptor, before ``current`` named the child's; its ``finally`` closed the closed descriptor
    again, and that EBADF replaced the Interrupted: "…/c/6749: Bad file descriptor", exit 2 instead of 143. Here
    the signal's exception is raised as the first ``os.close`` returns, deterministically."""
    from nczarr_conformance import safety
    from nczarr_conformance.stores import directory, open_store

    real_close = os.close
    armed = [True]

    def close_then_signal(fd: int) -> None:
        real_close(fd)
        if armed[0]:
            armed[0] = False
            raise safety.Interrupted(15)

    with open_store(str(store)) as opened:
        monkeypatch.setattr(directory.os, "close", close_then_signal)
        with pytest.raises(safety.Interrupted):
            opened.get("/w/0", 4000)
        monkeypatch.setattr(directory.os, "close", real_close)
        assert opened.get("/w/0", 4000) == VALUES.tobytes()  # the reader still works: nothing closed twice


# ---- compression bombs: a chunk never inflates past its declared size -----------------------------

def _one_big_chunk(store: Path) -> None:
    """Declare x = 1M in one 4 MB chunk (so a ~1 MB bomb is an honest stored size); no chunk written."""
    _declare(store, 1_000_000, 1_000_000)
    for var in ("v", "w"):
        (store / var / "0").unlink()


def test_zlib_chunk_bomb_stops_at_the_declared_size(store: Path, zlib_gib: bytes) -> None:
    (store / "v" / "0").write_bytes(zlib_gib)  # 1 MB stored for a 4000-byte chunk: refused unread
    assert_refused(run_bounded("zlib bomb, small chunk", "dump", str(store)), 2, "/v/0",
                   f"{len(zlib_gib)} bytes, more than the")
    _one_big_chunk(store)
    (store / "v" / "0").write_bytes(zlib_gib)  # 1 MB stored for a 4 MB chunk: inflation stopped at 4 MB
    assert_refused(run_bounded("zlib bomb", "dump", str(store)), 2, "/v/0", "more than the declared 4000000")
    assert_finding(run_bounded("zlib bomb", "check", "--deep", str(store)), "NCZ-CHUNK-SIZE", "/v/0",
                   "more than the declared 4000000")


def _set_compressor(store: Path, var: str, compressor: dict[str, object] | None, filters: object = None) -> None:
    zpath = store / var / ".zarray"
    zarray = json.loads(zpath.read_text())
    zarray["compressor"], zarray["filters"] = compressor, filters
    zpath.write_text(json.dumps(zarray))


@pytest.mark.parametrize("known_size", [False, True], ids=["streamed-frame", "frame-with-size"])
def test_zstd_chunk_bomb_stops_at_the_declared_size(store: Path, tmp_path: Path, known_size: bool) -> None:
    zstd = require_tool("zstd")  # makes the 1 GiB frame without holding it
    if known_size:  # a sparse 1 GiB file: the frame header declares its size
        source = tmp_path / "zeros"
        with open(source, "wb") as fh:
            fh.truncate(GiB)
        frame = subprocess.run([zstd, "-q", "-c", "-1", str(source)], capture_output=True, check=True).stdout
    else:  # from a pipe: no size in the frame, only streaming decoders know it
        frame = subprocess.run(f"head -c {GiB} /dev/zero | {zstd} -q -c -1", shell=True, capture_output=True,
                               check=True).stdout
    assert len(frame) < 100_000
    _one_big_chunk(store)
    _set_compressor(store, "w", {"id": "zstd", "level": 1})
    (store / "w" / "0").write_bytes(frame)
    assert_refused(run_bounded("zstd bomb", "dump", str(store)), 2, "/w/0", "more than the declared 4000000")
    assert_finding(run_bounded("zstd bomb", "check", "--deep", str(store)), "NCZ-CHUNK-SIZE", "/w/0",
                   "more than the declared 4000000")


def test_blosc_header_size_is_checked_before_decompressing(store: Path) -> None:
    from numcodecs import Blosc

    chunk = bytearray(Blosc(cname="lz4").encode(VALUES.tobytes()))
    chunk[4:8] = (GiB).to_bytes(4, "little")  # blosc header nbytes: what decompression allocates
    _set_compressor(store, "w", {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0})
    (store / "w" / "0").write_bytes(bytes(chunk))
    assert_refused(run_bounded("blosc nbytes", "dump", str(store)), 2, "/w/0",
                   f"inflates to {GiB} bytes, more than the declared 4000")


# ---- metadata objects: capped in size and nesting ----------------------------------------------------

class _RepeatedBlockDeflate:
    """zipfile's deflater for a member written in many equal blocks: each block ends in a full flush, after which
    deflate starts afresh, so a block seen before deflates to the bytes it gave then (as ``_zlib_bomb``): 1 GiB
    of spaces costs one 16 MiB block's deflate, not 64 (zipfile still takes the CRC of every byte)."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate, as zipfile's own
        self._seen: dict[bytes, bytes] = {}

    def compress(self, data: bytes) -> bytes:
        if data not in self._seen:
            self._seen[data] = self._deflate.compress(data) + self._deflate.flush(zlib.Z_FULL_FLUSH)
        return self._seen[data]

    def flush(self) -> bytes:
        return self._deflate.flush()


def test_zip_member_that_inflates_to_a_gib_is_refused_before_inflating(store: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    deflated = zipfile._get_compressor  # type: ignore[attr-defined]
    monkeypatch.setattr(zipfile, "_get_compressor", lambda kind, level=None: _RepeatedBlockDeflate()
                        if kind == zipfile.ZIP_DEFLATED else deflated(kind, level))
    archive = tmp_path / "ds.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for path in sorted(store.rglob("*")):
            rel = path.relative_to(store).as_posix()
            if path.is_file() and rel != "w/.zattrs":
                zf.write(path, f"ds/{rel}")
        original = (store / "w" / ".zattrs").read_bytes()
        with zf.open("ds/w/.zattrs", "w", force_zip64=True) as member:  # valid JSON: 1 GiB of spaces first
            block = b" " * (16 * MiB)
            for _ in range(GiB // len(block)):
                member.write(block)
            member.write(original)
    assert archive.stat().st_size < 4 * MiB
    url = f"file://{archive}#mode=nczarr,zip"
    assert_refused(run_bounded("zip zattrs bomb", "dump", "--header", url), 2, "member ds/w/.zattrs",
                   f": {GiB + len(original)} bytes, more than the", "-byte limit")  # its declared size: not inflated
    assert_finding(run_bounded("zip zattrs bomb", "check", url), "NCZ-STORE-READ", "/w/.zattrs", "-byte limit")


def test_a_100_mb_zattrs_is_refused_before_it_is_read(store: Path) -> None:
    attrs = json.loads((store / "w" / ".zattrs").read_text())
    with open(store / "w" / ".zattrs", "w") as fh:  # valid JSON, 100 MB of numbers
        fh.write(json.dumps(attrs)[:-1] + ', "big": [')
        fh.write("0," * (50 * 1024**2))
        fh.write("0]}")
    dumped = run_bounded("100 MB zattrs", "dump", "--header", str(store))
    assert_refused(dumped, 2, str(store / "w" / ".zattrs"), f"more than the {64 * MiB}-byte limit")
    smaller = run_bounded("100 MB zattrs", "dump", "--header", str(store), env={"NCZARR_MAX_METADATA": "1M"})
    assert_refused(smaller, 2, str(store / "w" / ".zattrs"), f"more than the {MiB}-byte limit")


def test_json_nested_100000_deep_is_a_clear_error(store: Path) -> None:
    depth = 100_000
    attrs = json.loads((store / "w" / ".zattrs").read_text())
    (store / "w" / ".zattrs").write_text(json.dumps(attrs)[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}")
    assert_refused(run_bounded("deep json", "dump", "--header", str(store)), 2, "/w/.zattrs",
                   f"JSON nested {depth + 1} levels deep")


# ---- declared shapes: memory follows the chunks, not the shape ---------------------------------------

def _declare(store: Path, size: int, chunk: int) -> None:
    for var in ("v", "w"):
        zpath = store / var / ".zarray"
        zarray = json.loads(zpath.read_text())
        zarray["shape"], zarray["chunks"] = [size], [chunk]
        zpath.write_text(json.dumps(zarray))
    root = json.loads((store / ".zattrs").read_text())
    root["_nczarr_group"]["dimensions"]["x"] = size  # netcdf-c 4.10 writes a bare size
    (store / ".zattrs").write_text(json.dumps(root))


@pytest.mark.parametrize("chunk", [1000, 500_000_000], ids=["small-chunks", "one-giant-chunk"])
def test_500m_declared_floats_are_refused_cleanly(store: Path, chunk: int) -> None:
    _declare(store, 500_000_000, chunk)
    if chunk != 1000:
        for var in ("v", "w"):
            (store / var / "0").unlink()
    checked = run_bounded(f"500M floats chunks={chunk}", "check", "--deep", str(store))
    assert "Traceback" not in checked.stderr and checked.rc == 0, checked.stderr  # no error: only unwritten chunks
    missing = "499999 of 500000" if chunk == 1000 else "1 of 1"
    for var in ("v", "w"):
        assert f"info NCZ-CHUNK-MISSING /{var}/.zarray: {missing} chunks never written" in str(checked.stdout)
    assert checked.peak < PEAK_MAX
    # CDL and --json stream chunk by chunk (as ncdump does): 20 MB of each, then the reader goes away;
    # one chunk bigger than the in-memory budget is refused when its turn comes
    for args in ((), ("--json",)):
        streamed = run_bounded(f"500M floats chunks={chunk}", "dump", *args, str(store), stop_after=20 * MiB)
        if chunk > 1000:
            assert_refused(streamed, 2, "/v: one run of chunks needs about 2000000000 bytes", "NCZARR_MAX_IN_MEMORY")
            continue
        assert "Traceback" not in streamed.stderr and streamed.rc == 0, streamed.stderr
        head = "netcdf ds {" if not args else '{\n "model": "nczarr-model/1"'
        assert streamed.stdout.startswith(head), streamed.stdout[:300]
        assert 0 < streamed.peak < PEAK_MAX, f"peak RSS {streamed.peak / MiB:.0f} MiB"


def test_json_dump_streams_and_parses_to_the_model(tmp_path: Path) -> None:
    """--json of 4M floats (16 MB of data; 1 GB as Python objects built whole) stays under the cap and
    parses to exactly the model our reader builds: its header and storage as the reader's model says them,
    each value the JSON number of the source's float32 (its shortest repr, the model's rule for ``float``).

    The values are compared as one float64 array, not through the model's ``to_json`` (a Python list of 4M
    floats, two thirds of this test's time); the conversion runs in this process (it is not what is tested)."""
    import netCDF4

    from nczarr_conformance.access.dataset import open_dataset
    from nczarr_conformance.cli.convert import main as convert

    values = np.arange(4_000_000, dtype="f4") / 7
    src = tmp_path / "big.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("x", 4_000_000)
        nc.createVariable("v", "f4", ("x",), chunksizes=(500_000,))[:] = values
    out = tmp_path / "big.file"
    with warnings.catch_warnings():  # as a process's PYTHONWARNINGS=ignore: h5py's version note at import
        warnings.simplefilter("ignore")
        assert convert(["-q", str(src), str(out)]) == 0
    dumped = run_bounded("json 4M floats", "dump", "--json", "--storage", str(out), timeout=300)
    assert dumped.rc == 0 and dumped.stderr == "", dumped.stderr
    assert 0 < dumped.peak < PEAK_MAX, f"peak RSS {dumped.peak / MiB:.0f} MiB"
    doc = json.loads(dumped.stdout)
    data = np.array(doc["root"]["variables"]["v"].pop("data"))
    assert doc == open_dataset(str(out), data=False).to_json(storage=True)
    assert data.dtype == np.float64 and data.shape == values.shape  # JSON numbers, no strings, all of them
    assert data.tobytes() == values.astype(str).astype(np.float64).tobytes()  # "0.14285715", not 0.142857149...


# ---- S3: the same bounds on a real S3 endpoint (moto) ------------------------------------------------

@pytest.mark.s3
def test_s3_chunk_bomb_and_oversized_metadata(store: Path, zlib_gib: bytes, s3_bucket: str) -> None:
    import boto3

    _one_big_chunk(store)
    (store / "v" / "0").write_bytes(zlib_gib)
    client = boto3.client("s3")
    for path in store.rglob("*"):
        if path.is_file():
            client.put_object(Bucket=s3_bucket, Key=f"ds/{path.relative_to(store).as_posix()}",
                              Body=path.read_bytes())
    url = f"s3://{s3_bucket}/ds#mode=nczarr,s3"
    assert_refused(run_bounded("s3 zlib bomb", "dump", url), 2, "/v/0", "more than the declared 4000000")
    assert_finding(run_bounded("s3 zlib bomb", "check", "--deep", url), "NCZ-CHUNK-SIZE", "/v/0",
                   "more than the declared 4000000")
    client.put_object(Bucket=s3_bucket, Key="ds/w/.zattrs", Body=b"{" + b" " * (2 * MiB) + b"}")
    assert_refused(run_bounded("s3 big zattrs", "dump", "--header", url, env={"NCZARR_MAX_METADATA": "1M"}), 2,
                   f"s3://{s3_bucket}/ds/w/.zattrs", f"more than the {MiB}-byte limit")


# ---- the reader's lazy API, against a peer ----------------------------------------------------------

@pytest.fixture
def zarr_store(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """A 3-d pure Zarr v2 array with edge chunks and one unwritten chunk, written by zarr-python."""
    zarr = require_module("zarr")
    path = tmp_path / "z.zarr"
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    arr = root.create_array("a", shape=(7, 5, 6), chunks=(3, 2, 4), dtype="<i4", fill_value=-1)
    values = np.arange(7 * 5 * 6, dtype="<i4").reshape(7, 5, 6)
    arr[...] = values
    arr[0:3, 0:2, 0:4] = -1  # all fill: zarr-python does not write the chunk
    return path, np.asarray(zarr.open_array(str(path / "a"), mode="r")[...])


def test_iter_slabs_and_chunks_and_regions_match_zarr_python(zarr_store: tuple[Path, np.ndarray]) -> None:
    from nczarr_conformance.nczarr.reader import DatasetReader
    from nczarr_conformance.stores import DirectoryStore

    path, expected = zarr_store
    with DirectoryStore(path) as s:
        reader = DatasetReader(s, pure_zarr=True)
        for max_bytes in (4, 24, 100, 10_000):
            pieces = [values.ravel() for _, values in reader.iter_slabs("/a", max_bytes)]
            assert all(p.nbytes <= max(max_bytes, 4) for p in pieces)
            np.testing.assert_array_equal(np.concatenate(pieces), expected.ravel())
        seen = np.zeros(expected.shape, dtype=int)
        for region, values in reader.iter_chunks("/a"):
            np.testing.assert_array_equal(values, expected[region])
            seen[region] += 1
        assert (seen == 1).all()
        np.testing.assert_array_equal(reader.read_region("/a", (slice(2, 6), slice(1, 5), slice(3, 4))),
                                      expected[2:6, 1:5, 3:4])
        np.testing.assert_array_equal(reader.read_variable("/a"), expected)



def test_iter_slabs_below_one_element_yields_one_element_per_piece(zarr_store: tuple[Path, np.ndarray]) -> None:
    """iter_slabs' contract: "at least one element per piece", even when ``max_bytes`` is less than one element
    (1 or 3 bytes of a 4-byte int): the pieces are single elements that concatenate to the variable."""
    from nczarr_conformance.nczarr.reader import DatasetReader
    from nczarr_conformance.stores import DirectoryStore

    path, expected = zarr_store
    with DirectoryStore(path) as s:
        reader = DatasetReader(s, pure_zarr=True)
        for max_bytes in (1, 3):
            pieces = [values.ravel() for _, values in reader.iter_slabs("/a", max_bytes)]
            assert {p.size for p in pieces} == {1}
            np.testing.assert_array_equal(np.concatenate(pieces), expected.ravel())

def test_iter_slabs_of_a_huge_declared_variable_holds_one_slab(store: Path) -> None:
    from nczarr_conformance.nczarr.reader import DatasetReader
    from nczarr_conformance.stores import DirectoryStore

    _declare(store, 100_000_000, 1000)  # 400 MB declared, one chunk written
    with DirectoryStore(store) as s:
        reader = DatasetReader(s)
        tracemalloc.start()
        try:
            slabs = reader.iter_slabs("/w", MiB)
            first_region, first = next(slabs)
            for _ in range(20):
                next(slabs)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    np.testing.assert_array_equal(first[:1000], VALUES)  # netCDF4-python wrote 0..999
    assert first.nbytes == MiB and first_region == (slice(0, MiB // 4),)
    assert peak < 8 * MiB
