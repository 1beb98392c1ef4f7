"""stores/staged.py: the one staged write of convert, --append and --concat.

What workers put through the write's ``part`` and what the client puts become visible together at
commit and not before; an abort leaves nothing behind; a write opened without workers has no view for
them. Checked on the directory and zip stores by reading the destination back as any reader would
(zipfile for the zip, the file system for the directory), not through the staged write.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from nczarr_conformance.errors import StoreError
from nczarr_conformance.stores.part import open_part
from nczarr_conformance.stores.staged import stage_write
from nczarr_conformance.urls import parse

ZGROUP = b'{"zarr_format": 2}'


def _listing(dst: Path) -> dict[str, bytes]:
    """Every object at ``dst`` by its key, read without our stores."""
    if dst.suffix == ".zip":
        with zipfile.ZipFile(dst) as zf:
            return {name.split("/", 1)[1]: zf.read(name) for name in zf.namelist() if not name.endswith("/")}
    return {str(p.relative_to(dst)): p.read_bytes() for p in sorted(dst.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ["out.zarr", "out.zip"])
def test_worker_chunks_and_client_metadata_appear_together_at_commit(tmp_path: Path, name: str) -> None:
    dst = tmp_path / name
    staged = stage_write(parse(str(dst) + ("#mode=nczarr,zip" if name.endswith(".zip") else "#mode=nczarr,file")),
                         workers=True)
    part = open_part(staged.part)  # what a dask worker opens from the task's PartSpec
    part.put("/v/0", b"\x01\x02")
    staged.put("/.zgroup", ZGROUP)
    assert not dst.exists()

    staged.commit()

    assert _listing(dst) == {"v/0": b"\x01\x02", ".zgroup": ZGROUP}
    if name.endswith(".zip"):
        assert list(_listing(dst))[-1] == ".zgroup"  # the client's metadata last, after every chunk
    assert staged.metadata_written == 1
    assert [p.name for p in tmp_path.iterdir()] == [name]  # nothing staged aside is left


@pytest.mark.parametrize("name", ["out.zarr", "out.zip"])
def test_an_aborted_write_leaves_nothing(tmp_path: Path, name: str) -> None:
    staged = stage_write(parse(str(tmp_path / name)), workers=True)
    open_part(staged.part).put("/v/0", b"\x01")
    staged.put("/.zgroup", ZGROUP)

    staged.abort(lambda: ["/v/0"])

    assert list(tmp_path.iterdir()) == []


def test_a_write_without_workers_has_no_view_for_them(tmp_path: Path) -> None:
    staged = stage_write(parse(str(tmp_path / "out.zarr")))
    try:
        with pytest.raises(StoreError, match="opened without workers"):
            _ = staged.part
    finally:
        staged.abort()
    assert list(tmp_path.iterdir()) == []
