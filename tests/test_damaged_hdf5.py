"""Issue 39 (5, 6): a damaged HDF5 chunk stops a conversion with one line, exit 2, nothing left behind.

(5) The direct copy (sources/hdf5_chunks.py) copied a corrupt zlib chunk as it was: exit 0 and a chunk no
reader decodes. (6) Where HDF5 decodes the chunk itself (``--no-direct-copy``, fletcher32, ``nczarr-dump``),
libnetcdf's RuntimeError was "unexpected RuntimeError … this is a bug". The files are made here with
netCDF4-python and damaged in one chunk's bytes, located by h5py's chunk index; that the damage is real is
asserted on the peers first: netCDF4-python refuses the variable, zlib refuses the chunk's bytes.
"""
from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from tests.test_convert_valid import REPO, run_cli

netCDF4 = pytest.importorskip("netCDF4")
h5py = pytest.importorskip("h5py")


def _damaged(path: Path, name: str, **options: object) -> int:
    """A file whose variable ``name`` (64 x 64 float32, chunks 16 x 64) has 16 bytes overwritten in the
    middle of its second chunk (chunk index 1,0); the chunk's byte address in the file."""
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", 64)
        ds.createDimension("y", 64)
        ok = ds.createVariable("ok", "i2", ("x",))
        ok[:] = np.arange(64, dtype="i2")
        var = ds.createVariable(name, "f4", ("x", "y"), chunksizes=(16, 64), **options)  # type: ignore[arg-type]
        var[:] = np.arange(64 * 64, dtype="f4").reshape(64, 64)
    with h5py.File(path, "r") as f:
        info = f[name].id.get_chunk_info(1)
        assert tuple(info.chunk_offset) == (16, 0)
        address, size = int(info.byte_offset), int(info.size)
        _, stored = f[name].id.read_direct_chunk((16, 0))
    with open(path, "r+b") as stream:
        stream.seek(address + size // 2)
        stream.write(b"\xff" * 16)
    # the peers agree the file is damaged: netCDF4-python cannot read the variable ...
    with netCDF4.Dataset(path) as ds, pytest.raises(RuntimeError, match="HDF error"):
        ds[name][...]
    if options.get("zlib") and not options.get("fletcher32"):  # ... and zlib refuses the chunk's new bytes
        with h5py.File(path, "r") as f:
            _, damaged = f[name].id.read_direct_chunk((16, 0))
        assert damaged != stored
        with pytest.raises(zlib.error):
            zlib.decompress(damaged)
    return address


def _nothing_left(tmp_path: Path, src: Path) -> None:
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]  # no output, no temporary beside it


@pytest.mark.parametrize("direct", [True, False])
def test_a_corrupt_zlib_chunk_stops_the_conversion_naming_the_variable(tmp_path: Path, direct: bool) -> None:
    src = tmp_path / "damaged.nc"
    address = _damaged(src, "temp", zlib=True)
    done = run_cli(*([] if direct else ["--no-direct-copy"]), str(src), str(tmp_path / "out.zarr"))
    assert (done.returncode, done.stdout) == (2, "")
    if direct:  # the copy names the chunk: copied as it was, it would be a chunk no reader decodes
        assert done.stderr == (f"nc2nczarr: {src}: /temp: chunk 1,0 (at byte {address} of the file) does not "
                               "decode: its zlib stream is damaged (Error -3 while decompressing data: incorrect "
                               "data check): the file is damaged\n")
    else:
        assert done.stderr == (f"nc2nczarr: {src}: /temp: cannot read its values: NetCDF: HDF error (a chunk that "
                               "does not decode: the file is damaged, fails a checksum, or changed while it was "
                               "read)\n")
    _nothing_left(tmp_path, src)


def test_a_fletcher32_failure_is_one_line_not_a_bug(tmp_path: Path) -> None:
    src = tmp_path / "checked.nc"
    _damaged(src, "checked", zlib=True, fletcher32=True)
    done = run_cli(str(src), str(tmp_path / "out.zarr"))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"nc2nczarr: {src}: /checked: cannot read its values: NetCDF: HDF error (a chunk that "
                           "does not decode: the file is damaged, fails a checksum, or changed while it was "
                           "read)\n")
    _nothing_left(tmp_path, src)


def test_a_copied_chunk_of_the_wrong_length_is_refused(tmp_path: Path) -> None:
    """Without deflate the check is the length; with it, the inflated length, within the chunk's size."""
    from nczarr_conformance.errors import FormatError
    from nczarr_conformance.sources.hdf5_chunks import Stored, _Reader

    class Plan:
        key, chunks, storage, compressor = "/v", (16, 64), np.dtype("f4"), None

    class Owner:
        class file:
            filename = "f.nc"

    reader = _Reader(Owner(), None, Plan(), {}, None, True)  # type: ignore[arg-type]
    good = bytes(16 * 64 * 4)
    assert reader._checked((0, 0), Stored(0, len(good), 0), good) == good
    with pytest.raises(FormatError, match=r"^f.nc: /v: chunk 0,0 \(at byte 0 of the file\) does not decode: it "
                                          r"holds 4095 bytes, not the chunk's 4096: the file is damaged$"):
        reader._checked((0, 0), Stored(0, 4095, 0), good[:4095])
    Plan.compressor = {"id": "zlib", "level": 1}  # type: ignore[assignment]
    assert reader._checked((0, 0), Stored(0, 1, 0), zlib.compress(good)) == zlib.compress(good)
    for payload, why in ((zlib.compress(good + b"\0"), "its zlib stream inflates past the chunk's 4096 bytes"),
                         (zlib.compress(good[:-4]), "it inflates to 4092 bytes, not the chunk's 4096"),
                         (zlib.compress(good)[:-6], "its zlib stream is cut short")):
        with pytest.raises(FormatError) as caught:
            reader._checked((0, 0), Stored(0, len(payload), 0), payload)
        assert str(caught.value) == (f"f.nc: /v: chunk 0,0 (at byte 0 of the file) does not decode: {why}: "
                                     "the file is damaged")


def test_dump_of_a_damaged_file_is_one_line(tmp_path: Path) -> None:
    src = tmp_path / "damaged.nc"
    _damaged(src, "temp", zlib=True)
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    env.pop("NCZARR_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", str(src)], check=False,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2
    assert done.stderr.endswith(f"nczarr-dump: {src}: /temp: cannot read its values: NetCDF: HDF error (a chunk "
                                "that does not decode: the file is damaged, fails a checksum, or changed while it "
                                "was read)\n"), done.stderr
    assert "this is a bug" not in done.stderr
