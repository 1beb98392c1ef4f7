"""Issue 39 (7): a zip member that inflates far past what its array declares is refused by every command
that copies a zip's members, as ``nczarr-dump`` and ``nczarr-check`` refuse it, in bounded memory.

``nczarr-fix --out``, ``nczarr-fix --to-v3 --out`` and ``nc2nczarr --append`` read each member whole
(``sys.maxsize``) to copy it as stored: a 2 MB member holding 2 GiB of zeros cost ~4.2 GB and was written
out (exit 0). Here the bomb is a chunk member declaring a few bytes' chunk that inflates to 512 MiB (its
deflated bytes: about 0.5 MB); each command runs under tests/test_hostile_reads.py's bounded runner (an
address-space cap, a timeout, its own peak RSS asserted under that file's PEAK_MAX).
"""
from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.fix.helpers import c410
from tests.test_hostile_reads import MiB, assert_refused, run_bounded

netCDF4 = pytest.importorskip("netCDF4")

BOMB = 512 * MiB


def _with_bomb(archive: Path, member: str) -> None:
    """``archive`` with ``member``'s bytes replaced by 512 MiB of zeros, deflated; every other member, and
    the order, kept (entry 0 names the dataset's folder)."""
    old = archive.with_suffix(".old")
    shutil.move(archive, old)
    with zipfile.ZipFile(old) as src, zipfile.ZipFile(archive, "w") as out:
        for info in src.infolist():
            if info.filename != member:
                out.writestr(info, src.read(info))
                continue
            bomb = zipfile.ZipInfo(member, date_time=info.date_time)
            bomb.compress_type = zipfile.ZIP_DEFLATED
            with out.open(bomb, "w", force_zip64=True) as sink:
                block = bytes(16 * MiB)
                for _ in range(BOMB // len(block)):
                    sink.write(block)
    old.unlink()
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo(member)
        assert (info.file_size, info.compress_type) == (BOMB, zipfile.ZIP_DEFLATED)
    assert archive.stat().st_size < 2 * MiB


def _zipped(store: Path, archive: Path) -> Path:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(store.rglob("*")):
            if p.is_file():
                zf.write(p, f"{archive.stem}/{p.relative_to(store)}")
    return archive


def _netcdf(path: Path, times: list[float]) -> Path:
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 4)
        ds.createVariable("time", "f8", ("time",))[:] = times
        ds.createVariable("v", "f4", ("time", "x"))[:] = np.ones((len(times), 4), "f4")
    return path


def _ours(tmp_path: Path) -> Path:
    archive = tmp_path / "a.zip"
    done = run_bounded("write", "convert", "--quiet", str(_netcdf(tmp_path / "a.nc", [0, 1])), str(archive))
    assert done.rc == 0, done.stderr
    return archive


def test_fix_out_refuses_a_bombed_chunk_member(tmp_path: Path) -> None:
    archive = _zipped(c410(tmp_path / "n.file", byte=True, shuffle=True), tmp_path / "n.zip")
    assert run_bounded("fixable", "fix", str(archive), "--dry-run").rc == 1  # there is something to fix
    _with_bomb(archive, "n/b/0")  # /b: 4 int8 values in one chunk of 4 bytes
    out = tmp_path / "fixed.zip"
    assert_refused(run_bounded("zip bomb", "fix", str(archive), "--out", str(out)), 2, "member n/b/0",
                   "-byte limit")
    assert not out.exists()


def test_fix_to_v3_out_refuses_a_bombed_chunk_member(tmp_path: Path) -> None:
    archive = _ours(tmp_path)
    _with_bomb(archive, "a/v/0.0")  # /v: chunks of 1 x 4 float32
    out = tmp_path / "v3.zip"
    assert_refused(run_bounded("zip bomb", "fix", "--to-v3", str(archive), "--out", str(out)), 2,
                   "member a/v/0.0", "-byte limit")
    assert not out.exists()


def test_append_refuses_a_bombed_chunk_member_and_leaves_the_zip(tmp_path: Path) -> None:
    archive = _ours(tmp_path)
    _with_bomb(archive, "a/v/0.0")
    before = archive.read_bytes()
    more = _netcdf(tmp_path / "b.nc", [2, 3])
    assert_refused(run_bounded("zip bomb", "convert", "--append", "time", str(more), str(archive)), 2,
                   "member a/v/0.0", "-byte limit")
    assert archive.read_bytes() == before


def test_fix_in_place_refuses_a_bombed_chunk_member_and_leaves_the_zip(tmp_path: Path) -> None:
    archive = _zipped(c410(tmp_path / "n.file", byte=True, shuffle=True), tmp_path / "n.zip")
    _with_bomb(archive, "n/b/0")
    before = archive.read_bytes()
    assert_refused(run_bounded("zip bomb", "fix", str(archive), "--no-backup"), 2, "member n/b/0", "-byte limit")
    assert archive.read_bytes() == before


def test_append_to_a_zarr_v3_zip_refuses_a_bombed_chunk_member_and_leaves_the_zip(tmp_path: Path) -> None:
    """A v3 zip is rewritten by the same member copy (entries at the top of the zip, as zarr-python reads them):
    each member is read within what its array declares, as for v2."""
    archive = tmp_path / "a.zip"
    done = run_bounded("write", "convert", "--quiet", "--zarr-format", "3", str(_netcdf(tmp_path / "a.nc", [0, 1])),
                       str(archive))
    assert done.rc == 0, done.stderr
    with zipfile.ZipFile(archive) as zf:
        chunk = next(n for n in zf.namelist() if n.startswith("v/c/"))
    _with_bomb(archive, chunk)
    before = archive.read_bytes()
    more = _netcdf(tmp_path / "b.nc", [2, 3])
    assert_refused(run_bounded("zip bomb", "convert", "--append", "time", str(more), str(archive)), 2,
                   f"member {chunk}", "-byte limit")
    assert archive.read_bytes() == before
