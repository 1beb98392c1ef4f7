"""Conversion at the copy limit: instant CLI startup, and a direct copy with no HDF5 call per chunk.

Startup: ``--version`` and ``--help`` of every command must leave numpy, h5py, netCDF4 and boto3
unimported, the cause of a slow start whatever the machine's speed. The start itself is timed by
benchmarks/run.py (reports/bench.md), never here: a wall-clock budget in a test fails on a busy
machine and passes on a fast one whatever the code does.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.conversion.from_netcdf import _header
from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable, diff
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.sources import netcdf4
from nczarr_conformance.sources.hdf5_chunks import DirectChunks
from nczarr_conformance.stores import DirectoryStore

COMMANDS = ("convert", "check", "dump", "report", "fix")
HEAVY = ("numpy", "h5py", "netCDF4", "boto3", "botocore", "tqdm", "numcodecs")

PROBE = """
import runpy, sys
children = []
sys.addaudithook(lambda event, args: children.append(args[0]) if event == "subprocess.Popen" else None)
sys.argv = [sys.argv[1], *sys.argv[2:]]
try:
    runpy.run_module(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
print(" ".join(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)
print("children:", *children, file=sys.stderr)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}


def _probe(module: str, *args: str, watch: tuple[str, ...] = HEAVY) -> tuple[set[str], list[str]]:
    """The modules of ``watch`` loaded once ``python -m module args`` has run, and the child processes it
    started (their executables, in order)."""
    probe = PROBE.format(heavy=watch)
    done = subprocess.run([sys.executable, "-c", probe, module, *args], capture_output=True, text=True,
                          timeout=120, env=_env())
    loaded, children = done.stderr.rstrip("\n").split("\n")[-2:]
    assert children.startswith("children:"), done.stderr
    return set(loaded.split()), children.split()[1:]


def _loaded_after(module: str, *args: str, watch: tuple[str, ...] = HEAVY) -> set[str]:
    return _probe(module, *args, watch=watch)[0]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_imports_no_numpy_h5py_netcdf4_boto3(command):
    assert _loaded_after(f"nczarr_conformance.cli.{command}", "--help") == set()


def test_version_imports_nothing_heavy():
    assert _loaded_after("nczarr_conformance.cli.convert", "--version") == set()


def test_package_exports_stay_and_load_on_use():
    code = ("import sys, nczarr_conformance as n; assert 'numpy' not in sys.modules; "
            "from nczarr_conformance import open_dataset, write_dataset, Dataset; "
            "from nczarr_conformance.access.dataset import open_dataset as o; assert open_dataset is o; "
            "print(sorted(set(n.__all__) - set(dir(n))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_small_conversion_loads_no_boto3_nor_tqdm(tmp_path):
    """A netCDF-3 file to a directory: no S3 client, no progress bar, and no h5py (not HDF5)."""
    import netCDF4

    src = tmp_path / "classic.nc"
    with netCDF4.Dataset(src, "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("x", 4)
        nc.createVariable("v", "f4", ("x",))[:] = np.arange(4, dtype="f4")
    loaded, children = _probe("nczarr_conformance.cli.convert", "--quiet", str(src), str(tmp_path / "out.file"))
    assert (tmp_path / "out.file" / ".zgroup").exists()
    assert not loaded & {"boto3", "botocore", "tqdm", "h5py"}, loaded
    # no ``ldconfig -p`` (ctypes.util.find_library) to name libc or the libnetcdf netCDF4-python loaded
    assert children == []


def test_small_netcdf4_conversion_loads_no_numcodecs(tmp_path):
    """netCDF-4's usual chain (shuffle, zlib) is copied chunk by chunk and the copied sample decoded by
    codecs.DeferredCodec: numcodecs (an entry-point scan, blosc, multiprocessing) is not imported. The copy
    is compared with the source, storage too, so a conversion that took another path would show."""
    import netCDF4

    src = tmp_path / "small4.nc"
    with netCDF4.Dataset(src, "w", format="NETCDF4") as nc:
        nc.createDimension("x", 8)
        nc.createVariable("v", "f4", ("x",), zlib=True, complevel=1, shuffle=True, chunksizes=(4,))[:] = \
            np.arange(8, dtype="f4")
    out = tmp_path / "out.file"
    loaded = _loaded_after("nczarr_conformance.cli.convert", "--quiet", str(src), str(out), watch=(*HEAVY, "zarr"))
    assert "numcodecs" not in loaded, loaded
    assert "h5py" in loaded  # a netCDF-4 source is looked at with h5py first: the probe saw a real conversion
    import zarr  # the peer reads what was written: values, codecs and chunks as the source has them

    arr = zarr.open_group(str(out), mode="r", zarr_format=2)["v"]
    assert arr[:].tolist() == list(range(8))
    assert (arr.dtype, arr.chunks) == (np.dtype("<f4"), (4,))
    assert [c.codec_id for c in arr.filters] == ["shuffle"]
    assert [(c.codec_id, c.level) for c in arr.compressors] == [("zlib", 1)]


@pytest.mark.parametrize("command", [("check",), ("fix", "--dry-run")])
def test_checking_a_small_v2_store_loads_no_codec_library_event_loop_nor_xml(command, tmp_path):
    """nczarr-check and nczarr-fix import every rule family and fix, but a v2 store with netCDF-4's usual chain
    needs neither numcodecs (the v3 rules' and the v3 writer's, imported where they build a codec), nor asyncio
    (the Icechunk store's probe), nor ElementTree (--format junit)."""
    root = Group(dimensions={"x": Dimension(4)}, attributes={"title": Attribute("char", "small")})
    root.variables["v"] = Variable("float", ["/x"], (4,), {}, np.arange(4, dtype="f4"),
                                   filters=[{"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 1}])
    with DirectoryStore(tmp_path / "small.file", "w") as store:
        write_dataset(Dataset(root), store)
    loaded = _loaded_after(f"nczarr_conformance.cli.{command[0]}", *command[1:], str(tmp_path / "small.file"),
                           watch=("numpy", "numcodecs", "asyncio", "xml.etree.ElementTree"))
    assert loaded == {"numpy"}


def test_dump_header_of_a_store_decodes_nothing_so_imports_no_codec_library(tmp_path):
    """``nczarr-dump -h`` is ncdump's quick look: only metadata is read, so numcodecs (about a third of the
    imports past numpy, benchmarks/dump.py's start-up row) and the HDF5/S3/progress libraries stay unloaded.
    Of a plain local store, not even numpy is loaded (cdl/quick_header.py reads the JSON with the standard
    library); with any other flag (``-s``) the full reader runs, and numpy is its floor (the model's attributes
    are numpy values). The data of netCDF-4's usual chain (shuffle, zlib) is decoded by the reader itself
    (codecs.DeferredCodec), so numcodecs stays unloaded there too; the data of a chain it hands to numcodecs
    (zstd) loads it."""
    root = Group(dimensions={"x": Dimension(3)}, attributes={"title": Attribute("char", "small")})
    root.variables["v"] = Variable("float", ["/x"], (3,), {"units": Attribute("char", "m")},
                                   np.arange(3, dtype="f4"), filters=[{"id": "shuffle", "elementsize": 4},
                                                                      {"id": "zlib", "level": 1}])
    with DirectoryStore(tmp_path / "small.file", "w") as store:
        write_dataset(Dataset(root), store)
    root.variables["v"].filters = [{"id": "zstd", "level": 1}]
    with DirectoryStore(tmp_path / "zstd.file", "w") as store:
        write_dataset(Dataset(root), store)
    assert _loaded_after("nczarr_conformance.cli.dump", "-h", str(tmp_path / "small.file")) == set()
    assert _loaded_after("nczarr_conformance.cli.dump", "-h", "-s", str(tmp_path / "small.file")) == {"numpy"}
    assert "numcodecs" not in _loaded_after("nczarr_conformance.cli.dump", str(tmp_path / "small.file"))
    assert "numcodecs" in _loaded_after("nczarr_conformance.cli.dump", str(tmp_path / "zstd.file"))


# ---- the direct path ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def many_chunks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two variables of 60 chunks each, zlib + shuffle, as model output is (one time step per chunk);
    119 steps in chunks of 2, so the last chunk is an edge chunk."""
    import netCDF4

    path = tmp_path_factory.mktemp("speed") / "many.nc"
    rng = np.random.default_rng(3)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time", 119)
        nc.createDimension("x", 16)
        for name in ("a", "b"):
            v = nc.createVariable(name, "f4", ("time", "x"), zlib=True, complevel=1, shuffle=True,
                                  chunksizes=(2, 16))
            v[:] = rng.random((119, 16), dtype="f4")
    return path


class _CountingLock:
    """Stands in for the HDF5 lock and counts how often it is taken."""

    def __init__(self, real: threading.Lock) -> None:
        self.real = real
        self.taken = 0

    def __enter__(self) -> None:
        self.real.acquire()
        self.taken += 1

    def __exit__(self, *exc: object) -> None:
        self.real.release()


def _write(src: Path, out: Path, raw: DirectChunks) -> int:
    nc = netcdf4.open_nc(str(src))
    try:
        variables: dict = {}
        model = Dataset(_header(nc, "/", variables))
        with DirectoryStore(out, "w") as store:
            return write_dataset(model, store, raw=raw, threads=4,
                                 source=lambda k, v, r: netcdf4.read_values(variables[k], r or None))
    finally:
        netcdf4.close_nc(nc)


def test_copied_chunks_take_no_hdf5_lock_per_chunk(many_chunks, tmp_path):
    direct = DirectChunks(str(many_chunks))
    lock = direct.lock = _CountingLock(direct.lock)  # type: ignore[assignment]
    try:
        copied = _write(many_chunks, tmp_path / "d.file", direct)
    finally:
        direct.close()
    assert copied == 120  # every chunk of a and b (60 each) copied as HDF5 stored it
    assert lock.taken <= 10, f"{lock.taken} HDF5 calls for 120 copied chunks"  # per variable, not per chunk
    assert diff(open_dataset(str(many_chunks)), open_dataset(str(tmp_path / "d.file"))) == []


def test_a_bad_last_chunk_is_caught_by_the_sample_and_the_variable_re_encoded(many_chunks, tmp_path):
    """The first chunk of ``b`` copies right, its last (edge) chunk does not: the sample's second
    chunk catches it and ``b`` is re-encoded; ``a`` is still copied."""

    class LastChunkWrong(DirectChunks):
        def __call__(self, plan):  # type: ignore[override]
            real = super().__call__(plan)
            if real is None or plan.key != "/b":
                return real
            return lambda index: b"x\x9c" + b"\x00" * 8 if index == (59, 0) else real(index)

    direct = LastChunkWrong(str(many_chunks))
    try:
        copied = _write(many_chunks, tmp_path / "l.file", direct)
    finally:
        direct.close()
    assert copied == 60
    assert diff(open_dataset(str(many_chunks)), open_dataset(str(tmp_path / "l.file"))) == []


def test_the_commands_the_suite_starts_find_fresh_bytecode():
    """tests/conftest.py compiles the package once per run: each command the suite starts then loads our modules'
    bytecode instead of compiling their source (PYTHONDONTWRITEBYTECODE would keep Python from caching it)."""
    import importlib.util

    from tests.conftest import is_checkout

    if not is_checkout():
        pytest.skip("a mutation tool's copy of the tracked files is not compiled (tests/conftest.py is_checkout)")
    package = Path(__file__).resolve().parents[1] / "nczarr_conformance"
    stale = []
    for source in sorted(package.rglob("*.py")):
        cached = Path(importlib.util.cache_from_source(str(source)))
        stat = source.stat()
        header = cached.read_bytes()[:16] if cached.exists() else b""
        # PEP 552: magic, flags (0: checked by timestamp), source mtime, source size
        fresh = (header[:4] == importlib.util.MAGIC_NUMBER
                 and header[8:16] == (int(stat.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                 + (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
        if not fresh:
            stale.append(str(source.relative_to(package)))
    assert stale == []
